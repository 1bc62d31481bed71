//! The native scenario format: the typed model of a scenario file.
//!
//! Every struct rejects unknown fields, so a misspelt key is an error rather than a
//! silently ignored setting. Defaults are declared here once; `sopsim schema` prints
//! the JSON Schema derived from these types.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A whole scenario: agents, the SOP that routes their turns, and run settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in outputs and reports.
    pub name: String,
    /// What the scenario is about, for people (never sent to a model).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default)]
    pub environment: EnvironmentSettings,
    /// LLM defaults for every call; states, roles and agents may override fields.
    #[serde(default)]
    pub llm: LlmSettings,
    /// Agents by name. Once loaded, the members of `populations` follow the agents
    /// the file names (they are not written back out).
    #[serde(default, serialize_with = "named_agents")]
    pub agents: IndexMap<String, AgentSpec>,
    /// Agents generated from templates, by population name: many agents playing one
    /// role, and the network of who sees whom.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub populations: IndexMap<String, super::PopulationSpec>,
    pub sop: Sop,
    /// Tools agents may call: name → definition. A role lists the ones it uses.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub tools: IndexMap<String, super::ToolSpec>,
    /// What `sopsim bench` measures in each run: decisions, payoffs and scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<super::Outcomes>,
    /// Replies for the scripted backend (`--llm scripted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Script>,
}

/// How much history agents share and how prompts are bounded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSettings {
    /// `cooperative`: agents see the whole run; `competitive`: only the current state's visit.
    #[serde(rename = "type", default)]
    pub mode: Mode,
    /// Recent messages shown verbatim, and the summary cadence: a new short-term summary
    /// every this many messages.
    #[serde(default = "default_max_chat_history")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_chat_history: usize,
    /// How many older messages relevant to the latest one are retrieved (0 = off).
    #[serde(default = "default_top_k")]
    #[schemars(range(max = 100))]
    pub top_k: usize,
    /// The largest prompt, in tokens, any call may send.
    #[serde(default = "default_prompt_token_budget")]
    #[schemars(range(min = 64))]
    pub prompt_token_budget: usize,
}

fn default_max_chat_history() -> usize {
    8
}
fn default_top_k() -> usize {
    3
}
fn default_prompt_token_budget() -> usize {
    2048
}

impl Default for EnvironmentSettings {
    fn default() -> Self {
        Self {
            mode: Mode::default(),
            max_chat_history: default_max_chat_history(),
            top_k: default_top_k(),
            prompt_token_budget: default_prompt_token_budget(),
        }
    }
}

/// Information sharing between states (aiwaves' `environment_type`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Cooperative,
    Competitive,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Cooperative => "cooperative",
            Mode::Competitive => "competitive",
        }
    }
}

/// A mode's name that is neither `cooperative` nor `competitive`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?} (expected cooperative or competitive)")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, UnknownMode> {
        match s {
            "cooperative" => Ok(Mode::Cooperative),
            "competitive" => Ok(Mode::Competitive),
            other => Err(UnknownMode(other.to_string())),
        }
    }
}

