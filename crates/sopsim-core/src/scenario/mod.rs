//! Scenario files: the native format, its validation and loading.

mod advice;
pub mod aiwaves;
mod builder;
mod choice_spec;
mod commands;
mod data_file;
pub mod expr;
mod format;
pub mod judge;
pub mod knowledge_file;
mod llm_settings;
mod load;
mod outcomes;
mod path;
pub mod people;
mod persona;
mod population;
pub mod probes;
pub mod reference;
mod routing_rules;
mod script;
mod structure;
mod table_file;
pub mod tool_settings;
mod tools;
mod validate;
mod validate_graph;
mod validate_tools;
mod validate_world;
mod world;

pub use advice::advice;
pub use builder::{AgentBuilder, ScenarioBuilder, StateBuilder};
pub use commands::{started_programs, CommandConsent, NotAllowed, StartedProgram};
pub use data_file::{read_objects, DataFile, DataFileError};
pub use format::{
    range_count, AgentSpec, AllTokens, BackendKind, ChoiceSpec, ChoiceTiming, Components,
    EnvironmentSettings, ExtractStep, JudgePrompts, KeywordRule, KnowledgeKind, KnowledgeLookup,
    LlmSettings, Mode, Players, RangeError, Scenario, Script, Sop, SpeakerRule, State,
    SummaryPrompts, TokenWindow, TransitionRule, Turns, UnknownMode,
};
pub use judge::JudgeSpec;
pub use load::{
    from_document, import_aiwaves, load_document_with, parse_json, read_text, read_text_digested,
    translate_aiwaves, validate_built, ScenarioError, MAX_SCENARIO_BYTES,
};
pub use outcomes::{
    choice_key, compile_formula, evaluate_formula, is_bounded_figure, Bounded, CompiledDecision,
    CompiledPayoff, CompiledScore, DecisionRule, DecisionValue, FormulaError, FormulaInputs,
    OutcomeRules, Outcomes, Payoff, Reduce, ScoreRule, Take, WorldFigures, GENERIC_FIGURES,
    QUALITY_FIGURES,
};
pub use path::FieldPath;
pub use people::{PeoplePoint, PeopleReference, PeopleSeries};
pub use persona::{identity, role_text, speak_as, Persona, RoleText, OPENING_NOTE};
pub use population::{
    expand as expand_population, footprint, member_count, member_name, Distribution, ExpandError,
    Footprint, Member, Neighbourhood, Network, PersonaSource, PopulationSpec, MAX_MEMBERS,
    MAX_STYLE_BYTES,
};
pub use probes::{AnswerForm, ProbeAsk, ProbeSpec, ProbeWhen, RunEdge};
pub use tool_settings::{
    is_loopback, loopback_allowlist, AllowlistError, FieldNames, McpCommand, McpConfigError,
    Millis, ResultDisplay, SettingsError, ToolKind, ToolSettings, UpTo,
};
pub use tools::{
    compile_arguments_schema, max_tool_steps, tools_of, AvailableIf, DecisionFormat, RunIf,
    SchemaError, ToolSpec, ANSWER,
};
pub use validate::{check, check_structure, schema, Problem};
pub use world::{
    moves_of as strategy_moves, options_of as choice_options_of, BuiltIn, Initial, StrategySpec,
    VariableSpec, WorldSpec,
};
