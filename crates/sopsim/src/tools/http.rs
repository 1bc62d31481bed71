//! The `http` tool: JSON GET/POST to loopback addresses only (127.0.0.0/8, ::1,
//! localhost), and only to the scheme, port and path prefixes `config.allow` lists.
//! Anything else is refused before a connection is opened. No proxy, no redirects, a
//! timeout and a cap on the response size.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use sopsim_core::scenario::tool_settings::HttpSettings;
use sopsim_core::scenario::{is_loopback, loopback_allowlist};
use url::{Host, Url};

use super::kind::{Kind, Start};
use super::{ResultObject, RunsIn, SettingsError, Setup, Tool, ToolFailure, ToolSetupError};
use sopsim_core::error_chain::chain;

/// A checked `http` configuration.
#[derive(Debug, Clone)]
pub struct Http {
    allow: Vec<Url>,
    timeout: Duration,
    max_bytes: u64,
    /// Made at the first call and shared by every call after it (its connections
    /// with it); why it could not be made, if it could not.
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl Start for HttpSettings {
    async fn start(self, setup: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
        let http =
            Http::new(&self).map_err(|e| setup.error(&["config"], SettingsError::from(e)))?;
        Ok(Box::new(http))
    }
}

impl Kind for Http {
    fn parameters(&self) -> Value {
        parameters()
    }

    fn runs_in(&self) -> RunsIn<'_> {
        RunsIn::Outside
    }

    fn payload_type(&self) -> &'static str {
        "table"
    }

    fn run_outside<'a>(
        &'a self,
        tool: &'a Tool,
        args: &'a Map<String, Value>,
    ) -> Option<BoxFuture<'a, Result<ResultObject, ToolFailure>>> {
        Some(Box::pin(async move {
            let objects = self.run(args).await?;
            let n = objects.len();
            Ok(tool.result(objects, n))
        }))
    }
}

/// The JSON schema of the tool's arguments: a `url`, and optionally a `method` and a JSON `body`.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "a URL under one of the allowed prefixes", "maxLength": 2000},
            "method": {"enum": ["GET", "POST"]},
            "body": {"type": "object", "description": "the JSON body of a POST"},
        },
        "required": ["url"],
        "additionalProperties": false,
    })
}

impl Http {
    /// The tool its settings describe; the error names the `allow` entry at fault.
    pub fn new(settings: &HttpSettings) -> Result<Http, crate::scenario::AllowlistError> {
        Ok(Http {
            allow: loopback_allowlist(&settings.allow)?,
            timeout: Duration::from_millis(settings.timeout_ms.0),
            max_bytes: settings.max_bytes.0,
            client: std::sync::OnceLock::new(),
        })
    }

    /// The client every call shares: no proxy, no redirects, and the allowed names
    /// (`localhost`) pinned to 127.0.0.1 rather than trusted to the resolver, whatever
    /// port a URL names.
    fn client(&self) -> Result<&reqwest::Client, ToolFailure> {
        let made = self.client.get_or_init(|| {
            let mut client = reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(self.timeout);
            for allowed in &self.allow {
                if let Some(Host::Domain(d)) = allowed.host() {
                    // Port 0: the URL's own port is the one used.
                    client = client.resolve(d, (IpAddr::V4(Ipv4Addr::LOCALHOST), 0).into());
                }
            }
            client.build().map_err(|e| e.to_string())
        });
        made.as_ref()
            .map_err(|e| ToolFailure::unknown(format!("the HTTP client could not start: {e}")))
    }