/// Model and sampling settings. Unset fields fall back to the next level out:
/// agent → role in state → state → scenario → backend default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// The model to ask: a server's model name (the local backend uses its own file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature; 0 takes the most likely token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f32>,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub top_p: Option<f32>,
    /// Keep only this many most likely tokens (0 or unset: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// The longest reply, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// Strings that end a reply (the other participants' labels are added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// The call's own seed (otherwise the run's `--seed` and the prompt decide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// How a decision agent asks for tool calls: `native` (the API's tool calling) or
    /// `json` (a JSON object in the reply, for servers without a tool parser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<super::DecisionFormat>,
    /// The API's `tool_choice` (`auto`, `required`, `none`), sent only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// Divides the logit of every token already in `repeat_window` (1: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1.0, max = 2.0))]
    pub repeat_penalty: Option<f32>,
    /// What the repeat, frequency and presence penalties look back over: a number of
    /// tokens, or `"all"` (the whole prompt and reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_window: Option<TokenWindow>,
    /// Subtracted from a token's logit once per time it is in `repeat_window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub frequency_penalty: Option<f32>,
    /// Subtracted from a token's logit if it is in `repeat_window` at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub presence_penalty: Option<f32>,
    /// DRY: a token that would extend a sequence already in `dry_window` (of at least
    /// `dry_allowed_length` tokens) loses `dry_multiplier · dry_base^(length −
    /// dry_allowed_length)` of its logit (0: off; the local engine's default is 0.8, an
    /// OpenAI-compatible server's its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 5.0))]
    pub dry_multiplier: Option<f32>,
    /// DRY's growth per token of repeat beyond `dry_allowed_length` (default 1.75).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1.0, max = 4.0))]
    pub dry_base: Option<f32>,
    /// The longest repeat DRY lets pass unpenalised, in tokens (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub dry_allowed_length: Option<u32>,
    /// What DRY matches against: a number of tokens, or `"all"`: the whole prompt (the
    /// conversation the agent was shown) and the reply so far (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_window: Option<TokenWindow>,
    /// Strings a repeat may not run across (default: newline, `:`, `"`, `*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), inner(length(min = 1, max = 32)))]
    pub dry_breakers: Option<Vec<String>>,
    /// Leave out tokens less likely than `min_p` times the most likely one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_p: Option<f32>,
    /// A reply with a flaw reply quality counts (a copy, a paraphrase, a label, a stage
    /// direction, speaking as someone else, an echo of the instructions, third-person
    /// narration, a foreign script, a cut or an empty reply) is drawn again, up to this
    /// many times (0: never); the last draw stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub redraws: Option<u32>,
    /// Candidates drawn at once for each reply (default 4 on a local model, which
    /// decodes them in one batch with the prompt read once; 1 on a server, where each is
    /// a call); the first without a flaw, in seed order, is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8))]
    pub candidates: Option<u32>,
}

/// How many tokens a penalty looks back over.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(untagged)]
pub enum TokenWindow {
    /// The last this many tokens.
    Tokens(#[schemars(range(min = 1, max = 1_048_576))] u32),
    /// The whole prompt and reply.
    All(AllTokens),
}

/// `"all"`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AllTokens {
    All,
}

impl LlmSettings {
    /// `self` with its unset fields taken from `outer`.
    pub fn over(&self, outer: &LlmSettings) -> LlmSettings {
        LlmSettings {
            model: self.model.clone().or_else(|| outer.model.clone()),
            temperature: self.temperature.or(outer.temperature),
            top_p: self.top_p.or(outer.top_p),
            top_k: self.top_k.or(outer.top_k),
            max_tokens: self.max_tokens.or(outer.max_tokens),
            stop: self.stop.clone().or_else(|| outer.stop.clone()),
            seed: self.seed.or(outer.seed),
            decision: self.decision.or(outer.decision),
            tool_choice: self
                .tool_choice
                .clone()
                .or_else(|| outer.tool_choice.clone()),
            repeat_penalty: self.repeat_penalty.or(outer.repeat_penalty),
            repeat_window: self.repeat_window.or(outer.repeat_window),
            frequency_penalty: self.frequency_penalty.or(outer.frequency_penalty),
            presence_penalty: self.presence_penalty.or(outer.presence_penalty),
            dry_multiplier: self.dry_multiplier.or(outer.dry_multiplier),
            dry_base: self.dry_base.or(outer.dry_base),
            dry_allowed_length: self.dry_allowed_length.or(outer.dry_allowed_length),
            dry_window: self.dry_window.or(outer.dry_window),
            dry_breakers: self
                .dry_breakers
                .clone()
                .or_else(|| outer.dry_breakers.clone()),
            min_p: self.min_p.or(outer.min_p),
            redraws: self.redraws.or(outer.redraws),
            candidates: self.candidates.or(outer.candidates),
        }
    }
}

