//! `environment.json`: what the Environment holds when a run ends. Its log is the
//! run's messages, shared with the transcript and written out as it is serialized, so
//! a population's million messages are never copied into a JSON tree.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;

use super::round::Errors;
use crate::memory::{Message, Summary};

/// The Environment at the end of a run, as `environment.json` has it: the tool
/// results' store (what every agent may see and what is hidden), the standing tool
/// errors, the values `extract` steps stored, and the shared memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvironmentRecord {
    /// The store's entries agents may see: tool → name → results.
    pub store: Value,
    /// The store's entries shown to no agent.
    pub hidden_store: Value,
    /// Agent → tool → standing self-healing error lines.
    pub tool_errors: Errors,
    /// Values `extract` steps stored, by tag.
    pub extracted: BTreeMap<String, String>,
    /// The long-term memory: every message, in order.
    pub log: Vec<Arc<Message>>,
    /// The short-term summary, when there is one.
    pub summary: Option<Summary>,
    /// Every summary made, oldest first.
    pub summaries: Vec<Summary>,
}

impl Serialize for EnvironmentRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct SharedMemory<'a> {
            long_term_memory: &'a [Arc<Message>],
            short_term_memory: &'a Option<Summary>,
            summaries: &'a [Summary],
        }
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("environment", &self.store)?;
        map.serialize_entry("hidden_environment", &self.hidden_store)?;
        map.serialize_entry("tool_errors", &self.tool_errors)?;
        map.serialize_entry("extracted", &self.extracted)?;
        map.serialize_entry(
            "shared_memory",
            &SharedMemory {
                long_term_memory: &self.log,
                short_term_memory: &self.summary,
                summaries: &self.summaries,
            },
        )?;
        map.end()
    }
}
