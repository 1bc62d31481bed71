//! The OpenAI-compatible backend (`--llm openai`): `POST {base}/chat/completions`, streamed
//! (SSE) or not, against OpenAI itself or vLLM, llama.cpp's server, Ollama, SGLang, TGI.
//!
//! Failures are bounded and explained: connect and read timeouts; retries with
//! exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and cut-off
//! streams, honouring `Retry-After`; then an error naming the status and the server's
//! message. A 401 says to check the API key; a 404 names the model and the URL. The key
//! is only ever sent in the `Authorization` header: never printed, logged or recorded.

mod retry;
mod sampling;
mod sse;
mod tokens;
mod tools;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use dashmap::DashMap;
use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

pub use retry::{
    parse_retry_after, retryable_status, with_retries, AttemptError, Cause, GaveUp, RetryPolicy,
};
pub use sse::{Event, SseParser};
pub use tokens::counter_for;

use super::{
    ChatRole, ChoiceMethod, Chosen, Completion, LlmBackend, LlmError, LlmRequest, TokenSink, Usage,
};
pub use crate::llm::ApiKey;
use crate::tokens::{Estimator, TokenCounter};

/// Where and how to reach the server.
#[derive(Debug, Clone)]
pub struct OpenAiOptions {
    /// With or without a trailing `/v1`.
    pub base_url: String,
    pub api_key: Option<ApiKey>,
    /// The model when a request names none; `None`: ask the server
    /// ([`OpenAiBackend::discover_model`]).
    pub model: Option<String>,
    /// Stream agents' replies (SSE). Controller, judge and summary answers are short and
    /// shown whole, so they are always asked for in one piece.
    pub stream: bool,
    pub connect_timeout: Duration,
    /// Longest silence while waiting for a response or the next streamed piece.
    pub read_timeout: Duration,
    pub retry: RetryPolicy,
    /// Requests in flight to this endpoint from the whole process.
    pub concurrency: usize,
}

impl Default for OpenAiOptions {
    /// OpenAI's own API without a key, the model asked of the server, replies
    /// streamed, five attempts per call.
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: None,
            stream: true,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            concurrency: 8,
        }
    }
}

impl OpenAiOptions {
    /// The defaults with `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL` where
    /// set, for programs that take their settings from the environment. The library
    /// itself never calls it: the command line reads those variables and passes them
    /// in [`crate::setup::ModelOptions`].
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let defaults = Self::default();
        Self {
            base_url: var("OPENAI_BASE_URL").unwrap_or(defaults.base_url),
            api_key: var("OPENAI_API_KEY").and_then(ApiKey::new),
            model: var("OPENAI_MODEL"),
            ..defaults
        }
    }
}

/// `http://host:8000`, `http://host:8000/` and `http://host:8000/v1` all become
/// `http://host:8000/v1`.
pub fn normalize_base(base: &str) -> String {
    let trimmed = base.trim().trim_end_matches('/');
    if trimmed.ends_with("/v1") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1")
    }
}

/// The URL without a user name and password, and whether it had any.
pub fn without_credentials(url: &str) -> (String, bool) {
    match reqwest::Url::parse(url.trim()) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            (u.to_string(), true)
        }
        _ => (url.to_string(), false),
    }
}

/// The URL without credentials, for messages.
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => url.to_string(),
    }
}

/// OpenAI's own API takes at most four stop sequences; vLLM, llama.cpp's server and
/// SGLang take any number.
const OPENAI_MAX_STOPS: usize = 4;

/// Alternatives asked for at each token of a structured choice: OpenAI's maximum, so
/// that the options' probabilities can be read even where many options part.
const TOP_LOGPROBS: u32 = 20;

/// Whether `endpoint` is OpenAI's own API, whose limits and model list differ from
/// the servers that copy its protocol.
fn is_openai(endpoint: &str) -> bool {
    reqwest::Url::parse(endpoint)
        .ok()
        .and_then(|u| {
            u.host_str()
                .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
        })
        .unwrap_or(false)
}

/// A stop sequence that is a participant's label on a new line (`\nBen:`), as agents
/// are given for everyone else in the conversation.
fn is_label_stop(stop: &str) -> bool {
    stop.strip_prefix('\n')
        .and_then(|s| s.strip_suffix(':'))
        .is_some_and(|name| !name.trim().is_empty() && !name.contains('\n'))
}

/// The stop sequences to send: every one, once; or, to a server that takes at most
/// `limit`, the participants' labels first (they keep a reply in character), then the
/// others in order. What is left out is still cut on this side: `Action::process`
/// ends a reply where another participant's line starts.
fn stops_to_send(stops: &[String], limit: Option<usize>) -> Vec<String> {
    let mut unique: Vec<&String> = Vec::new();
    for s in stops.iter().filter(|s| !s.is_empty()) {
        if !unique.contains(&s) {
            unique.push(s);
        }
    }
    let Some(limit) = limit else {
        return unique.into_iter().cloned().collect();
    };
    let (labels, rest): (Vec<&String>, Vec<&String>) =
        unique.into_iter().partition(|s| is_label_stop(s));
    labels
        .into_iter()
        .chain(rest)
        .take(limit)
        .cloned()
        .collect()
}

