//! One attempt at a completion ([`Transport::attempt`]): sending the request within
//! the read timeout, and what an answer other than HTTP 200 means (a retry, a refusal
//! the request's shape remembers, or a fatal error). A 200's body is read by
//! `reply.rs` or `stream.rs`.

use std::time::Duration;

use super::choice::Asking;
use super::redact::{server_message, shown, transport_failure};
use super::request::RequestShape;
use super::retry::{retry_after, retryable_status, AttemptError};
use super::{reply, stream};
use crate::{Completion, LlmRequest, TokenSink};

/// The HTTP client of one server and the URL completions are posted to (parsed once:
/// a URL would be parsed per request otherwise).
pub(super) struct Transport {
    client: reqwest::Client,
    url: reqwest::Url,
}

impl Transport {
    pub(super) fn new(client: reqwest::Client, url: reqwest::Url) -> Self {
        Self { client, url }
    }

    /// One try at `req`, shaped by `shape`: sent, its status checked, its reply read
    /// whole or streamed.
    pub(super) async fn attempt(
        &self,
        shape: &RequestShape,
        req: &LlmRequest,
        stream: Option<&TokenSink>,
        asking: Asking,
    ) -> Result<Completion, AttemptError> {
        let extras = shape.sends_extras(req);
        let response = self.send(shape, req, asking).await?;
        if response.status().as_u16() != 200 {
            return Err(self.rejected(shape, req, asking, extras, response).await);
        }
        // A server that answers a streamed request in one JSON body (some ignore
        // `stream`) is read as it answered.
        let whole = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().starts_with("application/json"));
        if shape.streams(req) && !whole {
            stream::read_stream(shape, req, response, stream).await
        } else {
            reply::read_whole(shape, req, response, stream, asking).await
        }
    }

    /// Posts the request, with the key as a bearer token; no response within the read
    /// timeout, or a failed connection, is worth another attempt.
    async fn send(
        &self,
        shape: &RequestShape,
        req: &LlmRequest,
        asking: Asking,
    ) -> Result<reqwest::Response, AttemptError> {
        let options = shape.options();
        let mut call = self
            .client
            .post(self.url.clone())
            .json(&shape.body(req, asking));
        if let Some(key) = &options.api_key {
            call = call.bearer_auth(key.expose());
        }
        let sent = tokio::time::timeout(options.read_timeout, call.send()).await;
        match sent {
            Err(_) => Err(AttemptError::Retry {
                cause: format!("no response within {:?}", options.read_timeout).into(),
                after: None,
            }),
            Ok(Err(e)) => Err(transport_failure("connection failed", e)),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// What a response other than 200 means, named with its status, the URL and the
    /// server's words: a refusal of something the request may go without, worth
    /// another attempt at once; a key or a model to check; a status worth retrying
    /// after the server's `Retry-After`, if it sent one; or else a fatal error.
    /// `extras_sent`: the request carried the extra sampling fields.
    async fn rejected(
        &self,
        shape: &RequestShape,
        req: &LlmRequest,
        asking: Asking,
        extras_sent: bool,
        response: reqwest::Response,
    ) -> AttemptError {
        let status = response.status().as_u16();
        let after = retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        let said = server_message(&text, shape.options().api_key.as_ref());
        let url = shown(self.url.as_str());
        // A refusal of what the request may go without: asked again at once, without it
        // (the completion says so, and the run warns once).
        if let Some(refused) = (status == 400)
            .then(|| shape.refused(req, asking, extras_sent))
            .flatten()
        {
            return AttemptError::Retry {
                cause: format!("HTTP 400 from {url} to {refused}: {said}").into(),
                after: Some(Duration::ZERO),
            };
        }
        match status {
            401 | 403 => AttemptError::Fatal(format!("HTTP {status} from {url}: check the API key (OPENAI_API_KEY); the server said: {said}").into()),
            404 => AttemptError::Fatal(format!("HTTP 404 from {url}: no model {:?} there, or the base URL is wrong; the server said: {said}", shape.model(req)).into()),
            s if retryable_status(s) => AttemptError::Retry { cause: format!("HTTP {s} from {url}: {said}").into(), after },
            s => AttemptError::Fatal(format!("HTTP {s} from {url}: {said}").into()),
        }
    }
}
