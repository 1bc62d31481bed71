//! The relevant-history index: one embedding per message, searched by cosine similarity.
//!
//! Vectors are stored L2-normalised in one contiguous buffer, so a search is a dot
//! product per candidate and allocation-free apart from the k results. A message that
//! nothing reads by meaning has no vector (`quality::Meaning`), yet keeps its position,
//! so positions in the index are positions in the log.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Embeddings of the log's messages, in log order.
#[derive(Debug, Clone, Default)]
pub struct EmbeddingIndex {
    dim: usize,
    /// Each message's row in `data`, or [`NO_ROW`] when it has no vector.
    rows: Vec<usize>,
    data: Vec<f32>,
}

const NO_ROW: usize = usize::MAX;

/// A search hit: the message's position in the log and its similarity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub position: usize,
    pub score: f32,
}

impl EmbeddingIndex {
    /// How many messages are indexed, with a vector or without.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no message is indexed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Appends the next message's embedding (normalised here). An empty vector, or one
    /// of another width than the first (a second embedder), leaves the message without
    /// a vector: it is never found, and is never a query.
    pub fn push(&mut self, vector: &[f32]) {
        if self.dim == 0 {
            self.dim = vector.len();
        }
        if vector.is_empty() || vector.len() != self.dim {
            self.rows.push(NO_ROW);
            return;
        }
        self.rows.push(self.data.len() / self.dim);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        self.data.extend(vector.iter().map(|x| x * scale));
    }

    /// The `k` positions in `range` most similar to the message at `query`, best first;
    /// ties go to the earlier message.
    pub fn top_k(&self, query: usize, range: std::ops::Range<usize>, k: usize) -> Vec<Hit> {
        match self.vector(query) {
            Some(q) => self.nearest(q, range, k),
            None => Vec::new(),
        }
    }

    /// The stored (normalised) vector at `position`, if the message has one.
    pub fn vector(&self, position: usize) -> Option<&[f32]> {
        let row = *self.rows.get(position)?;
        (row != NO_ROW).then(|| &self.data[row * self.dim..(row + 1) * self.dim])
    }

    /// The `k` positions in `range` most similar to a normalised vector `q`, best first.
    pub fn nearest(&self, q: &[f32], range: std::ops::Range<usize>, k: usize) -> Vec<Hit> {
        self.nearest_in(q, range.start..range.end.min(self.len()), k)
    }

    /// The `k` of `positions` (ascending, all stored) with a vector most similar to a normalised
    /// vector `q`, best first.
    pub fn nearest_in(
        &self,
        q: &[f32],
        positions: impl IntoIterator<Item = usize>,
        k: usize,
    ) -> Vec<Hit> {
        if k == 0 || q.len() != self.dim {
            return Vec::new();
        }
        let dot = dot_kernel();
        let mut heap: BinaryHeap<Worst> = BinaryHeap::with_capacity(k + 1);
        for position in positions {
            let Some(v) = self.vector(position) else {
                continue;
            };
            let hit = Hit {
                position,
                score: dot(q, v),
            };
            // Scanning in log order, a later hit with an equal score never displaces.
            if heap.len() == k
                && heap
                    .peek()
                    .is_some_and(|w| rank(&hit, &w.0) != Ordering::Greater)
            {
                continue;
            }
            heap.push(Worst(hit));
            if heap.len() > k {
                heap.pop();
            }
        }
        let mut hits: Vec<Hit> = heap.into_iter().map(|w| w.0).collect();
        hits.sort_by(|a, b| rank(b, a));
        hits
    }
}

type Dot = fn(&[f32], &[f32]) -> f32;

/// The dot product for this CPU. Every variant runs the same operations in the same
/// order (no fused multiply-add), so scores and rankings are identical on every machine;
/// the AVX2 build only uses wider registers.
fn dot_kernel() -> Dot {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return |a, b| {
            // SAFETY: AVX2 support was checked at run time just above.
            unsafe { dot_avx2(a, b) }
        };
    }
    dot
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b)
}

#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent accumulators let the compiler vectorise the loop. (More do not
    // help: at a thousand messages the scan is bound by memory bandwidth.)
    let mut acc = [0.0f32; 8];
    let chunks = a.len() / 8 * 8;
    for (ca, cb) in a[..chunks].chunks_exact(8).zip(b[..chunks].chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += ca[i] * cb[i];
        }
    }
    let tail: f32 = a[chunks..]
        .iter()
        .zip(&b[chunks..])
        .map(|(x, y)| x * y)
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// Higher score first, then earlier position.
fn rank(a: &Hit, b: &Hit) -> Ordering {
    a.score
        .total_cmp(&b.score)
        .then(b.position.cmp(&a.position))
}

/// Max-heap order that puts the worst hit on top, so it is the one evicted.
struct Worst(Hit);
impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        rank(&self.0, &other.0) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        rank(&other.0, &self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_most_similar_in_range_best_first() {
        let mut idx = EmbeddingIndex::default();
        for v in [[1.0, 0.0], [0.0, 1.0], [0.7, 0.7], [2.0, 0.1], [1.0, 0.0]] {
            idx.push(&v);
        }
        let hits = idx.top_k(4, 0..4, 2);
        assert_eq!(
            hits.iter().map(|h| h.position).collect::<Vec<_>>(),
            vec![0, 3]
        );
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        assert_eq!(
            idx.top_k(4, 1..3, 5)
                .iter()
                .map(|h| h.position)
                .collect::<Vec<_>>(),
            vec![2, 1]
        );
        assert!(idx.top_k(4, 0..4, 0).is_empty());
    }

    #[test]
    fn a_message_without_a_vector_keeps_its_place_and_is_never_found() {
        let mut idx = EmbeddingIndex::default();
        for v in [&[1.0, 0.0][..], &[], &[0.9, 0.1], &[0.0; 3], &[1.0, 0.1]] {
            idx.push(v);
        }
        assert_eq!(idx.len(), 5);
        assert_eq!((idx.vector(1), idx.vector(3)), (None, None));
        assert!(idx.vector(4).is_some());
        assert!(idx.top_k(1, 0..1, 2).is_empty(), "no vector, no query");
        assert_eq!(
            idx.top_k(4, 0..4, 4)
                .iter()
                .map(|h| h.position)
                .collect::<Vec<_>>(),
            vec![2, 0]
        );
    }

    #[test]
    fn ties_go_to_the_earlier_message() {
        let mut idx = EmbeddingIndex::default();
        for _ in 0..4 {
            idx.push(&[1.0; 10]);
        }
        assert_eq!(
            idx.top_k(3, 0..3, 2)
                .iter()
                .map(|h| h.position)
                .collect::<Vec<_>>(),
            vec![0, 1]
        );
    }
}
