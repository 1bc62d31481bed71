//! The actors of one simulation: a Director, one Agent per agent, and the Environment.
//! They are thin: each owns its state and message handling and calls into the pure
//! modules (`sop`, `environment`, `prompt`, `memory`) for every decision.

mod agent;
mod director;
mod environment;
pub mod messages;
mod model_turn;
mod participants;
mod tool_turn;

pub use agent::AgentActor;
pub use director::{Cast, Director, EndReason, Finish, Limits, ParseFailures};
pub use environment::EnvironmentActor;
