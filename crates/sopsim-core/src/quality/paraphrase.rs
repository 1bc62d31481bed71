//! A **paraphrase**: a reply says again what one of the [`REMEMBERED`] messages before it
//! said, when [`PARAPHRASE_JACCARD`] of the content words of the two are in both.
//!
//! The threshold was chosen against two blind readers' labels of 92 pairs of replies
//! (`benches/quality/paraphrase_pairs.jsonl`, measured by
//! `benches/quality/paraphrase_labels.py`), the same pairs it is scored on. On them the
//! shared words tell a restatement better than MiniLM's cosine did, so no embedding is
//! made for it. The blind readers' NEW scores
//! (`docs/guide/local-models.md#what-a-reader-keeps`) are the check on it.

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

/// The latest messages' content words, against which each reply is checked.
#[derive(Debug, Clone)]
pub(super) struct RestatementCheck {
    stop: FxHashSet<u64>,
    remembered: VecDeque<FxHashSet<u64>>,
}

impl Default for RestatementCheck {
    fn default() -> Self {
        Self {
            stop: STOP_WORDS.iter().map(|w| xxh3_64(w.as_bytes())).collect(),
            remembered: VecDeque::with_capacity(REMEMBERED),
        }
    }
}

impl RestatementCheck {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality::words::words;

    /// Whether each of `texts`, replies but the first, restates an earlier one.
    fn restated(texts: &[&str]) -> Vec<bool> {
        let mut r = RestatementCheck::default();
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
        let mut r = RestatementCheck::default();
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
        let mut r = RestatementCheck::default();
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
}
