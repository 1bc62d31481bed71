//! Tools agents call: the built-in kinds, their argument schemas, and the toolbox a
//! simulation builds from its scenario's `tools` section. Running a tool yields either
//! objects for an Elysia `Result` or a [`ToolFailure`] that becomes an Elysia `Error`.
//!
//! The decision agent's pure logic (what a decision prompt shows, reading a decision,
//! self-healing error texts) is in [`decision`]; the loop that drives it is the Agent
//! actor's (`actors::tool_turn`).
//!
//! # Layout
//! - `kind`: what every kind provides, `Start` and `Kind`.
//!   Each kind's file implements both; this file knows no kind by name.
//! - [`calculator`], [`dice`], [`json_lookup`]: run here, offline and deterministic.
//! - [`store_query`]: runs inside the Environment actor, over its store.
//! - `knowledge`: the Environment actor's knowledge lookup with the model's query.
//! - [`http`](mod@http): loopback-only JSON calls.
//! - [`mcp`]: tools of MCP servers run as child processes.
//! - `unavailable`: the kinds a build's features leave out.

pub use sopsim_core::tool_results::{ResultObject, Return, Store};

pub mod calculator;
pub mod decision;
pub mod dice;
#[cfg(feature = "openai")]
pub mod http;
pub mod json_lookup;
mod kind;
mod knowledge;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod store_query;
#[cfg(not(all(feature = "openai", feature = "mcp")))]
mod unavailable;

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{json, Map, Value};
use thiserror::Error;

use sopsim_core::scenario::{ResultDisplay, ToolSettings};

use crate::scenario::{
    CommandConsent, DataFileError, FieldPath, Scenario, SchemaError, SettingsError, ToolSpec,
};
use kind::{Kind, Start};
use sopsim_core::prompt::ToolDef;
pub use sopsim_core::tool_results::{CallOutcome, ToolFailure};

/// Where a call is made: what seeded tools draw from.
#[derive(Debug, Clone)]
pub struct ToolCallPlace {
    /// The run's seed.
    pub run_seed: u64,
    /// The agent making the call.
    pub agent: String,
    /// The run's turn of the call.
    pub turn: u64,
    /// The step of the turn's tool calls (0 for tools run before the first decision).
    pub step: u32,
}

/// A scenario's tools, checked and ready: schemas compiled, data files loaded.
#[derive(Default)]
pub struct ToolBox {
    tools: IndexMap<String, Arc<Tool>>,
}

/// One of a scenario's tools, ready to be called.
pub struct Tool {
    /// The tool's name, as the scenario's `tools` names it.
    pub name: String,
    /// The tool's entry in the scenario, its description filled in from the tool when empty.
    pub spec: ToolSpec,
    /// The argument schema the model sees and calls are checked against.
    pub parameters: Value,
    /// How its results are shown (`config`'s `name`, `payload_type`, `mapping`,
    /// `llm_message`).
    display: ResultDisplay,
    validator: jsonschema::Validator,
    kind: Box<dyn Kind>,
}

/// What setting up a tool may draw on, and where its settings are in the scenario.
pub(crate) struct Setup<'a> {
    /// `tools.NAME`.
    pub at: FieldPath,
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub consent: &'a CommandConsent,
    /// The MCP servers started so far: tools of one server share its process.
    #[cfg(feature = "mcp")]
    pub servers: &'a mut mcp::Servers,
}

impl Setup<'_> {
    /// The error of the setting at `keys` under the tool's entry.
    pub(crate) fn error(&self, keys: &[&str], cause: impl Into<SetupCause>) -> ToolSetupError {
        let path = keys.iter().fold(self.at.clone(), |at, key| at.key(key));
        ToolSetupError {
            path,
            cause: cause.into(),
        }
    }
}

/// Where a call runs: in the calling agent's turn, in the Environment actor (it reads
/// the store or the knowledge index), or outside the process (taped by `--record`).
pub enum RunsIn<'t> {
    /// In the calling agent's turn.
    Place,
    /// In the Environment actor.
    Environment(&'t InEnvironment),
    /// Outside the process: a recording keeps its result, and a replay reads it back.
    Outside,
}

