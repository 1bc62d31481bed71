//! Embeddings from an OpenAI-compatible server (`--embedder openai`): `POST
//! {base}/embeddings` with every queued text of a batch in one request, for users whose
//! embedding model lives on a server. Runs on the embedding service's worker thread,
//! which waits for the call on the HTTP runtime of blocking callers
//! (`llm::openai::wait_for`); retries as the chat backend does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::{EmbedError, Embedder};
use crate::llm::openai::{
    normalize_base, parse_retry_after, retryable_status, route, server_message, wait_for,
    with_retries, without_credentials, ApiKey, AttemptError, Cause, RetryPolicy,
};

/// An embedder that asks an OpenAI-compatible server's `embeddings` endpoint.
pub struct OpenAiEmbedder {
    /// What each call needs, shared with the calls in flight on the HTTP runtime.
    endpoint: Arc<Endpoint>,
    retry: RetryPolicy,
    dim: AtomicUsize,
}

struct Endpoint {
    client: reqwest::Client,
    url: String,
    key: Option<ApiKey>,
    model: String,
}

fn failed(e: impl std::error::Error + Send + Sync + 'static) -> EmbedError {
    EmbedError::failed("openai", e)
}

impl OpenAiEmbedder {
    /// An embedder for `model` on the server at `base_url`, with a per-request `timeout`
    /// and `retry`.
    pub fn new(
        base_url: &str,
        key: Option<ApiKey>,
        model: String,
        timeout: Duration,
        retry: RetryPolicy,
    ) -> Result<Self, EmbedError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(failed)?;
        let endpoint = Endpoint {
            client,
            url: route(
                &normalize_base(&without_credentials(base_url).0),
                "embeddings",
            ),
            key,
            model,
        };
        Ok(Self {
            endpoint: Arc::new(endpoint),
            retry,
            dim: AtomicUsize::new(0),
        })
    }
}

impl Endpoint {
    async fn attempt(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, AttemptError> {
        let mut call = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        if let Some(key) = &self.key {
            call = call.bearer_auth(key.expose());
        }
        let retry = |text: String, e| AttemptError::retry(Cause::caused_by(text, e));
        let response = call.send().await.map_err(|e| {
            let e = e.without_url();
            retry(format!("connection failed: {e}"), e)
        })?;
        let status = response.status().as_u16();
        let after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let text = response.text().await.map_err(|e| {
            let e = e.without_url();
            retry(format!("reading the response: {e}"), e)
        })?;
        if status != 200 {
            let hint = match status {
                401 | 403 => "; check the API key (OPENAI_API_KEY)".to_string(),
                404 => format!(
                    "; no embedding model {:?} there, or the base URL is wrong",
                    self.model
                ),
                _ => String::new(),
            };
            let cause = format!(
                "HTTP {status} from {}{hint}: {}",
                crate::llm::openai::shown(&self.url),
                server_message(&text, self.key.as_ref())
            );
            return Err(if retryable_status(status) {
                AttemptError::Retry {
                    cause: cause.into(),
                    after,
                }
            } else {
                AttemptError::Fatal(cause.into())
            });
        }
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            AttemptError::retry(Cause::caused_by(format!("malformed JSON: {e}"), e))
        })?;
        let mut rows: Vec<(u64, Vec<f32>)> = v["data"]
            .as_array()
            .ok_or_else(|| AttemptError::Fatal("the response has no data array".into()))?
            .iter()
            .map(|d| {
                let emb = d["embedding"]
                    .as_array()
                    .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(0.0) as f32).collect());
                (d["index"].as_u64().unwrap_or(0), emb.unwrap_or_default())
            })
            .collect();
        if rows.len() != texts.len() {
            return Err(AttemptError::Fatal(
                format!("asked for {} embeddings, got {}", texts.len(), rows.len()).into(),
            ));
        }
        rows.sort_by_key(|(i, _)| *i);
        Ok(rows.into_iter().map(|(_, v)| v).collect())
    }
}

impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        "openai"
    }

    /// Known after the first response (0 before).
    fn dim(&self) -> usize {
        self.dim.load(Ordering::Relaxed)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (endpoint, retry) = (self.endpoint.clone(), self.retry);
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        let calling = async move {
            let never = || false;
            let attempt = |_| endpoint.attempt(&texts);
            with_retries(
                &retry,
                "embedding call",
                attempt,
                tokio::time::sleep,
                &never,
            )
            .await
        };
        // The embedding worker's thread waits for the call.
        let vectors = wait_for(calling)
            .map_err(|e| failed(std::io::Error::other(e)))?
            .map_err(failed)?;
        if let Some(v) = vectors.first() {
            self.dim.store(v.len(), Ordering::Relaxed);
        }
        Ok(vectors)
    }
}
