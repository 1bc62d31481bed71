//! Errors of a running simulation.

use thiserror::Error;

use crate::embed::EmbedError;
use crate::llm::LlmError;

#[derive(Debug, Error)]
pub enum SimError {
    /// The run's settings do not fit the scenario (exit code 2 at the CLI).
    #[error("{0}")]
    BadInput(String),
    #[error("model call failed at turn {turn}: {source}")]
    Llm { turn: u64, source: LlmError },
    #[error("embedding failed: {0}")]
    Embed(#[from] EmbedError),
    #[error("an actor stopped unexpectedly: {0}")]
    Mailbox(#[from] actix::MailboxError),
    #[error("writing {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}