/// What the Environment actor runs for a call.
#[derive(Debug, Clone)]
pub enum InEnvironment {
    /// A `store_query` over the store entries the calling agent may see.
    StoreQuery {
        /// The most objects a result holds.
        max_objects: usize,
    },
    /// A lookup in a knowledge base.
    Knowledge(crate::scenario::KnowledgeLookup),
}

/// Why a scenario's tools could not be set up: the setting at fault and why.
#[derive(Debug, Error)]
#[error("{path}")]
pub struct ToolSetupError {
    /// The setting at fault.
    pub path: FieldPath,
    /// What is wrong with it.
    #[source]
    pub cause: SetupCause,
}

/// What is wrong with a tool's setting.
#[derive(Debug, Error)]
pub enum SetupCause {
    /// Boxed: the setting's name and what the kind takes would make every tool
    /// setup's error as large.
    #[error(transparent)]
    Settings(Box<SettingsError>),
    /// The tool's data file could not be loaded.
    #[error("{file}")]
    Data {
        /// The data file, as the setting names it.
        file: String,
        /// Why it could not be loaded.
        #[source]
        source: DataFileError,
    },
    /// The MCP server could not be started.
    #[cfg(feature = "mcp")]
    #[error(transparent)]
    McpStart(#[from] mcp::StartError),
    /// The user did not allow the MCP server's program to be started.
    #[error("starting {program:?} was not allowed (a scenario file starts no program without the user's consent)")]
    NotAllowed {
        /// The program the server would run.
        program: String,
    },
    /// The MCP server has no tool of the name the setting gives.
    #[error("the server has no tool {tool:?} (it has: {})", .names.join(", "))]
    NoSuchTool {
        /// The tool named.
        tool: String,
        /// The tools the server has.
        names: Vec<String>,
    },
    /// The scenario names an MCP tool, but this build has no MCP support.
    #[cfg(not(feature = "mcp"))]
    #[error("this sopsim was built without MCP support (the `mcp` feature)")]
    NoMcp,
    /// The tool's argument schema could not be compiled.
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

impl From<SettingsError> for SetupCause {
    fn from(e: SettingsError) -> Self {
        SetupCause::Settings(Box::new(e))
    }
}

pub use crate::scenario::compile_arguments_schema as compile_schema;

impl ToolBox {
    /// Builds every tool the scenario declares, starting the MCP servers it names that
    /// `consent` allows (a server it does not allow is an error naming the field).
    /// Files were resolved when the scenario was loaded; a scenario built in code names
    /// them relative to the working folder.
    pub async fn start(
        scenario: &Scenario,
        consent: &CommandConsent,
    ) -> Result<ToolBox, ToolSetupError> {
        let mut tools = IndexMap::new();
        #[cfg(feature = "mcp")]
        let mut servers = mcp::Servers::default();
        for (name, spec) in &scenario.tools {
            let mut setup = Setup {
                at: FieldPath::root().key("tools").key(name),
                consent,
                #[cfg(feature = "mcp")]
                servers: &mut servers,
            };
            let (settings, display) = ToolSettings::read(spec.kind, &spec.config)
                .map_err(|e| setup.error(&["config"], e))?;
            let kind = sopsim_core::with_tool_settings!(settings, s => s.start(&mut setup).await?);
            let mut spec = spec.clone();
            if spec.description.is_empty() {
                spec.description = kind.description().unwrap_or_default();
            }
            let parameters = spec.parameters.clone().unwrap_or_else(|| kind.parameters());
            let validator =
                compile_schema(&parameters).map_err(|e| setup.error(&["parameters"], e))?;
            tools.insert(
                name.clone(),
                Arc::new(Tool {
                    name: name.clone(),
                    spec,
                    parameters,
                    display,
                    validator,
                    kind,
                }),
            );
        }
        Ok(ToolBox { tools })
    }

    /// The tool named `name`, if the scenario declares one.
    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.get(name)
    }
}

impl Tool {
    /// What the model is shown of this tool.
    pub fn def(&self) -> ToolDef {
        ToolDef {
            name: self.name.clone(),
            description: self.spec.description.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// The arguments as an object, if they are JSON and match the schema; otherwise
    /// feedback naming what is wrong.
    pub fn check_arguments(&self, raw: &str) -> Result<Map<String, Value>, ToolFailure> {
        let value: Value = if raw.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_str(raw).map_err(|e| {
                ToolFailure::avoidable(format!(
                    "the arguments are not valid JSON ({e}): {}",
                    cut(raw, 200)
                ))
            })?
        };
        let problems: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if !problems.is_empty() {
            return Err(ToolFailure::avoidable(format!(
                "the arguments do not match the schema of `{}`: {}",
                self.name,
                problems.join("; ")
            )));
        }
        match value {
            Value::Object(o) => Ok(o),
            _ => Err(ToolFailure::avoidable(
                "the arguments must be a JSON object",
            )),
        }
    }

    /// Runs a tool that needs nothing but its arguments (`None` for one that does not
    /// run in place: see [`Tool::runs_in`]).
    pub fn run_here(
        &self,
        args: &Map<String, Value>,
        place: &ToolCallPlace,
    ) -> Option<Result<ResultObject, ToolFailure>> {
        self.kind.run_here(self, args, place)
    }

    /// One computed object as a result: its fields are also the metadata, for
    /// `llm_message`.
    pub(crate) fn computed(&self, object: Map<String, Value>) -> ResultObject {
        let mut r = self.result(vec![object.clone()], 1);
        r.metadata.extend(object);
        r
    }

    /// Where a call of this tool runs.
    pub fn runs_in(&self) -> RunsIn<'_> {
        self.kind.runs_in()
    }

