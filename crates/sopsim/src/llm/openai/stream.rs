//! Reading a streamed reply: server-sent events as they arrive, each piece handed to
//! the sink, tool calls gathered from their deltas, until `[DONE]` or a finished
//! choice; a stream that stalls, breaks or is cut off is worth another attempt.

use futures::StreamExt;
use serde_json::Value;

use super::redact::{server_message, without_url};
use super::reply::matched_stop;
use super::retry::{AttemptError, Cause};
use super::sse::{Event, SseParser};
use super::{tools, OpenAiBackend};
use crate::llm::{Completion, LlmRequest, TokenSink};

impl OpenAiBackend {
    /// The completion a streamed reply holds, each piece of its text handed to `sink`
    /// as it arrives.
    pub(super) async fn read_stream(
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
}
