//! The decision agent's pure logic, after Elysia's `Tree.async_run`: which tools are
//! offered and which not (with why), which run before the decision, what the decision
//! prompt shows (the step counter, previous errors, tasks completed, the visible
//! environment), reading the model's decision, and the self-healing error texts.

use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use super::{cut, Tool};
use crate::scenario::DecisionFormat;
use sopsim_core::prompt::ChatMessage;
pub use sopsim_core::tool_results::{error_line, render_environment};

pub use crate::scenario::ANSWER;

/// One tool run this turn, as later decisions see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The tool's name.
    pub tool: String,
    /// The arguments it was called with, on one line (cut at 500 characters).
    pub arguments: String,
    /// The result's `llm_parse` text, or the error.
    pub parsed: String,
    /// Whether the call failed.
    pub error: bool,
}

/// The tools offered now, and the ones held back with the reason the model is shown.
pub struct Availability<'t> {
    /// The tools offered.
    pub available: Vec<&'t Tool>,
    /// The tools held back, each with the reason the model is shown.
    pub unavailable: Vec<(&'t Tool, String)>,
}

/// Splits `tools` by their `available_if` rules. `has_run(tool)`: the tool returned a
/// result in this run; `store_has(tool)`: the store holds results under that name.
pub fn availability<'t>(
    tools: &[&'t Tool],
    has_run: impl Fn(&str) -> bool,
    store_has: impl Fn(&str) -> bool,
) -> Availability<'t> {
    let mut a = Availability {
        available: Vec::new(),
        unavailable: Vec::new(),
    };
    for t in tools {
        let open = match &t.spec.available_if {
            None => true,
            Some(rule) => {
                rule.after_tool.as_deref().is_none_or(&has_run)
                    && rule.store_has.as_deref().is_none_or(&store_has)
            }
        };
        if open {
            a.available.push(t);
        } else {
            let why = t
                .spec
                .available_if
                .as_ref()
                .map(|r| r.reason())
                .unwrap_or_default();
            a.unavailable.push((t, why));
        }
    }
    a
}

/// The tools whose `run_if` holds before this turn's first decision, with the
/// arguments they run with.
pub fn auto_runs<'t>(tools: &[&'t Tool], last_message: Option<&str>) -> Vec<(&'t Tool, String)> {
    tools
        .iter()
        .filter_map(|t| {
            let rule = t.spec.run_if.as_ref()?;
            let fires = rule.every_turn
                || rule.last_message_matches.as_deref().is_some_and(|p| {
                    last_message
                        .is_some_and(|m| regex::Regex::new(p).is_ok_and(|re| re.is_match(m)))
                });
            fires.then(|| {
                let args = with_last_message(&rule.arguments, last_message.unwrap_or(""));
                (*t, Value::Object(args).to_string())
            })
        })
        .collect()
}

/// `{last_message}` in string arguments replaced by the latest message.
fn with_last_message(args: &Map<String, Value>, last: &str) -> Map<String, Value> {
    args.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => Value::String(s.replace("{last_message}", last)),
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// What a decision prompt shows besides the role's own prompt.
pub struct DecisionView<'a> {
    /// The decision's number within the turn (from 1).
    pub step: u32,
    /// The most decisions a turn may take.
    pub max_steps: u32,
    /// The tools offered.
    pub available: &'a [&'a Tool],
    /// The tools held back, each with its reason.
    pub unavailable: &'a [(&'a Tool, String)],
    /// Error lines of this turn's earlier calls, by tool.
    pub errors: &'a IndexMap<String, Vec<String>>,
    /// The tools run this turn so far.
    pub tasks: &'a [Task],
    /// The visible store, rendered by [`render_environment`].
    pub environment: &'a str,
    /// How the model is asked to decide: native tool calls or a JSON object.
    pub format: DecisionFormat,
}

