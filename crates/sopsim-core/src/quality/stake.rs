//! A reply **off its stake**: closer by [`OFF_STAKE_MARGIN`] in MiniLM's embeddings (unit
//! vectors, so the dot product is the cosine) to another participant's stake than to
//! its own speaker's, it argues someone else's case ("My mother's asthma…" from the
//! neighbour whose story is the cafés).
//!
//! The margin was chosen by reading replies of debate and town-hall runs, a set not kept
//! in the repository; the blind readers' NEW scores
//! (`docs/guide/local-models.md#what-a-reader-keeps`) are the check on it. It is
//! MiniLM's, so other embedders are not checked.

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// How much closer to another participant's stake than to its own a reply may be.
pub(super) const OFF_STAKE_MARGIN: f32 = 0.10;

/// Every participant's stake embedded, by name (only those with a stake).
#[derive(Debug, Clone, Default)]
pub struct Stakes {
    vectors: indexmap::IndexMap<String, Box<[f32]>>,
}

impl Stakes {
    /// The stakes from each participant's name and stake embedding; empty ones are left out.
    pub fn new(vectors: impl IntoIterator<Item = (String, Vec<f32>)>) -> Self {
        Self {
            vectors: vectors
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(n, v)| (n, v.into()))
                .collect(),
        }
    }

    /// Whether no participant's stake is embedded.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// Whether `vector`, `speaker`'s reply, is closer by the margin to another
    /// participant's stake than to `speaker`'s own (never for a speaker without one).
    pub fn strays(&self, speaker: &str, vector: &[f32]) -> bool {
        let cos = |v: &[f32]| dot(v, vector);
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
