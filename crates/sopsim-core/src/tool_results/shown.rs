//! What a model is shown of the result store and of failed calls: the visible
//! store within a token budget, and Elysia's self-healing error lines.

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::{Entry, ToolFailure};
use crate::tokens::TokenCounter;

/// Elysia's self-healing error line for a failed call of a tool.
pub fn error_line(failure: &ToolFailure) -> String {
    if failure.avoidable {
        format!(
            "Avoidable error: {} (this error is likely to be solved by incorporating the feedback in a future tool call)",
            failure.message
        )
    } else {
        format!(
            "Unknown error: {} (this error is likely outside of your capacity to be solved; if it repeats, try something else or tell the others about the issue)",
            failure.message
        )
    }
}

/// The visible store as the decision prompt shows it, within `budget` tokens: each
/// entry's objects as JSON lines; past the budget only each key and its count, with a
/// pointer to `store_query`.
pub fn render_environment(
    entries: &[(&str, &str, &Entry)],
    budget: usize,
    counter: &dyn TokenCounter,
) -> String {
    let mut shown: Vec<String> = Vec::new();
    // The shown blocks' tokens: bounded while the bound settles it, counted after.
    let mut bound = 0;
    let mut counted: Option<usize> = None;
    let mut left_out: IndexMap<String, usize> = IndexMap::new();
    for (tool, name, entry) in entries {
        if !left_out.is_empty() {
            *left_out.entry(format!("{tool}/{name}")).or_default() += entry.objects.len();
            continue;
        }
        let block = format!(
            "[{tool}/{name}] {}\n{}",
            Value::Object(visible_metadata(&entry.metadata)),
            entry
                .objects
                .iter()
                .map(|o| Value::Object(o.clone()).to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
        bound += counter.at_most(&block);
        let fits = bound <= budget || {
            let used = counted.get_or_insert_with(|| shown.iter().map(|b| counter.count(b)).sum());
            let cost = counter.count(&block);
            let fits = *used + cost <= budget;
            if fits {
                *used += cost;
            }
            fits
        };
        if fits {
            shown.push(block);
        } else {
            left_out.insert(format!("{tool}/{name}"), entry.objects.len());
        }
    }
    let mut out: String = shown.iter().flat_map(|b| [b.as_str(), "\n"]).collect();
    if !left_out.is_empty() {
        out.push_str("Not shown (over the prompt budget; read them with a store_query tool):\n");
        for (key, n) in left_out {
            out.push_str(&format!("- {key}: {n} objects\n"));
        }
    }
    out.trim_end().to_string()
}

/// Metadata without sopsim's bookkeeping keys (`_agent`, `_state`, `_visit`).
fn visible_metadata(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_tell_fixable_from_not() {
        assert!(error_line(&ToolFailure::avoidable("bad")).starts_with("Avoidable error: bad"));
        assert!(error_line(&ToolFailure::unknown("down")).starts_with("Unknown error: down"));
    }
}
