//! Choosing among options by their probability under the model, without generating
//! text (pure logic; the engine runs the model for it).
//!
//! The options' token sequences (each ending with the end-of-reply token, so that an
//! option that is a prefix of another competes fairly with it) form a trie. At every
//! node where the options part ways, the model's logits for the tokens that continue
//! some option are renormalised over those tokens; an option's probability is the
//! product along its path. Options of different token lengths thus compare fairly: a
//! long option pays only at the points where it had a competitor.

use crate::error::InferError;

/// A point where the options part ways: the model's logits for `children` after the prompt and `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branching {
    /// The tokens, after the prompt, that lead to this point.
    pub path: Vec<u32>,
    /// The tokens that continue some option from here.
    pub children: Vec<u32>,
}

#[derive(Debug, Default)]
struct Node {
    children: Vec<(u32, usize)>,
}

/// The options of a choice as a trie of their tokens, with each option's path through it.
#[derive(Debug)]
pub struct OptionTrie {
    nodes: Vec<Node>,
    /// Each option's nodes after the root, in order.
    paths: Vec<Vec<usize>>,
}

impl OptionTrie {
    /// `options` are token sequences, distinct and non-empty.
    pub fn new(options: &[Vec<u32>]) -> Result<Self, InferError> {
        let mut nodes = vec![Node::default()];
        let mut paths = Vec::with_capacity(options.len());
        for (i, tokens) in options.iter().enumerate() {
            if tokens.is_empty() {
                return Err(InferError::EmptyOption { index: i });
            }
            let mut at = 0;
            let mut path = Vec::with_capacity(tokens.len());
            for &t in tokens {
                at = match nodes[at].children.iter().find(|(c, _)| *c == t) {
                    Some(&(_, next)) => next,
                    None => {
                        nodes.push(Node::default());
                        let next = nodes.len() - 1;
                        nodes[at].children.push((t, next));
                        next
                    }
                };
                path.push(at);
            }
            if !nodes[at].children.is_empty()
                || paths.iter().any(|p: &Vec<usize>| p.last() == Some(&at))
            {
                return Err(InferError::SameOption { index: i });
            }
            paths.push(path);
        }
        Ok(Self { nodes, paths })
    }

    /// The nodes where options part ways, root first, with the tokens leading there.
    pub fn questions(&self) -> Vec<Branching> {
        let mut out = Vec::new();
        let mut stack = vec![(0usize, Vec::new())];
        while let Some((node, path)) = stack.pop() {
            let children = &self.nodes[node].children;
            if children.len() > 1 {
                out.push(Branching {
                    path: path.clone(),
                    children: children.iter().map(|(t, _)| *t).collect(),
                });
            }
            for &(t, next) in children.iter().rev() {
                let mut p = path.clone();
                p.push(t);
                stack.push((next, p));
            }
        }
        out
    }

    /// Each option's probability, from the logits answering [`Self::questions`] (in
    /// that order, one per child).
    pub fn probabilities(&self, answers: &[Vec<f32>]) -> Vec<f64> {
        let questions = self.questions();
        // For every branching node: its children's renormalised probabilities.
        let mut at_node: std::collections::HashMap<usize, Vec<f64>> =
            std::collections::HashMap::new();
        for (q, logits) in questions.iter().zip(answers) {
            let node = self.node_at(&q.path);
            at_node.insert(node, crate::math::softmax(logits.iter().copied(), 1.0));
        }
        self.paths
            .iter()
            .map(|path| {
                let mut p = 1.0;
                let mut parent = 0;
                for &node in path {
                    if let Some(probs) = at_node.get(&parent) {
                        let i = self.nodes[parent]
                            .children
                            .iter()
                            .position(|(_, n)| *n == node)
                            .unwrap_or(0);
                        p *= probs.get(i).copied().unwrap_or(0.0);
                    }
                    parent = node;
                }
                p
            })
            .collect()
    }

    fn node_at(&self, path: &[u32]) -> usize {
        path.iter().fold(0, |at, t| {
            self.nodes[at]
                .children
                .iter()
                .find(|(c, _)| c == t)
                .map_or(at, |(_, n)| *n)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-computed example over a tiny vocabulary: 0 "CO", 1 "OP", 2 "DE", 3 "FECT",
    /// 5 the end of the reply (4 is unused). The options are "COOP" = [0, 1, 5], "CO" =
    /// [0, 5] (a prefix of "COOP", told apart by the end token) and "DEFECT" = [2, 3, 5],
    /// so the trie asks twice: at the root (0 or 2) and after "CO" (1 or 5).
    #[test]
    fn renormalises_at_each_branch_and_multiplies_along_paths() {
        let trie = OptionTrie::new(&[vec![0, 1, 5], vec![0, 5], vec![2, 3, 5]]).unwrap();
        let qs = trie.questions();
        assert_eq!(
            qs,
            vec![
                Branching {
                    path: vec![],
                    children: vec![0, 2]
                },
                Branching {
                    path: vec![0],
                    children: vec![1, 5]
                },
            ]
        );
        // Root: logits ln 3 and ln 1 → 0.75 / 0.25. After "CO": ln 1, ln 4 → 0.2 / 0.8.
        let p = trie.probabilities(&[vec![3f32.ln(), 0.0], vec![0.0, 4f32.ln()]]);
        let want = [0.75 * 0.2, 0.75 * 0.8, 0.25];
        for (a, b) in p.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{p:?}");
        }
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn options_that_never_part_ways_need_no_question() {
        let trie = OptionTrie::new(&[vec![7, 9]]).unwrap();
        assert!(trie.questions().is_empty());
        assert_eq!(trie.probabilities(&[]), vec![1.0]);
    }

    #[test]
    fn refuses_empty_and_identical_options() {
        assert!(OptionTrie::new(&[vec![], vec![1]]).is_err());
        assert!(OptionTrie::new(&[vec![1, 2], vec![1, 2]]).is_err());
    }
}