/// The stop sequence a server says ended the reply: vLLM's `stop_reason`, SGLang's
/// `matched_stop`, llama.cpp's `stopping_word` (a number there is a stop token's id,
/// not a sequence). OpenAI does not say.
fn matched_stop(choice: &Value) -> Option<String> {
    ["stop_reason", "matched_stop", "stopping_word"]
        .iter()
        .find_map(|k| choice[k].as_str())
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// Whether a model id of OpenAI's list looks like a chat model (`gpt-4o-mini`,
/// `o3-mini`, `chatgpt-4o-latest`) rather than one for embeddings, speech, images or
/// moderation.
fn looks_like_chat(id: &str) -> bool {
    let family = id.starts_with("gpt-")
        || id.starts_with("chatgpt-")
        || (id.starts_with('o') && id[1..].starts_with(|c: char| c.is_ascii_digit()));
    const NOT_CHAT: [&str; 7] = [
        "audio",
        "realtime",
        "transcribe",
        "tts",
        "image",
        "embedding",
        "instruct",
    ];
    family && !NOT_CHAT.iter().any(|n| id.contains(n))
}

/// The model to use when none is named: the first the server lists; on OpenAI's own
/// API, whose list starts with whatever it likes (embeddings, speech), the first that
/// looks like a chat model, if any does.
fn pick_model(ids: &[String], openai: bool) -> Option<&String> {
    let chat = openai
        .then(|| ids.iter().find(|id| looks_like_chat(id)))
        .flatten();
    chat.or(ids.first())
}

/// Endpoints that refused structured output (`response_format`): asked in plain text.
fn refuses_structured(endpoint: &str) -> bool {
    REFUSED.contains_key(endpoint)
}

static REFUSED: LazyLock<DashMap<String, ()>> = LazyLock::new(DashMap::new);

/// How a closed choice is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asking {
    /// `response_format`: a JSON object whose `choice` is one of the options, with
    /// `logprobs` for the probabilities.
    Structured,
    /// The prompt's own instruction; the answer is read as text.
    Text,
}

/// One semaphore per endpoint, shared by every backend in the process.
fn limit(endpoint: &str, permits: usize) -> Arc<Semaphore> {
    static LIMITS: LazyLock<DashMap<String, Arc<Semaphore>>> = LazyLock::new(DashMap::new);
    LIMITS
        .entry(endpoint.to_string())
        .or_insert_with(|| Arc::new(Semaphore::new(permits.max(1))))
        .clone()
}

pub struct OpenAiBackend {
    client: reqwest::Client,
    options: OpenAiOptions,
    url: String,
    permits: Arc<Semaphore>,
    /// What discovering the model found worth saying.
    notes: Vec<String>,
    /// The server answered the extra sampling fields with HTTP 400: never sent again.
    extras_refused: std::sync::atomic::AtomicBool,
}

