//! The prompt prefixes the local model has read, kept once for the whole process: a
//! radix tree over tokens in whole blocks of [`KEY_BLOCK`], each edge holding the keys
//! and values of its blocks (after SGLang's RadixAttention and vLLM's automatic prefix
//! caching). Every finished sequence of every run and bench job is inserted; a prefix
//! many sequences share — the scenario's system text, a conversation an agent reads
//! again each turn — is stored once. A new prompt continues from the longest prefix the
//! tree holds, copied into its own cache (a copy costs microseconds per block; reading
//! the block again costs a forward pass). Memory is bounded: past the budget, the
//! least recently used leaves go first.
//!
//! Keys and values depend only on the tokens before them, and the model's rows do not
//! depend on the batch, so a continued prompt gives the same bytes as one read whole.

use sopsim_infer::kv::{KvBlocks, KvCache, KEY_BLOCK};

/// One edge of the tree and the node it leads to.
struct Node {
    /// The blocks of this edge (none for the root).
    blocks: Option<KvBlocks>,
    children: Vec<usize>,
    parent: usize,
    /// When a prompt last used this node.
    used: u64,
}

pub(super) struct PrefixTree {
    /// Nodes by index; 0 is the root. A removed node's slot is `None` until reused.
    nodes: Vec<Option<Node>>,
    free: Vec<usize>,
    bytes: usize,
    budget: usize,
    clock: u64,
}

impl PrefixTree {
    /// A tree holding at most `budget` bytes of keys and values.
    pub(super) fn new(budget: usize) -> Self {
        Self {
            nodes: vec![Some(Node {
                blocks: None,
                children: Vec::new(),
                parent: 0,
                used: 0,
            })],
            free: Vec::new(),
            bytes: 0,
            budget,
            clock: 0,
        }
    }

