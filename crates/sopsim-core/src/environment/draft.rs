//! A turn before it is committed: what its agent said and did, nothing of it yet in
//! memory or the store. Every turn is drafted and committed by the Director; a
//! sequential turn is a round of one.

use serde::{Deserialize, Serialize};

use crate::memory::{Decision, MessageKind};
use crate::tool_results::Return;

/// One message of a drafted turn: a tool call, a tool's result, or what the agent said.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DraftMessage {
    /// The agent's name.
    pub name: String,
    /// The agent's role in the current state.
    pub role: String,
    /// The text; a stored result's `_REF_ID`s are added at the commit (see `stored`).
    pub response: String,
    /// How the message came about.
    pub kind: MessageKind,
    /// The run's turn number, from 1.
    pub turn: u64,
    /// The turn's closed choice, if it made one.
    pub decision: Option<Decision>,
    /// The other participants' names and roles: a reply is cut where it goes on as one.
    pub others: Vec<String>,
    /// The model stopped at a stop sequence that starts another participant's line.
    pub stopped_at_speaker: bool,
    /// For a tool's result: which of the turn's returns (from 0) it is, whose stored
    /// objects' `_REF_ID`s the commit lists after the text.
    pub stored: Option<usize>,
}

/// A turn as its agent hands it back to the Director.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DraftTurn {
    /// The agent whose turn it is.
    pub name: String,
    /// Its tool calls and results, then what it said.
    pub messages: Vec<DraftMessage>,
    /// Its tool events not shown yet (a round's turns are shown when it is committed).
    pub events: Vec<HeldEvent>,
}

/// A tool event of a turn, shown when the turn is committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldEvent {
    /// The tool event.
    pub ret: Return,
    /// The turn's return (from 0) whose stored objects this result shows: they get the
    /// `_REF_ID`s the store gives them at the commit.
    pub stored: Option<usize>,
}
