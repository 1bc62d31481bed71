//! Each tool kind's settings, typed: what a tool's `config` may hold for its `kind`,
//! read once into [`ToolSettings`]. Validation reports what reading refuses, the
//! running tools use what it returns, and the format reference and the tools guide
//! list each kind's settings from these types' schemas. The checks beyond a setting's
//! type are here too: the `http` allowlist (loopback only) and the `mcp` command.
//!
//! Adding a kind is a variant of [`ToolKind`] and of [`ToolSettings`] with its
//! settings type, all here (with its arm in [`with_tool_settings!`](crate::with_tool_settings)),
//! and one new file of the runtime's `tools` module, where its settings start it and
//! it runs. Every match over the kinds is exhaustive, so the compiler names each place
//! to fill in.

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use thiserror::Error;

use url::{Host, Url};

/// A whole number from 1 to `MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpTo<const MAX: u64>(pub u64);

impl<'de, const MAX: u64> Deserialize<'de> for UpTo<MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d)?
            .as_u64()
            .filter(|n| (1..=MAX).contains(n))
            .map(UpTo)
            .ok_or_else(|| D::Error::custom(format!("expected a whole number from 1 to {MAX}")))
    }
}

impl<const MAX: u64> Serialize for UpTo<MAX> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<const MAX: u64> JsonSchema for UpTo<MAX> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("UpTo{MAX}").into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "minimum": 1, "maximum": MAX})
    }
}

/// How long a call may take: at most ten minutes.
pub type Millis = UpTo<600_000>;

/// Display field → result field, every one a name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(transparent)]
#[schemars(inline)]
pub struct FieldNames(pub IndexMap<String, String>);

impl<'de> Deserialize<'de> for FieldNames {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IndexMap::<String, String>::deserialize(d)
            .map(FieldNames)
            .map_err(|_| D::Error::custom("expected an object of field names"))
    }
}

/// How any tool's results are shown, whatever its kind (Elysia's `Result`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ResultDisplay {
    /// The name results are stored under (default: the data file's name, or the kind).
    pub name: Option<String>,
    /// Elysia's `payload_type` (default: `table` for lookups, `response` for `mcp`,
    /// `default` otherwise).
    pub payload_type: Option<String>,
    /// Display field → result field, for the viewer's and Elysia's frontend payload.
    pub mapping: Option<FieldNames>,
    /// What the model reads of a result; `{name}`, `{num_objects}`, `{total}` and the
    /// result's metadata fields are filled in.
    pub llm_message: Option<String>,
}

/// Arithmetic expressions (`evalexpr`; every number a float).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct CalculatorSettings {}

/// Dice (`sides`, `count`), seeded from the run's seed, agent, turn and step.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct DiceSettings {}

/// Filter, sort and limit the objects of a JSON array or JSONL file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct JsonLookupSettings {
    /// The JSON array or JSONL file, relative to the scenario file.
    pub file: String,
}

/// The nearest passages of a knowledge file to the model's `query`, by embedding.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct KnowledgeSettings {
    /// The knowledge file, relative to the scenario file.
    pub path: String,
    /// How many passages a lookup returns.
    #[serde(default = "three")]
    pub top_k: UpTo<50>,
}

fn three() -> UpTo<50> {
    UpTo(3)
}

/// Results already in the Environment store, by tool, name, `_REF_ID` or metadata, as
/// far as the agent may see them (Elysia's `view_environment`).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct StoreQuerySettings {
    /// The most stored objects one call shows.
    #[serde(default = "twenty")]
    pub max_objects: UpTo<1_000>,
}

fn twenty() -> UpTo<1_000> {
    UpTo(20)
}

/// JSON GET/POST to loopback addresses, only under the listed prefixes; no proxy, no
/// redirects.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct HttpSettings {
    /// The URL prefixes the tool may reach, on loopback addresses only (127.0.0.0/8,
    /// ::1, localhost).
    pub allow: Vec<String>,
    /// How long a call may take, in milliseconds.
    #[serde(default = "five_seconds")]
    pub timeout_ms: Millis,
    /// The largest response read, in bytes (at most 64 MiB).
    #[serde(default = "quarter_mib")]
    pub max_bytes: UpTo<{ 64 << 20 }>,
}

fn five_seconds() -> Millis {
    UpTo(5_000)
}

fn quarter_mib() -> UpTo<{ 64 << 20 }> {
    UpTo(256 << 10)
}

/// One tool of a Model Context Protocol server that sopsim starts (stdio), only with
/// the user's consent; its description and argument schema come from the server.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct McpSettings {
    /// The program that runs the server; it starts only if the user allows it.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The name of the server's tool.
    pub tool: String,
    /// How long starting the server, and each call, may take, in milliseconds.
    #[serde(default = "ten_seconds")]
    pub timeout_ms: Millis,
}

