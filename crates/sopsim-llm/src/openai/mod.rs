//! The OpenAI-compatible backend (`--llm openai`): `POST {base}/chat/completions`, streamed
//! (SSE) or not, against OpenAI itself or vLLM, llama.cpp's server, Ollama, SGLang, TGI.
//!
//! Failures are bounded and explained: connect and read timeouts; retries with
//! exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and cut-off
//! streams, honouring `Retry-After`; then an error naming the status and the server's
//! message. A 401 says to check the API key; a 404 names the model and the URL. The key
//! is only ever sent in the `Authorization` header: never printed, logged or recorded.
//!
//! What the backend learns of its server is its own, shared by every run that shares
//! it: the slots for requests in flight, and whether the server refused structured
//! output or the extra sampling fields.
//!
//! This file holds [`OpenAiBackend`] and its call with retries; the rest, by job, each
//! with types and functions of its own:
//! - `config.rs`: where the server is ([`OpenAiOptions`]) and what its URL says;
//! - `discover.rs`: asking the server which model it serves, when none is named;
//! - `request.rs`: how a request is shaped (`RequestShape`: the body, and what the
//!   server has refused);
//! - `send.rs`: one attempt (`Transport`), and what a status other than 200 means;
//! - `reply.rs`: reading a whole reply, and the completion either kind of reply ends in;
//! - `stream.rs`: reading a streamed reply;
//! - `choice.rs`: closed choices, asked as structured output and read with their
//!   probabilities;
//! - `replicas.rs`: several servers of one model as one backend ([`Replicas`]);
//! - `redact.rs`: URLs and servers' messages without credentials or keys;
//! - `retry.rs`: backoff and `Retry-After`; `sse.rs`: server-sent events;
//!   `sampling_fields.rs`: sampling settings under the servers' names; `tools.rs`: native
//!   tool calling; `token_count.rs`: counting tokens for a server's models.

mod blocking;
mod choice;
mod config;
mod discover;
mod redact;
mod replicas;
mod reply;
mod request;
mod retry;
mod sampling_fields;
mod send;
mod sse;
mod stream;
mod token_count;
mod tools;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Semaphore;

pub use blocking::wait_for;
pub use config::{normalize_base, route, without_credentials, OpenAiOptions};
pub use redact::{server_message, shown};
pub use replicas::Replicas;
pub use retry::{
    parse_retry_after, retryable_status, with_retries, AttemptError, Cause, GaveUp, RetryPolicy,
};
pub use sse::{Event, SseParser};
pub use token_count::counter_for;

use super::{ChoiceMethod, Completion, LlmBackend, LlmError, LlmRequest, TokenSink};
pub use crate::ApiKey;
use choice::Asking;
use request::RequestShape;
use send::Transport;

/// One OpenAI-compatible server as a model backend. A run or a benchmark builds one
/// and shares it, so that its runs share its request slots and what it learned of
/// the server.
pub struct OpenAiBackend {
    transport: Transport,
    /// The options, and what the server has refused.
    shape: RequestShape,
    /// The server's base URL, ending in `/v1`.
    endpoint: String,
    /// Requests in flight at once: `options.concurrency`, at least one.
    permits: Semaphore,
    /// What discovering the model found worth saying.
    notes: Vec<String>,
}

impl OpenAiBackend {
    /// The backend for the server `options` name. A user name and password in its URL
    /// are removed (a note says so); only http and https servers are accepted.
    pub fn new(mut options: OpenAiOptions) -> Result<Self, LlmError> {
        let mut notes = Vec::new();
        let (base_url, had_credentials) = without_credentials(&options.base_url);
        if had_credentials {
            notes.push(
                "the server's URL carried a user name or password: sopsim removed them and \
                 authenticates with OPENAI_API_KEY as a bearer token"
                    .to_string(),
            );
        }
        options.base_url = base_url;
        let base = normalize_base(&options.base_url);
        let url = reqwest::Url::parse(&config::route(&base, "chat/completions")).map_err(|e| {
            LlmError::Config {
                backend: "openai".into(),
                message: format!("base URL {}", shown(&base)),
                source: Some(e.into()),
            }
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LlmError::config(
                "openai",
                format!(
                    "base URL {}: only http and https servers are supported",
                    shown(&base)
                ),
            ));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| LlmError::caused_by("openai", "building the HTTP client", e))?;
        let openai = config::is_openai(&base);
        let permits = Semaphore::new(options.concurrency.max(1));
        Ok(Self {
            transport: Transport::new(client, url),
            shape: RequestShape::new(options, openai),
            endpoint: base,
            permits,
            notes,
        })
    }

    /// Asks the server which model it serves (`GET {base}/models`) and uses the first
    /// (on OpenAI's API the first chat model); a note says so when it serves several.
    /// For when no model is named anywhere (a flag, the environment, the scenario).
    /// Blocking: call it before a run starts.
    pub fn discover_model(&mut self) -> Result<(), LlmError> {
        let found = discover::discover(&self.endpoint, self.options(), self.shape.is_openai())?;
        self.notes.extend(found.note);
        self.shape.serve(found.model);
        Ok(())
    }

    fn options(&self) -> &OpenAiOptions {
        self.shape.options()
    }