/// One agent: who it is and which role it plays in each state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// How the agent speaks; shown to it in every state.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub style: String,
    /// What the agent wants and why, in its own first-person words ("I run the bakery
    /// on the corner; half my customers drive in."); told to it again with every turn,
    /// where a small model weighs it most.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stake: String,
    /// State name → the role this agent plays there. Absent states: the agent is silent.
    pub roles: IndexMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
    /// A person types this agent's turns on standard input.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub human: bool,
    /// Set on the agents a population generated.
    #[serde(skip)]
    #[schemars(skip)]
    pub member: Option<super::Member>,
}

/// Writes the agents a file names, leaving out population members (the file's
/// `populations` section makes them again).
fn named_agents<S: serde::Serializer>(
    agents: &IndexMap<String, AgentSpec>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(None)?;
    for (name, agent) in agents.iter().filter(|(_, a)| a.member.is_none()) {
        map.serialize_entry(name, agent)?;
    }
    map.end()
}

/// The standard operating procedure: a graph of states.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Sop {
    /// The state the run starts in.
    pub start: String,
    /// The name that ends the run when a transition reaches it; not a state itself.
    #[serde(default = "default_end")]
    pub end: String,
    /// A safety net: the run stops after this many turns in all (`--max-turns` overrides).
    #[serde(default = "default_max_turns")]
    #[schemars(range(min = 1))]
    pub max_turns: u64,
    /// The states by name.
    pub states: IndexMap<String, State>,
}

fn default_end() -> String {
    "end".to_string()
}
fn default_max_turns() -> u64 {
    200
}

/// A stage of the procedure.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// The parts played in this state, in speaking order for the `order` rule.
    pub roles: Vec<String>,
    /// Who opens each visit of this state (default: the first role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin_role: Option<String>,
    /// Said verbatim by `begin_role` at the start of every visit, without a model call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin_query: Option<String>,
    /// Scene description put in front of every prompt in this state.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub environment_prompt: String,
    #[serde(default, skip_serializing_if = "SummaryPrompts::is_default")]
    pub summary: SummaryPrompts,
    /// Prompt components per role.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub components: IndexMap<String, Components>,
    /// `sequential` (the default): one role at a time, each seeing what the others
    /// said. `simultaneous`: rounds in which every role acts once on the same
    /// information, and no role sees another's message of the same round (game moves).
    #[serde(default, skip_serializing_if = "Turns::is_sequential")]
    pub turns: Turns,
    /// Who speaks next (sequential states only).
    #[serde(default)]
    pub speaker: SpeakerRule,
    #[serde(default)]
    pub transition: TransitionRule,
    /// States (or the SOP's end) this state may move to.
    #[serde(default)]
    pub next: Vec<String>,
    /// Tools every role of this state may call, besides its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Decisions per turn before a role must reply, for roles that do not set their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub max_tool_steps: Option<u32>,
    /// LLM settings for this state's controller, judge and summary calls, and the
    /// default for its roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
}

/// How the roles of a state take turns.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Turns {
    #[default]
    Sequential,
    Simultaneous,
}

impl Turns {
    fn is_sequential(&self) -> bool {
        *self == Turns::Sequential
    }
}

/// Prompts for the short-term summary made in this state.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummaryPrompts {
    /// The system prompt of the summary call.
    #[serde(default = "default_summary_system")]
    pub system_prompt: String,
    /// The last instruction of the summary call.
    #[serde(default = "default_summary_last")]
    pub last_prompt: String,
}

fn default_summary_system() -> String {
    "You keep the minutes of a conversation. Update the summary with the new messages: \
     who said what, decisions, open questions."
        .to_string()
}
fn default_summary_last() -> String {
    "Write the updated summary in at most five sentences.".to_string()
}

impl Default for SummaryPrompts {
    fn default() -> Self {
        Self {
            system_prompt: default_summary_system(),
            last_prompt: default_summary_last(),
        }
    }
}

