//! Message: messages, the relevant-history index and the shared memory of a simulation.

mod audience;
mod index;
mod message;
mod shared;

pub use audience::Audience;
pub use index::EmbeddingIndex;
pub use message::{Decision, Message, MessageKind};
pub use shared::{Observation, SharedMemory, Summary, SummaryRequest};