fn ten_seconds() -> Millis {
    UpTo(10_000)
}

/// The built-in tool kinds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Arithmetic expressions.
    Calculator,
    /// Filter, sort and limit the objects of a JSON or JSONL file.
    JsonLookup,
    /// The nearest passages of a knowledge file, by embedding.
    Knowledge,
    /// Results already in the Environment store, by tool, name, `_REF_ID` or metadata.
    StoreQuery,
    /// Dice seeded from the run's seed.
    Dice,
    /// JSON GET/POST to loopback addresses on an allowlist.
    Http,
    /// A tool of a Model Context Protocol server started as a child process.
    Mcp,
}

impl ToolKind {
    /// The kind's name, as a tool's `kind` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Calculator => "calculator",
            ToolKind::JsonLookup => "json_lookup",
            ToolKind::Knowledge => "knowledge",
            ToolKind::StoreQuery => "store_query",
            ToolKind::Dice => "dice",
            ToolKind::Http => "http",
            ToolKind::Mcp => "mcp",
        }
    }

    /// The `config` key naming the file the kind reads, if it reads one.
    pub fn file_setting(self) -> Option<&'static str> {
        match self {
            ToolKind::JsonLookup => Some("file"),
            ToolKind::Knowledge => Some("path"),
            ToolKind::Calculator
            | ToolKind::StoreQuery
            | ToolKind::Dice
            | ToolKind::Http
            | ToolKind::Mcp => None,
        }
    }
}

/// A tool's settings, read from its `kind` and `config`.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolSettings {
    /// A `calculator` tool's settings.
    Calculator(CalculatorSettings),
    /// A `json_lookup` tool's settings.
    JsonLookup(JsonLookupSettings),
    /// A `knowledge` tool's settings.
    Knowledge(KnowledgeSettings),
    /// A `store_query` tool's settings.
    StoreQuery(StoreQuerySettings),
    /// A `dice` tool's settings.
    Dice(DiceSettings),
    /// An `http` tool's settings.
    Http(HttpSettings),
    /// An `mcp` tool's settings.
    Mcp(McpSettings),
}

/// `$body` with `$settings` bound to whichever kind's settings `$value` holds.
///
/// The runtime gives each kind its behaviour by a trait its settings implement, in the
/// kind's own file; this is the one match over the kinds it needs, kept beside the
/// enum so that a new kind is its variant here and its file there.
#[macro_export]
macro_rules! with_tool_settings {
    ($value:expr, $settings:ident => $body:expr) => {
        match $value {
            $crate::scenario::ToolSettings::Calculator($settings) => $body,
            $crate::scenario::ToolSettings::JsonLookup($settings) => $body,
            $crate::scenario::ToolSettings::Knowledge($settings) => $body,
            $crate::scenario::ToolSettings::StoreQuery($settings) => $body,
            $crate::scenario::ToolSettings::Dice($settings) => $body,
            $crate::scenario::ToolSettings::Http($settings) => $body,
            $crate::scenario::ToolSettings::Mcp($settings) => $body,
        }
    };
}

