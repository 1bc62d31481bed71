//! The `tools` section of a scenario: each tool's kind, description, argument schema,
//! settings, and Elysia's two rules: `run_if` (run before the decision) and
//! `available_if` (offered only when it holds). Also the pure checks of a tool's
//! settings that validation and the running tools share (argument schemas, the
//! `http` allowlist, the `mcp` command), and how a decision is asked for.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;
use url::{Host, Url};

/// The decision that answers instead of calling a tool (a `json` decision's `tool`, a
/// scripted decision).
pub const ANSWER: &str = "answer";

/// How a decision is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionFormat {
    /// The server's native tool calling (`tools`, `tool_calls`); other backends answer
    /// in JSON.
    #[default]
    Native,
    /// A JSON object `{"tool", "arguments"}` in the reply, for servers without a tool
    /// parser.
    Json,
}

/// One tool agents may call.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub kind: ToolKind,
    /// What the tool does, as the model sees it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema of the arguments; each kind has a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// The kind's settings (`file` for `json_lookup`, `allow` for `http`…; the
    /// reference's "Tool settings" lists each kind's) and how its results are shown.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub config: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_if: Option<RunIf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_if: Option<AvailableIf>,
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

    /// Whether a replay must not run it again (it reaches outside the process).
    pub fn has_side_effects(self) -> bool {
        matches!(self, ToolKind::Http | ToolKind::Mcp)
    }
}

/// Run the tool before the decision when this holds (Elysia's `run_if_true`).
/// Exactly one condition is set.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunIf {
    /// Every turn of a role that lists the tool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_turn: bool,
    /// When the latest message matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_matches: Option<String>,
    /// The arguments it runs with; `{last_message}` in a string is replaced by the
    /// latest message.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// Offer the tool only when this holds; otherwise the model sees it as unavailable,
/// with `description` as the reason.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AvailableIf {
    /// After this tool has returned a result in the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_tool: Option<String>,
    /// When the store holds results under this tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_has: Option<String>,
    /// What the model reads of the tool while it is unavailable.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

impl AvailableIf {
    /// Why the tool is not offered, as the model reads it.
    pub fn reason(&self) -> String {
        if !self.description.is_empty() {
            return self.description.clone();
        }
        match (&self.after_tool, &self.store_has) {
            (Some(t), _) => format!("available after `{t}` has returned a result"),
            (None, Some(k)) => format!("available when the store holds results of `{k}`"),
            (None, None) => "not available now".into(),
        }
    }
}

/// The tools `role` may call in `state`: the state's, then the role's own.
pub fn tools_of<'s>(state: &'s super::State, role: &str) -> Vec<&'s str> {
    let mut names: Vec<&str> = state.tools.iter().map(String::as_str).collect();
    if let Some(c) = state.components.get(role) {
        for t in &c.tools {
            if !names.contains(&t.as_str()) {
                names.push(t);
            }
        }
    }
    names
}

/// Decisions per turn for `role` in `state`.
pub fn max_tool_steps(state: &super::State, role: &str) -> u32 {
    state
        .components
        .get(role)
        .and_then(|c| c.max_tool_steps)
        .or(state.max_tool_steps)
        .unwrap_or(3)
}

/// Why a tool's argument schema cannot be used.
#[derive(Debug, Error)]
pub enum SchemaError {
    #[error("tool arguments are an object: the schema needs \"type\": \"object\"")]
    NotAnObject,
    #[error(transparent)]
    Invalid(Box<jsonschema::ValidationError<'static>>),
}

/// Compiles a JSON Schema for tool arguments.
pub fn compile_arguments_schema(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(SchemaError::NotAnObject);
    }
    jsonschema::validator_for(schema).map_err(|e| SchemaError::Invalid(Box::new(e)))
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
    #[error(
        "allow: list the URL prefixes the tool may reach, e.g. [\"http://127.0.0.1:8080/api/\"]"
    )]
    Missing,
    #[error("allow[{index}]: {text:?} is not a URL")]
    NotUrl {
        index: usize,
        text: String,
        #[source]
        source: url::ParseError,
    },
    #[error("allow[{0}]: only http and https URLs")]
    Scheme(usize),
    #[error("allow[{0}]: a prefix may not carry a user name or password")]
    Credentials(usize),
    #[error("allow[{index}]: {text:?} is not a loopback address (127.0.0.0/8, ::1, localhost)")]
    NotLoopback { index: usize, text: String },
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
/// ([`McpSettings::command`](super::McpSettings::command)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct McpCommand {
    pub program: String,
    pub args: Vec<String>,
    pub tool: String,
}

/// Why an `mcp` tool's settings cannot be used; each names the setting.
#[derive(Debug, Error)]
pub enum McpConfigError {
    #[error("command: the program that runs the MCP server")]
    NoCommand,
    #[error("tool: the name of the server's tool")]
    NoTool,
}