impl OpenAiBackend {
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
        let parsed = reqwest::Url::parse(&base).map_err(|e| LlmError::Config {
            backend: "openai".into(),
            message: format!("base URL {}", shown(&base)),
            source: Some(e.into()),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
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
        let url = format!("{base}/chat/completions");
        let permits = limit(&base, options.concurrency);
        Ok(Self {
            client,
            options,
            url,
            permits,
            notes,
            extras_refused: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Asks the server which model it serves (`GET {base}/models`) and uses the first
    /// (`pick_model`: on OpenAI's API the first chat model); a note says so when it
    /// serves several. For when no model is named anywhere
    /// (a flag, the environment, the scenario). Blocking: call it before a run starts.
    pub fn discover_model(&mut self) -> Result<(), LlmError> {
        let url = format!("{}/models", self.endpoint());
        let doing = format!(
            "no model is named, and {} did not say which it serves",
            shown(&url)
        );
        let fail = |why: String| LlmError::failed("openai", format!("{doing}: {why}"));
        let failed_by = |e: Cause| LlmError::caused_by("openai", format!("{doing}: {e}"), e);
        let client = reqwest::blocking::Client::builder()
            .connect_timeout(self.options.connect_timeout)
            .timeout(self.options.read_timeout)
            .build()
            .map_err(|e| failed_by(Cause::caused_by(e.to_string(), e)))?;
        let mut call = client.get(&url);
        if let Some(key) = &self.options.api_key {
            call = call.bearer_auth(key.expose());
        }
        let response = call
            .send()
            .map_err(|e| failed_by(Cause::caused_by(without_url(&e), e.without_url())))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .map_err(|e| failed_by(Cause::caused_by(without_url(&e), e.without_url())))?;
        if status != 200 {
            return Err(fail(format!(
                "HTTP {status}: {}",
                server_message(&body, self.options.api_key.as_ref())
            )));
        }
        let v: Value = serde_json::from_str(&body)
            .map_err(|e| failed_by(Cause::caused_by(format!("malformed JSON: {e}"), e)))?;
        let ids: Vec<String> = v["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m["id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let first = pick_model(&ids, is_openai(&self.endpoint()))
            .cloned()
            .ok_or_else(|| fail("it lists no model".into()))?;
        if ids.len() > 1 {
            let shown_ids: Vec<&str> = ids.iter().take(8).map(String::as_str).collect();
            self.notes.push(format!(
                "no model named; {} serves {} models ({}{}): using {first}",
                shown(&self.endpoint()),
                ids.len(),
                shown_ids.join(", "),
                if ids.len() > 8 { ", …" } else { "" }
            ));
        }
        self.options.model = Some(first);
        Ok(())
    }

    /// Whether the request's settings ask for extra sampling fields this server may
    /// take (never OpenAI's own API, nor a server that refused them).
    fn sends_extras(&self, req: &LlmRequest) -> bool {
        !is_openai(&self.endpoint())
            && !self
                .extras_refused
                .load(std::sync::atomic::Ordering::Relaxed)
            && !sampling::extras(&req.settings).is_empty()
    }

    /// Whether the request's extra sampling fields go unsent.
    fn extras_unsent(&self, req: &LlmRequest) -> bool {
        !sampling::extras(&req.settings).is_empty() && !self.sends_extras(req)
    }

    fn body(&self, req: &LlmRequest, asking: Asking) -> Value {
        let s = &req.settings;
        let messages: Vec<Value> = req
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    ChatRole::System => "system",
                    ChatRole::User => "user",
                    ChatRole::Assistant => "assistant",
                };
                json!({"role": role, "content": m.content})
            })
            .collect();
        let mut messages = messages;
        let mut obj = serde_json::Map::new();
        if let Some(tools) = req
            .tools
            .as_ref()
            .filter(|t| t.format == super::DecisionFormat::Native)
        {
            messages.extend(tools::exchange_messages(&tools.exchange));
            obj.insert("tools".into(), tools::definitions(&tools.tools));
            if let Some(choice) = &tools.tool_choice {
                obj.insert("tool_choice".into(), json!(choice));
            }
        }
        obj.insert("model".into(), json!(self.model(req)));
        obj.insert("messages".into(), Value::Array(messages));
        obj.insert("stream".into(), json!(self.streams(req)));
        if let Some(t) = s.temperature {
            obj.insert("temperature".into(), json!(t));
        }
        if let Some(p) = s.top_p {
            obj.insert("top_p".into(), json!(p));
        }
        if let Some(k) = s.top_k {
            obj.insert("top_k".into(), json!(k));
        }
        if let Some(m) = s.max_tokens {
            obj.insert("max_tokens".into(), json!(m));
        }
        if let Some(stop) = s.stop.as_ref().filter(|s| !s.is_empty()) {
            let limit = is_openai(&self.endpoint()).then_some(OPENAI_MAX_STOPS);
            obj.insert("stop".into(), json!(stops_to_send(stop, limit)));
        }
        if let Some(seed) = s.seed {
            let attempt = req.redraw.as_ref().map_or(0, |r| u64::from(r.attempt));
            obj.insert("seed".into(), json!(seed.wrapping_add(attempt)));
        }
        sampling::standard(s, req.redraw.as_ref(), &mut obj);
        if self.sends_extras(req) {
            obj.extend(sampling::extras(s));
        }
        if self.streams(req) {
            obj.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if let (Some(options), Asking::Structured) = (&req.options, asking) {
            let schema = json!({
                "type": "object",
                "properties": {"choice": {"type": "string", "enum": options}},
                "required": ["choice"],
                "additionalProperties": false,
            });
            obj.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "choice", "strict": true, "schema": schema}}),
            );
            obj.insert("logprobs".into(), json!(true));
            obj.insert("top_logprobs".into(), json!(TOP_LOGPROBS));
            // Room for the JSON around the longest option.
            let longest = options
                .iter()
                .map(|o| Estimator.count(o))
                .max()
                .unwrap_or(1);
            obj.insert("max_tokens".into(), json!(16 + 2 * longest));
        }
        Value::Object(obj)
    }

    fn streams(&self, req: &LlmRequest) -> bool {
        self.options.stream
            && matches!(
                req.context.kind,
                super::CallKind::Act | super::CallKind::Decide
            )
    }

    fn model<'a>(&'a self, req: &'a LlmRequest) -> &'a str {
        req.settings
            .model
            .as_deref()
            .or(self.options.model.as_deref())
            .unwrap_or("default")
    }

    async fn attempt(
        &self,
        req: &LlmRequest,
        stream: Option<&TokenSink>,
        asking: Asking,
    ) -> Result<Completion, AttemptError> {
        let extras = self.sends_extras(req);
        let mut call = self.client.post(&self.url).json(&self.body(req, asking));
        if let Some(key) = &self.options.api_key {
            call = call.bearer_auth(key.expose());
        }
        let sent = tokio::time::timeout(self.options.read_timeout, call.send()).await;
        let response = match sent {
            Err(_) => {
                return Err(AttemptError::Retry {
                    cause: format!("no response within {:?}", self.options.read_timeout).into(),
                    after: None,
                })
            }
            Ok(Err(e)) => {
                return Err(AttemptError::retry(Cause::caused_by(
                    format!("connection failed: {}", without_url(&e)),
                    e.without_url(),
                )))
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        if status != 200 {
            let after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            let text = response.text().await.unwrap_or_default();
            let said = server_message(&text, self.options.api_key.as_ref());
            let url = shown(&self.url);
            if status == 400 && extras {
                // The extra sampling fields are refused: ask again without them, from
                // now on (the completion says so, and the run warns once).
                self.extras_refused
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(AttemptError::Retry {
                    cause: format!("HTTP 400 from {url} to the extra sampling fields: {said}")
                        .into(),
                    after: Some(Duration::ZERO),
                });
            }
            if status == 400 && req.options.is_some() && asking == Asking::Structured {
                // Structured output is refused: remember it for this endpoint and ask in
                // plain text from now on.
                REFUSED.insert(self.endpoint(), ());
                return Err(AttemptError::Retry {
                    cause: format!("HTTP 400 from {url} to structured output: {said}").into(),
                    after: Some(Duration::ZERO),
                });
            }
            return Err(match status {
                401 | 403 => AttemptError::Fatal(format!("HTTP {status} from {url}: check the API key (OPENAI_API_KEY); the server said: {said}").into()),
                404 => AttemptError::Fatal(format!("HTTP 404 from {url}: no model {:?} there, or the base URL is wrong; the server said: {said}", self.model(req)).into()),
                s if retryable_status(s) => AttemptError::Retry { cause: format!("HTTP {s} from {url}: {said}").into(), after },
                s => AttemptError::Fatal(format!("HTTP {s} from {url}: {said}").into()),
            });
        }
        if self.streams(req) {
            self.read_stream(req, response, stream).await
        } else {
            let text = tokio::time::timeout(self.options.read_timeout, response.text())
                .await
                .map_err(|_| AttemptError::Retry {
                    cause: "the response stalled".into(),
                    after: None,
                })?
                .map_err(|e| {
                    AttemptError::retry(Cause::caused_by(
                        format!("reading the response: {}", without_url(&e)),
                        e.without_url(),
                    ))
                })?;
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                AttemptError::retry(Cause::caused_by(
                    format!("malformed JSON in the response: {e}"),
                    e,
                ))
            })?;
            let message = &v["choices"][0]["message"];
            let tool_calls = tools::read_calls(&message["tool_calls"]);
            let content = match message["content"].as_str() {
                Some(c) => c.to_string(),
                // A message that only calls tools may have no content.
                None if !tool_calls.is_empty() => String::new(),
                None => {
                    return Err(AttemptError::Retry {
                        cause: "the response has no choices[0].message.content".into(),
                        after: None,
                    })
                }
            };
            if let Some(sink) = stream {
                sink(&content);
            }
            let mut completion = self.completion(req, content, &v["usage"]);
            completion.tool_calls = tool_calls;
            completion.stopped_at = matched_stop(&v["choices"][0]);
            if let Some(options) = &req.options {
                completion.chosen = read_choice(
                    &completion.text,
                    options,
                    asking,
                    &v["choices"][0]["logprobs"],
                )?;
                if let Some(c) = &completion.chosen {
                    completion.text = options[c.index].clone();
                }
            }
            Ok(completion)
        }
    }

    /// Counts tokens as the models do where sopsim knows their tokenizers: this
    /// backend's own model and `named`, the models a scenario's agents, roles and
    /// states ask for (a prompt costs the most any of them counts).
    pub fn counter(&self, named: &[&str]) -> std::sync::Arc<dyn crate::tokens::TokenCounter> {
        let mut models = named.to_vec();
        models.extend(self.options.model.as_deref());
        counter_for(&models)
    }

    fn endpoint(&self) -> String {
        normalize_base(&self.options.base_url)
    }

    async fn read_stream(
        &self,
        req: &LlmRequest,
        response: reqwest::Response,
        sink: Option<&TokenSink>,
    ) -> Result<Completion, AttemptError> {
        let mut bytes = response.bytes_stream();
        let mut parser = SseParser::default();
        let mut text = String::new();
        let mut usage = Value::Null;
        let mut finished = false;
        let mut stopped_at = None;
        let mut calls = tools::StreamedCalls::default();
        loop {
            let next = tokio::time::timeout(self.options.read_timeout, bytes.next())
                .await
                .map_err(|_| AttemptError::Retry {
                    cause: format!("the stream stalled for {:?}", self.options.read_timeout).into(),
                    after: None,
                })?;
            let Some(chunk) = next else { break };
            let chunk = chunk.map_err(|e| {
                AttemptError::retry(Cause::caused_by(
                    format!("the stream broke: {}", without_url(&e)),
                    e.without_url(),
                ))
            })?;
            let events = parser
                .push(&chunk)
                .map_err(|e| AttemptError::retry(Cause::caused_by(e.to_string(), e)))?;
            for event in events {
                let data = match event {
                    Event::Done => {
                        let mut c = self.completion(req, text, &usage);
                        c.tool_calls = calls.finish();
                        c.stopped_at = stopped_at;
                        return Ok(c);
                    }
                    Event::Data(d) => d,
                };
                let v: Value = serde_json::from_str(&data).map_err(|e| {
                    AttemptError::retry(Cause::caused_by(
                        format!("malformed JSON in the stream: {e}"),
                        e,
                    ))
                })?;
                if let Some(err) = v.get("error") {
                    return Err(AttemptError::Retry {
                        cause: format!(
                            "the server reported an error mid-stream: {}",
                            server_message(&err.to_string(), self.options.api_key.as_ref())
                        )
                        .into(),
                        after: None,
                    });
                }
                if let Some(piece) = v["choices"][0]["delta"]["content"].as_str() {
                    text.push_str(piece);
                    if let Some(sink) = sink {
                        sink(piece);
                    }
                }
                calls.push(&v["choices"][0]["delta"]["tool_calls"]);
                if v["choices"][0]["finish_reason"].is_string() {
                    finished = true;
                    stopped_at = stopped_at.or_else(|| matched_stop(&v["choices"][0]));
                }
                if v["usage"].is_object() {
                    usage = v["usage"].clone();
                }
            }
        }
        // Servers that omit [DONE] still end a complete reply with a finish_reason.
        if finished && !parser.is_mid_event() {
            let mut c = self.completion(req, text, &usage);
            c.tool_calls = calls.finish();
            c.stopped_at = stopped_at;
            return Ok(c);
        }
        Err(AttemptError::Retry {
            cause: format!("the stream was cut off after {} characters", text.len()).into(),
            after: None,
        })
    }

    fn completion(&self, req: &LlmRequest, text: String, usage: &Value) -> Completion {
        let reported = usage["prompt_tokens"]
            .as_u64()
            .zip(usage["completion_tokens"].as_u64());
        let usage = match reported {
            Some((prompt, completion)) => Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                cached_prompt_tokens: usage["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(0),
                estimated: false,
            },
            None => Usage {
                prompt_tokens: req
                    .messages
                    .iter()
                    .map(|m| Estimator.count(&m.content) as u64)
                    .sum(),
                completion_tokens: Estimator.count(&text) as u64,
                cached_prompt_tokens: 0,
                estimated: true,
            },
        };
        Completion::text(text, usage, self.model(req).to_string())
    }
}

