//! The scenario format's routing rules: who speaks next within a state
//! (`SpeakerRule`) and when the state changes (`TransitionRule`: keywords, turn and
//! round limits, the judge and its prompts).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who speaks next within a state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "rule", rename_all = "lowercase", deny_unknown_fields)]
pub enum SpeakerRule {
    /// Round robin over `roles`, starting after `begin_role`.
    #[default]
    Order,
    /// Uniformly among the roles other than the last speaker's, seeded by `--seed`.
    Random,
    /// A controller call picks among the roles other than the last speaker's.
    Llm {
        /// The controller's system prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        system_prompt: Option<String>,
        /// The controller's last instruction.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_prompt: Option<String>,
        /// The tag an answer may be wrapped in, `<end>…</end>` by default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extract_words: Option<String>,
    },
}

/// When to leave a state. Checked after every turn (in a simultaneous state, once
/// after every round), in this order: keywords, `max_turns`, then the judge; if none
/// fires, the state goes on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TransitionRule {
    /// Leave after this many turns in one visit (the opening counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_turns: Option<u32>,
    /// Simultaneous states: leave after this many rounds in one visit (a round counts a
    /// turn per player in `max_turns`, however many players there are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_rounds: Option<u32>,
    /// Where `max_turns` and `max_rounds` lead (default: the first of `next`). Naming
    /// this state itself starts a new visit of it (a new round), as every move into a
    /// state does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_max_turns: Option<String>,
    /// Move when the last message contains a keyword (case-insensitive). After a
    /// simultaneous round, the round's messages are checked in the order of `roles`:
    /// the first that contains a keyword decides, and within it the first keyword
    /// listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<KeywordRule>,
    /// After each turn, an LLM judge chooses between staying and each of `next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgePrompts>,
    /// How many visits this state allows in a run. A transition that would start one
    /// more goes to `on_max_visits` instead, which bounds loops such as game rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_visits: Option<u32>,
    /// Where a transition into this state goes once `max_visits` is used up: a state
    /// in `next`, or the SOP's end (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_max_visits: Option<String>,
}

/// A move taken when the last message contains a keyword.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KeywordRule {
    /// The word to look for (case-insensitive).
    pub keyword: String,
    /// A state in `next`, this state itself (a new visit of it), or the SOP's end.
    pub to: String,
}

/// The prompts of the LLM judge that chooses between staying in a state and moving
/// to each of its `next`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JudgePrompts {
    /// The judge's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The judge's last instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_prompt: Option<String>,
    /// Labels the judge may answer with instead of the names, one per choice in the
    /// order offered: staying, then each of `next` (aiwaves configs use "0", "1", …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The tag an answer may be wrapped in, `<end>…</end>` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_words: Option<String>,
}
