//! The `tools` section of a scenario: each tool's kind, description, argument schema,
//! settings, and Elysia's two rules: `run_if` (run before the decision) and
//! `available_if` (offered only when it holds), argument schemas, and how a decision
//! is asked for. Each kind's settings are in `tool_settings.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

use super::tool_settings::ToolKind;

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
    /// The tool's kind: what it does, and which `config` settings it takes.
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
    /// Run the tool, with set arguments, before the turn's first decision when this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_if: Option<RunIf>,
    /// Offer the tool only when this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_if: Option<AvailableIf>,
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
    /// The schema does not say `"type": "object"`.
    #[error("tool arguments are an object: the schema needs \"type\": \"object\"")]
    NotAnObject,
    /// The schema is not a valid JSON Schema.
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
