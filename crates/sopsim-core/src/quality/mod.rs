//! Reply quality: what a reader notices first in a transcript, counted for every
//! `reply` message of a run (not openings, choices, people's lines or tool lines).
//!
//! Words are lower-cased runs of letters and digits. A reply is
//! - a **copy** when it shares a run of [`COPY_WORDS`] words with an earlier message of
//!   the run (anyone's, the speaker's own included; tool calls and results are data a
//!   reply may quote, not messages, and do not count);
//! - **labelled** when it carries another participant's speaker label (`Name:` or
//!   `Name (Role):` at the start of a line or of a sentence), or opens with its own, or
//!   carries a role's name as a label (`Union_Rep:`);
//! - **narration** when it opens with the speaker's own name used in the third person
//!   ("Ada argues …"; "Ada's point" and "Ada:" are not), names its speaker after a
//!   comma ("Well, Dan, first of all …", "Yes, Ben agreed!"), or reports on the
//!   conversation instead of taking part: it opens with another's name in the third
//!   person and has no word of the first or second person ("Cleo argues that the ban
//!   is unjustified. She believes …");
//! - an **echo** when it shares a run of [`ECHO_WORDS`] words with the instructions:
//!   the scenario's (tasks, rules, outputs, last instructions, styles, judge,
//!   controller, summary, extract and choice prompts; not environment prompts, which
//!   set the scene and may be restated) and sopsim's own (who an agent is told it is,
//!   the notes and headers it puts in prompts);
//! - **empty** with fewer than three words, or with nothing but participants' names
//!   and roles ("Joan. Ruth. Amira.");
//! - **cut** when it does not end where a sentence ends;
//! - a **stage** direction when it opens with a lead-in built from the instructions
//!   ("Back up Ada and say:"), tells someone to reply as somebody, opens with an
//!   action in brackets, or carries a piece of its cue anywhere ("(Mia, your turn)",
//!   "Your view: …", "Two or three sentences.", a bracket repeating the task;
//!   `voice.rs`);
//! - an **impersonation** when it speaks as another participant ("As Rosa (Chair),
//!   I…");
//! - **foreign** when it holds letters of a script the scenario does not use, or words
//!   run together into one ("aretheonlywayicanreach…");
//! - a **paraphrase** when it says again what one of the 64 messages before it said:
//!   of all the content words of the two, [`PARAPHRASE_JACCARD`] are in both
//!   (`paraphrase.rs`; not counted for a population's members, who speak once a round);
//! - **off its stake** when it declares the side opposite to its speaker's stake ("I am
//!   not for the ban" from someone whose stake opens "I am for the ban"; `side.rs`), or,
//!   with MiniLM, when it is closer to another participant's stake than to its
//!   speaker's (`stake.rs`).
//!
//! `distinct_2` is the share of distinct word bigrams among all bigrams of the run's
//! replies. Pure: the Director feeds a [`Checker`] every message it commits, and its
//! figures go to `summary.json`, the progress events and the bench report.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rustc_hash::{FxHashMap, FxHashSet};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::memory::MessageKind;
use crate::scenario::{identity, Scenario, SpeakerRule};

mod checker;
mod labels;
mod meaning;
mod paraphrase;
mod settled;
mod side;
mod stake;
mod voice;
mod words;

use words::{gram_hashes, words};

pub use checker::Checker;
pub use meaning::{Meaning, Plan};
pub use paraphrase::PARAPHRASE_JACCARD;
pub use stake::Stakes;
pub use voice::Script;

/// Words a reply must share in a row with an earlier message to be a copy.
pub const COPY_WORDS: usize = 10;
/// Words a reply must share in a row with the instructions to be an echo.
pub const ECHO_WORDS: usize = 8;
/// Fewer words than this is an empty reply.
pub const EMPTY_WORDS: usize = 3;
/// Times a flawed reply is drawn again when the settings do not say (`redraws`).
pub const DEFAULT_REDRAWS: u32 = 2;
/// Candidates for a reply on a local model when the settings do not say (`candidates`;
/// a server draws one, each candidate being a call of its own). Two: on the default
/// model the second is drawn for few replies, the first debate takes as long as with
/// one, and blind readers kept more of its replies than with one
/// (`docs/guide/local-models.md`, "Choosing the default model").
pub const DEFAULT_CANDIDATES: u32 = 2;

