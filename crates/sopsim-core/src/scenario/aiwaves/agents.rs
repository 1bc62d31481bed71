//! An aiwaves config's agents and each role's prompt components, in the native format.

use serde_json::{json, Map, Value};

use super::{ImportError, CONCISE, NOT_YET, UNSUPPORTED};

/// The agents that speak in some state that runs, with their roles there.
pub(super) fn translate_agents(
    obj: &Map<String, Value>,
    state_roles: &[(String, Vec<String>)],
    humans: &[String],
    notes: &mut Vec<String>,
) -> Result<Map<String, Value>, ImportError> {
    let mut agents = Map::new();
    let listed = obj
        .get("agents")
        .and_then(Value::as_object)
        .ok_or_else(|| ImportError::new("agents", "must be an object"))?;
    for (agent, spec) in listed {
        let mut roles = Map::new();
        for (state, role) in spec
            .get("roles")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let Some(role) = role.as_str() else { continue };
            match state_roles.iter().find(|(s, _)| s == state) {
                Some((_, known)) if known.iter().any(|r| r == role) => {
                    roles.insert(state.clone(), json!(role));
                }
                Some(_) => notes.push(format!(
                    "agent {agent:?}: role {role:?} is not among the roles of state {state:?}, so the agent never speaks there (as in the original)"
                )),
                None => {}
            }
        }
        if roles.is_empty() {
            notes.push(format!(
                "agent {agent:?} speaks in no state that runs and is left out"
            ));
            continue;
        }
        let mut a = json!({ "roles": roles });
        if let Some(style) = spec
            .get("style")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            a["style"] = json!(style);
        }
        if humans.iter().any(|h| h == agent) {
            a["human"] = json!(true);
        }
        agents.insert(agent.clone(), a);
    }
    for human in humans.iter().filter(|h| !agents.contains_key(h.as_str())) {
        notes.push(format!(
            "config.User_Names: {human:?} is not an agent that speaks, so nobody types for it"
        ));
    }
    Ok(agents)
}

/// An aiwaves `LLM` block (`model`, `temperature`; `log_path` has no meaning here).
pub(super) fn llm_settings(block: Option<&Value>) -> Option<Value> {
    let block = block?.as_object()?;
    let mut out = Map::new();
    if let Some(m) = block.get("model").and_then(Value::as_str) {
        out.insert("model".into(), json!(m));
    }
    if let Some(t) = block.get("temperature").and_then(Value::as_f64) {
        out.insert("temperature".into(), json!(t.clamp(0.0, 2.0)));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// The argument of a component: `{"task": "..."}` or, leniently, the bare string.
pub(super) fn arg<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    match value {
        Value::String(s) => Some(s.as_str()),
        Value::Object(m) => m.get(key).and_then(Value::as_str),
        _ => None,
    }
    .map(str::trim)
    .filter(|s| !s.is_empty())
}

pub(super) fn role_components(
    state: &str,
    role: &str,
    comps: &Map<String, Value>,
    concise: bool,
    exists: &dyn Fn(&str) -> bool,
    notes: &mut Vec<String>,
) -> Map<String, Value> {
    let mut out = Map::new();
    let mut rules: Vec<String> = Vec::new();
    let mut demonstrations: Vec<String> = Vec::new();
    let mut last: Vec<String> = Vec::new();
    for (key, value) in comps {
        match key.as_str() {
            "style" => {
                let part = value
                    .get("role")
                    .and_then(Value::as_str)
                    .map(|r| format!("You are the {r}."));
                let style = value
                    .get("style")
                    .and_then(Value::as_str)
                    .map(|s| format!("Speak in a {s} style."));
                let text: Vec<String> = part.into_iter().chain(style).collect();
                if !text.is_empty() {
                    out.insert("style".into(), json!(text.join(" ")));
                }
            }
            "task" => {
                if let Some(t) = arg(value, "task") {
                    out.insert("task".into(), json!(t));
                }
            }
            "rule" => rules.extend(arg(value, "rule").map(String::from)),
            "system" => rules.extend(arg(value, "system_prompt").map(String::from)),
            "demonstrations" | "cot" => {
                demonstrations.extend(arg(value, "demonstrations").map(String::from))
            }
            "output" => {
                if let Some(o) = arg(value, "output") {
                    out.insert("output".into(), json!(o));
                }
            }
            "last" => last.extend(arg(value, "last_prompt").map(String::from)),
            // The original adds its text to the last prompt every turn.
            "StaticComponent" => last.extend(arg(value, "output").map(String::from)),
            "LLM" => {
                if let Some(llm) = llm_settings(Some(value)) {
                    out.insert("llm".into(), llm);
                }
            }
            "LLM_type" => {}
            "CustomizeComponent" => {
                if let Some(t) = arg(value, "template") {
                    out.insert("template".into(), json!(t));
                }
            }
            "ExtractComponent" => {
                let words: Vec<&str> = value
                    .get("extract_words")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !words.is_empty() {
                    let text = |k: &str| {
                        value
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string()
                    };
                    out.insert(
                        "extract".into(),
                        json!({ "words": words, "system_prompt": text("system_prompt"), "last_prompt": text("last_prompt") }),
                    );
                }
            }
            "KnowledgeBaseComponent" => {
                let given = value
                    .get("knowledge_path")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                // Example configs name the file from the repository's examples folder;
                // it sits next to the config.
                let path = [given, given.rsplit('/').next().unwrap_or(given)]
                    .into_iter()
                    .find(|p| !p.is_empty() && exists(p));
                match path {
                    Some(path) => {
                        let kind = match value.get("type").and_then(Value::as_str) {
                            Some("QA") | None => "qa",
                            Some(_) => "text",
                        };
                        let top_k = value.get("top_k").and_then(Value::as_u64).unwrap_or(1).clamp(1, 100);
                        out.insert("knowledge".into(), json!({ "path": path, "top_k": top_k, "kind": kind }));
                    }
                    None => notes.push(format!(
                        "states.{state}.agent_states.{role}.KnowledgeBaseComponent: skipped: its knowledge_path {given:?} is not next to the config"
                    )),
                }
            }
            other => {
                let why = UNSUPPORTED
                    .iter()
                    .find(|(name, _)| *name == other)
                    .map(|(_, why)| format!("it needs {why}, which sopsim does not call"))
                    .or_else(|| {
                        NOT_YET
                            .contains(&other)
                            .then(|| "sopsim does not support it yet".to_string())
                    })
                    .unwrap_or_else(|| "the original ignores this key too".to_string());
                notes.push(format!(
                    "states.{state}.agent_states.{role}.{other}: skipped: {why}"
                ));
            }
        }
    }
    if !rules.is_empty() {
        out.insert("rule".into(), json!(rules.join("\n")));
    }
    if !demonstrations.is_empty() {
        out.insert("demonstrations".into(), json!(demonstrations));
    }
    if concise {
        last.push(CONCISE.to_string());
    }
    if !last.is_empty() {
        out.insert("last".into(), json!(last.join("\n")));
    }
    out
}