    /// Counts tokens as the models do where sopsim knows their tokenizers: this
    /// backend's own model and `named`, the models a scenario's agents, roles and
    /// states ask for (a prompt costs the most any of them counts).
    pub fn counter(&self, named: &[&str]) -> std::sync::Arc<dyn sopsim_core::tokens::TokenCounter> {
        let mut models = named.to_vec();
        models.extend(self.options().model.as_deref());
        counter_for(&models)
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The model asked for when a request names none (found by discovery, when no
    /// model was named).
    pub fn served_model(&self) -> Option<&str> {
        self.options().model.as_deref()
    }
}

impl LlmBackend for OpenAiBackend {
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn native_tools(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        format!(
            "openai:{}@{}",
            self.options().model.as_deref().unwrap_or("default"),
            shown(self.endpoint())
        )
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            self.call(&request, stream, &|| false)
                .await
                .map_err(CallFailed::into_error)
        })
    }
}

/// Why a call failed: the server kept failing through every attempt, asked for a
/// longer wait than a call makes, or took longer than the call's deadline (it may be
/// down); it was handed to another server rather than waited for; or the request
/// itself was refused.
#[derive(Debug)]
pub(crate) enum CallFailed {
    ServerGaveUp(LlmError),
    HandedOff { rest: Duration, error: LlmError },
    Refused(LlmError),
}

impl CallFailed {
    pub(crate) fn into_error(self) -> LlmError {
        match self {
            CallFailed::ServerGaveUp(e)
            | CallFailed::Refused(e)
            | CallFailed::HandedOff { error: e, .. } => e,
        }
    }
}

impl OpenAiBackend {
    /// One model call with its retries, within the call's deadline. `hand_off()` says
    /// whether another server could take the call at once, rather than this one wait
    /// before its next attempt.
    pub(crate) async fn call(
        &self,
        request: &LlmRequest,
        stream: Option<TokenSink>,
        hand_off: &(dyn Fn() -> bool + Sync),
    ) -> Result<Completion, CallFailed> {
        let deadline = self.options().deadline;
        match tokio::time::timeout(deadline, self.call_with_retries(request, stream, hand_off))
            .await
        {
            Ok(done) => done,
            Err(_) => Err(CallFailed::ServerGaveUp(LlmError::failed(
                "openai",
                format!(
                    "{} gave no complete answer within the call's deadline of {} s",
                    shown(self.endpoint()),
                    deadline.as_secs_f64()
                ),
            ))),
        }
    }

    async fn call_with_retries(
        &self,
        request: &LlmRequest,
        stream: Option<TokenSink>,
        hand_off: &(dyn Fn() -> bool + Sync),
    ) -> Result<Completion, CallFailed> {
        let _permit = self.permits.acquire().await.map_err(|e| {
            CallFailed::Refused(LlmError::caused_by(
                "openai",
                "waiting for a connection slot",
                e,
            ))
        })?;
        let policy = self.options().retry;
        // Asked again each attempt: a server that refused structured output on
        // the last one is asked in plain text from then on.
        let asking = || {
            if request.options.is_some() && self.shape.asks_structured() {
                Asking::Structured
            } else {
                Asking::Text
            }
        };
        let last_was_bad_answer = AtomicBool::new(false);
        let result = with_retries(
            &policy,
            "model call",
            |_| {
                let last = &last_was_bad_answer;
                let stream = stream.as_ref();
                let asking = asking();
                async move {
                    let r = self
                        .transport
                        .attempt(&self.shape, request, stream, asking)
                        .await;
                    last.store(matches!(r, Err(AttemptError::Again(_))), Ordering::Relaxed);
                    r
                }
            },
            tokio::time::sleep,
            hand_off,
        )
        .await;
        let mut c = match result {
            Ok(mut c) => {
                c.settings_unsent = self.shape.extras_unsent(request);
                c
            }
            // A server whose structured answers keep failing is asked in plain
            // text, and its answer read as one of the options.
            Err(GaveUp::Exhausted { .. }) if last_was_bad_answer.load(Ordering::Relaxed) => {
                self.shape.structured_proved_unusable();
                self.transport
                    .attempt(&self.shape, request, None, Asking::Text)
                    .await
                    .map_err(|e| {
                        let cause = e.into_cause();
                        CallFailed::Refused(LlmError::caused_by("openai", cause.to_string(), cause))
                    })?
            }
            Err(e) => {
                let (refused, rest) = match &e {
                    GaveUp::Fatal(_) => (true, None),
                    GaveUp::HandedOff { rest, .. } => (false, Some(*rest)),
                    GaveUp::Exhausted { .. } | GaveUp::WaitTooLong { .. } => (false, None),
                };
                let error = LlmError::caused_by("openai", e.to_string(), e);
                return Err(match (refused, rest) {
                    (true, _) => CallFailed::Refused(error),
                    (false, Some(rest)) => CallFailed::HandedOff { rest, error },
                    (false, None) => CallFailed::ServerGaveUp(error),
                });
            }
        };
        // Told apart from a refusal: the run's warning says which it was.
        if let Some(chosen) = &mut c.chosen {
            if chosen.method == ChoiceMethod::Text && self.shape.text_after_unusable() {
                chosen.method = ChoiceMethod::TextAfterUnusable;
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_the_base_url_are_removed_and_other_schemes_refused() {
        let mut o = OpenAiOptions {
            base_url: "http://user:secret@127.0.0.1:9/v1".into(),
            ..OpenAiOptions::default()
        };
        let b = OpenAiBackend::new(o.clone()).unwrap();
        assert!(!b.describe().contains("secret") && !b.endpoint().contains("secret"));
        assert_eq!(b.notes().len(), 1);
        o.base_url = "file:///etc/passwd".into();
        assert!(matches!(
            OpenAiBackend::new(o),
            Err(LlmError::Config { .. })
        ));
    }
}