/// What is wrong with one reply (each a count of 0 or 1 when summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flaws {
    /// It shares a run of `COPY_WORDS` words with an earlier message of the run.
    pub copy: bool,
    /// It carries another participant's speaker label or a role's, or opens with its own.
    pub label: bool,
    /// It speaks of its speaker in the third person, or reports on the conversation
    /// instead of taking part.
    pub narration: bool,
    /// It shares a run of `ECHO_WORDS` words with the instructions.
    pub echo: bool,
    /// It has fewer than `EMPTY_WORDS` words, or nothing but participants' names and roles.
    pub empty: bool,
    /// It does not end where a sentence ends.
    pub cut: bool,
    /// It carries a stage direction: a lead-in built from the instructions, an action in
    /// brackets, or a piece of its cue.
    pub stage: bool,
    /// It speaks as another participant.
    pub impersonation: bool,
    /// It holds letters of a script the scenario does not use, or words run together.
    pub foreign: bool,
    /// It declares the side opposite to its speaker's stake, or is closer to another
    /// participant's stake than to its own.
    pub off_stake: bool,
    /// An assistant declining ("I'm sorry, but I can't assist with that"), wherever in
    /// the reply.
    pub refusal: bool,
}

/// What a reply is drawn again for: a flaw a reader always rejects, the first of them
/// in this order. A paraphrase, a reply off its speaker's stake and one cut short are
/// counted but not drawn again: readers keep some of them, and a redraw for them cost
/// more draws than it saved readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RedrawCause {
    /// It copies an earlier message.
    Copy,
    /// It carries a speaker label.
    Label,
    /// It echoes the instructions.
    Echo,
    /// It narrates instead of speaking as its speaker.
    Narration,
    /// It says next to nothing.
    Empty,
    /// It speaks as another participant.
    Impersonation,
    /// It carries a stage direction.
    Stage,
    /// It holds letters of another script, or words run together.
    Foreign,
    /// An assistant declines in it instead of the participant speaking.
    Refusal,
}

impl RedrawCause {
    /// How much a reader minds the flaw, most first: when every draw of a reply has a
    /// flaw, the one with the mildest is kept.
    pub fn severity(self) -> u8 {
        match self {
            RedrawCause::Copy
            | RedrawCause::Label
            | RedrawCause::Impersonation
            | RedrawCause::Refusal => 4,
            RedrawCause::Stage | RedrawCause::Echo | RedrawCause::Foreign => 3,
            RedrawCause::Narration | RedrawCause::Empty => 2,
        }
    }
}

impl Flaws {
    /// The first flaw that makes a reply worth drawing again.
    pub fn redraw_cause(&self) -> Option<RedrawCause> {
        [
            (self.copy, RedrawCause::Copy),
            (self.label, RedrawCause::Label),
            (self.impersonation, RedrawCause::Impersonation),
            (self.refusal, RedrawCause::Refusal),
            (self.stage, RedrawCause::Stage),
            (self.echo, RedrawCause::Echo),
            (self.narration, RedrawCause::Narration),
            (self.foreign, RedrawCause::Foreign),
            (self.empty, RedrawCause::Empty),
        ]
        .into_iter()
        .find_map(|(flawed, cause)| flawed.then_some(cause))
    }
}

/// The scenario's side of the checks: who takes part, and what its instructions say.
/// Cheap to clone: every agent's checks share one.
#[derive(Debug, Clone)]
pub struct Instructions {
    names: std::sync::Arc<[String]>,
    /// The names, for scenarios with more than [`CHECKED_NAMES`] of them.
    name_set: std::sync::Arc<HashSet<String>>,
    /// The most words in a name.
    name_words: usize,
    grams: Arc<FxHashSet<u64>>,
    /// The instructions' runs of three words: a leading line repeating one is a stage
    /// direction.
    lead_grams: Arc<FxHashSet<u64>>,
    /// The words of the participants' names and roles, as hashed by `words`.
    roster: Arc<FxHashSet<u64>>,
    /// The roles, whose names are labels too ("Union_Rep:").
    roles: Arc<[String]>,
    /// The scripts the scenario is written in (Latin when it says nothing).
    scripts: Arc<std::collections::BTreeSet<Script>>,
    /// The side each participant's stake declares, for those whose stake opens by
    /// declaring one.
    sides: Arc<FxHashMap<String, side::Side>>,
    /// Messages' runs of [`COPY_WORDS`] words, shared by every check of the run: an
    /// agent is shown the same recent messages on reply after reply.
    copy_grams: Arc<CopyGrams>,
}

/// No participants and no instructions, in the Latin script.
impl Default for Instructions {
    fn default() -> Self {
        Self::with(Vec::new(), FxHashSet::default())
    }
}

