//! Validation of the `tools` section and of where tools are listed: kinds' settings
//! (as [`ToolSettings::read`](super::ToolSettings::read) reads them),
//! argument schemas, `run_if` / `available_if` rules, unknown tool names, tools no
//! agent can call, and scripted decisions. Pure: data files are checked at load.

use serde_json::Value;

use super::format::Scenario;
use super::path::FieldPath;
use super::tools::ToolSpec;
use crate::error_chain::chain;

/// Every problem with the scenario's tools, as `(path, message)`.
pub(super) fn check(s: &Scenario) -> Vec<(FieldPath, String)> {
    let mut out = Vec::new();
    let root = FieldPath::root();
    for (name, spec) in &s.tools {
        spec_problems(s, name, spec, &root.key("tools").key(name), &mut out);
    }
    let known = |t: &str| s.tools.contains_key(t);
    let tool_names = || s.tools.keys().cloned().collect::<Vec<_>>().join(", ");
    for (state_name, state) in &s.sop.states {
        let at = root.key("sop").key("states").key(state_name);
        let played = |role: &str| {
            s.agents
                .values()
                .any(|a| a.roles.get(state_name).is_some_and(|r| r == role))
        };
        for (i, t) in state.tools.iter().enumerate() {
            if !known(t) {
                out.push((
                    at.key("tools").index(i),
                    format!("unknown tool {t:?} (tools: {})", or_none(tool_names())),
                ));
            }
        }
        if !state.tools.is_empty() && !state.roles.iter().any(|r| played(r)) {
            out.push((
                at.key("tools"),
                "no agent plays a role in this state, so no one can call these tools".into(),
            ));
        }
        for (role, comps) in &state.components {
            let cat = at.key("components").key(role);
            for (i, t) in comps.tools.iter().enumerate() {
                if !known(t) {
                    out.push((
                        cat.key("tools").index(i),
                        format!("unknown tool {t:?} (tools: {})", or_none(tool_names())),
                    ));
                }
            }
            if !comps.tools.is_empty() && state.roles.contains(role) && !played(role) {
                out.push((
                    cat.key("tools"),
                    format!(
                        "no agent plays {role:?} in this state, so no one can call these tools"
                    ),
                ));
            }
        }
    }
    if let Some(script) = &s.script {
        for (who, list) in &script.decisions {
            let at = root.key("script").key("decisions").key(who);
            let is_role = s.sop.states.values().any(|st| st.roles.contains(who));
            if !s.agents.contains_key(who) && !is_role {
                out.push((
                    at.clone(),
                    format!("{who:?} is neither an agent nor a role"),
                ));
            }
            for (i, d) in list.iter().enumerate() {
                let ok = match d {
                    Value::String(a) => a == super::tools::ANSWER,
                    Value::Object(o) => o.get("tool").and_then(Value::as_str).is_some(),
                    _ => false,
                };
                if !ok {
                    out.push((
                        at.index(i),
                        "a decision is \"answer\" or {\"tool\": NAME, \"arguments\": {...}}".into(),
                    ));
                }
            }
        }
    }
    out
}

fn or_none(s: String) -> String {
    if s.is_empty() {
        "none declared".into()
    } else {
        s
    }
}

fn spec_problems(
    s: &Scenario,
    name: &str,
    spec: &ToolSpec,
    at: &FieldPath,
    out: &mut Vec<(FieldPath, String)>,
) {
    if name.trim().is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        out.push((
            at.clone(),
            format!("{name:?}: tool names are one word without spaces or control characters"),
        ));
    }
    if let Err(e) = super::tool_settings::ToolSettings::read(spec.kind, &spec.config) {
        out.push((at.key("config"), chain(&e)));
    }
    let validator = match &spec.parameters {
        Some(schema) => match super::tools::compile_arguments_schema(schema) {
            Ok(v) => Some(v),
            Err(e) => {
                out.push((
                    at.key("parameters"),
                    format!("not a usable JSON Schema: {}", chain(&e)),
                ));
                None
            }
        },
        None => None,
    };
    if let Some(rule) = &spec.run_if {
        let p = at.key("run_if");
        match (rule.every_turn, &rule.last_message_matches) {
            (true, Some(_)) => out.push((
                p.clone(),
                "give every_turn or last_message_matches, not both".into(),
            )),
            (false, None) => out.push((
                p.clone(),
                "give every_turn: true or last_message_matches".into(),
            )),
            (_, Some(pattern)) => {
                if let Err(e) = regex::Regex::new(pattern) {
                    out.push((
                        p.key("last_message_matches"),
                        format!("not a regular expression: {e}"),
                    ));
                }
            }
            _ => {}
        }
        if let Some(v) = &validator {
            let args = Value::Object(rule.arguments.clone());
            for e in v.iter_errors(&args).take(3) {
                out.push((
                    p.key("arguments"),
                    format!("does not match the tool's parameters: {e}"),
                ));
            }
        }
    }
    if let Some(rule) = &spec.available_if {
        let p = at.key("available_if");
        if rule.after_tool.is_none() && rule.store_has.is_none() {
            out.push((p.clone(), "give after_tool or store_has".into()));
        }
        for (key, t) in [
            ("after_tool", &rule.after_tool),
            ("store_has", &rule.store_has),
        ] {
            if let Some(t) = t.as_ref().filter(|t| !s.tools.contains_key(*t)) {
                out.push((p.key(key), format!("unknown tool {t:?}")));
            }
        }
    }
}
