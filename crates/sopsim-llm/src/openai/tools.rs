//! Native tool calling in the chat-completions API: the `tools` definitions, a turn's
//! earlier calls as `assistant` `tool_calls` and `tool` messages, and reading the
//! calls a reply makes, whole or streamed as `index`ed deltas.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::{ToolCall, ToolDef, ToolExchange};

/// Most calls read from one reply; the rest are ignored.
const MAX_CALLS: usize = 16;

pub(super) fn definitions(tools: &[ToolDef]) -> Value {
    Value::Array(
        tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect(),
    )
}

/// Each earlier call as the assistant message that made it and the tool's answer.
pub(super) fn exchange_messages(exchange: &[ToolExchange]) -> Vec<Value> {
    exchange
        .iter()
        .flat_map(|e| {
            [
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": e.call.id, "type": "function",
                    "function": {"name": e.call.name, "arguments": e.call.arguments},
                }]}),
                json!({"role": "tool", "tool_call_id": e.call.id, "content": e.result}),
            ]
        })
        .collect()
}

/// The calls of a whole `message.tool_calls`; entries without a name are skipped.
pub(super) fn read_calls(v: &Value) -> Vec<ToolCall> {
    let Some(items) = v.as_array() else {
        return Vec::new();
    };
    items
        .iter()
        .take(MAX_CALLS)
        .enumerate()
        .filter_map(|(i, c)| {
            let f = &c["function"];
            Some(ToolCall {
                id: c["id"]
                    .as_str()
                    .map_or_else(|| format!("call_{i}"), String::from),
                name: f["name"].as_str()?.to_string(),
                arguments: arguments_text(&f["arguments"]),
            })
        })
        .collect()
}

/// Servers send arguments as a JSON string; some send the object itself.
fn arguments_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Calls assembled from streamed `delta.tool_calls`: the first delta of a call brings
/// its `index`, `id` and name, later ones pieces of its arguments.
#[derive(Default)]
pub(super) struct StreamedCalls {
    calls: BTreeMap<u64, ToolCall>,
}

impl StreamedCalls {
    pub(super) fn push(&mut self, deltas: &Value) {
        let Some(items) = deltas.as_array() else {
            return;
        };
        for (pos, d) in items.iter().enumerate() {
            let index = d["index"].as_u64().unwrap_or(pos as u64);
            if !self.calls.contains_key(&index) && self.calls.len() >= MAX_CALLS {
                continue;
            }
            let call = self.calls.entry(index).or_insert_with(|| ToolCall {
                id: format!("call_{index}"),
                name: String::new(),
                arguments: String::new(),
            });
            if let Some(id) = d["id"].as_str() {
                call.id = id.to_string();
            }
            let f = &d["function"];
            if let Some(name) = f["name"].as_str() {
                call.name.push_str(name);
            }
            call.arguments.push_str(&arguments_text(&f["arguments"]));
        }
    }

    pub(super) fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_values()
            .filter(|c| !c.name.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_deltas_are_joined_by_index() {
        let mut s = StreamedCalls::default();
        s.push(&json!([{"index": 0, "id": "a", "function": {"name": "calc", "arguments": ""}}]));
        s.push(&json!([{"index": 1, "id": "b", "function": {"name": "dice", "arguments": "{}"}}]));
        s.push(&json!([{"index": 0, "function": {"arguments": "{\"expression\":"}}]));
        s.push(&json!([{"index": 0, "function": {"arguments": "\"1+1\"}"}}]));
        let calls = s.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("a", "calc")
        );
        assert_eq!(calls[0].arguments, "{\"expression\":\"1+1\"}");
        assert_eq!(calls[1].name, "dice");
    }

    #[test]
    fn whole_calls_are_read_with_string_or_object_arguments() {
        let calls = read_calls(&json!([
            {"id": "x", "type": "function", "function": {"name": "calc", "arguments": "{\"expression\":\"2\"}"}},
            {"id": "y", "type": "function", "function": {"name": "calc", "arguments": {"expression": "3"}}},
            {"id": "z", "type": "function", "function": {}},
        ]));
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].arguments, "{\"expression\":\"3\"}");
    }
}