/// Why a tool's `config` cannot be used; each names the setting.
#[derive(Debug, Error)]
pub enum SettingsError {
    /// A setting of the wrong type or out of range: the setting, then why.
    #[error("{0}")]
    Value(String),
    /// A setting the kind requires is not given.
    #[error("{key}: required for kind `{kind}`: {what}")]
    Missing {
        /// The setting's name.
        key: String,
        /// The tool's kind.
        kind: &'static str,
        /// What the setting is, from its description.
        what: String,
    },
    /// A setting the kind does not take.
    #[error("{key}: kind `{kind}` has no such setting{hint} (it takes: {known})")]
    Unknown {
        /// The setting's name.
        key: String,
        /// The tool's kind.
        kind: &'static str,
        /// "; did you mean …?", when a setting it takes is a typo away.
        hint: String,
        /// The settings the kind takes, comma-separated.
        known: String,
    },
    /// An `http` tool's `allow` list cannot be used.
    #[error(transparent)]
    Allow(#[from] AllowlistError),
    /// An `mcp` tool's server or tool is not named.
    #[error(transparent)]
    Mcp(#[from] McpConfigError),
}

impl ToolSettings {
    /// Reads `config` as a tool of `kind` sets it: its own settings and how its results
    /// are shown.
    pub fn read(
        kind: ToolKind,
        config: &Map<String, Value>,
    ) -> Result<(ToolSettings, ResultDisplay), SettingsError> {
        let own_schema = kind.settings_schema();
        let own_keys = properties(&own_schema);
        let shown_keys = properties(&ToolKind::display_schema());
        let (mut own, mut shown) = (Map::new(), Map::new());
        for (key, value) in config {
            let part = if shown_keys.contains(key) {
                &mut shown
            } else if own_keys.contains(key) {
                &mut own
            } else {
                let known: Vec<String> = own_keys.iter().chain(&shown_keys).cloned().collect();
                return Err(SettingsError::Unknown {
                    key: key.clone(),
                    kind: kind.as_str(),
                    hint: super::structure::closest(key, &known)
                        .map(|k| format!("; did you mean {k:?}?"))
                        .unwrap_or_default(),
                    known: known.join(", "),
                });
            };
            part.insert(key.clone(), value.clone());
        }
        for key in own_schema["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap_or_default();
            if !own.contains_key(key) {
                let what = own_schema["properties"][key]["description"].as_str();
                return Err(SettingsError::Missing {
                    key: key.to_string(),
                    kind: kind.as_str(),
                    what: what
                        .unwrap_or_default()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                });
            }
        }
        let display = typed(shown)?;
        let settings = match kind {
            ToolKind::Calculator => ToolSettings::Calculator(typed(own)?),
            ToolKind::JsonLookup => ToolSettings::JsonLookup(typed(own)?),
            ToolKind::Knowledge => ToolSettings::Knowledge(typed(own)?),
            ToolKind::StoreQuery => ToolSettings::StoreQuery(typed(own)?),
            ToolKind::Dice => ToolSettings::Dice(typed(own)?),
            ToolKind::Http => {
                let http: HttpSettings = typed(own)?;
                loopback_allowlist(&http.allow)?;
                ToolSettings::Http(http)
            }
            ToolKind::Mcp => {
                let mcp: McpSettings = typed(own)?;
                mcp.command()?;
                ToolSettings::Mcp(mcp)
            }
        };
        Ok((settings, display))
    }
}

impl McpSettings {
    /// The server to start and the tool to call.
    pub fn command(&self) -> Result<McpCommand, McpConfigError> {
        if self.command.trim().is_empty() {
            return Err(McpConfigError::NoCommand);
        }
        if self.tool.is_empty() {
            return Err(McpConfigError::NoTool);
        }
        Ok(McpCommand {
            program: self.command.clone(),
            args: self.args.clone(),
            tool: self.tool.clone(),
        })
    }
}

impl ToolKind {
    /// The JSON Schema of this kind's own settings (without [`ResultDisplay`]'s).
    pub fn settings_schema(self) -> Value {
        match self {
            ToolKind::Calculator => schemars::schema_for!(CalculatorSettings),
            ToolKind::JsonLookup => schemars::schema_for!(JsonLookupSettings),
            ToolKind::Knowledge => schemars::schema_for!(KnowledgeSettings),
            ToolKind::StoreQuery => schemars::schema_for!(StoreQuerySettings),
            ToolKind::Dice => schemars::schema_for!(DiceSettings),
            ToolKind::Http => schemars::schema_for!(HttpSettings),
            ToolKind::Mcp => schemars::schema_for!(McpSettings),
        }
        .to_value()
    }

    /// The schema of the settings every kind takes: how results are shown.
    pub fn display_schema() -> Value {
        schemars::schema_for!(ResultDisplay).to_value()
    }
}

fn properties(schema: &Value) -> Vec<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// `part` as `T`; an error names the setting, as in `timeout_ms: expected …`.
fn typed<T: DeserializeOwned>(part: Map<String, Value>) -> Result<T, SettingsError> {
    serde_path_to_error::deserialize(Value::Object(part))
        .map_err(|e| SettingsError::Value(e.to_string()))
}

/// Whether `url` names this machine by a loopback address or `localhost`.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Why an `http` tool's `config.allow` cannot be used; each names the setting.
#[derive(Debug, Error)]
pub enum AllowlistError {
    /// The list is empty.
    #[error(
        "allow: list the URL prefixes the tool may reach, e.g. [\"http://127.0.0.1:8080/api/\"]"
    )]
    Missing,
    /// An entry is not a URL.
    #[error("allow[{index}]: {text:?} is not a URL")]
    NotUrl {
        /// The entry's position in the list, from 0.
        index: usize,
        /// The entry as written.
        text: String,
        /// Why it does not parse as a URL.
        #[source]
        source: url::ParseError,
    },
    /// An entry's scheme is neither `http` nor `https`; its position, from 0.
    #[error("allow[{0}]: only http and https URLs")]
    Scheme(usize),
    /// An entry carries a user name or password; its position, from 0.
    #[error("allow[{0}]: a prefix may not carry a user name or password")]
    Credentials(usize),
    /// An entry names a host that is not a loopback address.
    #[error("allow[{index}]: {text:?} is not a loopback address (127.0.0.0/8, ::1, localhost)")]
    NotLoopback {
        /// The entry's position in the list, from 0.
        index: usize,
        /// The entry as written.
        text: String,
    },
}

