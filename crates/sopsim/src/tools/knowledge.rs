//! The `knowledge` tool: the nearest passages of a knowledge file to the model's query.
//! The Environment actor runs it, with the run's embedder and the knowledge bases it
//! has read.

use serde_json::{json, Value};
use sopsim_core::scenario::tool_settings::KnowledgeSettings;

use super::kind::{Kind, Start};
use super::{InEnvironment, RunsIn, Setup, ToolSetupError};
use crate::scenario::KnowledgeLookup;

/// A lookup in one knowledge file.
struct Knowledge(InEnvironment);

impl Start for KnowledgeSettings {
    async fn start(self, _: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
        Ok(Box::new(Knowledge(InEnvironment::Knowledge(
            KnowledgeLookup {
                path: self.path,
                top_k: self.top_k.0 as usize,
                kind: Default::default(),
                min_score: None,
            },
        ))))
    }
}

impl Kind for Knowledge {
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what to look up", "maxLength": 1000}},
            "required": ["query"],
            "additionalProperties": false,
        })
    }

    fn runs_in(&self) -> RunsIn<'_> {
        RunsIn::Environment(&self.0)
    }

    fn payload_type(&self) -> &'static str {
        "default"
    }
}
