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

mod agents;

use agents::{llm_settings, role_components, translate_agents};

/// What the translation could not carry into the native document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Imported {
    /// The config's `API_BASE`, used as the server unless the run names another.
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

/// A part of an aiwaves config that cannot be translated, with its field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ImportError {
    /// Where in the config, as `states.name` or `config.TOP_K` (empty: the whole file).
    pub field: String,
    /// What is wrong with that part of the config.
    pub message: String,
}

impl ImportError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Translates an aiwaves config into a native scenario document named `name`.
/// `exists` says whether a path relative to the config's folder names a file.
pub fn import(
    doc: &Value,
    name: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Result<(Value, Imported), ImportError> {
    let obj = doc
        .as_object()
        .ok_or_else(|| ImportError::new("", "an aiwaves config is a JSON object"))?;
    let mut imported = Imported::default();
    let settings = Settings::read(obj, &mut imported)?;
    let graph = Graph::read(obj)?;
    let mut states = Map::new();
    let mut state_roles: Vec<(String, Vec<String>)> = Vec::new();
    graph.check_relations(&mut imported.notes);
    for state_name in graph.reachable(&mut imported.notes) {
        let (state, roles) =
            translate_state(&graph, &state_name, &settings, exists, &mut imported.notes)?;
        states.insert(state_name.clone(), state);
        state_roles.push((state_name, roles));
    }
    let agents = translate_agents(obj, &state_roles, &settings.humans, &mut imported.notes)?;
    let mut native = json!({
        "name": name,
        "description": format!("Imported from an aiwaves Agents config ({name})."),
        "environment": {
            "type": settings.mode,
            "max_chat_history": settings.max_chat_history,
            "top_k": settings.top_k,
            "prompt_token_budget": 8192
        },
        "agents": agents,
        "sop": { "start": graph.root, "end": "end", "max_turns": 1000, "states": states }
    });
    if let Some(llm) = llm_settings(obj.get("LLM")) {
        native["llm"] = llm;
    }
    Ok((native, imported))
}

/// The config-wide settings (`config`, `environment_type`, `LLM_type`).
struct Settings {
    mode: &'static str,
    max_chat_history: u64,
    top_k: u64,
    humans: Vec<String>,
    concise: bool,
}

impl Settings {
    fn read(obj: &Map<String, Value>, imported: &mut Imported) -> Result<Self, ImportError> {
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
        let number = |key: &str, default: u64| match setting(key) {
            None => Ok(default),
            Some(s) => s.parse().map_err(|_| {
                ImportError::new(
                    format!("config.{key}"),
                    format!("{s:?} is not a whole number"),
                )
            }),
        };
        let humans = match setting("User_Names") {
            None => Vec::new(),
            Some(s) => serde_json::from_str(&s).map_err(|_| {
                ImportError::new(
                    "config.User_Names",
                    format!("{s:?} is not a JSON list of names"),
                )
            })?,
        };
        imported.base_url = setting("API_BASE");
        if let Some(m) = setting("Embed_Model") {
            imported.notes.push(format!(
                "config.Embed_Model {m:?} is not used: sopsim embeds with the embedder it is run with (default all-MiniLM-L6-v2)"
            ));
        }
        if let Some(t) = obj
            .get("LLM_type")
            .and_then(Value::as_str)
            .filter(|t| *t != "OpenAI")
        {
            imported.notes.push(format!(
                "LLM_type {t:?} is not used: the model is the one sopsim is run with"
            ));
        }
        Ok(Self {
            mode: match obj.get("environment_type").and_then(Value::as_str) {
                Some("competive" | "competitive") => "competitive",
                _ => "cooperative",
            },
            max_chat_history: number("MAX_CHAT_HISTORY", 10)?.clamp(1, 1000),
            top_k: number("TOP_K", 0)?.min(100),
            humans,
            concise: setting("ACTIVE_MODE").as_deref() == Some("0"),
        })
    }
}

/// The state graph: `root`, `states`, `relations` and the finish state.
struct Graph<'a> {
    root: &'a str,
    finish: String,
    states: &'a Map<String, Value>,
    relations: &'a Map<String, Value>,
}

impl<'a> Graph<'a> {
    fn read(obj: &'a Map<String, Value>) -> Result<Self, ImportError> {
        let object = |key: &str| {
            obj.get(key)
                .and_then(Value::as_object)
                .ok_or_else(|| ImportError::new(key, "must be an object"))
        };
        Ok(Self {
            root: obj
                .get("root")
                .and_then(Value::as_str)
                .ok_or_else(|| ImportError::new("root", "must name a state"))?,
            finish: obj
                .get("finish_state_name")
                .and_then(Value::as_str)
                .unwrap_or("end_state")
                .to_string(),
            states: object("states")?,
            relations: object("relations")?,
        })
    }

    /// A state's edges (relation key, target), in the order of their numeric keys.
    fn edges(&self, state: &str) -> Vec<(String, String)> {
        let mut edges: Vec<(String, String)> = self
            .relations
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
    }

    /// Notes for relations the original ignores without a word: edges from a state that
    /// does not exist, keys that are not numbers, targets that are not names.
    fn check_relations(&self, notes: &mut Vec<String>) {
        for (from, edges) in self.relations {
            if from != &self.finish && !self.states.contains_key(from) {
                notes.push(format!(
                    "relations.{from}: there is no state {from:?}, so these edges are never taken"
                ));
                continue;
            }
            let Some(edges) = edges.as_object() else {
                notes.push(format!("relations.{from}: not an object of edges; ignored"));
                continue;
            };
            for (key, to) in edges {
                if key.parse::<u64>().is_err() {
                    notes.push(format!(
                        "relations.{from}.{key}: relation keys are numbers (\"0\" stays, \"1\" moves on); {key:?} is offered after them"
                    ));
                }
                if !to.is_string() {
                    notes.push(format!(
                        "relations.{from}.{key}: not a state name; the edge is ignored"
                    ));
                }
            }
        }
    }