/// An `http` tool's `config.allow`: URL prefixes on loopback addresses only.
pub fn loopback_allowlist(list: &[String]) -> Result<Vec<Url>, AllowlistError> {
    if list.is_empty() {
        return Err(AllowlistError::Missing);
    }
    let mut allow = Vec::new();
    for (index, text) in list.iter().enumerate() {
        let url = Url::parse(text).map_err(|source| AllowlistError::NotUrl {
            index,
            text: text.to_string(),
            source,
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(AllowlistError::Scheme(index));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(AllowlistError::Credentials(index));
        }
        if !is_loopback(&url) {
            return Err(AllowlistError::NotLoopback {
                index,
                text: text.to_string(),
            });
        }
        allow.push(url);
    }
    Ok(allow)
}

/// An `mcp` tool's server: `config.command`, `config.args`, and the server's `tool`
/// ([`McpSettings::command`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct McpCommand {
    /// The program that runs the server (`config.command`).
    pub program: String,
    /// The program's arguments (`config.args`).
    pub args: Vec<String>,
    /// The name of the server's tool to call (`config.tool`).
    pub tool: String,
}

/// Why an `mcp` tool's settings cannot be used; each names the setting.
#[derive(Debug, Error)]
pub enum McpConfigError {
    /// `command` is empty or blank.
    #[error("command: the program that runs the MCP server")]
    NoCommand,
    /// `tool` is empty.
    #[error("tool: the name of the server's tool")]
    NoTool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(kind: ToolKind, config: Value) -> Result<ToolSettings, String> {
        ToolSettings::read(kind, config.as_object().unwrap())
            .map(|(s, _)| s)
            .map_err(|e| crate::error_chain::chain(&e))
    }

    #[test]
    fn a_kind_takes_its_settings_with_their_defaults() {
        let Ok(ToolSettings::Http(http)) = read(
            ToolKind::Http,
            json!({"allow": ["http://127.0.0.1:8080/api/"], "name": "weather"}),
        ) else {
            panic!("an http tool");
        };
        assert_eq!((http.timeout_ms.0, http.max_bytes.0), (5_000, 256 << 10));
        let Ok(ToolSettings::Knowledge(k)) = read(ToolKind::Knowledge, json!({"path": "k.json"}))
        else {
            panic!("a knowledge tool");
        };
        assert_eq!(k.top_k, UpTo(3));
    }

    #[test]
    fn a_setting_out_of_range_or_of_another_kind_is_named() {
        assert_eq!(
            read(ToolKind::StoreQuery, json!({"max_objects": "abc"})).unwrap_err(),
            "max_objects: expected a whole number from 1 to 1000"
        );
        assert_eq!(
            read(
                ToolKind::Mcp,
                json!({"command": "x", "tool": "y", "timeout_ms": 600_001})
            )
            .unwrap_err(),
            "timeout_ms: expected a whole number from 1 to 600000"
        );
        assert_eq!(
            read(ToolKind::Dice, json!({"mapping": "x"})).unwrap_err(),
            "mapping: expected an object of field names"
        );
        assert_eq!(
            read(ToolKind::Calculator, json!({"max_objects": 5})).unwrap_err(),
            "max_objects: kind `calculator` has no such setting \
             (it takes: name, payload_type, mapping, llm_message)"
        );
        assert_eq!(
            read(
                ToolKind::JsonLookup,
                json!({"file": "f.json", "payload_typ": "table"})
            )
            .unwrap_err(),
            "payload_typ: kind `json_lookup` has no such setting; did you mean \"payload_type\"? \
             (it takes: file, name, payload_type, mapping, llm_message)"
        );
        assert_eq!(
            read(
                ToolKind::Mcp,
                json!({"command": "x", "tool": "y", "args": [1]})
            )
            .unwrap_err(),
            "args[0]: invalid type: integer `1`, expected a string"
        );
    }

    #[test]
    fn an_http_tool_reaches_only_this_machine_and_an_mcp_tool_names_its_program() {
        assert_eq!(
            read(ToolKind::Http, json!({})).unwrap_err(),
            "allow: required for kind `http`: The URL prefixes the tool may reach, on loopback \
             addresses only (127.0.0.0/8, ::1, localhost)."
        );
        assert!(read(ToolKind::Http, json!({"allow": []}))
            .unwrap_err()
            .starts_with("allow: list the URL prefixes"));
        assert!(
            read(ToolKind::Http, json!({"allow": ["http://192.168.1.1/"]}))
                .unwrap_err()
                .contains("is not a loopback address")
        );
        assert_eq!(
            read(ToolKind::Mcp, json!({"command": " ", "tool": "y"})).unwrap_err(),
            "command: the program that runs the MCP server"
        );
    }
}