    /// Bytes of keys and values held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    fn node(&self, i: usize) -> &Node {
        self.nodes[i].as_ref().expect("a live node")
    }

    fn node_mut(&mut self, i: usize) -> &mut Node {
        self.nodes[i].as_mut().expect("a live node")
    }

    /// How many whole blocks `tokens` shares with `blocks` from their start.
    fn shared_blocks(blocks: &KvBlocks, tokens: &[u32]) -> usize {
        blocks
            .tokens()
            .chunks(KEY_BLOCK)
            .zip(tokens.chunks_exact(KEY_BLOCK))
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// The path of nodes whose blocks `tokens` begins with, and how many blocks of the
    /// last node's edge it shares when it shares only part of it.
    fn walk(&self, tokens: &[u32]) -> (Vec<usize>, Option<(usize, usize)>) {
        let mut path = Vec::new();
        let mut at = 0;
        let mut node = 0;
        loop {
            let rest = &tokens[at.min(tokens.len())..];
            let next = self.node(node).children.iter().find_map(|&c| {
                let blocks = self.node(c).blocks.as_ref()?;
                let n = Self::shared_blocks(blocks, rest);
                (n > 0).then_some((c, n, blocks.len()))
            });
            match next {
                Some((c, n, len)) if n == len => {
                    path.push(c);
                    at += n * KEY_BLOCK;
                    node = c;
                }
                Some((c, n, _)) => return (path, Some((c, n))),
                None => return (path, None),
            }
        }
    }

    /// How many tokens of `ids` [`take`](Self::take) would give.
    pub(super) fn matched(&self, ids: &[u32]) -> usize {
        let usable = (ids.len().saturating_sub(1) / KEY_BLOCK) * KEY_BLOCK;
        let (path, partial) = self.walk(&ids[..usable]);
        let blocks: usize = path
            .iter()
            .map(|&n| self.node(n).blocks.as_ref().map_or(0, KvBlocks::len))
            .sum::<usize>()
            + partial.map_or(0, |(_, n)| n);
        blocks * KEY_BLOCK
    }

    /// A cache holding the longest prefix of `ids` the tree has, in whole blocks and
    /// short of the last token (which must run to give the logits); `None` when it
    /// holds no block of it.
    pub(super) fn take(
        &mut self,
        ids: &[u32],
        new_cache: impl FnOnce() -> KvCache,
    ) -> Option<KvCache> {
        let usable = (ids.len().saturating_sub(1) / KEY_BLOCK) * KEY_BLOCK;
        let (path, partial) = self.walk(&ids[..usable]);
        if path.is_empty() && partial.is_none() {
            return None;
        }
        self.clock += 1;
        let mut cache = new_cache();
        let blocks: usize = path
            .iter()
            .map(|&n| self.node(n).blocks.as_ref().map_or(0, KvBlocks::len))
            .sum::<usize>()
            + partial.map_or(0, |(_, n)| n);
        cache.reserve(blocks * KEY_BLOCK).ok()?;
        for &n in &path {
            self.node_mut(n).used = self.clock;
            if let Some(b) = &self.node(n).blocks {
                cache.extend_blocks(b);
            }
        }
        if let Some((c, n)) = partial {
            self.node_mut(c).used = self.clock;
            if let Some(b) = &self.node(c).blocks {
                let (head, _) = b.clone().split(n);
                cache.extend_blocks(&head);
            }
        }
        Some(cache)
    }

    /// Keeps the whole blocks of a finished sequence's cache: what the tree holds of
    /// them already is shared, the rest added as a new leaf; then the least recently
    /// used leaves go until the tree is within its budget.
    pub(super) fn insert(&mut self, cache: &KvCache) {
        if self.budget == 0 {
            return;
        }
        let whole = cache.len() / KEY_BLOCK;
        let tokens = &cache.tokens()[..whole * KEY_BLOCK];
        self.clock += 1;
        let (path, partial) = self.walk(tokens);
        let mut parent = path.last().copied().unwrap_or(0);
        let mut have: usize = path
            .iter()
            .map(|&n| self.node(n).blocks.as_ref().map_or(0, KvBlocks::len))
            .sum();
        for &n in &path {
            self.node_mut(n).used = self.clock;
        }
        if let Some((c, n)) = partial {
            parent = self.split(c, n);
            self.node_mut(parent).used = self.clock;
            have += n;
        }
        if have < whole {
            let blocks = cache.blocks(have..whole);
            self.bytes += blocks.bytes();
            let leaf = self.add(Node {
                blocks: Some(blocks),
                children: Vec::new(),
                parent,
                used: self.clock,
            });
            self.node_mut(parent).children.push(leaf);
        }
        self.evict();
    }

    /// Cuts node `c`'s edge after its first `n` blocks: a new node holds those, with
    /// `c` (the rest) as its child. Returns the new node.
    fn split(&mut self, c: usize, n: usize) -> usize {
        let node = self.node_mut(c);
        let blocks = node.blocks.take().expect("an edge to split");
        let (head, tail) = blocks.split(n);
        node.blocks = Some(tail);
        let parent = node.parent;
        let used = node.used;
        let mid = self.add(Node {
            blocks: Some(head),
            children: vec![c],
            parent,
            used,
        });
        self.node_mut(c).parent = mid;
        let siblings = &mut self.node_mut(parent).children;
        if let Some(slot) = siblings.iter_mut().find(|s| **s == c) {
            *slot = mid;
        }
        mid
    }

    fn add(&mut self, node: Node) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        }
    }

    /// Removes least recently used leaves until the tree is within its budget.
    fn evict(&mut self) {
        while self.bytes > self.budget {
            let leaf = self
                .nodes
                .iter()
                .enumerate()
                .skip(1)
                .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
                .filter(|(_, n)| n.children.is_empty())
                .min_by_key(|(i, n)| (n.used, *i))
                .map(|(i, _)| i);
            let Some((leaf, node)) = leaf.and_then(|i| Some((i, self.nodes[i].take()?))) else {
                return;
            };
            self.free.push(leaf);
            self.bytes -= node.blocks.as_ref().map_or(0, KvBlocks::bytes);
            self.node_mut(node.parent).children.retain(|c| *c != leaf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYERS: usize = 2;
    const WIDTH: usize = 4;

    /// A cache of `tokens` whose keys and values encode each token and position, as
    /// the model's would depend on them.
    fn cache_of(tokens: &[u32]) -> KvCache {
        let mut c = KvCache::new(LAYERS, WIDTH);
        c.reserve(tokens.len()).unwrap();
        for (pos, &t) in tokens.iter().enumerate() {
            for layer in 0..LAYERS {
                let k: Vec<f32> = (0..WIDTH).map(|i| (t as f32) + i as f32 * 0.25).collect();
                let v: Vec<f32> = (0..WIDTH).map(|i| (pos as f32) + i as f32).collect();
                c.store(layer, pos, &k, &v);
            }
        }
        c.push_tokens(tokens);
        c
    }

    fn same(a: &KvCache, b: &KvCache, n: usize) -> bool {
        (0..LAYERS).all(|l| {
            let (ak, av) = a.layer(l);
            let (bk, bv) = b.layer(l);
            let span = n * WIDTH;
            ak[..span] == bk[..span] && av[..span] == bv[..span]
        }) && a.tokens()[..n] == b.tokens()[..n]
    }

    fn tokens(seed: u32, n: usize) -> Vec<u32> {
        (0..n as u32).map(|i| seed * 1000 + i).collect()
    }

    #[test]
    fn a_prompt_continues_from_the_whole_blocks_a_finished_sequence_left() {
        let mut tree = PrefixTree::new(1 << 20);
        let first = tokens(1, 50);
        tree.insert(&cache_of(&first));
        // A prompt sharing 40 tokens takes the two whole blocks (32) within them.
        let mut prompt = first[..40].to_vec();
        prompt.extend(tokens(2, 10));
        let taken = tree.take(&prompt, || KvCache::new(LAYERS, WIDTH)).unwrap();
        assert_eq!(taken.len(), 32);
        assert!(same(&taken, &cache_of(&prompt), 32));
        // A prompt equal to the kept one keeps its last token to run.
        let taken = tree
            .take(&first[..48], || KvCache::new(LAYERS, WIDTH))
            .unwrap();
        assert_eq!(taken.len(), 32);
        assert!(tree
            .take(&tokens(3, 40), || KvCache::new(LAYERS, WIDTH))
            .is_none());
    }

    #[test]
    fn shared_prefixes_are_stored_once_and_branches_split_the_edge() {
        let mut tree = PrefixTree::new(1 << 20);
        let base = tokens(1, 64);
        let mut a = base.clone();
        a.extend(tokens(2, 32));
        let mut b = base.clone();
        b.extend(tokens(3, 32));
        tree.insert(&cache_of(&a));
        let one = tree.bytes();
        tree.insert(&cache_of(&b));
        // Only b's own two blocks were added.
        assert_eq!(tree.bytes(), one + one / 6 * 2);
        for p in [&a, &b] {
            let mut prompt = p.clone();
            prompt.push(7);
            let taken = tree.take(&prompt, || KvCache::new(LAYERS, WIDTH)).unwrap();
            assert_eq!(taken.len(), 96);
            assert!(same(&taken, &cache_of(p), 96));
        }
        tree.insert(&cache_of(&a));
        assert_eq!(
            tree.bytes(),
            one + one / 6 * 2,
            "nothing new is stored twice"
        );
    }

    #[test]
    fn past_its_budget_the_least_recently_used_leaves_go() {
        let block_bytes = cache_of(&tokens(1, 16)).blocks(0..1).bytes();
        let mut tree = PrefixTree::new(block_bytes * 5);
        let (a, b) = (tokens(1, 32), tokens(2, 32));
        tree.insert(&cache_of(&a));
        tree.insert(&cache_of(&b));
        let mut again = a.clone();
        again.push(9);
        assert!(tree.take(&again, || KvCache::new(LAYERS, WIDTH)).is_some());
        tree.insert(&cache_of(&tokens(3, 32)));
        assert!(tree.bytes() <= block_bytes * 5);
        let mut b_again = b.clone();
        b_again.push(9);
        assert!(
            tree.take(&b_again, || KvCache::new(LAYERS, WIDTH))
                .is_none(),
            "b was oldest"
        );
        assert!(tree.take(&again, || KvCache::new(LAYERS, WIDTH)).is_some());
    }
}