/// The decision prompt: the role's prompt, then the tools, the step counter, errors,
/// tasks completed and the environment, then how to answer.
pub fn decision_messages(base: &[ChatMessage], view: &DecisionView<'_>) -> Vec<ChatMessage> {
    let mut messages = base.to_vec();
    let mut text = String::from(
        "Before you reply you may use tools. Decide whether to call one of the available tools or to answer now.\n",
    );
    text.push_str("\nAvailable tools:\n");
    for t in view.available {
        text.push_str(&format!(
            "- {}: {}\n  arguments: {}\n",
            t.name,
            t.spec.description,
            describe_schema(&t.parameters)
        ));
    }
    if !view.unavailable.is_empty() {
        text.push_str("\nUnavailable tools:\n");
        for (t, why) in view.unavailable {
            text.push_str(&format!(
                "- {}: {} (unavailable: {why})\n",
                t.name, t.spec.description
            ));
        }
    }
    let last = view.step == view.max_steps;
    text.push_str(&format!(
        "\nDecision {} of {}{}.\n",
        view.step,
        view.max_steps,
        if last {
            " (this is the last decision before you must reply)"
        } else {
            ""
        }
    ));
    if !view.errors.is_empty() {
        text.push_str("\nPrevious errors:\n");
        for (tool, lines) in view.errors {
            for l in lines {
                text.push_str(&format!("- {tool}: {l}\n"));
            }
        }
    }
    if !view.tasks.is_empty() {
        text.push_str("\nTasks completed this turn:\n");
        for (i, t) in view.tasks.iter().enumerate() {
            let outcome = if t.error {
                "(UNSUCCESSFUL) There was an error during this tool call. See the error messages for details."
            } else {
                "(SUCCESSFUL)"
            };
            text.push_str(&format!(
                "{}. {} {} {outcome}\n   {}\n",
                i + 1,
                t.tool,
                t.arguments,
                t.parsed
            ));
        }
    }
    if !view.environment.is_empty() {
        text.push_str("\nEnvironment (results stored so far):\n");
        text.push_str(view.environment);
        text.push('\n');
    }
    messages.push(ChatMessage::system(text));
    let ask = match view.format {
        DecisionFormat::Native => {
            "Call a tool if you need one; otherwise answer without calling any.".to_string()
        }
        DecisionFormat::Json => format!(
            "Answer with one JSON object and nothing else: {{\"tool\": \"<tool name>\", \"arguments\": {{...}}}} to call a tool, or {{\"tool\": \"{ANSWER}\"}} to reply now."
        ),
    };
    messages.push(ChatMessage::user(ask));
    messages
}

/// Characters of one tool's argument description in a decision prompt.
const MAX_ARGUMENTS_TEXT: usize = 1200;
/// Values of an enumeration listed before the rest are elided.
const MAX_LISTED: usize = 16;

/// A tool's argument schema as a decision prompt shows it: compact, e.g. `{search?:
/// <text>, limit?: <integer 1–50>}` (`?`: optional). Native tool calls and the local
/// model's constrained decoding get the schema itself; the prompt needs only the gist.
pub fn describe_schema(schema: &Value) -> String {
    cut(&describe(schema, 0), MAX_ARGUMENTS_TEXT)
}

