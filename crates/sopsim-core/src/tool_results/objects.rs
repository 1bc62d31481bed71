//! Elysia's return objects (seeds 001 and 003): `Result`, `Text`, `Status`, `Warning`,
//! `Error` and `Completed`, with `to_json`, `to_frontend` and `llm_parse`.
//!
//! The frontend envelope is `{type, user_id, conversation_id, query_id, id, payload}`;
//! ids are `<first three letters of type>-<uuid>` as in Elysia.

use std::borrow::Cow;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::template::{self, TemplateError};

/// The key under which every stored object carries its reference id.
pub const REF_ID: &str = "_REF_ID";

/// A tool's result: objects for the store and the frontend (Elysia's `Result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultObject {
    /// The result's objects, each a JSON object.
    pub objects: Vec<Map<String, Value>>,
    /// Facts about the result as a whole; the store adds who made it, where and when.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// What kind of objects these are, sent to the frontend as the payload's `type`.
    #[serde(default = "default_name")]
    pub payload_type: String,
    /// Keys the result in the store under `[tool][name]`.
    #[serde(default = "default_name")]
    pub name: String,
    /// Frontend field → object key; `""` leaves the field out.
    #[serde(default)]
    pub mapping: Option<IndexMap<String, String>>,
    /// Message for the model, with `{payload_type}`, `{name}`, `{num_objects}` and
    /// metadata-key placeholders.
    #[serde(default)]
    pub llm_message: Option<String>,
    /// Keys copied as they are when mapping.
    #[serde(default = "default_unmapped")]
    pub unmapped_keys: Vec<String>,
    /// Whether the frontend is sent the result.
    #[serde(default = "default_true")]
    pub display: bool,
}

fn default_name() -> String {
    "default".into()
}
fn default_unmapped() -> Vec<String> {
    vec![REF_ID.to_string()]
}
fn default_true() -> bool {
    true
}

impl ResultObject {
    /// A result named `name` holding `objects`, with no metadata, mapping or model message.
    pub fn new(name: impl Into<String>, objects: Vec<Map<String, Value>>) -> Self {
        Self {
            objects,
            metadata: Map::new(),
            payload_type: default_name(),
            name: name.into(),
            mapping: None,
            llm_message: None,
            unmapped_keys: default_unmapped(),
            display: true,
        }
    }

    /// The objects, mapped to frontend fields when `mapping` is asked for and set.
    /// Unlike Elysia, an object missing a mapped key gets `null` there instead of
    /// raising, and the objects are not mutated.
    pub fn to_json(&self, mapping: bool) -> Vec<Map<String, Value>> {
        match (&self.mapping, mapping) {
            (Some(map), true) => self
                .objects
                .iter()
                .map(|obj| {
                    let mut out: Map<String, Value> = map
                        .iter()
                        .filter(|(_, key)| !key.is_empty())
                        .map(|(field, key)| {
                            (field.clone(), obj.get(key).cloned().unwrap_or(Value::Null))
                        })
                        .collect();
                    for k in &self.unmapped_keys {
                        if let Some(v) = obj.get(k) {
                            out.insert(k.clone(), v.clone());
                        }
                    }
                    out
                })
                .collect(),
            _ => self.objects.clone(),
        }
    }

    /// The message the model sees about this result.
    pub fn llm_parse(&self) -> Result<String, TemplateError> {
        let Some(message) = &self.llm_message else {
            return Ok(format!(
                "Displayed: A {} object with {} objects.",
                self.payload_type,
                self.objects.len()
            ));
        };
        template::render(message, |key| -> Option<Cow<'_, str>> {
            match key {
                "payload_type" => Some(Cow::Borrowed(self.payload_type.as_str())),
                "name" => Some(Cow::Borrowed(self.name.as_str())),
                "num_objects" => Some(Cow::Owned(self.objects.len().to_string())),
                other => self.metadata.get(other).map(|v| match v {
                    Value::String(s) => Cow::Borrowed(s.as_str()),
                    v => Cow::Owned(v.to_string()),
                }),
            }
        })
    }
}

