//! The typed messages actors exchange. All are serde-serializable, so a run's traffic
//! can be logged or sent across a process boundary.

use std::sync::Arc;

use actix::Message;
use serde::{Deserialize, Serialize};

use crate::elysia::Return;
use crate::error::SimError;
use crate::memory::{Memory, MessageKind, Observation};

/// Director → Environment: a new visit of `state` begins.
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "()")]
pub struct EnterVisit {
    pub state: String,
    pub visit: u32,
}

/// Agent or Director → Environment: what may be seen now.
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "Observation")]
pub struct Observe;

/// Agent → Environment: store a finished turn (embed it, append it, summarise if due).
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "Result<Arc<Memory>, SimError>")]
pub struct Record {
    pub name: String,
    pub role: String,
    pub response: String,
    pub kind: MessageKind,
    pub turn: u64,
}

/// Director → Agent: speak now.
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "Result<TurnDone, SimError>")]
pub struct TakeTurn {
    pub state: String,
    pub visit: u32,
    pub role: String,
    /// The run's turn number, from 1.
    pub turn: u64,
    /// The visit's opening line, said verbatim.
    pub opening: Option<String>,
}

/// Agent → Director: the turn's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TurnDone {
    Spoke(Arc<Memory>),
    /// A human agent's input ended; the run ends cleanly.
    InputClosed,
}

/// A tool's return for the Environment: Results go into the store, Errors into the
/// tool's error list that its next call sees. Returns the frontend payload, if any.
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "()")]
pub struct ApplyReturn {
    pub tool: String,
    pub ret: Return,
}

/// The Environment's state for `environment.json` and the run's transcript.
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "EnvironmentSnapshot")]
pub struct Snapshot;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvironmentSnapshot {
    pub transcript: Vec<Arc<Memory>>,
    pub json: serde_json::Value,
    /// Embedding calls the simulation made (one per recorded message).
    pub embeddings: u64,
}

/// Agent → Environment: values an `extract` step read, stored for `template`s.
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "()")]
pub struct SetShared {
    pub values: Vec<(String, String)>,
}

/// Agent → Environment: the knowledge-base text for the latest message.
#[derive(Debug, Clone, Serialize, Deserialize, Message)]
#[rtype(result = "Result<String, SimError>")]
pub struct Consult {
    pub lookup: crate::scenario::KnowledgeLookup,
}
