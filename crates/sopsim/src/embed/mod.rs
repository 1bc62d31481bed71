//! Embeddings: the `Embedder` trait, the feature-hashing embedder, and the service that
//! keeps embedding work off the actors' threads and batches it.

mod first_use;
mod hash;
#[cfg(feature = "local")]
mod minilm;
#[cfg(feature = "openai")]
mod openai;
mod service;
#[cfg(feature = "local")]
mod tokenizer_file;

pub use first_use::OnFirstUse;
pub use hash::HashEmbedder;
#[cfg(feature = "local")]
pub use minilm::{tokenizer_from_json, MiniLm};
#[cfg(feature = "openai")]
pub use openai::OpenAiEmbedder;
pub use service::EmbedService;

/// The name the MiniLM embedder goes by (`summary.json`'s `embedder`).
pub const MINILM_NAME: &str = "minilm";

/// The embedder of a scenario that never reads an embedding (`top_k` 0 and no
/// knowledge lookups): nothing is loaded and nothing is embedded.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEmbedder;

impl Embedder for NoEmbedder {
    fn name(&self) -> &str {
        "none (retrieval off)"
    }
    fn dim(&self) -> usize {
        0
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(vec![Vec::new(); texts.len()])
    }
    fn is_cheap(&self) -> bool {
        true
    }
}

use std::sync::Arc;

use thiserror::Error;

/// Why texts could not be embedded. Cloned to every request of a failed batch, so the
/// cause is shared. The message quotes the cause and its causes, which are also the
/// source, so that code showing only the message shows why.
#[derive(Debug, Clone, Error)]
pub enum EmbedError {
    /// The named embedder failed, or could not be set up.
    #[error("embedder {embedder}: {}", sopsim_core::error_chain::chain(&**.source))]
    Failed {
        /// Name of the embedder that failed.
        embedder: String,
        /// What made it fail.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// The embedding service stopped before answering.
    #[error("the embedding service has shut down")]
    Closed,
}

impl EmbedError {
    /// `embedder` failed because of `source`.
    pub fn failed(
        embedder: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        EmbedError::Failed {
            embedder: embedder.into(),
            source: Arc::new(source),
        }
    }
}

/// Turns texts into vectors of one fixed dimension. Implementations are CPU-bound and
/// synchronous; [`EmbedService`] decides where they run.
pub trait Embedder: Send + Sync {
    /// Name as given to `--embedder`.
    fn name(&self) -> &str;
    /// Length of the vectors this embedder produces.
    fn dim(&self) -> usize;
    /// One vector per text, in the order of `texts`.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Cheaper than handing the work to another thread (microseconds per text).
    fn is_cheap(&self) -> bool {
        false
    }
}
