//! The `store_query` tool (Elysia's `view_environment`): objects already in the
//! Environment store, chosen by tool, result name, `_REF_ID` or metadata values, up to
//! a cap. Only entries the caller may see are searched.

use serde_json::{json, Map, Value};

use sopsim_core::scenario::tool_settings::StoreQuerySettings;

use super::kind::{Kind, Start};
use super::{InEnvironment, RunsIn, Setup, ToolSetupError};
use sopsim_core::tool_results::{Entry, Store, REF_ID};

/// A query of the store: the Environment actor runs it, over what the caller may see.
struct StoreQuery(InEnvironment);

impl Start for StoreQuerySettings {
    async fn start(self, _: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
        Ok(Box::new(StoreQuery(InEnvironment::StoreQuery {
            max_objects: self.max_objects.0 as usize,
        })))
    }
}

impl Kind for StoreQuery {
    fn parameters(&self) -> Value {
        parameters()
    }

    fn runs_in(&self) -> RunsIn<'_> {
        RunsIn::Environment(&self.0)
    }

    fn payload_type(&self) -> &'static str {
        "table"
    }

    fn stores_results(&self) -> bool {
        false
    }
}

/// The JSON schema of the tool's arguments: optional `tool`, `name`, `ref_id` and
/// `metadata` filters.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tool": {"type": "string", "description": "the tool whose results to read"},
            "name": {"type": "string", "description": "the result name under that tool"},
            "ref_id": {"type": "string", "description": "one object's _REF_ID"},
            "metadata": {"type": "object", "description": "metadata values the entry must have"},
        },
        "additionalProperties": false,
    })
}

/// The objects matching `args` among the entries `visible` admits, at most
/// `cap` (the tool's `max_objects`), and how many matched in all.
pub fn run(
    store: &Store,
    args: &Map<String, Value>,
    cap: usize,
    visible: impl Fn(&Entry) -> bool,
) -> (Vec<Map<String, Value>>, usize) {
    let text = |k: &str| args.get(k).and_then(Value::as_str);
    let wanted_meta = args.get("metadata").and_then(Value::as_object);
    let mut found = Vec::new();
    let mut total = 0;
    for (tool, name, entry) in store.entries() {
        if text("tool").is_some_and(|t| t != tool)
            || text("name").is_some_and(|n| n != name)
            || !visible(entry)
            || wanted_meta.is_some_and(|m| m.iter().any(|(k, v)| entry.metadata.get(k) != Some(v)))
        {
            continue;
        }
        for obj in &entry.objects {
            if text("ref_id").is_some_and(|r| obj.get(REF_ID).and_then(Value::as_str) != Some(r)) {
                continue;
            }
            total += 1;
            if found.len() < cap {
                found.push(obj.clone());
            }
        }
    }
    (found, total)
}