/// Anything a tool or the simulator sends to the frontend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Return {
    /// A tool's result.
    Result(ResultObject),
    /// Text for the conversation view; `payload_type` is e.g. `response`.
    Text {
        /// What kind of text it is.
        payload_type: String,
        /// The text's objects, each a JSON object.
        objects: Vec<Map<String, Value>>,
        /// Facts about the text as a whole.
        metadata: Map<String, Value>,
        /// Whether the frontend is sent the text.
        display: bool,
    },
    /// A status line about what is under way.
    Status {
        /// The status line.
        text: String,
        /// Structured facts about the status for a frontend (sopsim's addition; a
        /// round's start and end carry `round` and `roles`). Left out when empty, so
        /// other statuses are Elysia's `{text}`.
        #[serde(default, skip_serializing_if = "Map::is_empty")]
        metadata: Map<String, Value>,
    },
    /// A warning about the run.
    Warning {
        /// The warning.
        text: String,
    },
    /// Feedback kept per tool and shown to the next call of that tool.
    Error {
        /// Feedback the model can act on; empty when the error is outside its control.
        feedback: String,
        /// What went wrong.
        error_message: String,
    },
    /// The run has finished.
    Completed,
    /// A decision of the decision agent (Elysia's `TreeUpdate`): `node` decided
    /// `decision` at step `tree_index`.
    TreeUpdate {
        /// The agent that decided.
        node: String,
        /// The turn's decision step, from 1.
        tree_index: u32,
        /// What was decided: the tools called, or the answer.
        decision: String,
        /// The model's reasoning for the decision.
        reasoning: String,
        /// Whether the frontend starts its tree over (Elysia's `reset`).
        reset: bool,
    },
}

impl Return {
    /// Elysia's `Response(text)`.
    pub fn response(text: impl Into<String>, metadata: Map<String, Value>) -> Self {
        let mut obj = Map::new();
        obj.insert("text".into(), Value::String(text.into()));
        Return::Text {
            payload_type: "response".into(),
            objects: vec![obj],
            metadata,
            display: true,
        }
    }

    /// A status line with no metadata.
    pub fn status(text: impl Into<String>) -> Self {
        Return::Status {
            text: text.into(),
            metadata: Map::new(),
        }
    }

