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

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashSet;
use xxhash_rust::xxh3::xxh3_64;

use super::words::words;

/// The cosine from which a reply restates an earlier message (MiniLM embeddings).
pub const PARAPHRASE_COSINE: f32 = 0.80;

/// The share of the shorter message's content words two messages must have in common
/// before their embeddings are compared. MiniLM finds a restatement only between
/// messages that share their words; the screen spares the forward pass for every
/// other pair (`benches/quality/paraphrase_screen.py` measures what it keeps).
pub const SCREEN_OVERLAP: f32 = 0.3;

/// How many earlier messages a reply is compared with: a loop restates what was said
/// lately, and the check stays cheap however long the run.
const REMEMBERED: usize = 64;

/// Words too common to tell two messages apart (lower-cased), kept in step with
/// `benches/quality/paraphrase_screen.py`.
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

/// Which earlier messages each reply may restate, and the verdicts once their
/// embeddings are in: a reply is a paraphrase when it shares [`SCREEN_OVERLAP`] of its
/// content words with one of the latest messages and their embeddings are within
/// [`PARAPHRASE_COSINE`]. Only the messages a screen picks are ever embedded.
#[derive(Debug, Clone)]
pub(super) struct ParaphraseScreen {
    stop: FxHashSet<u64>,
    remembered: VecDeque<Remembered>,
    next: u64,
}

#[derive(Debug, Clone)]
struct Remembered {
    id: u64,
    text: Arc<str>,
    words: FxHashSet<u64>,
    vector: Option<Arc<[f32]>>,
}

/// A reply waiting for its verdict: it and the earlier messages the screen picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Suspect {
    pub reply: u64,
    pub earlier: Vec<u64>,
}

impl Default for ParaphraseScreen {
    fn default() -> Self {
        Self {
            stop: STOP_WORDS.iter().map(|w| xxh3_64(w.as_bytes())).collect(),
            remembered: VecDeque::new(),
            next: 0,
        }
    }
}

impl ParaphraseScreen {
    /// Takes in the next message; for a reply, the earlier messages it shares enough
    /// words with, if any. The message's id is the suspect's `reply`, or the one
    /// returned when it is not a suspect.
    pub(super) fn add(&mut self, text: &str, is_reply: bool) -> (u64, Option<Suspect>) {
        let words: FxHashSet<u64> = words(text)
            .into_iter()
            .filter(|w| !self.stop.contains(w))
            .collect();
        let id = self.next;
        self.next += 1;
        let suspect = is_reply
            .then(|| {
                let earlier: Vec<u64> = self
                    .remembered
                    .iter()
                    .filter(|r| overlap(&words, &r.words) >= SCREEN_OVERLAP)
                    .map(|r| r.id)
                    .collect();
                (!earlier.is_empty()).then_some(Suspect { reply: id, earlier })
            })
            .flatten();
        if self.remembered.len() == REMEMBERED {
            self.remembered.pop_front();
        }
        self.remembered.push_back(Remembered {
            id,
            text: text.into(),
            words,
            vector: None,
        });
        (id, suspect)
    }

    /// The messages among `suspects` whose embeddings are still to be made, by id.
    pub(super) fn unembedded<'a>(
        &'a self,
        suspects: impl IntoIterator<Item = &'a Suspect>,
    ) -> Vec<(u64, Arc<str>)> {
        let mut ids: Vec<u64> = suspects
            .into_iter()
            .flat_map(|s| std::iter::once(s.reply).chain(s.earlier.iter().copied()))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| self.get(id))
            .filter(|r| r.vector.is_none())
            .map(|r| (r.id, r.text.clone()))
            .collect()
    }

    /// Keeps a message's embedding (a message already forgotten is skipped).
    pub(super) fn embedded(&mut self, id: u64, vector: Arc<[f32]>) {
        if let Some(r) = self.remembered.iter_mut().find(|r| r.id == id) {
            r.vector = Some(vector);
        }
    }

    /// Whether the suspect restates one of its earlier messages, from the embeddings
    /// kept so far (a pair missing one is not a paraphrase).
    pub(super) fn restates(&self, suspect: &Suspect) -> bool {
        let Some(reply) = self.get(suspect.reply).and_then(|r| r.vector.as_deref()) else {
            return false;
        };
        suspect
            .earlier
            .iter()
            .filter_map(|id| self.get(*id).and_then(|r| r.vector.as_deref()))
            .any(|v| v.len() == reply.len() && dot(v, reply) >= PARAPHRASE_COSINE)
    }

    fn get(&self, id: u64) -> Option<&Remembered> {
        // Ids rise along the queue, so the one sought is found from its offset.
        let first = self.remembered.front()?.id;
        self.remembered
            .get(usize::try_from(id.checked_sub(first)?).ok()?)
    }
}

/// The share of the smaller set's words that the other has too.
fn overlap(a: &FxHashSet<u64>, b: &FxHashSet<u64>) -> f32 {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if small.is_empty() {
        return 0.0;
    }
    small.iter().filter(|w| large.contains(w)).count() as f32 / small.len() as f32
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

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn only_replies_sharing_words_are_embedded_and_judged_by_meaning() {
        let mut s = ParaphraseScreen::default();
        let (said, none) = s.add("Closing the car park brings children a safe park.", false);
        assert_eq!(
            none, None,
            "a message that is not a reply is never a suspect"
        );
        let (_, other) = s.add("The bus timetable is my worry on Sundays.", true);
        assert_eq!(other, None, "no content word shared: nothing to embed");
        let (reply, suspect) = s.add("A park instead of the car park: safe for children.", true);
        let suspect = suspect.expect("shares car, park, safe, children");
        assert_eq!(
            suspect,
            Suspect {
                reply,
                earlier: vec![said]
            }
        );
        let missing: Vec<u64> = s.unembedded([&suspect]).iter().map(|(id, _)| *id).collect();
        assert_eq!(missing, vec![said, reply]);
        assert!(!s.restates(&suspect), "no embedding yet");
        s.embedded(said, unit(&[1.0, 0.0, 0.0]).into());
        s.embedded(reply, unit(&[1.0, 0.3, 0.0]).into());
        assert!(s.unembedded([&suspect]).is_empty());
        assert!(s.restates(&suspect));
        s.embedded(reply, unit(&[1.0, 1.0, 0.0]).into());
        assert!(!s.restates(&suspect), "below the cosine");
        s.embedded(reply, vec![1.0, 0.0].into());
        assert!(!s.restates(&suspect), "another embedder's vector");
    }

    #[test]
    fn a_reply_is_screened_against_the_latest_messages_only() {
        let mut s = ParaphraseScreen::default();
        s.add("Closing the car park brings children a safe park.", false);
        for i in 0..REMEMBERED {
            s.add(&format!("Nothing alike {i}."), false);
        }
        let (_, suspect) = s.add("A park instead of the car park: safe for children.", true);
        assert_eq!(suspect, None, "forgotten");
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