    /// Whether its results go into the Environment's store.
    pub(crate) fn stores_results(&self) -> bool {
        self.kind.stores_results()
    }

    /// Runs a tool that reaches outside (`None` for the others).
    pub async fn run_remote(
        &self,
        args: &Map<String, Value>,
    ) -> Option<Result<ResultObject, ToolFailure>> {
        Some(self.kind.run_outside(self, args)?.await)
    }

    /// Elysia's `Result` for `objects` (of `total` that matched): named after the data
    /// file or the kind, with the scenario's `payload_type`, `mapping` and `llm_message`.
    pub fn result(&self, objects: Vec<Map<String, Value>>, total: usize) -> ResultObject {
        let shown = &self.display;
        let name = shown.name.clone().unwrap_or_else(|| {
            self.kind
                .result_name()
                .unwrap_or(self.spec.kind.as_str())
                .to_string()
        });
        let mut r = ResultObject::new(name, objects);
        r.payload_type = shown
            .payload_type
            .clone()
            .unwrap_or_else(|| self.kind.payload_type().into());
        r.mapping = shown.mapping.as_ref().map(|m| m.0.clone());
        r.metadata.insert("total".into(), json!(total));
        r.llm_message = Some(match &shown.llm_message {
            Some(message) => message.clone(),
            None if total == 0 => "{name}: nothing matched; try other filters.".into(),
            None => self.kind.message().into(),
        });
        r
    }
}

/// `text` cut to at most `max` characters, marked when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::scenario::CommandConsent;

    use super::*;

    fn repository() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The debate with these tools (ToolBox reads nothing else of a scenario).
    fn toolbox(tools: Value) -> Result<ToolBox, ToolSetupError> {
        let path = repository().join("scenarios/debate.json");
        let doc = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut scenario = sopsim_core::scenario::from_document(&path, doc).unwrap();
        scenario.tools = serde_json::from_value(tools).unwrap();
        futures::executor::block_on(ToolBox::start(&scenario, &CommandConsent::Nothing))
    }

    fn products() -> String {
        repository()
            .join("scenarios/data/products.jsonl")
            .display()
            .to_string()
    }

