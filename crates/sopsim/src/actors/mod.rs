//! The actors of one simulation: a Director, one Agent per agent, and the Environment.
//! They are thin: each owns its state and message handling and calls into the pure
//! modules (`sop`, `run_state`, `environment`, `prompt`, `memory`) for every decision.

/// What each message is answered with: actix's `Message` without its derive macros,
/// which would add two proc-macro crates to every build.
macro_rules! answered_with {
    ($($message:ty => $reply:ty;)*) => {
        $(impl actix::Message for $message {
            type Result = $reply;
        })*
    };
}

mod agent;
mod cast;
mod director;
mod director_rules;
mod environment;
pub mod messages;
mod model_turn;
mod participants;
mod prober;
mod routing;
mod seating;
mod steps;
mod tool_rules;
mod tool_turn;
mod turns;
mod world_keeper;

pub use crate::run_state::{EndReason, ParseFailures};
pub use agent::AgentActor;
pub(crate) use agent::AgentShared;
pub use cast::{Cast, Finish, Limits};
pub use director::Director;
pub use environment::{EnvironmentActor, QualityEmbeddings};
pub use prober::ProbeFailure;
pub(crate) use prober::Prober;