/// The option a choice answer names, with the probabilities the logprobs give. A
/// structured answer that is not JSON or names no option is retried; a text answer
/// naming none is no choice (`None`).
fn read_choice(
    content: &str,
    options: &[String],
    asking: Asking,
    logprobs: &Value,
) -> Result<Option<Chosen>, AttemptError> {
    match asking {
        Asking::Text => Ok(
            crate::sop::parse_choice_in(content, options, "end", options).map(|index| Chosen {
                index,
                probabilities: None,
                method: ChoiceMethod::Text,
            }),
        ),
        Asking::Structured => {
            let bad = |cause: Cause| AttemptError::Again(cause);
            let v: Value = serde_json::from_str(content.trim()).map_err(|e| {
                bad(Cause::caused_by(
                    format!("the structured answer is not JSON: {e}"),
                    e,
                ))
            })?;
            let value = v["choice"]
                .as_str()
                .ok_or_else(|| bad("the structured answer has no \"choice\"".into()))?;
            let index = options.iter().position(|o| o == value).ok_or_else(|| {
                bad(format!("the structured answer {value:?} is not one of the options").into())
            })?;
            Ok(Some(Chosen {
                index,
                probabilities: option_probabilities(content, value, options, logprobs),
                method: ChoiceMethod::Structured,
            }))
        }
    }
}