impl SummaryPrompts {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// What a role is told in a state (aiwaves' prompt components).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Components {
    /// How this role speaks here, added to the agent's own style.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
    /// What the role does here: the last instruction of its prompt, addressed to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Rules the role follows here, in its system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Example replies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub demonstrations: Vec<String>,
    /// The required output format, restated at the end of the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// A final instruction, the last thing in the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
    /// Text with `{key}` placeholders filled from the values `extract` steps stored
    /// (aiwaves' CustomizeComponent); a key not stored yet reads as empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Before this role speaks, a model call reads `<word>…</word>` values out of the
    /// conversation and stores them for `template`s (aiwaves' ExtractComponent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<ExtractStep>,
    /// Before this role speaks, the entries of a JSON knowledge base most similar to the
    /// latest message are added to the prompt (aiwaves' KnowledgeBaseComponent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<KnowledgeLookup>,
    /// A closed decision this role makes every turn here (a game move), asked as a
    /// choice among options rather than read out of free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<ChoiceSpec>,
    /// Tools (names from the top-level `tools`) this role may call before it replies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Decisions per turn before the role must reply (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub max_tool_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
}

/// A closed decision: the model picks one option (with the probability of each, where
/// the backend can tell), so every turn has a valid decision whatever the model writes.
/// Stored on the turn's message as `decision: {value, probabilities}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChoiceSpec {
    /// The options (at least two, all different).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Numeric options instead: `[min, max, step]`, the step dividing the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 3]>,
    /// The question (default: "Make your choice.").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `reply` (the default): the agent speaks freely, then chooses; `instead`: the
    /// choice is the whole turn.
    #[serde(default)]
    pub after: ChoiceTiming,
}

/// When a role's choice is made.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChoiceTiming {
    #[default]
    Reply,
    Instead,
}

/// Numeric choices are at most this many options.
pub const MAX_RANGE_OPTIONS: usize = 1000;

impl ChoiceSpec {
    /// The options, in order: `values`, or the numbers of `range` written as briefly as
    /// the step allows (`0`, `2.5`…). Empty when the spec is invalid (validation says
    /// why).
    pub fn options(&self) -> Vec<String> {
        if !self.values.is_empty() {
            return self.values.clone();
        }
        let Some([min, max, step]) = self.range else {
            return Vec::new();
        };
        match range_count(min, max, step) {
            Ok(n) => {
                let decimals = decimals(step).max(decimals(min));
                (0..n)
                    .map(|i| format_number(min + i as f64 * step, decimals))
                    .collect()
            }
            Err(_) => Vec::new(),
        }
    }
}

/// Why `[min, max, step]` is not a usable range of numbers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RangeError {
    #[error("the range must be three finite numbers")]
    NotFinite,
    #[error("[{min}, {max}, {step}] is empty or inverted: min must be below max")]
    Empty { min: f64, max: f64, step: f64 },
    #[error("the step {0} must be positive")]
    Step(f64),
    #[error("the step {step} does not divide the range {min}..{max}")]
    Uneven { min: f64, max: f64, step: f64 },
    #[error("{0} options; at most {MAX_RANGE_OPTIONS}")]
    TooMany(f64),
}

/// How many numbers `[min, max, step]` holds.
pub fn range_count(min: f64, max: f64, step: f64) -> Result<usize, RangeError> {
    if !(min.is_finite() && max.is_finite() && step.is_finite()) {
        return Err(RangeError::NotFinite);
    }
    if min >= max {
        return Err(RangeError::Empty { min, max, step });
    }
    if step <= 0.0 {
        return Err(RangeError::Step(step));
    }
    let steps = (max - min) / step;
    if (steps - steps.round()).abs() > 1e-9 * steps.max(1.0) {
        return Err(RangeError::Uneven { min, max, step });
    }
    let n = steps.round() + 1.0;
    if n > MAX_RANGE_OPTIONS as f64 {
        return Err(RangeError::TooMany(n));
    }
    Ok(n as usize)
}

/// Decimal places needed to write `x` (at most 6).
fn decimals(x: f64) -> usize {
    (0..=6)
        .find(|d| {
            let scaled = x * 10f64.powi(*d as i32);
            (scaled - scaled.round()).abs() < 1e-9
        })
        .unwrap_or(6)
}

