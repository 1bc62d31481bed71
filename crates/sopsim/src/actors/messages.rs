//! The typed messages actors exchange. All are serde-serializable, so a run's traffic
//! can be logged or sent across a process boundary.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::SimError;
pub(crate) use crate::tools::CallOutcome;
use crate::tools::{Tool, ToolFailure};
pub(crate) use sopsim_core::environment::{
    DraftMessage, DraftTurn, EnvironmentSnapshot, HeldEvent, ToolReturn, ToolSummary, ToolView,
};
use sopsim_core::memory::{Message, Observation};
use sopsim_core::tool_results::{ResultObject, Return};

/// Director → Environment: a new visit of `state` begins.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EnterVisit {
    pub state: String,
    pub visit: u32,
}

/// Agent or Director → Environment: what may be seen now, by the agent named (a
/// population member may see less than everyone) or by the Director (`None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Observe(pub Option<String>);

/// Director → Environment: turns of `agents` begin (a sequential turn is a round of
/// one). Until they are committed, what each of these agents' tools return (and what
/// their `extract` steps read) is kept to that agent's own turn when there are several:
/// the others decide on the store as it stood when the round began.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BeginRound {
    pub agents: Vec<String>,
}

/// Director → Environment: commit a round's turns, in the order of the state's roles:
/// first each turn's tool returns and extracted values, in that order (so the store's
/// `_REF_ID`s do not depend on which reply came first), then every message, with
/// consecutive `seq` numbers: embed them, append them, summarise if due.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Commit(pub Vec<DraftTurn>);

/// One turn as committed: its tool events (with the `_REF_ID`s the store gave at the
/// commit), then its messages as kept in memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CommittedTurn {
    pub name: String,
    pub events: Vec<Return>,
    pub messages: Vec<Arc<Message>>,
    /// Each message's embedding (empty where none was made).
    pub vectors: Vec<Vec<f32>>,
}

/// Director → Agent: speak now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TakeTurn {
    pub state: String,
    pub visit: u32,
    pub role: String,
    /// The run's turn number, from 1.
    pub turn: u64,
    /// The visit's opening line, said verbatim.
    pub opening: Option<String>,
    /// Shown as it happens (a sequential turn: its reply streamed, its tool events at
    /// once); otherwise shown when its round is committed, and a person types unseen.
    pub live: bool,
    /// The world as the turn sees it, in a scenario with one (or strategy players).
    #[serde(skip)]
    pub world: Option<std::sync::Arc<sopsim_core::world::WorldView>>,
}

/// Agent → Director: the turn's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum TurnDone {
    /// The turn, for the Director to commit with the rest of its round.
    Drafted(DraftTurn),
    /// A human agent's input ended; the run ends cleanly.
    InputClosed,
}

/// Agent → Environment: a tool's return in the agent's turn; the stored objects'
/// `_REF_ID`s as that turn sees them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ApplyReturn(pub ToolReturn);

/// Agent → Environment: what a decision prompt shows of the Environment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ViewTools {
    pub agent: String,
    /// Token budget of the rendered store.
    pub budget: usize,
}

/// Agent → Environment: run a tool that reads the Environment (`store_query`,
/// `knowledge`) for `agent`.
pub(crate) struct RunInEnvironment {
    pub tool: Arc<Tool>,
    pub agent: String,
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// The Environment's state for `environment.json` and the run's transcript.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Snapshot;

/// Agent → Environment: values an `extract` step read, stored for `template`s.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SetShared {
    pub agent: String,
    pub values: Vec<(String, String)>,
}

/// Agent → Environment: the knowledge-base text for the latest message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Consult {
    pub lookup: crate::scenario::KnowledgeLookup,
}

/// Director → Environment: the world after a round, for the prompts it builds
/// (observations, summaries).
#[derive(Debug, Clone)]
pub(crate) struct SetWorld(pub std::sync::Arc<sopsim_core::world::WorldView>);

answered_with! {
    EnterVisit => ();
    Observe => Observation;
    BeginRound => ();
    Commit => Result<Vec<CommittedTurn>, SimError>;
    TakeTurn => Result<TurnDone, SimError>;
    ApplyReturn => Vec<String>;
    ViewTools => ToolView;
    RunInEnvironment => Result<ResultObject, ToolFailure>;
    Snapshot => EnvironmentSnapshot;
    SetShared => ();
    Consult => Result<String, SimError>;
    SetWorld => ();
}
