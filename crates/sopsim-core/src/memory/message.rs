//! `Message`: one message in the run's long-term log (aiwaves' `Memory`).

use serde::{Deserialize, Serialize};

/// How a message came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// A state's `begin_query`, said verbatim at the start of a visit.
    Opening,
    /// An agent's reply from its model.
    Reply,
    /// A turn typed by a person.
    Human,
    /// A turn that is only a closed choice (a `choice` component with `after: instead`).
    Choice,
    /// A tool call the agent made before replying.
    ToolCall,
    /// What a tool call returned (with the stored objects' `_REF_ID`s) or its error.
    ToolResult,
}

impl MessageKind {
    /// A tool call or result: part of a turn, not a turn of its own.
    pub fn is_tool(self) -> bool {
        matches!(self, MessageKind::ToolCall | MessageKind::ToolResult)
    }
}

/// A closed choice made in a turn: the value, and the probability the model gave each
/// option when the backend can tell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The option chosen.
    pub value: String,
    /// Each option's probability, when the backend can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<indexmap::IndexMap<String, f64>>,
}

/// One message: aiwaves' `Memory(send_role, send_name, content)` plus where and
/// when in the run it was said. One line of `transcript.jsonl`.
///
/// There is deliberately no wall-clock time here: a replayed run must reproduce the
/// transcript byte for byte. Times are in `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[doc(alias = "Memory")]
pub struct Message {
    /// Position in the run's log, from 0.
    pub seq: u64,
    /// The SOP state the message was said in.
    pub state: String,
    /// The state's visit number within the run, from 1.
    pub visit: u32,
    /// aiwaves' `send_role`.
    pub role: String,
    /// aiwaves' `send_name`.
    pub name: String,
    /// What was said.
    pub content: String,
    /// How the message came about.
    pub kind: MessageKind,
    /// The turn's closed choice, if its role has a `choice` component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

impl Message {
    /// The message as one line of a prompt.
    pub fn render(&self) -> String {
        format!("{} ({}): {}", self.name, self.role, self.content)
    }
}
