//! The native scenario format: the typed model of a scenario file.
//!
//! Every struct rejects unknown fields, so a misspelt key is an error rather than a
//! silently ignored setting. Defaults are declared here once; `sopsim schema` prints
//! the JSON Schema derived from these types.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::choice_spec::{range_count, ChoiceSpec, ChoiceTiming, RangeError};
pub use super::llm_settings::{AllTokens, BackendKind, LlmSettings, TokenWindow};
pub use super::routing_rules::{JudgePrompts, KeywordRule, SpeakerRule, TransitionRule};
pub use super::script::Script;

/// A whole scenario: agents, the SOP that routes their turns, and run settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in outputs and reports.
    pub name: String,
    /// What the scenario is about, for people (never sent to a model).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// How much history agents share and how prompts are bounded.
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
    /// The standard operating procedure: a graph of states, the one the run starts in,
    /// and the name that ends it.
    pub sop: Sop,
    /// Tools agents may call: name → definition. A role lists the ones it uses.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub tools: IndexMap<String, super::ToolSpec>,
    /// What `sopsim bench` measures in each run: decisions, payoffs and scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<super::Outcomes>,
    /// Numbers that carry from round to round (fish in a lake, each agent's wallet),
    /// shown in prompts, updated after each round, and conditions that end the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<super::WorldSpec>,
    /// How the finished run is judged: a rubric's dimensions scored by a model, for
    /// each agent or the episode, into `judgement.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<super::JudgeSpec>,
    /// Questions put to agents during the run that leave no trace in it (surveys,
    /// interviews), by name; the answers go to `probes.jsonl`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub probes: IndexMap<String, super::ProbeSpec>,
    /// The experiment this scenario plays, in the terms a published design is stated
    /// in (`group_size`, `rounds`, `payoffs`, `treatment`…): people's data is compared
    /// only with a scenario of the same design.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub design: IndexMap<String, serde_json::Value>,
    /// People's data from a published experiment of the same `design`, set beside the
    /// models' figures by `sopsim bench` (as `--reference FILE` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<super::PeopleReference>,
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
    /// every this many messages. The latest messages move a block of this many at a
    /// time (from this many up to twice that less one), so a prompt only grows between
    /// moves.
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
    /// Agents see the whole run, across every state and visit.
    #[default]
    Cooperative,
    /// Agents see only the current visit of the current state.
    Competitive,
}

impl Mode {
    /// The mode's name as a scenario file writes it.
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
    // Boxed: most agents set none, and a population holds a million of them.
    /// LLM settings for this agent's calls, over those of its role, state and scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<Box<LlmSettings>>,
    /// A person types this agent's turns on standard input.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub human: bool,
    /// The agent plays by this rule instead of a model: it decides exactly and says a
    /// line from a template, with no model call. Shared: a population's members share
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<std::sync::Arc<super::StrategySpec>>,
    /// The probability that each move the agent makes in a closed choice is flipped
    /// to another option (a tremble, drawn from the run's seed): noise, for a strategy
    /// and a model alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub noise: Option<f64>,
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
    /// Prompts for the short-term summary made in this state.
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
    /// When the run leaves this state, and where it goes.
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
    /// One role at a time, each seeing what the others said.
    #[default]
    Sequential,
    /// Rounds in which every role acts once, none seeing another's message of the same round.
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
    /// LLM settings for this role's calls in this state, over the state's and the scenario's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
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

/// What a knowledge base's entries hold, and so what is matched and shown.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum KnowledgeKind {
    /// Questions and answers: the questions are matched, and question and answer shown.
    #[default]
    Qa,
    /// Text chunks: the chunks are matched and shown.
    Text,
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
                .and_then(|a| a.llm.as_deref()),
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
            .chain(self.agents.values().map(|a| a.llm.as_deref()))
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

    /// Every backend the scenario's `llm` settings name, with its model, each once, in
    /// a fixed order (a population's members share their population's settings).
    pub fn backends_named(&self) -> Vec<(BackendKind, Option<String>)> {
        let states = self.sop.states.values();
        let layers = std::iter::once(Some(&self.llm))
            .chain(self.agents.values().map(|a| a.llm.as_deref()))
            .chain(self.populations.values().map(|p| p.llm.as_ref()))
            .chain(states.clone().map(|st| st.llm.as_ref()))
            .chain(
                states
                    .flat_map(|st| st.components.values())
                    .map(|c| c.llm.as_ref()),
            );
        let mut named: Vec<(BackendKind, Option<String>)> = layers
            .chain(self.probes.values().map(|p| p.llm.as_ref()))
            .chain(std::iter::once(
                self.judge.as_ref().and_then(|j| j.llm.as_ref()),
            ))
            .flatten()
            .filter_map(|l| Some((l.backend?, l.model.clone())))
            .collect();
        named.sort();
        named.dedup();
        named
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
