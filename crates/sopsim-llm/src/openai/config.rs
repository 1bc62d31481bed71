//! Where the server is and how to reach it: [`OpenAiOptions`], and what a base URL
//! says (its canonical `/v1` form, whether it carried credentials, whether it is
//! OpenAI's own API).

use std::time::Duration;

use super::retry::RetryPolicy;
use crate::ApiKey;

/// Where and how to reach the server.
#[derive(Debug, Clone)]
pub struct OpenAiOptions {
    /// With or without a trailing `/v1`.
    pub base_url: String,
    /// The key sent as a bearer token in the `Authorization` header (`None`: no key).
    pub api_key: Option<ApiKey>,
    /// The model when a request names none; `None`: ask the server
    /// ([`super::OpenAiBackend::discover_model`]).
    pub model: Option<String>,
    /// Stream agents' replies (SSE). Controller, judge and summary answers are short and
    /// shown whole, so they are always asked for in one piece.
    pub stream: bool,
    /// Longest wait for a connection to the server.
    pub connect_timeout: Duration,
    /// Longest silence while waiting for a response or the next piece of a streamed
    /// reply (keep-alive comments are not pieces).
    pub read_timeout: Duration,
    /// Longest a model call may take, its retries and waits included.
    pub deadline: Duration,
    /// When failed requests are tried again, and how long to wait between attempts.
    pub retry: RetryPolicy,
    /// Requests in flight at once through one backend, and so from every run that
    /// shares it (at least one).
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
            deadline: Duration::from_secs(600),
            retry: RetryPolicy::default(),
            concurrency: 8,
        }
    }
}

/// `http://host:8000`, `http://host:8000/` and `http://host:8000/v1` all become
/// `http://host:8000/v1`. A query (a gateway's key or version) stays at the end:
/// `http://host/v1/?key=K` becomes `http://host/v1?key=K`.
pub fn normalize_base(base: &str) -> String {
    let base = base.trim();
    let (path, query) = match base.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (base, None),
    };
    let trimmed = path.trim_end_matches('/');
    let path = if trimmed.ends_with("/v1") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1")
    };
    match query {
        Some(q) if !q.is_empty() => format!("{path}?{q}"),
        _ => path,
    }
}

/// The URL of `route` (`chat/completions`, `models`…) under a normalised base URL,
/// before the base's query.
pub fn route(base: &str, route: &str) -> String {
    match base.split_once('?') {
        Some((path, query)) => format!("{path}/{route}?{query}"),
        None => format!("{base}/{route}"),
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

/// Whether `endpoint` is OpenAI's own API, whose limits and model list differ from
/// the servers that copy its protocol.
pub(super) fn is_openai(endpoint: &str) -> bool {
    reqwest::Url::parse(endpoint)
        .ok()
        .and_then(|u| {
            u.host_str()
                .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
        })
        .unwrap_or(false)
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
    }

    #[test]
    fn a_query_stays_at_the_end_of_every_route() {
        let base = normalize_base("http://h:8000/v1/?token=S");
        assert_eq!(base, "http://h:8000/v1?token=S");
        assert_eq!(
            route(&base, "chat/completions"),
            "http://h:8000/v1/chat/completions?token=S"
        );
        assert_eq!(route("http://h/v1", "models"), "http://h/v1/models");
        assert_eq!(normalize_base("http://h?"), "http://h/v1");
    }

    #[test]
    fn openai_is_told_apart_from_servers_copying_its_protocol() {
        assert!(is_openai("https://api.openai.com/v1") && !is_openai("http://127.0.0.1:8000/v1"));
    }
}
