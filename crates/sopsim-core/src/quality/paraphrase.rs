//! What a reply's meaning shows, from the run's MiniLM sentence embeddings (unit
//! vectors, so the dot product is the cosine):
//! - a **paraphrase loop**: a reply within [`PARAPHRASE_COSINE`] of an earlier message
//!   restates it in other words;
//! - a reply **off its stake**: closer by [`OFF_STAKE_MARGIN`] to another participant's
//!   stake than to its own speaker's, it argues someone else's case ("My mother's
//!   asthma…" from the neighbour whose story is the cafés).
//!
//! The thresholds were chosen by reading pairs of replies from debate and town-hall
//! runs, a set not kept in the repository; the blind readers' NEW scores
//! (`docs/guide/local-models.md#what-a-reader-keeps`) are the check on them. They are
//! MiniLM's, so other embedders are not checked.

/// The cosine from which a reply restates an earlier message (MiniLM embeddings).
pub const PARAPHRASE_COSINE: f32 = 0.80;

/// The embeddings of the messages a reply is checked against, most recent last. Only
/// the latest 64 are kept: a loop restates what was said lately, and a
/// check stays cheap however long the run.
#[derive(Debug, Clone)]
pub struct Paraphrases {
    threshold: f32,
    vectors: std::collections::VecDeque<Box<[f32]>>,
}

/// How many earlier messages a reply is compared with.
const REMEMBERED: usize = 64;

impl Paraphrases {
    pub fn new(threshold: f32) -> Self {
        Self {
            threshold,
            vectors: std::collections::VecDeque::new(),
        }
    }

    /// Takes in an earlier message's embedding.
    pub fn add(&mut self, vector: &[f32]) {
        if self.vectors.len() == REMEMBERED {
            self.vectors.pop_front();
        }
        self.vectors.push_back(vector.into());
    }

    /// Whether `vector` is within the threshold of an earlier message's.
    pub fn restates(&self, vector: &[f32]) -> bool {
        self.vectors.iter().any(|v| {
            v.len() == vector.len()
                && v.iter().zip(vector).map(|(a, b)| a * b).sum::<f32>() >= self.threshold
        })
    }
}

/// How much closer to another participant's stake than to its own a reply may be.
pub const OFF_STAKE_MARGIN: f32 = 0.10;

/// Every participant's stake embedded, by name (only those with a stake).
#[derive(Debug, Clone, Default)]
pub struct Stakes {
    vectors: indexmap::IndexMap<String, Box<[f32]>>,
}

impl Stakes {
    pub fn new(vectors: impl IntoIterator<Item = (String, Vec<f32>)>) -> Self {
        Self {
            vectors: vectors
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(n, v)| (n, v.into()))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// Whether `vector`, `speaker`'s reply, is closer by the margin to another
    /// participant's stake than to `speaker`'s own (never for a speaker without one).
    pub fn strays(&self, speaker: &str, vector: &[f32]) -> bool {
        let cos = |v: &[f32]| v.iter().zip(vector).map(|(a, b)| a * b).sum::<f32>();
        let Some(own) = self
            .vectors
            .get(speaker)
            .filter(|v| v.len() == vector.len())
        else {
            return false;
        };
        let own = cos(own);
        self.vectors
            .iter()
            .filter(|(n, v)| n.as_str() != speaker && v.len() == vector.len())
            .any(|(_, v)| cos(v) > own + OFF_STAKE_MARGIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn a_reply_close_to_an_earlier_message_restates_it() {
        let mut p = Paraphrases::new(0.8);
        p.add(&unit(&[1.0, 0.0, 0.0]));
        assert!(p.restates(&unit(&[1.0, 0.3, 0.0])));
        assert!(!p.restates(&unit(&[1.0, 1.0, 0.0])));
        assert!(!p.restates(&[1.0, 0.0]), "another embedder's vector");
        for _ in 0..REMEMBERED {
            p.add(&unit(&[0.0, 0.0, 1.0]));
        }
        assert!(!p.restates(&unit(&[1.0, 0.3, 0.0])), "forgotten");
    }

    #[test]
    fn a_reply_closer_to_anothers_stake_strays() {
        let stakes = Stakes::new([
            ("Ada".to_string(), unit(&[1.0, 0.0, 0.0])),
            ("Cleo".to_string(), unit(&[0.0, 1.0, 0.0])),
            ("Mia".to_string(), Vec::new()),
        ]);
        assert!(stakes.strays("Cleo", &unit(&[1.0, 0.2, 0.0])));
        assert!(
            !stakes.strays("Cleo", &unit(&[1.0, 0.95, 0.0])),
            "within the margin"
        );
        assert!(!stakes.strays("Ada", &unit(&[1.0, 0.2, 0.0])));
        assert!(
            !stakes.strays("Mia", &unit(&[1.0, 0.2, 0.0])),
            "no stake of its own"
        );
    }
}