    /// The states reachable from the root (only they ever run), in breadth-first order;
    /// a note for each state left out.
    fn reachable(&self, notes: &mut Vec<String>) -> Vec<String> {
        let mut reachable = vec![self.root.to_string()];
        let mut queue = VecDeque::from([self.root.to_string()]);
        let mut seen: HashSet<String> = reachable.iter().cloned().collect();
        while let Some(s) = queue.pop_front() {
            for (_, to) in self.edges(&s) {
                if to != self.finish && seen.insert(to.clone()) {
                    reachable.push(to.clone());
                    queue.push_back(to);
                }
            }
        }
        for s in self.states.keys() {
            if s != &self.finish && !seen.contains(s) {
                notes.push(format!(
                    "state {s:?} is never reached from {:?} (as in the original) and is left out",
                    self.root
                ));
            }
        }
        reachable
    }

    /// The native name of a target state.
    fn target(&self, to: &str) -> String {
        if to == self.finish {
            "end".to_string()
        } else {
            to.to_string()
        }
    }
}

/// One state in the native format, and its roles.
fn translate_state(
    graph: &Graph,
    state_name: &str,
    settings: &Settings,
    exists: &dyn Fn(&str) -> bool,
    notes: &mut Vec<String>,
) -> Result<(Value, Vec<String>), ImportError> {
    let st = graph
        .states
        .get(state_name)
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ImportError::new(
                "relations",
                format!("state {state_name:?} is not in states"),
            )
        })?;
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
    out.insert("speaker".into(), speaker(&controller, roles.len()));
    let (transition, next) = transition(graph, state_name, &controller, notes)?;
    out.insert("transition".into(), transition);
    out.insert("next".into(), json!(next));
    let mut components = Map::new();
    for (role, comps) in &agent_states {
        let Some(comps) = comps.as_object().filter(|_| roles.contains(role)) else {
            continue;
        };
        let c = role_components(state_name, role, comps, settings.concise, exists, notes);
        if !c.is_empty() {
            components.insert(role.clone(), Value::Object(c));
        }
    }
    if !components.is_empty() {
        out.insert("components".into(), Value::Object(components));
    }
    Ok((Value::Object(out), roles))
}

/// A controller's text setting, trimmed, if non-empty.
fn controller_text(controller: &Map<String, Value>, key: &str) -> Option<String> {
    controller
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// The speaker rule for `controller_type`; one role needs none.
fn speaker(controller: &Map<String, Value>, roles: usize) -> Value {
    let kind = controller
        .get("controller_type")
        .and_then(Value::as_str)
        .unwrap_or("order");
    match kind {
        "random" if roles > 1 => json!({ "rule": "random" }),
        "rule" if roles > 1 => {
            let mut r = json!({ "rule": "llm" });
            for (from, to) in [
                ("call_system_prompt", "system_prompt"),
                ("call_last_prompt", "last_prompt"),
                ("call_extract_words", "extract_words"),
            ] {
                if let Some(p) = controller_text(controller, from) {
                    r[to] = json!(p);
                }
            }
            r
        }
        _ => json!({ "rule": "order" }),
    }
}

/// The transition rule and the next states: `max_chat_nums` turns, then the relation
/// `"1"`; with several edges, the judge chooses by relation key.
fn transition(
    graph: &Graph,
    state_name: &str,
    controller: &Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<(Value, Vec<String>), ImportError> {
    let max_chat_nums = controller
        .get("max_chat_nums")
        .and_then(Value::as_u64)
        .unwrap_or(1000)
        .max(1);
    let edges = graph.edges(state_name);
    Ok(match edges.as_slice() {
        [] => {
            return Err(ImportError::new(
                format!("relations.{state_name}"),
                "the state has no edges",
            ))
        }
        [(_, to)] if to == state_name => {
            notes.push(format!(
                "state {state_name:?} only leads to itself: the original never leaves it; sopsim ends the run after max_chat_nums ({max_chat_nums}) turns there"
            ));
            (
                json!({ "max_turns": max_chat_nums, "on_max_turns": "end" }),
                vec!["end".to_string()],
            )
        }
        [(_, to)] => (json!({ "max_turns": 1 }), vec![graph.target(to)]),
        many => {
            let leaving = || many.iter().filter(|(_, to)| to != state_name);
            let next: Vec<String> = leaving().map(|(_, to)| graph.target(to)).collect();
            let stay_label = many
                .iter()
                .find(|(_, to)| to == state_name)
                .map_or("0".to_string(), |(k, _)| k.clone());
            let mut labels = vec![stay_label];
            labels.extend(leaving().map(|(k, _)| k.clone()));
            let mut judge = json!({ "labels": labels });
            for (from, to) in [
                ("judge_system_prompt", "system_prompt"),
                ("judge_last_prompt", "last_prompt"),
                ("judge_extract_words", "extract_words"),
            ] {
                if let Some(p) = controller_text(controller, from) {
                    judge[to] = json!(p);
                }
            }
            let mut t = json!({ "judge": judge, "max_turns": max_chat_nums });
            if let Some((_, to)) = many.iter().find(|(k, _)| k == "1") {
                if to != state_name {
                    t["on_max_turns"] = json!(graph.target(to));
                }
            }
            (t, next)
        }
    })
}
