//! sopsim's language models, usable without the simulator: the backend trait
//! ([`LlmBackend`]), an OpenAI-compatible client ([`openai`]: replicas, retries,
//! streaming, cost), the local engine's serving side ([`local`]: continuous batching,
//! the prefix tree, choices scored from logits), recording and replay ([`record`]), the
//! scripted backend ([`scripted`]), and the per-simulation client that counts every
//! call ([`LlmClient`]). A call is stopped through a [`CancelToken`].
//!
//! # Layout
//!
//! - `types`: requests ([`LlmRequest`]), completions ([`Completion`]), usage;
//! - `client`: [`LlmClient`], the ledger of what a run spent;
//! - `routed`: one backend per agent, role or state ([`Routed`]);
//! - [`openai`], [`local`], [`record`], [`scripted`], [`cost`]: the backends and prices;
//! - `cancel`: [`CancelToken`].

pub use sopsim_core::sentence::{ends_sentence, ReplyBudget};
pub use sopsim_core::tokens::{Estimator, TokenCounter, MESSAGE_OVERHEAD};

mod api_key;
mod cancel;
mod client;
pub mod cost;
#[cfg(feature = "local")]
pub mod local;
#[cfg(feature = "openai")]
pub mod openai;
pub mod record;
mod routed;
pub mod scripted;
mod types;

pub use api_key::ApiKey;
pub use cancel::CancelToken;
#[doc(hidden)]
pub use client::cache_share;
pub use client::{CallError, KindUsage, Ledger, LlmClient, Redrawn, ReplyTokens};
pub use routed::{BackendKey, Routed};
pub use scripted::ScriptedBackend;
pub use types::{
    CallContext, CallKind, ChatMessage, ChatRole, ChoiceMethod, Chosen, Completion, DecisionFormat,
    LlmRequest, Redraw, Screen, Screening, TokenSink, ToolCall, ToolDef, ToolExchange, ToolRequest,
    Usage,
};

use futures::future::BoxFuture;
use thiserror::Error;

/// Any error, kept as the cause of an [`LlmError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a call to a language model backend failed.
#[derive(Debug, Error)]
pub enum LlmError {
    /// The scripted backend's script lacks something a call needs.
    #[error("the scripted backend needs {what}")]
    Script {
        /// What the script lacks, e.g. a route answer.
        what: String,
    },
    /// A line of the script is not a template the backend can fill.
    #[error("the scripted backend needs a valid line")]
    ScriptLine(#[source] sopsim_core::template::TemplateError),
    /// A call failed (the server, the model thread, a recording), with the error that
    /// made it fail when there is one.
    #[error("{backend}: {message}")]
    Backend {
        /// The backend that failed, as it describes itself.
        backend: String,
        /// What was being done, or what went wrong.
        message: String,
        /// The error that made the call fail, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The backend's settings cannot work (a malformed server URL…).
    #[error("{backend}: {message}")]
    Config {
        /// The backend whose settings are wrong.
        backend: String,
        /// What is wrong with the settings.
        message: String,
        /// The error behind the problem, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The run was stopped while the call was in progress: it was abandoned, not
    /// awaited.
    #[error("abandoned: the run was stopped")]
    Cancelled,
}

impl LlmError {
    /// A failed call, explained by `message` alone.
    pub fn failed(backend: impl Into<String>, message: impl Into<String>) -> Self {
        LlmError::Backend {
            backend: backend.into(),
            message: message.into(),
            source: None,
        }
    }

    /// A failed call: `message` says what was being done, `source` why it failed.
    pub fn caused_by(
        backend: impl Into<String>,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        LlmError::Backend {
            backend: backend.into(),
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// Settings that cannot work.
    pub fn config(backend: impl Into<String>, message: impl Into<String>) -> Self {
        LlmError::Config {
            backend: backend.into(),
            message: message.into(),
            source: None,
        }
    }
}

/// A chat-completion backend, shared by every simulation in the process.
pub trait LlmBackend: Send + Sync {
    /// A short description for summaries and logs (never contains secrets).
    fn describe(&self) -> String;

    /// What the backend found worth telling the user: at set-up (reported as warnings
    /// when a run starts) and since (with the run's summary).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether decisions can use the API's native tool calling; the others answer a
    /// decision with a JSON object in the text.
    fn native_tools(&self) -> bool {
        false
    }

    /// Whether a reply asked again may come out differently (a model draws; a script
    /// does not), so that a flawed reply is worth drawing again.
    fn draws(&self) -> bool {
        true
    }

    /// How many candidates of a reply to draw at once when the scenario does not say
    /// (`candidates`): several where they cost little more than one (a local model
    /// decodes them in one batch), one where each is a call of its own (a server).
    fn candidates(&self) -> u32 {
        1
    }

    /// Whether replies are drawn without the tokens that hold a `forbid` string (a
    /// local model masks them; a server is not told).
    fn forbids(&self) -> bool {
        false
    }

    /// Where tools with side effects keep or find their results (recording, replay).
    fn tool_tape(&self) -> Option<record::ToolTape> {
        None
    }

    /// The backend that answers requests with `settings`, when it is another one (a
    /// router's named model): what it draws and how many candidates it takes are its
    /// own.
    fn routed(&self, _settings: &sopsim_core::scenario::LlmSettings) -> Option<&dyn LlmBackend> {
        None
    }

    /// Completes `request`, passing text pieces to `stream` as they arrive.
    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>>;
}