fn describe(s: &Value, depth: usize) -> String {
    if depth > 6 {
        return "…".into();
    }
    if let Some(c) = s.get("const") {
        return c.to_string();
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        let mut shown: Vec<String> = values
            .iter()
            .take(MAX_LISTED)
            .map(Value::to_string)
            .collect();
        if values.len() > MAX_LISTED {
            shown.push("…".into());
        }
        return format!("one of {}", shown.join("|"));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = s.get(key).and_then(Value::as_array) {
            return alts
                .iter()
                .map(|a| describe(a, depth + 1))
                .collect::<Vec<_>>()
                .join(" | ");
        }
    }
    let range = || match (s.get("minimum"), s.get("maximum")) {
        (Some(a), Some(b)) => format!(" {a}–{b}"),
        (Some(a), None) => format!(" ≥ {a}"),
        (None, Some(b)) => format!(" ≤ {b}"),
        (None, None) => String::new(),
    };
    let kind = |t: &str| match t {
        "object" => {
            let required: Vec<&str> = s["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let props: Vec<String> = s["properties"]
                .as_object()
                .map(|p| {
                    p.iter()
                        .map(|(k, v)| {
                            let opt = if required.contains(&k.as_str()) {
                                ""
                            } else {
                                "?"
                            };
                            format!("{k}{opt}: {}", describe(v, depth + 1))
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!("{{{}}}", props.join(", "))
        }
        "array" => format!("[{}, …]", describe(&s["items"], depth + 1)),
        "string" => "text".into(),
        "integer" => format!("integer{}", range()),
        "number" => format!("number{}", range()),
        "boolean" => "true or false".into(),
        "null" => "null".into(),
        other => other.to_string(),
    };
    // Placeholders in angle brackets, so that a small model does not copy them as values.
    let placeholder = |t: &str| match t {
        "object" | "array" => kind(t),
        _ => format!("<{}>", kind(t)),
    };
    match &s["type"] {
        Value::String(t) => placeholder(t),
        Value::Array(ts) => {
            let kinds: Vec<String> = ts.iter().filter_map(Value::as_str).map(kind).collect();
            format!("<{}>", kinds.join(" or "))
        }
        _ if s.get("properties").is_some() => kind("object"),
        _ => "<any JSON>".into(),
    }
}

/// The JSON Schema of a `json` decision: a call of one of `available` with its
/// arguments, or the answer.
pub fn decision_schema(available: &[&Tool]) -> Value {
    let mut any_of: Vec<Value> = available
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"tool": {"const": t.name}, "arguments": t.parameters},
                "required": ["tool", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    any_of.push(json!({
        "type": "object",
        "properties": {"tool": {"const": ANSWER}},
        "required": ["tool"],
        "additionalProperties": false,
    }));
    json!({"anyOf": any_of})
}

/// A decision read from a model's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Call a tool.
    Call {
        /// The tool's name.
        name: String,
        /// Its arguments, as JSON text (`{}` when none were given).
        arguments: String,
    },
    /// Answer now, calling no tool.
    Answer,
    /// Not a decision; the text says why.
    Unreadable(String),
}

/// Reads a `json` decision: the first JSON object in `text` (models wrap it in code
/// fences or prose). `tool` missing, null or `answer` means answer; `reply` alone too.
pub fn read_decision(text: &str) -> Decided {
    let Some(obj) = first_object(text) else {
        return Decided::Unreadable(format!(
            "no JSON object in the decision: {}",
            cut(text.trim(), 200)
        ));
    };
    match obj.get("tool") {
        None | Some(Value::Null) => Decided::Answer,
        Some(Value::String(t)) if t.eq_ignore_ascii_case(ANSWER) || t.is_empty() => Decided::Answer,
        Some(Value::String(t)) => Decided::Call {
            name: t.clone(),
            arguments: obj
                .get("arguments")
                .map_or_else(|| "{}".to_string(), Value::to_string),
        },
        Some(other) => Decided::Unreadable(format!("\"tool\" must be a tool name, not {other}")),
    }
}

fn first_object(text: &str) -> Option<Map<String, Value>> {
    for (i, _) in text.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(o))) = stream.next() {
            return Some(o);
        }
    }
    None
}

/// What the reply prompt adds after this turn's tool calls: each result, so the
/// agent's reply can build on them.
pub fn results_for_reply(tasks: &[Task], objects: &[String]) -> Option<String> {
    if tasks.is_empty() {
        return None;
    }
    let mut text = format!("{}\n", sopsim_core::prompt::TOOL_FACTS_NOTE);
    for t in tasks {
        text.push_str(&format!("- {} {}: {}\n", t.tool, t.arguments, t.parsed));
    }
    for o in objects {
        text.push_str(o);
        text.push('\n');
    }
    Some(text.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_read_from_wrapped_json() {
        assert_eq!(
            read_decision("Sure!\n```json\n{\"tool\": \"calc\", \"arguments\": {\"expression\": \"1+1\"}}\n```"),
            Decided::Call { name: "calc".into(), arguments: "{\"expression\":\"1+1\"}".into() }
        );
        assert_eq!(read_decision("{\"tool\": \"answer\"}"), Decided::Answer);
        assert_eq!(
            read_decision("{\"tool\": null, \"reply\": \"hi\"}"),
            Decided::Answer
        );
        assert!(matches!(
            read_decision("I will answer now."),
            Decided::Unreadable(_)
        ));
        assert!(matches!(
            read_decision("{\"tool\": 3}"),
            Decided::Unreadable(_)
        ));
        assert_eq!(
            read_decision("{\"tool\": \"calc\"}"),
            Decided::Call {
                name: "calc".into(),
                arguments: "{}".into()
            }
        );
    }

    #[test]
    fn argument_schemas_are_described_compactly() {
        let schema = json!({"type": "object", "properties": {
            "expression": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "filters": {"type": "array", "items": {"anyOf": [
                {"type": "object", "properties": {"field": {"const": "price"}, "op": {"enum": ["min", "max"]}, "value": {"type": "number"}}, "required": ["field", "op", "value"]},
                {"type": "object", "properties": {"field": {"const": "tags"}, "value": {"type": ["string", "number"]}}}
            ]}}
        }, "required": ["expression"]});
        assert_eq!(
            describe_schema(&schema),
            "{expression: <text>, limit?: <integer 1–50>, filters?: [{field: \"price\", op: one of \"min\"|\"max\", value: <number>} | {field?: \"tags\", value?: <text or number>}, …]}"
        );
    }
}
