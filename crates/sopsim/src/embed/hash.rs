//! The feature-hashing embedder (`--embedder hash`): no model, microseconds per text.
//!
//! Each lower-cased word and each pair of adjacent words is hashed (xxh3, stable across
//! platforms and releases) to one of `dim` buckets with a hashed sign; the vector is
//! L2-normalised. Cosine similarity then measures shared vocabulary, which is enough
//! for retrieval by topic and makes runs fast and reproducible. It is a documented
//! option, not a stand-in: the MiniLM embedder captures meaning; this one captures words.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::{EmbedError, Embedder};

pub(super) const DEFAULT_DIM: usize = 384;

/// The feature-hashing embedder: words and adjacent word pairs hashed into `dim` buckets.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dim: usize,
}

impl Default for HashEmbedder {
    fn default() -> Self {
        Self { dim: DEFAULT_DIM }
    }
}

impl HashEmbedder {
    /// A hashing embedder with `dim` buckets (at least one).
    pub fn new(dim: usize) -> Self {
        Self { dim: dim.max(1) }
    }

    /// The L2-normalised hashed vector of `text`.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let mut add = |feature: &[u8], weight: f32| {
            let h = xxh3_64_with_seed(feature, 0x5eed);
            let bucket = (h % self.dim as u64) as usize;
            v[bucket] += if h >> 63 == 0 { weight } else { -weight };
        };
        for w in &words {
            add(w.as_bytes(), 1.0);
        }
        let mut pair = Vec::new();
        for w in words.windows(2) {
            pair.clear();
            pair.extend_from_slice(w[0].as_bytes());
            pair.push(b' ');
            pair.extend_from_slice(w[1].as_bytes());
            add(&pair, 0.5);
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

impl Embedder for HashEmbedder {
    fn name(&self) -> &str {
        "hash"
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
    fn is_cheap(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn shared_words_score_higher_and_vectors_are_unit_length() {
        let e = HashEmbedder::default();
        let a = e.embed_one("The budget for the bridge project is too high");
        let b = e.embed_one("We must cut the bridge project budget");
        let c = e.embed_one("My cat sleeps all afternoon");
        assert!(
            cos(&a, &b) > cos(&a, &c) + 0.2,
            "{} vs {}",
            cos(&a, &b),
            cos(&a, &c)
        );
        assert!((cos(&a, &a) - 1.0).abs() < 1e-5);
        assert_eq!(e.embed_one("Same TEXT"), e.embed_one("same text"));
        assert!(e.embed_one("").iter().all(|x| *x == 0.0));
    }
}