/// The options' probabilities from the answer's log-probabilities.
///
/// A structured answer (`{"choice": "10"}`) is generated token by token. As the local
/// backend does over its option trie, an option's probability is the product, along
/// the tokens that spell it, of each token's probability renormalised over the tokens
/// there that continue some option still possible. The generated tokens are one path;
/// an option that parts from it does so at one position, where `top_logprobs` gives the
/// alternative that starts it: if that alternative leads to this option alone, the
/// constrained rest of it is certain; if it leads to several ("1" when "1" and "10" are
/// options and "10" was generated), their split lies at a position the server never
/// generated, so the answer is `None` — never a wrong number. `None` too without
/// logprobs, when the tokens do not spell the answer, or when an option missing from a
/// position's alternatives could hold more than a hundredth of the probability there.
fn option_probabilities(
    content: &str,
    value: &str,
    options: &[String],
    logprobs: &Value,
) -> Option<Vec<f64>> {
    /// How much probability an option left out of the alternatives may hide.
    const MISSING: f64 = 0.01;
    let tokens = logprobs["content"].as_array()?;
    let texts: Vec<&str> = tokens
        .iter()
        .map(|t| t["token"].as_str())
        .collect::<Option<_>>()?;
    if texts.concat() != content {
        return None;
    }
    // Each option as the answer writes it after the opening quote, closing quote included.
    let spelled: Vec<String> = options
        .iter()
        .map(|o| serde_json::to_string(o).ok().map(|q| q[1..].to_string()))
        .collect::<Option<_>>()?;
    // The value follows its key, so its last occurrence is the value.
    let start = content.rfind(&serde_json::to_string(value).ok()?)? + 1;
    let mut p = vec![0.0; options.len()];
    let mut alive: Vec<usize> = (0..options.len()).collect();
    let mut along = 1.0f64; // the probability of the generated path so far
    let mut written = 0; // bytes of the value (after its opening quote) generated so far
    let mut at = 0;
    for (t, text) in tokens.iter().zip(&texts) {
        let end = at + text.len();
        if end <= start || text.is_empty() {
            at = end;
            continue;
        }
        // The token may begin before the value (`: "1`): alternatives must too.
        let lead = text.get(..start.saturating_sub(at))?;
        let own = &text[lead.len()..];
        let listed = t["top_logprobs"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut alternatives: Vec<(&str, f64)> = Vec::new();
        let mut listed_mass = 0.0;
        for alt in listed {
            let (Some(tok), Some(lp)) = (alt["token"].as_str(), alt["logprob"].as_f64()) else {
                continue;
            };
            listed_mass += lp.exp();
            if let Some(rest) = tok.strip_prefix(lead) {
                if !alternatives.iter().any(|(r, _)| *r == rest) {
                    alternatives.push((rest, lp.exp()));
                }
            }
        }
        if !alternatives.iter().any(|(r, _)| *r == own) {
            let lp = t["logprob"].as_f64()?;
            listed_mass += lp.exp();
            alternatives.push((own, lp.exp()));
        }
        // For each alternative, the options still possible it completes or continues.
        let rest_of = |o: usize| &spelled[o][written..];
        let leads_to = |alt: &str| -> Vec<(usize, bool)> {
            alive
                .iter()
                .filter_map(|&o| {
                    let r = rest_of(o);
                    if alt.starts_with(r) {
                        Some((o, true))
                    } else if r.starts_with(alt) {
                        Some((o, false))
                    } else {
                        None
                    }
                })
                .collect()
        };
        let z: f64 = alternatives
            .iter()
            .filter(|(alt, _)| !leads_to(alt).is_empty())
            .map(|(_, q)| q)
            .sum();
        if z <= 0.0 {
            return None;
        }
        let mut reached = vec![false; options.len()];
        for (alt, q) in &alternatives {
            let to = leads_to(alt);
            for (o, _) in &to {
                reached[*o] = true;
            }
            if *alt == own {
                continue;
            }
            match to.as_slice() {
                [] => {}
                [(o, _)] => p[*o] += along * q / z,
                _ => return None,
            }
        }
        let missing = (1.0 - listed_mass).max(0.0);
        if alive.iter().any(|&o| !reached[o]) && missing / (z + missing) > MISSING {
            return None;
        }
        let path = leads_to(own);
        along *= alternatives.iter().find(|(r, _)| *r == own)?.1 / z;
        match path.as_slice() {
            [(o, true)] => {
                p[*o] += along;
                let total: f64 = p.iter().sum();
                return (total > 0.0).then(|| p.into_iter().map(|x| x / total).collect());
            }
            to if to.iter().all(|(_, completes)| !completes) && !to.is_empty() => {
                alive = to.iter().map(|(o, _)| *o).collect();
                written += own.len();
            }
            _ => return None,
        }
        at = end;
    }
    None
}

/// reqwest errors include the URL; print it without credentials.
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), &shown(url.as_str()));
    }
    s
}