    /// The envelope's outer `type`.
    pub fn frontend_type(&self) -> &'static str {
        match self {
            Return::Result(_) => "result",
            Return::Text { .. } => "text",
            Return::Status { .. } => "status",
            Return::Warning { .. } => "warning",
            Return::Error { .. } => "self_healing_error",
            Return::Completed => "completed",
            Return::TreeUpdate { .. } => "tree_update",
        }
    }

    /// The frontend payload with a fresh random id; `None` for results that are not
    /// displayed or have no objects, as in Elysia.
    pub fn to_frontend(
        &self,
        user_id: &str,
        conversation_id: &str,
        query_id: &str,
    ) -> Option<Value> {
        self.to_frontend_with_id(user_id, conversation_id, query_id, uuid::Uuid::new_v4())
    }

    /// As [`Return::to_frontend`] with a given id, so seeded runs write identical events.
    pub fn to_frontend_with_id(
        &self,
        user_id: &str,
        conversation_id: &str,
        query_id: &str,
        id: uuid::Uuid,
    ) -> Option<Value> {
        let payload = match self {
            Return::Result(r) => {
                if !r.display || r.objects.is_empty() {
                    return None;
                }
                json!({"type": r.payload_type, "objects": r.to_json(true), "metadata": r.metadata})
            }
            Return::Text {
                payload_type,
                objects,
                metadata,
                display,
            } => {
                if !display {
                    return None;
                }
                json!({"type": payload_type, "objects": objects, "metadata": metadata})
            }
            Return::Status { text, metadata } if !metadata.is_empty() => {
                json!({ "text": text, "metadata": metadata })
            }
            Return::Status { text, .. } | Return::Warning { text } => json!({ "text": text }),
            Return::Error {
                feedback,
                error_message,
            } => {
                let feedback = if feedback.is_empty() {
                    "An unknown issue occurred."
                } else {
                    feedback.as_str()
                };
                json!({"feedback": feedback, "error_message": error_message})
            }
            Return::Completed => json!({}),
            Return::TreeUpdate {
                node,
                tree_index,
                decision,
                reasoning,
                reset,
            } => json!({
                "node": node, "tree_index": tree_index, "decision": decision,
                "reasoning": reasoning, "reset": reset,
            }),
        };
        let kind = self.frontend_type();
        Some(json!({
            "type": kind,
            "user_id": user_id,
            "conversation_id": conversation_id,
            "query_id": query_id,
            // Elysia's TreeUpdate id is a bare uuid; the others carry a type prefix.
            "id": if kind == "tree_update" { id.to_string() } else { format!("{}-{}", &kind[..3], id) },
            "payload": payload,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn cards() -> ResultObject {
        let mut r = ResultObject::new(
            "dealt_cards",
            vec![
                obj(json!({"card_title": "Jack of Clubs", "card_value": 11})),
                obj(json!({"card_title": "8 of Diamonds", "card_value": 8})),
            ],
        );
        r.payload_type = "playing_cards".into();
        r.metadata = obj(json!({"deck_size": 52}));
        r
    }

    #[test]
    fn llm_parse_fills_placeholders_from_the_seed_example() {
        let mut r = cards();
        r.llm_message = Some("Dealt {num_objects} cards out of a possible {deck_size}.".into());
        assert_eq!(
            r.llm_parse().unwrap(),
            "Dealt 2 cards out of a possible 52."
        );
        r.llm_message = Some("{payload_type} {name}".into());
        assert_eq!(r.llm_parse().unwrap(), "playing_cards dealt_cards");
        r.llm_message = Some("{type}".into());
        assert_eq!(
            r.llm_parse(),
            Err(TemplateError::UnknownPlaceholder("type".into()))
        );
        r.llm_message = None;
        assert_eq!(
            r.llm_parse().unwrap(),
            "Displayed: A playing_cards object with 2 objects."
        );
    }

    #[test]
    fn mapping_renames_fields_and_keeps_unmapped_keys() {
        let mut r = ResultObject::new(
            "p",
            vec![obj(
                json!({"_REF_ID": "t_p_0_0", "prod_name": "Lamp", "cost": 3}),
            )],
        );
        r.mapping = Some(
            [("name", "prod_name"), ("price", "cost"), ("image", "")]
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .into_iter()
                .collect(),
        );
        assert_eq!(
            Value::Object(r.to_json(true)[0].clone()),
            json!({"name": "Lamp", "price": 3, "_REF_ID": "t_p_0_0"})
        );
        assert_eq!(r.to_json(false), r.objects);
    }

    #[test]
    fn frontend_envelope_matches_elysia() {
        let id = uuid::Uuid::nil();
        let v = Return::Result(cards())
            .to_frontend_with_id("u", "c", "q", id)
            .unwrap();
        assert_eq!(v["type"], "result");
        assert_eq!(v["id"], format!("res-{id}"));
        assert_eq!(v["payload"]["type"], "playing_cards");
        assert_eq!(v["payload"]["metadata"]["deck_size"], 52);
        assert_eq!(
            (
                v["user_id"].as_str(),
                v["conversation_id"].as_str(),
                v["query_id"].as_str()
            ),
            (Some("u"), Some("c"), Some("q"))
        );
        let err = Return::Error {
            feedback: String::new(),
            error_message: "boom".into(),
        }
        .to_frontend("u", "c", "q")
        .unwrap();
        assert_eq!(err["type"], "self_healing_error");
        assert_eq!(err["payload"]["feedback"], "An unknown issue occurred.");
        assert_eq!(
            Return::Completed.to_frontend("u", "c", "q").unwrap()["payload"],
            json!({})
        );
        assert_eq!(
            Return::status("hi").to_frontend("u", "c", "q").unwrap()["id"]
                .as_str()
                .unwrap()[..4],
            *"sta-"
        );
        let mut hidden = cards();
        hidden.display = false;
        assert!(Return::Result(hidden).to_frontend("u", "c", "q").is_none());
        assert!(Return::Result(ResultObject::new("x", vec![]))
            .to_frontend("u", "c", "q")
            .is_none());
    }
}
