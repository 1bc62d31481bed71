//! Reading a streamed reply: server-sent events as they arrive, each piece handed to
//! the sink, tool calls gathered from their deltas, until `[DONE]` or a finished
//! choice; a stream that stalls, breaks or is cut off is worth another attempt.

use std::borrow::Cow;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;

use super::redact::{server_message, transport_failure};
use super::reply::completion;
use super::reply::first_stop;
use super::request::RequestShape;
use super::retry::{AttemptError, Cause};
use super::sse::{Event, SseParser};
use super::tools;
use crate::{Completion, LlmRequest, TokenSink};

/// The completion a streamed reply holds, each piece of its text handed to `sink` as it
/// arrives.
pub(super) async fn read_stream(
    shape: &RequestShape,
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
    // Pieces of text received: a server sends about a token in each.
    let mut pieces = 0usize;
    let budget = shape.budget(req);
    // A reply past its tokens (and the headroom a sentence's end takes) is closed
    // there, as the local engine's hard cap closes it.
    let cap = req
        .settings
        .max_tokens
        .map(|m| sopsim_core::sentence::ReplyBudget::of(m as usize).hard);
    let mut look_from = 0;
    // A draw another would replace stops at a flaw it has for certain.
    let mut screening = req.screen.clone().map(crate::Screen::reading);
    // Only events count as progress: a server that sends nothing but keep-alive
    // comments has stalled.
    let idle = shape.options().read_timeout;
    let mut last_event = tokio::time::Instant::now();
    let mut any_event = false;
    loop {
        let next = tokio::time::timeout_at(last_event + idle, bytes.next())
            .await
            .map_err(|_| AttemptError::Retry {
                cause: format!("the stream stalled: no event for {idle:?}").into(),
                after: None,
            })?;
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| transport_failure("the stream broke", e))?;
        let events = parser
            .push(&chunk)
            .map_err(|e| AttemptError::retry(Cause::caused_by(e.to_string(), e)))?;
        if !events.is_empty() {
            last_event = tokio::time::Instant::now();
            any_event = true;
        }
        for event in events {
            let data = match event {
                Event::Done => {
                    let mut c = completion(shape, req, text, &usage);
                    c.tool_calls = calls.finish();
                    c.stopped_at = stopped_at;
                    return Ok(c);
                }
                Event::Data(d) => d,
            };
            let chunk: Chunk = serde_json::from_str(&data).map_err(|e| {
                AttemptError::retry(Cause::caused_by(
                    format!("malformed JSON in the stream: {e}"),
                    e,
                ))
            })?;
            if let Some(err) = chunk.error {
                return Err(AttemptError::Retry {
                    cause: format!(
                        "the server reported an error mid-stream: {}",
                        server_message(&err.to_string(), shape.options().api_key.as_ref())
                    )
                    .into(),
                    after: None,
                });
            }
            if let Some(choice) = chunk.choices.into_iter().next() {
                if let Some(piece) = choice.delta.content {
                    let before = text.len();
                    text.push_str(&piece);
                    pieces += 1;
                    if let Some(cause) = screening.as_mut().and_then(|s| s.next(&text)) {
                        // Closing the stream stops the server.
                        text.truncate(text.trim_end().len());
                        let mut c = completion(shape, req, text, &usage);
                        c.abandoned = Some(cause);
                        return Ok(c);
                    }
                    if let Some(b) = budget.filter(|b| pieces >= b.soft) {
                        if pieces == b.soft {
                            look_from = before.saturating_sub(4);
                        }
                        if let Some(end) = sopsim_core::sentence::first_end(&text, look_from) {
                            // The reply ends here; closing the stream stops the
                            // server.
                            if let (Some(sink), true) = (sink, end > before) {
                                sink(&text[before..end]);
                            }
                            text.truncate(end);
                            let mut c = completion(shape, req, text, &usage);
                            c.tool_calls = calls.finish();
                            return Ok(c);
                        }
                    }
                    if let Some(sink) = sink {
                        sink(&piece);
                    }
                    if cap.is_some_and(|cap| pieces >= cap) {
                        let mut c = completion(shape, req, text, &usage);
                        c.tool_calls = calls.finish();
                        return Ok(c);
                    }
                }
                if let Some(deltas) = &choice.delta.tool_calls {
                    calls.push(deltas);
                }
                if choice.finish_reason.is_some() {
                    finished = true;
                    stopped_at = stopped_at.or_else(|| {
                        first_stop([
                            choice.stop_reason.as_ref(),
                            choice.matched_stop.as_ref(),
                            choice.stopping_word.as_ref(),
                        ])
                    });
                }
            }
            if let Some(u) = chunk.usage.filter(Value::is_object) {
                usage = u;
            }
        }
    }
    // Servers that omit [DONE] still end a complete reply with a finish_reason.
    if finished && !parser.is_mid_event() {
        let mut c = completion(shape, req, text, &usage);
        c.tool_calls = calls.finish();
        c.stopped_at = stopped_at;
        return Ok(c);
    }
    let cause = match any_event {
        true => format!("the stream was cut off after {} characters", text.len()),
        false => "the response held no event of a stream (`data: …` lines)".to_string(),
    };
    Err(AttemptError::Retry {
        cause: cause.into(),
        after: None,
    })
}

/// One event of a streamed reply, as far as it is read: a reply streams dozens of them,
/// so the text of each is borrowed from the event where it can be, and only what is
/// rare (tool calls, usage, an error) is read into JSON values.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<ChunkChoice<'a>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice<'a> {
    #[serde(default, borrow)]
    delta: Delta<'a>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    // The stop sequence that ended the reply, where a server names it (see
    // `first_stop`).
    #[serde(default)]
    stop_reason: Option<Value>,
    #[serde(default)]
    matched_stop: Option<Value>,
    #[serde(default)]
    stopping_word: Option<Value>,
}

#[derive(Default, Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Value>,
}
