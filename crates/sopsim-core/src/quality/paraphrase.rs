//! What a reply restates, and whose case it argues:
//! - a **paraphrase**: a reply says again what one of the [`REMEMBERED`] messages before
//!   it said, when [`PARAPHRASE_JACCARD`] of the content words of the two are in both;
//! - a reply **off its stake**: closer by [`OFF_STAKE_MARGIN`] in MiniLM's embeddings
//!   (unit vectors, so the dot product is the cosine) to another participant's stake
//!   than to its own speaker's, it argues someone else's case ("My mother's asthma…"
//!   from the neighbour whose story is the cafés).
//!
//! The paraphrase threshold was chosen against two blind readers' labels of 92 pairs of
//! replies (`benches/quality/paraphrase_pairs.jsonl`, measured by
//! `benches/quality/paraphrase_labels.py`). On them the shared words tell a
//! restatement better than MiniLM's cosine did, so no embedding is made for it. The
//! stake margin was chosen by reading replies of debate and town-hall runs, a set not
//! kept in the repository; the blind readers' NEW scores
//! (`docs/guide/local-models.md#what-a-reader-keeps`) are the check on both.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;
use xxhash_rust::xxh3::xxh3_64;

/// The share of two messages' content words (of all the content words of either: the
/// Jaccard index) from which a reply restates an earlier message. A restatement shares
/// most of both messages' words; two replies on one topic share its words but little
/// else.
pub const PARAPHRASE_JACCARD: f32 = 0.3;

/// How many earlier messages a reply is compared with: a loop restates what was said
/// lately, and the check stays cheap however long the run.
const REMEMBERED: usize = 64;

/// Words too common to tell two messages apart (lower-cased), kept in step with
/// `benches/quality/paraphrase_labels.py`.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "for",
    "from", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "just", "me", "more", "most", "my", "no", "not", "now", "of", "on",
    "one", "only", "or", "our", "out", "over", "she", "so", "some", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "very",
    "was", "we", "were", "what", "when", "where", "which", "who", "will", "with", "would", "you",
    "your", "yes", "let", "s", "t",
];

/// The latest messages' content words, and whether each reply restates one of them.
#[derive(Debug, Clone)]
pub(super) struct Restatements {
    stop: FxHashSet<u64>,
    remembered: VecDeque<FxHashSet<u64>>,
}

impl Default for Restatements {
    fn default() -> Self {
        Self {
            stop: STOP_WORDS.iter().map(|w| xxh3_64(w.as_bytes())).collect(),
            remembered: VecDeque::with_capacity(REMEMBERED),
        }
    }
}

impl Restatements {
    /// Takes in the next message (`words`, its hashed words); for a reply, whether it
    /// restates one of the messages before it.
    pub(super) fn add(&mut self, words: &[u64], is_reply: bool) -> bool {
        let content: FxHashSet<u64> = words
            .iter()
            .copied()
            .filter(|w| !self.stop.contains(w))
            .collect();
        let restates = is_reply
            && self
                .remembered
                .iter()
                .any(|earlier| jaccard(&content, earlier) >= PARAPHRASE_JACCARD);
        if self.remembered.len() == REMEMBERED {
            self.remembered.pop_front();
        }
        self.remembered.push_back(content);
        restates
    }
}

/// The share of the words of either set that both have.
fn jaccard(a: &FxHashSet<u64>, b: &FxHashSet<u64>) -> f32 {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let shared = small.iter().filter(|w| large.contains(w)).count();
    match a.len() + b.len() - shared {
        0 => 0.0,
        either => shared as f32 / either as f32,
    }
}

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
    use crate::quality::words::words;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    /// Whether each of `texts`, replies but the first, restates an earlier one.
    fn restated(texts: &[&str]) -> Vec<bool> {
        let mut r = Restatements::default();
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| r.add(&words(t), i > 0))
            .collect()
    }

    #[test]
    fn a_reply_sharing_most_of_both_messages_words_restates_it() {
        let said = "Closing the car park brings children a safe park.";
        assert_eq!(
            restated(&[said, "A park instead of the car park: safe for children."]),
            [false, true],
            "car, park, safe and children of seven words"
        );
        assert_eq!(
            restated(&[said, "The bus timetable is my worry on Sundays."]),
            [false, false]
        );
        let mut r = Restatements::default();
        r.add(&words(said), false);
        let again = words("A park instead of the car park: safe for children.");
        assert!(r.add(&again, true));
        assert!(!r.add(&again, false), "only a reply restates");
    }

    #[test]
    fn replies_sharing_only_their_topic_words_do_not_restate() {
        // Two of the reply's three content words are the earlier message's, but two of
        // twelve of both messages' words.
        let texts = [
            "The car park behind the shops should stay: the pharmacy needs its blue-badge bays.",
            "The park suits the shops.",
        ];
        assert_eq!(restated(&texts), [false, false]);
    }

    #[test]
    fn a_reply_is_compared_with_the_latest_messages_only() {
        let mut r = Restatements::default();
        r.add(
            &words("Closing the car park brings children a safe park."),
            false,
        );
        for i in 0..REMEMBERED {
            r.add(&words(&format!("Nothing alike {i}.")), false);
        }
        let reply = words("A park instead of the car park: safe for children.");
        assert!(!r.add(&reply, true), "forgotten");
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