/// The hashes of each message's runs of [`COPY_WORDS`] words, by the hash of its text.
#[derive(Debug, Default)]
struct CopyGrams(Mutex<FxHashMap<u64, Arc<[u64]>>>);

/// How many messages' runs [`CopyGrams`] holds at most; it forgets them all past that.
const REMEMBERED_MESSAGES: usize = 1 << 14;

impl CopyGrams {
    /// `text`'s runs, from its word hashes `hashed` where the caller has them.
    fn of(&self, text: &str, hashed: Option<&[u64]>) -> Arc<[u64]> {
        let key = xxh3_64(text.as_bytes());
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(grams) = memo.get(&key) {
            return grams.clone();
        }
        let grams: Arc<[u64]> = match hashed {
            Some(w) => gram_hashes(w, COPY_WORDS).collect(),
            None => gram_hashes(&words(text), COPY_WORDS).collect(),
        };
        if memo.len() >= REMEMBERED_MESSAGES {
            memo.clear();
        }
        memo.insert(key, grams.clone());
        grams
    }
}

/// A reply is checked for the label of each of up to this many participants; with more
/// (a population), only for the names its own words could be, so a check does not
/// grow with the population.
const CHECKED_NAMES: usize = 64;

impl Instructions {
    /// The participants whose label `text` could carry: every one, or in a population
    /// those whose name is a run of the text's words (less emphasis and punctuation).
    fn names_in<'a>(&'a self, text: &str) -> Vec<&'a str> {
        if self.names.len() <= CHECKED_NAMES {
            return self.names.iter().map(String::as_str).collect();
        }
        let words: Vec<&str> = text
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .collect();
        let mut found: Vec<&'a str> = Vec::new();
        for start in 0..words.len() {
            for end in start + 1..=(start + self.name_words).min(words.len()) {
                if let Some(name) = self.name_set.get(words[start..end].join(" ").as_str()) {
                    if !found.contains(&name.as_str()) {
                        found.push(name);
                    }
                }
            }
        }
        found
    }
}

impl Instructions {
    /// The checks' side of `scenario`: its participants and roles, the scripts it is
    /// written in, its instructions' runs of words, and the sides its stakes declare.
    pub fn of(scenario: &Scenario) -> Self {
        let identities: Vec<String> = scenario
            .agents
            .iter()
            .flat_map(|(name, a)| a.roles.values().map(move |role| identity(name, role)))
            .collect();
        let mut texts: Vec<&str> = crate::prompt::FRAMEWORK_TEXTS.to_vec();
        texts.extend(identities.iter().map(String::as_str));
        let speaking: Vec<String> = scenario
            .agents
            .keys()
            .map(|n| crate::scenario::speak_as(n))
            .collect();
        texts.extend(speaking.iter().map(String::as_str));
        for agent in scenario.agents.values() {
            texts.push(&agent.style);
            texts.push(&agent.stake);
        }
        for state in scenario.sop.states.values() {
            for c in state.components.values() {
                texts.extend(
                    [&c.style, &c.task, &c.rule, &c.output, &c.last, &c.template]
                        .into_iter()
                        .flatten()
                        .map(String::as_str),
                );
                if let Some(x) = &c.extract {
                    texts.extend([x.system_prompt.as_str(), x.last_prompt.as_str()]);
                }
                if let Some(choice) = &c.choice {
                    texts.extend(choice.prompt.as_deref());
                }
            }
            texts.extend([
                state.summary.system_prompt.as_str(),
                state.summary.last_prompt.as_str(),
            ]);
            if let SpeakerRule::Llm {
                system_prompt,
                last_prompt,
                ..
            } = &state.speaker
            {
                texts.extend(system_prompt.as_deref());
                texts.extend(last_prompt.as_deref());
            }
            if let Some(judge) = &state.transition.judge {
                texts.extend(judge.system_prompt.as_deref());
                texts.extend(judge.last_prompt.as_deref());
            }
        }
        let mut grams = FxHashSet::default();
        let mut lead_grams = FxHashSet::default();
        for t in &texts {
            let w = words(t);
            grams.extend(gram_hashes(&w, ECHO_WORDS));
            lead_grams.extend(gram_hashes(&w, 3));
        }
        let mut scripts: std::collections::BTreeSet<Script> =
            texts.iter().flat_map(|t| voice::scripts_in(t)).collect();
        for state in scenario.sop.states.values() {
            scripts.extend(voice::scripts_in(&state.environment_prompt));
            scripts.extend(state.begin_query.iter().flat_map(|q| voice::scripts_in(q)));
        }
        for name in scenario.agents.keys() {
            scripts.extend(voice::scripts_in(name));
        }
        let mut made = Self::with(scenario.agents.keys().cloned().collect(), grams);
        made.lead_grams = lead_grams.into();
        made.scripts = scripts.into();
        let mut roles: Vec<String> = scenario
            .agents
            .values()
            .flat_map(|a| a.roles.values().cloned())
            .collect();
        roles.sort_unstable();
        roles.dedup();
        made.roster = Arc::new(
            scenario
                .agents
                .keys()
                .chain(&roles)
                .flat_map(|n| words(n))
                .collect(),
        );
        made.roles = roles.into();
        made.sides = Arc::new(
            scenario
                .agents
                .iter()
                .filter_map(|(name, a)| side::of_stake(&a.stake).map(|s| (name.clone(), s)))
                .collect(),
        );
        made
    }

