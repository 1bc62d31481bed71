//! Importing aiwaves "Agents" 1.x configs (PyPI `ai-agents`): the translation of such a
//! config into the native format, as a JSON document that then goes through the same
//! validation as any native file. Pure: the caller reads the file.
//!
//! What maps where (the full table is in the README):
//! - `root`, `relations`, `finish_state_name` → `sop.start`, `next`, `sop.end`. `"0"`
//!   (staying) is the judge's "stay"; `"1"` is where `max_chat_nums` leads; with more
//!   than one edge the judge chooses, answering with the relation keys as labels.
//! - `controller_type` `order` / `random` / `rule` → speaker `order` / `random` / `llm`.
//! - `config`: `MAX_CHAT_HISTORY`, `TOP_K` → `environment`; `User_Names` → human agents;
//!   `ACTIVE_MODE` "0" → the concise-reply instruction; `API_BASE` → [`Imported::base_url`].
//! - Components `style`, `task`, `rule`, `demonstrations`, `cot`, `system`, `output`,
//!   `last`, `StaticComponent` become prompt text; `CustomizeComponent`, `ExtractComponent`
//!   and `KnowledgeBaseComponent` become `template`, `extract` and `knowledge`;
//!   components that need outside services are listed in [`Imported::notes`] and skipped.

use std::collections::{HashSet, VecDeque};

use serde_json::{json, Map, Value};

/// What the translation could not carry into the native document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Imported {
    /// The config's `API_BASE`, used as the server unless `--base-url` says otherwise.
    pub base_url: Option<String>,
    /// Skipped components and settings, one line each, reported once per run.
    pub notes: Vec<String>,
}

/// Whether a parsed JSON document is an aiwaves config rather than a native scenario.
pub fn is_aiwaves(doc: &Value) -> bool {
    doc.get("relations").is_some() && doc.get("root").is_some() && doc.get("states").is_some()
}

/// The concise-reply instruction aiwaves adds when `ACTIVE_MODE` is "0".
const CONCISE: &str = "Please keep your reply as concise as possible.";

/// Components that need services sopsim does not call: reported and skipped.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("WebSearchComponent", "web search (an outside search API)"),
    ("WebCrawlComponent", "web crawling"),
    ("CategoryRequirementsComponent", "a shopping search service"),
    ("CodeComponent", "writing generated code to files"),
    ("FunctionComponent", "running code from the config"),
    ("MailComponent", "sending mail"),
    ("WeatherComponet", "a weather API"),
    ("TranslateComponent", "a translation API"),
    ("APIComponent", "an outside API"),
    ("FlightComponent", "a flight search API"),
];

const NOT_YET: &[&str] = &[
    "ExtractComponent",
    "CustomizeComponent",
    "KnowledgeBaseComponent",
];

