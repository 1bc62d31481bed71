//! Message: messages, the relevant-history index and the shared memory of a simulation.

mod index;
mod message;
mod shared;

pub use index::{EmbeddingIndex, Hit};
pub use message::{Decision, Message, MessageKind};
pub use shared::{Observation, SharedMemory, Summary, SummaryRequest};
