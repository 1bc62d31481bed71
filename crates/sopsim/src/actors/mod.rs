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
pub(crate) mod messages;
mod model_turn;
mod participants;
mod prober;
mod routing;
mod seating;
mod steps;
#[cfg(test)]
mod tests;
mod tool_rules;
mod tool_turn;
mod turns;
mod world_keeper;

pub(crate) use agent::AgentActor;
pub(crate) use agent::AgentShared;
pub(crate) use cast::{Cast, Finish, Limits};
pub(crate) use director::Director;
pub(crate) use environment::{EnvironmentActor, QualityEmbeddings};
pub(crate) use prober::ProbeFailure;
pub(crate) use prober::Prober;
pub(crate) use sopsim_core::run_state::ParseFailures;