/// Translates an aiwaves config into a native scenario document named `name`.
/// `exists` says whether a path relative to the config's folder names a file.
pub fn import(
    doc: &Value,
    name: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Result<(Value, Imported), String> {
    let obj = doc
        .as_object()
        .ok_or("an aiwaves config is a JSON object")?;
    let mut imported = Imported::default();
    let config = obj
        .get("config")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let setting = |key: &str| {
        config
            .get(key)
            .and_then(|v| match v {
                Value::String(s) => Some(s.trim().to_string()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
    };
    let number = |key: &str, default: u64| -> Result<u64, String> {
        match setting(key) {
            None => Ok(default),
            Some(s) => s
                .parse()
                .map_err(|_| format!("config.{key}: {s:?} is not a whole number")),
        }
    };
    let max_chat_history = number("MAX_CHAT_HISTORY", 10)?.clamp(1, 1000);
    let top_k = number("TOP_K", 0)?.min(100);
    let humans: Vec<String> = match setting("User_Names") {
        None => Vec::new(),
        Some(s) => serde_json::from_str(&s)
            .map_err(|_| format!("config.User_Names: {s:?} is not a JSON list of names"))?,
    };
    let concise = setting("ACTIVE_MODE").as_deref() == Some("0");
    imported.base_url = setting("API_BASE");
    if let Some(m) = setting("Embed_Model") {
        imported.notes.push(format!(
            "config.Embed_Model {m:?} is not used: sopsim embeds with --embedder (default all-MiniLM-L6-v2)"
        ));
    }
    if let Some(t) = obj
        .get("LLM_type")
        .and_then(Value::as_str)
        .filter(|t| *t != "OpenAI")
    {
        imported.notes.push(format!(
            "LLM_type {t:?} is not used: the model comes from --llm"
        ));
    }
    let mode = match obj.get("environment_type").and_then(Value::as_str) {
        Some("competive" | "competitive") => "competitive",
        _ => "cooperative",
    };
    let finish = obj
        .get("finish_state_name")
        .and_then(Value::as_str)
        .unwrap_or("end_state")
        .to_string();
    let root = obj
        .get("root")
        .and_then(Value::as_str)
        .ok_or("root: must name a state")?;
    let states_in = obj
        .get("states")
        .and_then(Value::as_object)
        .ok_or("states: must be an object")?;
    let relations = obj
        .get("relations")
        .and_then(Value::as_object)
        .ok_or("relations: must be an object")?;

    // Only states reachable from the root through the relations run at all.
    let edges_of = |state: &str| -> Vec<(String, String)> {
        let mut edges: Vec<(String, String)> = relations
            .get(state)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        edges.sort_by_key(|(k, _)| (k.parse::<u64>().unwrap_or(u64::MAX), k.clone()));
        edges
    };
    let mut reachable = vec![root.to_string()];
    let mut queue = VecDeque::from([root.to_string()]);
    let mut seen: HashSet<String> = reachable.iter().cloned().collect();
    while let Some(s) = queue.pop_front() {
        for (_, to) in edges_of(&s) {
            if to != finish && seen.insert(to.clone()) {
                reachable.push(to.clone());
                queue.push_back(to);
            }
        }
    }
    for s in states_in.keys() {
        if s != &finish && !seen.contains(s) {
            imported.notes.push(format!(
                "state {s:?} is never reached from {root:?} (as in the original) and is left out"
            ));
        }
    }

    let mut states = Map::new();
    let mut state_roles: Vec<(String, Vec<String>)> = Vec::new();
    for state_name in &reachable {
        let st = states_in
            .get(state_name)
            .and_then(Value::as_object)
            .ok_or_else(|| format!("relations: state {state_name:?} is not in states"))?;
        let agent_states = st
            .get("agent_states")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let roles: Vec<String> = match st.get("roles").and_then(Value::as_array) {
            Some(r) => r
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            None => agent_states.keys().cloned().collect(),
        };
        let controller = st
            .get("controller")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let text = |key: &str| {
            controller
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        let mut out = Map::new();
        out.insert("roles".into(), json!(roles));
        for key in ["begin_role", "begin_query", "environment_prompt"] {
            if let Some(v) = st
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                out.insert(key.into(), json!(v));
            }
        }
        if let Some(p) = st.get("summary_system_prompt").and_then(Value::as_str) {
            let mut summary = json!({ "system_prompt": p });
            if let Some(l) = st.get("summary_last_prompt").and_then(Value::as_str) {
                summary["last_prompt"] = json!(l);
            }
            out.insert("summary".into(), summary);
        }
        if let Some(llm) = llm_settings(st.get("LLM")) {
            out.insert("llm".into(), llm);
        }
        // Speaker rule; one role needs none.
        let speaker = match controller
            .get("controller_type")
            .and_then(Value::as_str)
            .unwrap_or("order")
        {
            "random" if roles.len() > 1 => json!({ "rule": "random" }),
            "rule" if roles.len() > 1 => {
                let mut r = json!({ "rule": "llm" });
                if let Some(p) = text("call_system_prompt") {
                    r["system_prompt"] = json!(p);
                }
                if let Some(p) = text("call_last_prompt") {
                    r["last_prompt"] = json!(p);
                }
                if let Some(w) = text("call_extract_words") {
                    r["extract_words"] = json!(w);
                }
                r
            }
            _ => json!({ "rule": "order" }),
        };
        out.insert("speaker".into(), speaker);
        // Transitions.
        let max_chat_nums = controller
            .get("max_chat_nums")
            .and_then(Value::as_u64)
            .unwrap_or(1000)
            .max(1);
        let target = |to: &str| {
            if to == finish {
                "end".to_string()
            } else {
                to.to_string()
            }
        };
        let edges = edges_of(state_name);
        let (transition, next) = match edges.as_slice() {
            [] => return Err(format!("relations.{state_name}: the state has no edges")),
            [(_, to)] if to == state_name => {
                imported.notes.push(format!(
                    "state {state_name:?} only leads to itself: the original never leaves it; sopsim ends the run after max_chat_nums ({max_chat_nums}) turns there"
                ));
                (
                    json!({ "max_turns": max_chat_nums, "on_max_turns": "end" }),
                    vec!["end".to_string()],
                )
            }
            [(_, to)] => (json!({ "max_turns": 1 }), vec![target(to)]),
            many => {
                let next: Vec<String> = many
                    .iter()
                    .filter(|(_, to)| to != state_name)
                    .map(|(_, to)| target(to))
                    .collect();
                let stay_label = many
                    .iter()
                    .find(|(_, to)| to == state_name)
                    .map_or("0".to_string(), |(k, _)| k.clone());
                let mut labels = vec![stay_label];
                labels.extend(
                    many.iter()
                        .filter(|(_, to)| to != state_name)
                        .map(|(k, _)| k.clone()),
                );
                let mut judge = json!({ "labels": labels });
                if let Some(p) = text("judge_system_prompt") {
                    judge["system_prompt"] = json!(p);
                }
                if let Some(p) = text("judge_last_prompt") {
                    judge["last_prompt"] = json!(p);
                }
                if let Some(w) = text("judge_extract_words") {
                    judge["extract_words"] = json!(w);
                }
                let mut t = json!({ "judge": judge, "max_turns": max_chat_nums });
                if let Some((_, to)) = many.iter().find(|(k, _)| k == "1") {
                    if to != state_name {
                        t["on_max_turns"] = json!(target(to));
                    }
                }
                (t, next)
            }
        };
        out.insert("transition".into(), transition);
        out.insert("next".into(), json!(next));
        // Components per role.
        let mut components = Map::new();
        for (role, comps) in &agent_states {
            if !roles.contains(role) {
                continue;
            }
            let Some(comps) = comps.as_object() else {
                continue;
            };
            let c = role_components(
                state_name,
                role,
                comps,
                concise,
                exists,
                &mut imported.notes,
            );
            if !c.is_empty() {
                components.insert(role.clone(), Value::Object(c));
            }
        }
        if !components.is_empty() {
            out.insert("components".into(), Value::Object(components));
        }
        states.insert(state_name.clone(), Value::Object(out));
        state_roles.push((state_name.clone(), roles));
    }

    let mut agents = Map::new();
    for (agent, spec) in obj
        .get("agents")
        .and_then(Value::as_object)
        .ok_or("agents: must be an object")?
    {
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
                Some(_) => imported.notes.push(format!(
                    "agent {agent:?}: role {role:?} is not among the roles of state {state:?}, so the agent never speaks there (as in the original)"
                )),
                None => {}
            }
        }
        if roles.is_empty() {
            imported.notes.push(format!(
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

    let mut native = json!({
        "name": name,
        "description": format!("Imported from an aiwaves Agents config ({name})."),
        "environment": {
            "type": mode,
            "max_chat_history": max_chat_history,
            "top_k": top_k,
            "prompt_token_budget": 8192
        },
        "agents": agents,
        "sop": { "start": root, "end": "end", "max_turns": 1000, "states": states }
    });
    if let Some(llm) = llm_settings(obj.get("LLM")) {
        native["llm"] = llm;
    }
    Ok((native, imported))
}

/// An aiwaves `LLM` block (`model`, `temperature`; `log_path` has no meaning here).
fn llm_settings(block: Option<&Value>) -> Option<Value> {
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
fn arg<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    match value {
        Value::String(s) => Some(s.as_str()),
        Value::Object(m) => m.get(key).and_then(Value::as_str),
        _ => None,
    }
    .map(str::trim)
    .filter(|s| !s.is_empty())
}

fn role_components(
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