    #[test]
    fn each_kind_runs_where_it_reads_from() {
        let tools = toolbox(json!({
            "sum": {"kind": "calculator"},
            "seen": {"kind": "store_query", "config": {"max_objects": 7}},
            "notes": {"kind": "knowledge", "config": {"path": "notes.json", "top_k": 5}},
        }))
        .unwrap();
        assert!(matches!(tools.get("sum").unwrap().runs_in(), RunsIn::Place));
        assert!(matches!(
            tools.get("seen").unwrap().runs_in(),
            RunsIn::Environment(InEnvironment::StoreQuery { max_objects: 7 })
        ));
        let RunsIn::Environment(InEnvironment::Knowledge(lookup)) =
            tools.get("notes").unwrap().runs_in()
        else {
            panic!("a knowledge tool runs in the Environment");
        };
        assert_eq!((lookup.path.as_str(), lookup.top_k), ("notes.json", 5));
    }

    /// What each kind gives a result by default, and whether it goes into the store.
    #[test]
    fn each_kind_names_and_shows_its_results_unless_the_scenario_says() {
        let tools = toolbox(json!({
            "sum": {"kind": "calculator"},
            "roll": {"kind": "dice"},
            "seen": {"kind": "store_query", "config": {"max_objects": 7}},
            "notes": {"kind": "knowledge", "config": {"path": "notes.json"}},
        }))
        .unwrap();
        let shown = |name: &str| {
            let r = tools.get(name).unwrap().result(vec![Map::new()], 1);
            (r.name, r.payload_type, r.llm_message.unwrap_or_default())
        };
        let listing = "{name}: {num_objects} shown of {total} matching.";
        let expected = [
            ("sum", "calculator", "default", "{expression} = {value}"),
            ("roll", "dice", "default", "rolled {rolls} (total {total})"),
            ("seen", "store_query", "table", listing),
            ("notes", "knowledge", "default", listing),
        ];
        for (tool, name, payload, message) in expected {
            assert_eq!(
                shown(tool),
                (name.to_string(), payload.to_string(), message.to_string()),
                "{tool}"
            );
        }
        let stored = |name: &str| tools.get(name).unwrap().stores_results();
        assert!(stored("sum") && stored("roll") && stored("notes"));
        assert!(
            !stored("seen"),
            "a query of the store does not store what it found"
        );
    }

    #[test]
    fn a_lookups_results_are_named_after_its_file_unless_the_scenario_names_them() {
        let tools = toolbox(json!({
            "plain": {"kind": "json_lookup", "config": {"file": products()}},
            "named": {"kind": "json_lookup", "config": {
                "file": products(), "name": "shelf", "payload_type": "product",
                "llm_message": "{num_objects} on the shelf", "mapping": {"title": "name"},
            }},
        }))
        .unwrap();
        let plain = tools.get("plain").unwrap().result(Vec::new(), 0);
        assert_eq!(
            (plain.name.as_str(), plain.payload_type.as_str()),
            ("products", "table")
        );
        assert_eq!(
            plain.llm_message.as_deref(),
            Some("{name}: nothing matched; try other filters.")
        );
        let named = tools.get("named").unwrap().result(Vec::new(), 0);
        assert_eq!(
            (named.name.as_str(), named.payload_type.as_str()),
            ("shelf", "product")
        );
        assert_eq!(
            named.llm_message.as_deref(),
            Some("{num_objects} on the shelf")
        );
        assert_eq!(named.mapping.unwrap()["title"], "name");
    }

    #[test]
    fn a_setting_the_kind_refuses_stops_the_toolbox_naming_the_config() {
        let Err(e) =
            toolbox(json!({"seen": {"kind": "store_query", "config": {"max_objects": 0}}}))
        else {
            panic!("max_objects 0 is refused");
        };
        assert_eq!(e.path.to_string(), "tools.seen.config");
        assert_eq!(
            sopsim_core::error_chain::chain(&e.cause),
            "max_objects: expected a whole number from 1 to 1000"
        );
    }
}