/// The server's own explanation: `error.message` of a JSON body, else the text.
/// What a server said in an error body: its message when the body is OpenAI-style
/// JSON, else the text; at most 300 characters, with API keys blanked out (servers echo
/// a wrong key back in "Incorrect API key provided: sk-…").
pub(crate) fn server_message(body: &str, key: Option<&ApiKey>) -> String {
    let body = scrub(body, key);
    let body = body.as_str();
    let v: Option<Value> = serde_json::from_str(body).ok();
    let msg = v
        .as_ref()
        .and_then(|v| {
            v["error"]["message"]
                .as_str()
                .or(v["message"].as_str())
                .or(v["error"].as_str())
                .map(String::from)
        })
        .unwrap_or_else(|| body.trim().to_string());
    let msg: String = msg.chars().take(300).collect();
    if msg.is_empty() {
        "(no message)".into()
    } else {
        msg
    }
}

/// `text` with `key` and anything shaped like an API key or bearer token replaced by
/// `[redacted]`.
pub(crate) fn scrub(text: &str, key: Option<&ApiKey>) -> String {
    static SHAPES: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let shapes = SHAPES.get_or_init(|| {
        regex::Regex::new(r"(?i)\b(?:sk|pk|rk)-[a-z0-9_\-*.]{6,}|\bbearer\s+[^\s\x22']+")
            .expect("a valid pattern")
    });
    let mut text = text.to_string();
    if let Some(k) = key {
        if k.expose().len() >= 4 {
            text = text.replace(k.expose(), "[redacted]");
        }
    }
    shapes.replace_all(&text, "[redacted]").into_owned()
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
            self.options.model.as_deref().unwrap_or("default"),
            shown(&normalize_base(&self.options.base_url))
        )
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let _permit =
                self.permits.acquire().await.map_err(|e| {
                    LlmError::caused_by("openai", "waiting for a connection slot", e)
                })?;
            let policy = self.options.retry;
            // Asked again each attempt: a server that refused structured output on
            // the last one is asked in plain text from then on.
            let asking = || {
                if request.options.is_some() && !refuses_structured(&self.endpoint()) {
                    Asking::Structured
                } else {
                    Asking::Text
                }
            };
            let last_was_bad_answer = std::sync::atomic::AtomicBool::new(false);
            let result = with_retries(
                &policy,
                "model call",
                |_| {
                    let last = &last_was_bad_answer;
                    let stream = stream.as_ref();
                    let request = &request;
                    let asking = asking();
                    async move {
                        let r = self.attempt(request, stream, asking).await;
                        last.store(
                            matches!(r, Err(AttemptError::Again(_))),
                            std::sync::atomic::Ordering::Relaxed,
                        );
                        r
                    }
                },
                tokio::time::sleep,
            )
            .await;
            match result {
                Ok(mut c) => {
                    c.settings_unsent = self.extras_unsent(&request);
                    Ok(c)
                }
                // A server whose structured answers keep failing is asked in plain
                // text, and its answer read as one of the options.
                Err(GaveUp::Exhausted { .. })
                    if last_was_bad_answer.load(std::sync::atomic::Ordering::Relaxed) =>
                {
                    let mut c = self
                        .attempt(&request, None, Asking::Text)
                        .await
                        .map_err(|e| {
                            let cause = e.into_cause();
                            LlmError::caused_by("openai", cause.to_string(), cause)
                        })?;
                    // Told apart from a refusal: the run's warning says which it was.
                    if let Some(chosen) = &mut c.chosen {
                        chosen.method = ChoiceMethod::TextAfterUnusable;
                    }
                    Ok(c)
                }
                Err(e) => Err(LlmError::caused_by("openai", e.to_string(), e)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_with_or_without_v1_meet() {
        for b in [
            "http://h:8000",
            "http://h:8000/",
            "http://h:8000/v1",
            "http://h:8000/v1/",
        ] {
            assert_eq!(normalize_base(b), "http://h:8000/v1");
        }
        assert_eq!(shown("http://user:secret@h:1/v1"), "http://h:1/v1");
        assert_eq!(
            format!("{:?}", ApiKey::new("sk-123").unwrap()),
            "ApiKey(redacted)"
        );
        assert!(ApiKey::new("  ").is_none());
    }

    #[test]
    fn server_messages_are_extracted_and_bounded() {
        assert_eq!(
            server_message(r#"{"error": {"message": "Rate limit reached"}}"#, None),
            "Rate limit reached"
        );
        assert_eq!(server_message("plain text", None), "plain text");
        assert_eq!(server_message(&"x".repeat(1000), None).len(), 300);
        assert_eq!(server_message("", None), "(no message)");
    }

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

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A generated token, its probability, and its alternatives with theirs.
    type Token<'a> = (&'a str, f64, &'a [(&'a str, f64)]);

    /// Log-probabilities as servers return them.
    fn logprobs(tokens: &[Token]) -> Value {
        json!({"content": tokens.iter().map(|(t, p, top)| json!({
            "token": t,
            "logprob": p.ln(),
            "top_logprobs": top.iter().map(|(a, q)| json!({"token": a, "logprob": q.ln()})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>()})
    }

    fn close(p: &[f64], want: &[f64]) -> bool {
        p.len() == want.len() && p.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9)
    }

    #[test]
    fn an_option_sharing_a_first_token_with_others_is_never_credited_twice() {
        let options = strings(&["1", "2", "10"]);
        // "10" generated; the alternative "1" begins both "1" and "10", and how it
        // would have split lies at a position the server never generated.
        let content = r#"{"choice": "10"}"#;
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("10", 0.6, &[("10", 0.6), ("1", 0.3), ("2", 0.1)]),
            (r#""}"#, 1.0, &[]),
        ]);
        assert_eq!(option_probabilities(content, "10", &options, &lp), None);
        // With "1" generated the split is there: `"` ends "1", `0` goes on to "10".
        let content = r#"{"choice": "1"}"#;
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("1", 0.5, &[("1", 0.5), ("10", 0.3), ("2", 0.2)]),
            (r#""}"#, 0.8, &[(r#""}"#, 0.8), ("0", 0.2)]),
        ]);
        let p = option_probabilities(content, "1", &options, &lp).unwrap();
        assert!(close(&p, &[0.5 * 0.8, 0.2, 0.3 + 0.5 * 0.2]), "{p:?}");
    }

    #[test]
    fn options_of_several_tokens_are_renormalised_over_what_continues_an_option() {
        let options = strings(&["COOPERATE", "COOL", "DEFECT"]);
        let content = r#"{"choice": "COOPERATE"}"#;
        let lp = logprobs(&[
            (r#"{"choice": "#, 1.0, &[]),
            // The token starts before the value; "XY" continues no option.
            (
                r#""CO"#,
                0.6,
                &[(r#""CO"#, 0.6), (r#""DE"#, 0.3), (r#""XY"#, 0.1)],
            ),
            ("OPER", 0.5, &[("OPER", 0.5), ("OL", 0.3), ("zz", 0.2)]),
            (r#"ATE"}"#, 1.0, &[]),
        ]);
        let p = option_probabilities(content, "COOPERATE", &options, &lp).unwrap();
        assert!(close(&p, &[5.0 / 12.0, 0.25, 1.0 / 3.0]), "{p:?}");
        // An alternative that begins two options that are both still possible ("O"
        // for COOPERATE and COOL) cannot be split: no number rather than a wrong one.
        let lp = logprobs(&[
            (r#"{"choice": "#, 1.0, &[]),
            (r#""CO"#, 0.6, &[(r#""CO"#, 0.6), (r#""DE"#, 0.4)]),
            ("OPER", 0.5, &[("OPER", 0.5), ("O", 0.5)]),
            (r#"ATE"}"#, 1.0, &[]),
        ]);
        assert_eq!(
            option_probabilities(content, "COOPERATE", &options, &lp),
            None
        );
    }

    #[test]
    fn probabilities_are_none_when_the_logprobs_cannot_tell() {
        let options = strings(&["COOPERATE", "DEFECT"]);
        let content = r#"{"choice": "DEFECT"}"#;
        assert_eq!(
            option_probabilities(content, "DEFECT", &options, &Value::Null),
            None
        );
        // Tokens that do not spell the answer.
        let lp = logprobs(&[(r#"{"choice": "DEF"#, 1.0, &[]), ("ECT", 1.0, &[])]);
        assert_eq!(option_probabilities(content, "DEFECT", &options, &lp), None);
        // COOPERATE is not among the alternatives, and a third of the mass is unlisted.
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("DE", 0.6, &[("DE", 0.6), ("XY", 0.1)]),
            (r#"FECT"}"#, 1.0, &[]),
        ]);
        assert_eq!(option_probabilities(content, "DEFECT", &options, &lp), None);
        // Left out, but with next to nothing unlisted: it had next to no chance.
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("DE", 0.999, &[("DE", 0.999)]),
            (r#"FECT"}"#, 1.0, &[]),
        ]);
        let p = option_probabilities(content, "DEFECT", &options, &lp).unwrap();
        assert!(close(&p, &[0.0, 1.0]), "{p:?}");
    }

    #[test]
    fn stops_all_go_to_servers_and_the_labels_first_to_openai() {
        let stops = strings(&[
            "END",
            "\nMia:",
            "\nBen:",
            "\nCleo:",
            "\nDan:",
            "\nModerator:",
            "END",
        ]);
        assert_eq!(
            stops_to_send(&stops, None),
            strings(&[
                "END",
                "\nMia:",
                "\nBen:",
                "\nCleo:",
                "\nDan:",
                "\nModerator:"
            ])
        );
        assert_eq!(
            stops_to_send(&stops, Some(OPENAI_MAX_STOPS)),
            strings(&["\nMia:", "\nBen:", "\nCleo:", "\nDan:"])
        );
        assert_eq!(
            stops_to_send(&strings(&["END", "\nBen:"]), Some(4)),
            strings(&["\nBen:", "END"])
        );
        assert!(is_openai("https://api.openai.com/v1") && !is_openai("http://127.0.0.1:8000/v1"));
        assert_eq!(
            matched_stop(&json!({"stop_reason": "\nBen:"})).as_deref(),
            Some("\nBen:")
        );
        assert_eq!(matched_stop(&json!({"stop_reason": 151645})), None);
    }

    #[test]
    fn on_openai_the_first_chat_model_is_taken_elsewhere_the_first_listed() {
        let ids = strings(&[
            "text-embedding-3-small",
            "tts-1",
            "gpt-4o-mini-tts",
            "omni-moderation-latest",
            "o3-mini",
            "gpt-4o-mini",
        ]);
        assert_eq!(pick_model(&ids, true).unwrap(), "o3-mini");
        assert_eq!(pick_model(&ids, false).unwrap(), "text-embedding-3-small");
        assert_eq!(
            pick_model(&strings(&["whisper-1"]), true).unwrap(),
            "whisper-1",
            "no chat model: the first, and the server will say"
        );
        assert!(looks_like_chat("chatgpt-4o-latest") && looks_like_chat("gpt-4.1"));
        assert!(!looks_like_chat("gpt-3.5-turbo-instruct") && !looks_like_chat("dall-e-3"));
    }

    #[test]
    fn keys_are_blanked_out_of_server_messages() {
        let key = ApiKey::new("my-own-secret-key-123").unwrap();
        let body = r#"{"error": {"message": "Incorrect API key provided: sk-proj-abcDEF123456. Sent: my-own-secret-key-123, Authorization: Bearer xyz.987"}}"#;
        let said = server_message(body, Some(&key));
        assert!(
            !said.contains("abcDEF")
                && !said.contains("my-own-secret")
                && !said.contains("xyz.987"),
            "{said}"
        );
        assert!(
            said.starts_with("Incorrect API key provided: [redacted]"),
            "{said}"
        );
    }
}
