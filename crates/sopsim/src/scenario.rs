//! The scenario format: its types, the builder for scenarios made in code, validation
//! without running ([`check`], [`schema`]), the generated reference and the translation
//! of aiwaves configs ([`translate_aiwaves`]). A scenario is loaded with
//! [`crate::load`] and run with [`crate::run`].

pub use sopsim_core::scenario::{
    advice, check, check_structure, schema, AgentBuilder, ScenarioBuilder, StateBuilder,
};
pub use sopsim_core::scenario::{aiwaves, expr, judge, knowledge_file, people, probes, reference};
pub use sopsim_core::scenario::{
    choice_key, compile_formula, evaluate_formula, is_bounded_figure, Bounded, CompiledDecision,
    CompiledPayoff, CompiledScore, DecisionRule, DecisionValue, FormulaError, FormulaInputs,
    OutcomeRules, Outcomes, Payoff, Reduce, ScoreRule, Take, WorldFigures, GENERIC_FIGURES,
    QUALITY_FIGURES,
};
pub use sopsim_core::scenario::{
    choice_options_of, strategy_moves, BuiltIn, Initial, StrategySpec, VariableSpec, WorldSpec,
};
pub use sopsim_core::scenario::{
    compile_arguments_schema, max_tool_steps, tools_of, AllowlistError, AvailableIf,
    DecisionFormat, McpConfigError, RunIf, SchemaError, SettingsError, ToolKind, ToolSpec, ANSWER,
};
pub use sopsim_core::scenario::{
    expand_population, footprint, member_count, member_name, Distribution, ExpandError, Footprint,
    Member, Neighbourhood, Network, PersonaSource, PopulationSpec, MAX_MEMBERS, MAX_STYLE_BYTES,
};
pub use sopsim_core::scenario::{identity, role_text, speak_as, Persona, RoleText, OPENING_NOTE};
pub use sopsim_core::scenario::{
    range_count, AgentSpec, AllTokens, BackendKind, ChoiceSpec, ChoiceTiming, Components,
    EnvironmentSettings, ExtractStep, JudgePrompts, KeywordRule, KnowledgeKind, KnowledgeLookup,
    LlmSettings, Mode, Players, RangeError, Scenario, Script, Sop, SpeakerRule, State,
    SummaryPrompts, TokenWindow, TransitionRule, Turns, UnknownMode,
};
pub use sopsim_core::scenario::{
    read_objects, started_programs, translate_aiwaves, CommandConsent, DataFile, DataFileError,
    FieldPath, NotAllowed, Problem, ScenarioError, StartedProgram, MAX_SCENARIO_BYTES,
};
