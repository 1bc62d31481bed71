//! A server's API key, kept out of every message: its `Debug` is redacted, and only the
//! HTTP `Authorization` header reads it. Defined apart from the OpenAI backend so that
//! options can carry one in builds without it.

/// An API key. Its `Debug` output is redacted so it cannot leak through logs.
#[derive(Clone)]
pub struct ApiKey(
    // Read only by the servers' clients, which a build without `openai` leaves out.
    #[cfg_attr(not(feature = "openai"), allow(dead_code))] String,
);

impl ApiKey {
    /// A key from `key`, trimmed of surrounding whitespace; `None` when nothing is left.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        (!key.trim().is_empty()).then(|| Self(key.trim().to_string()))
    }

    /// The key itself, for the `Authorization` header and nothing else.
    #[cfg(feature = "openai")]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(redacted)")
    }
}
