//! The typed messages actors exchange. All are serde-serializable, so a run's traffic
//! can be logged or sent across a process boundary.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use indexmap::IndexMap;

use crate::elysia::{ResultObject, Return};
use crate::error::SimError;
use crate::memory::{Decision, Message, MessageKind, Observation};
pub use crate::tools::CallOutcome;
use crate::tools::{Failure, Tool};

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

/// Agent → Environment: commit one turn's messages (its tool calls and results, then
/// its reply), in order, with consecutive `seq` numbers: embed them, append them,
/// summarise if due.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Result<Vec<Arc<Message>>, SimError>")]
pub struct Record(pub Vec<Turn>);

/// Director → Environment: a simultaneous round begins. Until it is committed, what
/// each of these agents' tools return (and what their `extract` steps read) is kept to
/// that agent's own turn: the others of the round decide on the store as it stood when
/// the round began.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "()")]
pub struct BeginRound {
    pub agents: Vec<String>,
}

/// Director → Environment: commit a round's turns, in the order of the state's roles:
/// first each turn's tool returns and extracted values, in that order (so the store's
/// `_REF_ID`s do not depend on which reply came first), then every message as
/// [`Record`] does, with consecutive `seq` numbers.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Result<Vec<CommittedTurn>, SimError>")]
pub struct CommitRound(pub Vec<Drafted>);

/// One turn of a round as committed: its tool events (with the `_REF_ID`s the store
/// gave at the commit), then its messages.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommittedTurn {
    pub name: String,
    pub events: Vec<Return>,
    pub messages: Vec<Arc<Message>>,
}

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
    /// The turn's messages as recorded: its tool calls and results, then the reply.
    Spoke(Vec<Arc<Message>>),
    /// A turn of a simultaneous round, not yet in memory.
    Drafted(Drafted),
    /// A human agent's input ended; the run ends cleanly.
    InputClosed,
}

/// A turn of a simultaneous round as its agent handed it back: nothing of it is in
/// memory or the store yet, and nothing of it has been shown.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Drafted {
    pub name: String,
    /// Its tool calls and results, then its reply.
    pub turns: Vec<Turn>,
    /// Its tool events, held back until the round is committed.
    pub events: Vec<HeldEvent>,
}

/// A tool event of a round's turn, shown when the round is committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldEvent {
    pub ret: Return,
    /// The turn's tool return (0-based) whose stored objects this result shows: they
    /// get the `_REF_ID`s the store gives them at the commit.
    pub stored: Option<usize>,
}

/// A tool's return for the Environment: Results go into the store (with the agent,
/// state and visit that made them in the entry's metadata), Errors into the agent's
/// error list for that tool, which a later success of the same tool clears. Returns
/// the stored objects' `_REF_ID`s.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Vec<String>")]
pub struct ApplyReturn {
    pub tool: String,
    pub agent: String,
    pub turn: u64,
    pub ret: Return,
    pub outcome: CallOutcome,
    /// An earlier call this turn failed.
    pub retry: bool,
    /// Keep a result in the store (not for `store_query`, whose objects are already
    /// there).
    pub store: bool,
}

/// Agent → Environment: what a decision prompt shows of the Environment.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "ToolView")]
pub struct ViewTools {
    pub agent: String,
    /// Token budget of the rendered store.
    pub budget: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolView {
    /// This agent's standing errors, by tool.
    pub errors: IndexMap<String, Vec<String>>,
    /// The entries this agent may see, rendered within the budget.
    pub environment: String,
    /// Tools that have returned a result in this run.
    pub ran: Vec<String>,
    /// Tool names the store holds results under.
    pub stored: Vec<String>,
}

/// Agent → Environment: run a tool that reads the Environment (`store_query`,
/// `knowledge`) for `agent`.
#[derive(actix::Message)]
#[rtype(result = "Result<ResultObject, Failure>")]
pub struct RunInEnvironment {
    pub tool: Arc<Tool>,
    pub agent: String,
    pub arguments: serde_json::Map<String, serde_json::Value>,
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
    pub tools: ToolSummary,
}

/// Tool use over a run, for `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// Tool → outcome (`ok`, `failed`, `invalid_arguments`, `unknown_tool`) → calls.
    pub calls: IndexMap<String, IndexMap<String, u64>>,
    /// Calls that did not succeed.
    pub errors: u64,
    /// Calls made after an earlier call of the same turn failed.
    pub retries: u64,
}

/// Agent → Environment: values an `extract` step read, stored for `template`s.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "()")]
pub struct SetShared {
    pub agent: String,
    pub values: Vec<(String, String)>,
}

/// Agent → Environment: the knowledge-base text for the latest message.
#[derive(Debug, Clone, Serialize, Deserialize, actix::Message)]
#[rtype(result = "Result<String, SimError>")]
pub struct Consult {
    pub lookup: crate::scenario::KnowledgeLookup,
}