    /// Checks for nobody in particular, against no instructions, in the Latin script.
    fn with(names: Vec<String>, grams: FxHashSet<u64>) -> Self {
        let name_set = if names.len() > CHECKED_NAMES {
            names.iter().cloned().collect()
        } else {
            HashSet::new()
        };
        Self {
            name_words: names
                .iter()
                .map(|n| n.split_whitespace().count())
                .max()
                .unwrap_or(0),
            names: names.into(),
            name_set: name_set.into(),
            grams: grams.into(),
            lead_grams: Arc::default(),
            scripts: Arc::new([Script::Latin].into()),
            sides: Arc::default(),
            roster: Arc::default(),
            roles: Arc::default(),
            copy_grams: Arc::default(),
        }
    }
}

/// A run's reply quality, as `summary.json` holds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplyQuality {
    /// Replies checked.
    pub replies: u64,
    /// Replies that copy an earlier message.
    pub copy: u64,
    /// Replies that carry a speaker label.
    pub label: u64,
    /// Replies that narrate instead of speaking as their speaker.
    pub narration: u64,
    /// Replies that echo the instructions.
    pub echo: u64,
    /// Replies with next to no words, or nothing but participants' names and roles.
    pub empty: u64,
    /// Replies that do not end where a sentence ends.
    #[serde(default)]
    pub cut: u64,
    /// Replies that carry a stage direction.
    #[serde(default)]
    pub stage: u64,
    /// Replies that speak as another participant.
    #[serde(default)]
    pub impersonation: u64,
    /// Replies with letters of a script the scenario does not use, or words run together.
    #[serde(default)]
    pub foreign: u64,
    /// Replies that restate one of the 64 messages before them (`null` for a run with
    /// populations, whose members speak once a round).
    #[serde(default)]
    pub paraphrase: Option<u64>,
    /// Replies that declare the side opposite to their speaker's stake, or are closer
    /// to another participant's stake than to their own (`null` when not measured: no
    /// stake declares a side, and the embedder is not MiniLM or no agent has a stake).
    #[serde(default)]
    pub off_stake: Option<u64>,
    /// Replies in which an assistant declines instead of the participant speaking.
    #[serde(default)]
    pub refusal: u64,
    /// Each count over `replies` (`null` without replies).
    pub rates: QualityRates,
    /// The share of distinct word bigrams among the replies' bigrams (`null` without any).
    pub distinct_2: Option<f64>,
}

/// Each reply-quality count as a share of the replies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QualityRates {
    /// The share of replies that copy an earlier message.
    pub copy: Option<f64>,
    /// The share of replies that carry a speaker label.
    pub label: Option<f64>,
    /// The share of replies that narrate instead of speaking as their speaker.
    pub narration: Option<f64>,
    /// The share of replies that echo the instructions.
    pub echo: Option<f64>,
    /// The share of replies with next to no words.
    pub empty: Option<f64>,
    /// The share of replies that do not end where a sentence ends.
    #[serde(default)]
    pub cut: Option<f64>,
    /// The share of replies that carry a stage direction.
    #[serde(default)]
    pub stage: Option<f64>,
    /// The share of replies that speak as another participant.
    #[serde(default)]
    pub impersonation: Option<f64>,
    /// The share of replies with letters of a foreign script or words run together.
    #[serde(default)]
    pub foreign: Option<f64>,
    /// The share of replies that restate an earlier message (`null` when not measured).
    #[serde(default)]
    pub paraphrase: Option<f64>,
    /// The share of replies off their speaker's stake (`null` when not measured).
    #[serde(default)]
    pub off_stake: Option<f64>,
    /// The share of replies in which an assistant declines.
    #[serde(default)]
    pub refusal: Option<f64>,
}

#[cfg(test)]
mod tests;