    /// The URL to call, if the allowlist permits it; otherwise why not.
    pub fn permit(&self, text: &str) -> Result<Url, ToolFailure> {
        let url = Url::parse(text).map_err(|e| {
            ToolFailure::avoidable(format!("{:?} is not a URL: {e}", super::cut(text, 200)))
        })?;
        // Credentials never travel in a tool's URL, and are never repeated back.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ToolFailure::avoidable(
                "the URL carries a user name or password; call it without them",
            ));
        }
        let allowed: Vec<&str> = self.allow.iter().map(Url::as_str).collect();
        if !is_loopback(&url) {
            return Err(ToolFailure::avoidable(format!(
                "{text:?} is not on this machine; only loopback addresses may be called: {}",
                allowed.join(", ")
            )));
        }
        let path = decoded_path(&url)
            .map_err(|why| ToolFailure::avoidable(format!("{:?} {why}", super::cut(text, 200))))?;
        let permitted = self.allow.iter().any(|a| {
            a.scheme() == url.scheme()
                && a.host() == url.host()
                && a.port_or_known_default() == url.port_or_known_default()
                && decoded_path(a).is_ok_and(|prefix| path.starts_with(&prefix))
        });
        if !permitted {
            return Err(ToolFailure::avoidable(format!(
                "{text:?} is not under an allowed prefix: {}",
                allowed.join(", ")
            )));
        }
        Ok(url)
    }

    /// Calls `args.url` and returns the JSON it answers as objects.
    pub async fn run(
        &self,
        args: &Map<String, Value>,
    ) -> Result<Vec<Map<String, Value>>, ToolFailure> {
        let url = self.permit(args.get("url").and_then(Value::as_str).unwrap_or_default())?;
        let post = args.get("method").and_then(Value::as_str) == Some("POST");
        let client = self.client()?;
        let request = if post {
            client
                .post(url.clone())
                .json(args.get("body").unwrap_or(&Value::Object(Map::new())))
        } else {
            client.get(url.clone())
        };
        let mut response = request
            .send()
            .await
            .map_err(|e| ToolFailure::unknown(format!("{url}: {}", chain(&e.without_url()))))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ToolFailure::unknown(format!("{url}: {}", chain(&e.without_url()))))?
        {
            if (body.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(ToolFailure::unknown(format!(
                    "{url}: the response is larger than {} bytes",
                    self.max_bytes
                )));
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let said: String = String::from_utf8_lossy(&body).chars().take(200).collect();
            let message = format!("{url}: HTTP {status}: {said}");
            return Err(if status.is_client_error() {
                ToolFailure::avoidable(message)
            } else {
                ToolFailure::unknown(message)
            });
        }
        let value: Value = serde_json::from_slice(&body)
            .map_err(|e| ToolFailure::unknown(format!("{url}: the response is not JSON: {e}")))?;
        Ok(match value {
            Value::Object(o) => vec![o],
            Value::Array(items) if items.iter().all(Value::is_object) => items
                .into_iter()
                .filter_map(|v| match v {
                    Value::Object(o) => Some(o),
                    _ => None,
                })
                .collect(),
            other => {
                let mut o = Map::new();
                o.insert("value".into(), other);
                vec![o]
            }
        })
    }
}

/// `url`'s path percent-decoded once, as the server will read it; refused if it holds
/// an encoded separator (`%2F`, `%5C`) or, decoded, a `.` or `..` segment, which a
/// server could resolve above the allowed prefix (`/api/..%2Fadmin`).
fn decoded_path(url: &Url) -> Result<String, &'static str> {
    let raw = url.path().to_ascii_lowercase();
    if raw.contains("%2f") || raw.contains("%5c") {
        return Err("has an encoded path separator");
    }
    let path = percent_encoding::percent_decode_str(url.path())
        .decode_utf8()
        .map_err(|_| "has a path that is not UTF-8 once decoded")?;
    if path.split('/').any(|s| s == "." || s == "..") {
        return Err("climbs out of its folder once decoded");
    }
    Ok(path.into_owned())
}

#[cfg(test)]
mod tests {
    use sopsim_core::scenario::{ToolKind, ToolSettings};

    use super::*;

    fn from_config(config: Value) -> Result<Http, String> {
        match ToolSettings::read(ToolKind::Http, config.as_object().unwrap()) {
            Ok((ToolSettings::Http(settings), _)) => {
                Http::new(&settings).map_err(|e| e.to_string())
            }
            Ok(_) => unreachable!("an http tool's settings"),
            Err(e) => Err(e.to_string()),
        }
    }

    fn http() -> Http {
        from_config(json!({"allow": ["http://127.0.0.1:8765/api/", "http://localhost:9000/"]}))
            .unwrap()
    }

    #[test]
    fn only_allowed_loopback_prefixes_are_permitted() {
        let h = http();
        assert!(h.permit("http://127.0.0.1:8765/api/items?q=1").is_ok());
        assert!(h.permit("http://localhost:9000/x").is_ok());
        assert!(h.permit("http://127.0.0.1:8765/api/caf%C3%A9").is_ok());
        for refused in [
            "http://10.0.0.1:8765/api/",
            "http://example.com/api/",
            "http://127.0.0.1:8766/api/",
            "http://127.0.0.1:8765/admin",
            "https://127.0.0.1:8765/api/",
            "file:///etc/passwd",
            "not a url",
            "http://user:secret@127.0.0.1:8765/api/x",
            "http://127.0.0.1:8765/api/..%2fadmin",
            "http://127.0.0.1:8765/api/..%2Fadmin",
            "http://127.0.0.1:8765/api/%2e%2e/admin",
            "http://127.0.0.1:8765/api/..%5cadmin",
            "http://127.0.0.1:8765/%61dmin",
        ] {
            assert!(h.permit(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn configs_naming_other_machines_are_refused() {
        for bad in [
            json!({}),
            json!({"allow": []}),
            json!({"allow": ["http://192.168.1.1/"]}),
            json!({"allow": ["ftp://127.0.0.1/"]}),
        ] {
            assert!(from_config(bad.clone()).is_err(), "{bad}");
        }
    }
}
