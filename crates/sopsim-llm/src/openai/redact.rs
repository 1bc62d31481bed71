//! What errors may show of a server: its URLs without user names and passwords, and
//! its error bodies bounded and with API keys and bearer tokens blanked out (servers
//! echo a wrong key back).

use serde_json::Value;

use super::retry::{AttemptError, Cause};
use crate::ApiKey;

/// The URL without credentials, for messages and files: no user name or password, and
/// its query (where some gateways take a key) only said to be there.
pub fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            let hidden = u.query().is_some();
            u.set_query(None);
            u.set_fragment(None);
            let mut text = u.to_string();
            if hidden {
                text.push_str("?[query hidden]");
            }
            text
        }
        // Not a URL sopsim could call: shown up to where a query would begin.
        Err(_) => match url.split_once('?') {
            Some((path, _)) => format!("{path}?[query hidden]"),
            None => url.to_string(),
        },
    }
}

/// reqwest errors include the URL; print it without credentials.
pub(super) fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), &shown(url.as_str()));
    }
    s
}

/// A connection or a read that failed, worth another attempt: `what` failed, with
/// reqwest's words and cause, the URL without credentials.
pub(super) fn transport_failure(what: &str, e: reqwest::Error) -> AttemptError {
    AttemptError::retry(Cause::caused_by(
        format!("{what}: {}", without_url(&e)),
        e.without_url(),
    ))
}

/// What a server said in an error body: its message when the body is OpenAI-style
/// JSON, else the text; at most 300 characters, with API keys blanked out (servers echo
/// a wrong key back in "Incorrect API key provided: sk-…").
pub fn server_message(body: &str, key: Option<&ApiKey>) -> String {
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
fn scrub(text: &str, key: Option<&ApiKey>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_keys_are_shown_without_their_secrets() {
        assert_eq!(shown("http://user:secret@h:1/v1"), "http://h:1/v1");
        assert_eq!(
            shown("http://h:1/v1/chat/completions?token=SECRET"),
            "http://h:1/v1/chat/completions?[query hidden]"
        );
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
