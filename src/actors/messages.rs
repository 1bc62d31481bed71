//! The typed messages actors exchange. All are serde-serializable, so a run's traffic
//! can be logged or sent across a process boundary.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::elysia::Return;
use crate::error::SimError;
use crate::memory::{Decision, Message, MessageKind, Observation};

/// Director → Environment: a new visit of `state` begins.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "()")]
pub struct EnterVisit {
    pub state: String,
    pub visit: u32,
}

/// Agent or Director → Environment: what may be seen now.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Observation")]
pub struct Observe;

/// One finished turn, ready to be committed to memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Turn {
    pub name: String,
    pub role: String,
    pub response: String,
    pub kind: MessageKind,
    pub turn: u64,
    pub decision: Option<Decision>,
    /// The other participants' names and roles: a reply is cut where it goes on as one.
    pub others: Vec<String>,
    /// The model stopped at a stop sequence that starts another participant's line.
    pub stopped_at_speaker: bool,
}

/// Agent or Director → Environment: commit these turns, in order, with consecutive
/// `seq` numbers (one turn, or every turn of a simultaneous round): embed them, append
/// them, summarise if due.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Result<Vec<Arc<Message>>, SimError>")]
pub struct Record(pub Vec<Turn>);

/// Director → Agent: speak now.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Result<TurnDone, SimError>")]
pub struct TakeTurn {
    pub state: String,
    pub visit: u32,
    pub role: String,
    /// The run's turn number, from 1.
    pub turn: u64,
    /// The visit's opening line, said verbatim.
    pub opening: Option<String>,
    /// Record the turn at once (sequential states); otherwise hand it back as a
    /// [`TurnDone::Drafted`] for the Director to commit with the rest of its round.
    pub commit: bool,
}

/// Agent → Director: the turn's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TurnDone {
    Spoke(Arc<Message>),
    /// A turn of a simultaneous round, not yet in memory.
    Drafted(Turn),
    /// A human agent's input ended; the run ends cleanly.
    InputClosed,
}

/// A tool's return for the Environment: Results go into the store, Errors into the
/// tool's error list that its next call sees. Returns the frontend payload, if any.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "()")]
pub struct ApplyReturn {
    pub tool: String,
    pub ret: Return,
}

/// The Environment's state for `environment.json` and the run's transcript.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "EnvironmentSnapshot")]
pub struct Snapshot;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvironmentSnapshot {
    pub transcript: Vec<Arc<Message>>,
    pub json: serde_json::Value,
    /// Embedding calls the simulation made (one per recorded message).
    pub embeddings: u64,
    /// Replies cut where they went on as another participant.
    pub cut_replies: u64,
}

/// Agent → Environment: values an `extract` step read, stored for `template`s.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "()")]
pub struct SetShared {
    pub values: Vec<(String, String)>,
}

/// Agent → Environment: the knowledge-base text for the latest message.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Result<String, SimError>")]
pub struct Consult {
    pub lookup: crate::scenario::KnowledgeLookup,
}
