//! Reading a whole (non-streamed) reply, and the [`Completion`] a reply of either kind
//! ends in: its text, its usage (the server's count, else an estimate), and the stop
//! sequence the server says ended it.

use serde_json::Value;

use super::choice::{read_choice, Asking};
use super::redact::transport_failure;
use super::request::RequestShape;
use super::retry::{AttemptError, Cause};
use super::tools;
use crate::{Completion, LlmRequest, TokenSink, Usage};
use sopsim_core::tokens::{Estimator, TokenCounter};

/// The largest whole response read: a reply, its tool calls and its
/// log-probabilities are far smaller.
const MAX_BODY_BYTES: usize = 16 << 20;

/// The completion a whole reply holds: its text (handed to `sink` in one piece), its
/// tool calls, and for a closed choice the option it names. A reply that stalls,
/// cannot be read or is not a chat completion is worth another attempt.
pub(super) async fn read_whole(
    shape: &RequestShape,
    req: &LlmRequest,
    response: reqwest::Response,
    sink: Option<&TokenSink>,
    asking: Asking,
) -> Result<Completion, AttemptError> {
    let v = whole_json(shape.options().read_timeout, response).await?;
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
    if let Some(sink) = sink {
        sink(&content);
    }
    let mut completion = completion(shape, req, content, &v["usage"]);
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

/// The response's body as JSON, at most [`MAX_BODY_BYTES`] of it, each piece read
/// within `read_timeout`.
async fn whole_json(
    read_timeout: std::time::Duration,
    response: reqwest::Response,
) -> Result<Value, AttemptError> {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut pieces = response.bytes_stream();
    loop {
        let piece = tokio::time::timeout(read_timeout, pieces.next())
            .await
            .map_err(|_| AttemptError::Retry {
                cause: "the response stalled".into(),
                after: None,
            })?;
        let Some(piece) = piece else { break };
        let piece = piece.map_err(|e| transport_failure("reading the response", e))?;
        if body.len() + piece.len() > MAX_BODY_BYTES {
            return Err(AttemptError::retry(format!(
                "the response is over {} MiB, more than any reply",
                MAX_BODY_BYTES >> 20
            )));
        }
        body.extend_from_slice(&piece);
    }
    serde_json::from_slice(&body).map_err(|e| {
        AttemptError::retry(Cause::caused_by(
            format!("malformed JSON in the response: {e}"),
            e,
        ))
    })
}

/// The completion of `text`, with the usage the server reported or, where it reported
/// none, the prompt and the reply counted here (marked estimated).
pub(super) fn completion(
    shape: &RequestShape,
    req: &LlmRequest,
    text: String,
    usage: &Value,
) -> Completion {
    let text = without_thinking(text);
    let reported = usage["prompt_tokens"]
        .as_u64()
        .zip(usage["completion_tokens"].as_u64());
    let implausible = reported
        .is_some_and(|(prompt, completion)| !plausible(prompt, completion, prompt_bytes(req)));
    let usage = match reported.filter(|_| !implausible) {
        Some((prompt, completion)) => Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_prompt_tokens: usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0),
            estimated: false,
            thinking_tokens: usage["completion_tokens_details"]["reasoning_tokens"]
                .as_u64()
                .unwrap_or(0),
            ..Usage::default()
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
            implausible,
            ..Usage::default()
        },
    };
    Completion::text(text, usage, shape.model(req).to_string())
}

/// A reply's text without the thinking a model wrote before it (`<think>…</think>`, as
/// a server without a reasoning parser returns Qwen3's): all of it is thinking when the
/// block never closes.
fn without_thinking(text: String) -> String {
    let Some(thinking) = text.trim_start().strip_prefix("<think>") else {
        return text;
    };
    match thinking.split_once("</think>") {
        Some((_, answer)) => answer.trim_start().to_string(),
        None => String::new(),
    }
}

/// The bytes a request's prompt takes: its messages and the tools it offers.
fn prompt_bytes(req: &LlmRequest) -> u64 {
    let messages: usize = req.messages.iter().map(|m| m.content.len()).sum();
    let tools = req
        .tools
        .as_ref()
        .map_or(0, |t| serde_json::to_string(t).map_or(0, |s| s.len()));
    (messages + tools) as u64
}

/// Whether a server's token counts could be true of a prompt of `bytes`: a token is at
/// least a byte, and a chat template adds a few thousand at most; no reply of one call
/// runs to a million tokens, hidden reasoning included.
fn plausible(prompt: u64, completion: u64, bytes: u64) -> bool {
    prompt <= bytes.saturating_add(4096) && completion <= 1_000_000
}

/// The stop sequence a server says ended the reply: vLLM's `stop_reason`, SGLang's
/// `matched_stop`, llama.cpp's `stopping_word` (a number there is a stop token's id,
/// not a sequence). OpenAI does not say.
pub(super) fn matched_stop(choice: &Value) -> Option<String> {
    first_stop(["stop_reason", "matched_stop", "stopping_word"].map(|k| choice.get(k)))
}

/// The first stop sequence among the fields servers name it in (in the order
/// [`matched_stop`] reads them).
pub(super) fn first_stop<'v>(
    fields: impl IntoIterator<Item = Option<&'v Value>>,
) -> Option<String> {
    fields
        .into_iter()
        .find_map(|f| f?.as_str())
        .filter(|s| !s.is_empty())
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_stop_a_server_names_is_read_and_a_stop_tokens_id_is_not() {
        assert_eq!(
            matched_stop(&json!({"stop_reason": "\nBen:"})).as_deref(),
            Some("\nBen:")
        );
        assert_eq!(matched_stop(&json!({"stop_reason": 151645})), None);
    }

    #[test]
    fn thinking_never_reaches_the_reply() {
        let cases = [
            (
                "<think>\nBen wants it cheap.\n</think>\n\nIt pays for itself.",
                "It pays for itself.",
            ),
            ("<think>still thinking when the budget ran out", ""),
            ("It pays for itself.", "It pays for itself."),
            ("I <think> it pays.", "I <think> it pays."),
        ];
        for (text, reply) in cases {
            assert_eq!(without_thinking(text.to_string()), reply, "{text:?}");
        }
    }
}
