//! The `script` section: the scripted backend's replies, answers and decisions.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Replies for the scripted backend. Lines are templates with `{name}`, `{role}`,
/// `{state}`, `{turn}` (the run's turn number), `{n}` (this agent's reply number,
/// from 1) and `{one_of:A|B|C}` (one option, drawn with the run's seed). An agent's
/// lines are used in order and start over when they run out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Agent name → its lines. Takes precedence over `roles`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub agents: IndexMap<String, Vec<String>>,
    /// Role name → lines for whichever agent plays it.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub roles: IndexMap<String, Vec<String>>,
    /// The line for agents with none of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Answers of the `llm` speaker controller, in order (default: the offered roles in turn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<String>,
    /// Answers of the transition judge, in order (default: "stay").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transit: Vec<String>,
    /// Agent or role name → answers to its `choice` component, in order, each naming an
    /// option (a run stops at one that names none; default: its reply lines, where they
    /// name an option, else a seeded draw among the options).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub choices: IndexMap<String, Vec<String>>,
    /// Agent or role name → its decisions, in order over the run: `{"tool": NAME,
    /// "arguments": {...}}` calls a tool, `"answer"` replies; past the end it replies.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub decisions: IndexMap<String, Vec<serde_json::Value>>,
    /// The summary template, with `{state}` and `{turn}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Answers to probes that ask for free text, in order over the run (default: a
    /// line naming the agent); a closed probe is answered by a seeded draw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<String>,
    /// A judge's answers, in order over the items it is asked, each naming a score
    /// (default: a seeded draw among the scale's points).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judge: Vec<String>,
}
