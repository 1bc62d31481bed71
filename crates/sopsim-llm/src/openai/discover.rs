//! Model discovery: when no model is named anywhere, asking the server which it serves
//! (`GET {base}/models`) and picking one.

use serde_json::Value;

use super::redact::{server_message, shown, without_url};
use super::retry::{retry_after, retryable_status, with_retries, AttemptError, Cause, GaveUp};
use super::OpenAiOptions;
use crate::LlmError;

/// The model a server serves, and a note when it serves several.
pub(super) struct Discovered {
    pub(super) model: String,
    pub(super) note: Option<String>,
}

/// Asks the server at `endpoint` which model it serves (`GET {base}/models`) and takes
/// the first (`pick_model`: on OpenAI's API, `openai`, the first chat model), with a
/// note when it serves several. Blocking.
pub(super) fn discover(
    endpoint: &str,
    options: &OpenAiOptions,
    openai: bool,
) -> Result<Discovered, LlmError> {
    let url = super::config::route(endpoint, "models");
    let doing = format!(
        "no model is named, and {} did not say which it serves",
        shown(&url)
    );
    let fail = |why: String| LlmError::failed("openai", format!("{doing}: {why}"));
    let failed_by = |e: Cause| LlmError::caused_by("openai", format!("{doing}: {e}"), e);
    let client = reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .timeout(options.read_timeout)
        .build()
        .map_err(|e| failed_by(Cause::caused_by(e.to_string(), e)))?;
    let (key, retry) = (options.api_key.clone(), options.retry);
    // A server still loading its model answers 503 (llama.cpp's "Loading model"):
    // asked again as a model call would be, with the same bounded backoff.
    let asking = async move {
        let attempt = |_: u32| {
            let mut call = client.get(&url);
            if let Some(key) = &key {
                call = call.bearer_auth(key.expose());
            }
            models_answer(call, key.clone())
        };
        let never = || false;
        with_retries(
            &retry,
            "request for the served models",
            attempt,
            tokio::time::sleep,
            &never,
        )
        .await
    };
    let body = super::wait_for(asking)
        .map_err(fail)?
        .map_err(|e| match e {
            GaveUp::Fatal(cause) => failed_by(cause),
            exhausted => fail(exhausted.to_string()),
        })?;
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
    let first = pick_model(&ids, openai)
        .cloned()
        .ok_or_else(|| fail("it lists no model".into()))?;
    let note = (ids.len() > 1).then(|| {
        let shown_ids: Vec<&str> = ids.iter().take(8).map(String::as_str).collect();
        format!(
            "no model named; {} serves {} models ({}{}): using {first}",
            shown(endpoint),
            ids.len(),
            shown_ids.join(", "),
            if ids.len() > 8 { ", …" } else { "" }
        )
    });
    Ok(Discovered { model: first, note })
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

/// One `GET /models`: the body of a 200, or how the attempt failed (429, 408 and 5xx,
/// and a failed connection, are worth another attempt).
async fn models_answer(
    call: reqwest::RequestBuilder,
    key: Option<crate::ApiKey>,
) -> Result<String, AttemptError> {
    let response = call
        .send()
        .await
        .map_err(|e| AttemptError::retry(Cause::caused_by(without_url(&e), e.without_url())))?;
    let status = response.status().as_u16();
    let after = retry_after(response.headers());
    let body = response
        .text()
        .await
        .map_err(|e| AttemptError::retry(Cause::caused_by(without_url(&e), e.without_url())))?;
    if status == 200 {
        return Ok(body);
    }
    let cause = Cause::from(format!(
        "HTTP {status}: {}",
        server_message(&body, key.as_ref())
    ));
    Err(if retryable_status(status) {
        AttemptError::Retry { cause, after }
    } else {
        AttemptError::Fatal(cause)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
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
}