fn format_number(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// A model call that extracts tagged values from the conversation.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExtractStep {
    /// The tags to read, e.g. `["code"]` for `<code>…</code>`; each value is stored under its tag.
    pub words: Vec<String>,
    /// The system prompt of the extract call.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub system_prompt: String,
    /// The last instruction of the extract call.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_prompt: String,
}

/// A knowledge-base lookup.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeLookup {
    /// A JSON file: an object or array of entries with `q` and `a` (question and
    /// answer) and/or `chunk` (text). A relative path is relative to the scenario file.
    pub path: String,
    /// How many of the most similar entries are shown.
    #[serde(default = "default_knowledge_top_k")]
    #[schemars(range(min = 1, max = 100))]
    pub top_k: usize,
    /// `qa`: match questions and show question and answer; `text`: match and show chunks.
    #[serde(default)]
    pub kind: KnowledgeKind,
    /// Entries less similar than this are not shown (default 0.75 for `qa`, 0.5 for
    /// `text`, as in aiwaves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f32>,
}

fn default_knowledge_top_k() -> usize {
    1
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum KnowledgeKind {
    #[default]
    Qa,
    Text,
}

/// Who speaks next within a state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "rule", rename_all = "lowercase", deny_unknown_fields)]
pub enum SpeakerRule {
    /// Round robin over `roles`, starting after `begin_role`.
    #[default]
    Order,
    /// Uniformly among the roles other than the last speaker's, seeded by `--seed`.
    Random,
    /// A controller call picks among the roles other than the last speaker's.
    Llm {
        /// The controller's system prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        system_prompt: Option<String>,
        /// The controller's last instruction.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_prompt: Option<String>,
        /// The tag an answer may be wrapped in, `<end>…</end>` by default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extract_words: Option<String>,
    },
}

/// When to leave a state. Checked after every turn (in a simultaneous state, once
/// after every round), in this order: keywords, `max_turns`, then the judge; if none
/// fires, the state goes on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TransitionRule {
    /// Leave after this many turns in one visit (the opening counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_turns: Option<u32>,
    /// Simultaneous states: leave after this many rounds in one visit (a round counts a
    /// turn per player in `max_turns`, however many players there are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_rounds: Option<u32>,
    /// Where `max_turns` and `max_rounds` lead (default: the first of `next`). Naming
    /// this state itself starts a new visit of it (a new round), as every move into a
    /// state does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_max_turns: Option<String>,
    /// Move when the last message contains a keyword (case-insensitive). After a
    /// simultaneous round, the round's messages are checked in the order of `roles`:
    /// the first that contains a keyword decides, and within it the first keyword
    /// listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<KeywordRule>,
    /// After each turn, an LLM judge chooses between staying and each of `next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgePrompts>,
    /// How many visits this state allows in a run. A transition that would start one
    /// more goes to `on_max_visits` instead, which bounds loops such as game rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_visits: Option<u32>,
    /// Where a transition into this state goes once `max_visits` is used up: a state
    /// in `next`, or the SOP's end (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_max_visits: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KeywordRule {
    /// The word to look for (case-insensitive).
    pub keyword: String,
    /// A state in `next`, or the SOP's end.
    pub to: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JudgePrompts {
    /// The judge's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The judge's last instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_prompt: Option<String>,
    /// Labels the judge may answer with instead of the names, one per choice in the
    /// order offered: staying, then each of `next` (aiwaves configs use "0", "1", …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The tag an answer may be wrapped in, `<end>…</end>` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_words: Option<String>,
}

/// Replies for the scripted backend. Lines are templates with `{name}`, `{role}`,
/// `{state}`, `{turn}` (the run's turn number), `{n}` (this agent's reply number,
/// from 1) and `{one_of:A|B|C}` (one option, drawn with the run's seed). An agent's
/// lines are used in order and start over when they run out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Agent name → its lines. Takes precedence over `roles`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub agents: IndexMap<String, Vec<String>>,
    /// Role name → lines for whichever agent plays it.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub roles: IndexMap<String, Vec<String>>,
    /// The line for agents with none of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Answers of the `llm` speaker controller, in order (default: the offered roles in turn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<String>,
    /// Answers of the transition judge, in order (default: "stay").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transit: Vec<String>,
    /// Agent or role name → answers to its `choice` component, in order (default: its
    /// reply lines, where they name an option, else a seeded draw among the options).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub choices: IndexMap<String, Vec<String>>,
    /// Agent or role name → its decisions, in order over the run: `{"tool": NAME,
    /// "arguments": {...}}` calls a tool, `"answer"` replies; past the end it replies.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub decisions: IndexMap<String, Vec<serde_json::Value>>,
    /// The summary template, with `{state}` and `{turn}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Who plays each role in each state: state → role → its agents ([`Scenario::players`]).
pub type Players =
    std::collections::HashMap<String, std::collections::HashMap<String, Vec<String>>>;

impl Scenario {
    /// The model settings of a call in `state`, layered from the inside out: the agent's
    /// (if an agent makes the call), the role's in this state, the state's, then the
    /// scenario's. Unknown names contribute nothing.
    pub fn settings_for(
        &self,
        state: &str,
        role: Option<&str>,
        agent: Option<&str>,
    ) -> LlmSettings {
        let st = self.sop.states.get(state);
        [
            agent
                .and_then(|a| self.agents.get(a))
                .and_then(|a| a.llm.as_ref()),
            role.zip(st)
                .and_then(|(r, st)| st.components.get(r))
                .and_then(|c| c.llm.as_ref()),
            st.and_then(|st| st.llm.as_ref()),
            Some(&self.llm),
        ]
        .into_iter()
        .flatten()
        .fold(LlmSettings::default(), |s, layer| s.over(layer))
    }

    /// Every model the scenario's `llm` settings name (top level, agents, states, roles),
    /// each once.
    pub fn models_named(&self) -> Vec<&str> {
        let states = self.sop.states.values();
        let layers = std::iter::once(Some(&self.llm))
            .chain(self.agents.values().map(|a| a.llm.as_ref()))
            .chain(states.clone().map(|st| st.llm.as_ref()))
            .chain(
                states
                    .flat_map(|st| st.components.values())
                    .map(|c| c.llm.as_ref()),
            );
        let mut models: Vec<&str> = Vec::new();
        for model in layers.flatten().filter_map(|l| l.model.as_deref()) {
            if !models.contains(&model) {
                models.push(model);
            }
        }
        models
    }

    /// Whether anything reads message embeddings: retrieval (`top_k` > 0) or a
    /// knowledge lookup. When nothing does, messages are not embedded at all.
    pub fn needs_embeddings(&self) -> bool {
        self.environment.top_k > 0
            || self
                .sop
                .states
                .values()
                .flat_map(|s| s.components.values())
                .any(|c| c.knowledge.is_some())
    }

    /// Who plays each role in each state (state → role → its agents, in file order: one
    /// named agent, or a population's members), built in one pass over the agents.
    pub fn players(&self) -> Players {
        let mut players = Players::new();
        for (name, agent) in &self.agents {
            for (state, role) in &agent.roles {
                players
                    .entry(state.clone())
                    .or_default()
                    .entry(role.clone())
                    .or_default()
                    .push(name.clone());
            }
        }
        players
    }

    /// The simultaneous state with the most turns in a round, and that number: a run
    /// whose turn limit is below it could never start such a round.
    pub fn largest_round(&self) -> Option<(&str, u64)> {
        let mut seats: IndexMap<&str, u64> = IndexMap::new();
        for agent in self.agents.values() {
            for (state, role) in &agent.roles {
                let simultaneous = self.sop.states.get(state).is_some_and(|s| {
                    s.turns == Turns::Simultaneous && s.roles.iter().any(|r| r == role)
                });
                if simultaneous {
                    *seats.entry(state.as_str()).or_default() += 1;
                }
            }
        }
        seats.into_iter().max_by_key(|(_, n)| *n)
    }

    /// The role `role` opens each visit of `state` with.
    pub fn begin_role<'a>(&'a self, state: &'a State) -> &'a str {
        state
            .begin_role
            .as_deref()
            .or(state.roles.first().map(String::as_str))
            .unwrap_or("")
    }
}
