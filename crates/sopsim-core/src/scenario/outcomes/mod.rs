//! The `outcomes` section of a scenario: what `sopsim bench` reads out of a finished run
//! (decisions and scores from the agents' messages, payoffs over the decisions), and
//! its compiled form, which validation builds once to report every problem by field.

use indexmap::IndexMap;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod compile;
mod formula;

pub use compile::choice_key;
pub use formula::{compile_formula, evaluate_formula, Bounded, FormulaError, FormulaInputs};

/// What a benchmark measures in each run, besides the generic figures (turns, calls,
/// tokens, latency) every scenario gets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Outcomes {
    /// The agents scored, in the order of the payoff table's keys and values (default:
    /// every agent with a role in the decision's state, in file order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub players: Vec<String>,
    /// How each player's decision is read from its messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRule>,
    /// What each player earns in a round, from the players' decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payoff: Option<Payoff>,
    /// Extra per-agent numbers read from messages, by name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub scores: IndexMap<String, ScoreRule>,
    /// Figures over the world's history, by name (`measure.NAME`): formulas over
    /// `final` and `initial` (each variable's last and first value; a per-agent
    /// variable's mean over the agents), `history` (each global variable's value after
    /// every round), `rounds` (rounds played) and `ended_early` (1 when an `end_if`
    /// ended the run). Over-usage, say: `"final.overused / rounds"`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub measures: IndexMap<String, String>,
    /// The figures of the report's headline table (default: every outcome figure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub report: Vec<String>,
}

/// How each player's decision is read: from the `decision` its `choice` component
/// stored on its messages, else from its text with `pattern`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DecisionRule {
    /// A regular expression; its first capture group (else the whole match) is the
    /// decision. Matched case-insensitively. Needed unless the players' roles have a
    /// `choice` component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Only messages in this state count, and each visit of it is one round. Without
    /// it, the whole run is one round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Which match counts when a player's messages in a round match several times.
    #[serde(default)]
    pub take: Take,
    /// The possible choices, matched case-insensitively and reported as written here.
    /// Without `values`, decisions are numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The choices that count as cooperating (`cooperation_rate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cooperative: Vec<String>,
    /// Numeric decisions: the allowed `[min, max]`; a number outside is unreadable.
    /// `cooperation_rate` is the mean of `(value - min) / (max - min)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    /// The decision assumed for a player with no readable decision in a round (it is
    /// counted in `decision_failures` either way). Without it, that round earns no payoffs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DecisionValue>,
}

/// A choice or a number.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum DecisionValue {
    /// A numeric decision.
    Number(f64),
    /// One of the decision's `values`.
    Choice(String),
}

/// Which of several matches counts.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Take {
    /// The first match.
    First,
    /// The last match.
    #[default]
    Last,
}

/// What each player earns in a round. Exactly one of `table` and `formula`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Payoff {
    /// Joint decisions in `players` order, joined by `,` (e.g. `"COOPERATE,DEFECT"`) →
    /// each player's payoff, in the same order. Every combination must be listed.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub table: IndexMap<String, Vec<f64>>,
    /// One player's payoff as an expression (minijinja syntax) over `own`, `sum`,
    /// `mean`, `min`, `max`, `n`, `others_sum`, `others_mean` (numeric decisions),
    /// `counts` (each of `values` → how many chose it this round), and `round` (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// Games on a population's network: each player plays each of its neighbours with
    /// the two-player `table` (rows `"MINE,THEIRS"` → `[mine, theirs]`) and earns the
    /// sum, every round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pairwise: bool,
}

/// A number read from an agent's messages.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScoreRule {
    /// A regular expression; its first capture group is the number. With `reduce:
    /// count`, the matches are counted and need no group.
    pub pattern: String,
    /// Only messages in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The agents scored (default: the players).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// How an agent's matches become one score (default: the last).
    #[serde(default)]
    pub reduce: Reduce,
}

/// How an agent's matches become one score.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Reduce {
    /// The first number matched.
    First,
    /// The last number matched.
    #[default]
    Last,
    /// The sum of the numbers matched.
    Sum,
    /// The mean of the numbers matched.
    Mean,
    /// How many times the pattern matched.
    Count,
}

/// The outcome rules, checked and ready to apply to transcripts.
#[derive(Debug, Clone)]
pub struct OutcomeRules {
    /// The agents scored, in order.
    pub players: Vec<String>,
    /// Per player: its population (an index into `populations`) and member number;
    /// `None` for an agent the file names.
    pub members: Vec<Option<(usize, u32)>>,
    /// The scenario's populations, in order (their networks are drawn per run).
    pub populations: Vec<(String, crate::scenario::PopulationSpec)>,
    /// Whether the payoff table is played pairwise over the networks.
    pub pairwise: bool,
    /// How decisions are read, checked; `None` without a decision rule.
    pub decision: Option<CompiledDecision>,
    /// The payoff rule, checked; `None` without one.
    pub payoff: Option<CompiledPayoff>,
    /// The score rules, checked, in file order.
    pub scores: Vec<CompiledScore>,
    /// The world's variables and measures, when the scenario has a world.
    pub world: Option<WorldFigures>,
    /// Per player, what plays it (`strategy:tit_for_tat`, `local:qwen15`, `run` for the
    /// run's own backend), when players are played by two or more: the report then
    /// gives payoffs and cooperation by what plays.
    pub played_by: Option<Vec<String>>,
    /// The headline figures, in order.
    pub report: Vec<String>,
}

/// What a report reads out of `world.jsonl`.
#[derive(Debug, Clone, Default)]
pub struct WorldFigures {
    /// Variables by name, and whether each is per agent.
    pub variables: Vec<(String, bool)>,
    /// `outcomes.measures`.
    pub measures: IndexMap<String, String>,
    /// The variables' first values, where they are one number.
    pub initial: IndexMap<String, f64>,
}

impl WorldFigures {
    /// The figures, in report order: `rounds_survived`, `ended_early`, each variable's
    /// `world.NAME.final`, `.mean` and `.min`, then `measure.NAME`.
    pub fn names(&self) -> Vec<String> {
        let mut names = vec!["rounds_survived".to_string(), "ended_early".to_string()];
        for (v, _) in &self.variables {
            for what in ["final", "mean", "min"] {
                names.push(format!("world.{v}.{what}"));
            }
        }
        names.extend(self.measures.keys().map(|m| format!("measure.{m}")));
        names
    }
}

/// A decision rule, checked, with its pattern compiled and the options its choices offer.
#[derive(Debug, Clone)]
pub struct CompiledDecision {
    /// The rule as the file states it.
    pub rule: DecisionRule,
    /// The compiled `pattern` (case-insensitive), if the rule has one.
    pub pattern: Option<Regex>,
    /// Whether the players decide with a `choice` component (then runs report the
    /// probabilities the model gave: `p.VALUE` for each value, and `expected_decision`
    /// for numbers).
    pub chosen: bool,
    /// What the choice components offer, in order, each once: for a numeric decision
    /// (a range), the values that get a `p.VALUE`, written as the options are.
    pub options: Vec<String>,
}

/// A payoff rule, checked.
#[derive(Debug, Clone)]
pub enum CompiledPayoff {
    /// Joint key (normalised choices joined by `,`) → payoffs in player order.
    Table(IndexMap<String, Vec<f64>>),
    /// One player's payoff as a formula, checked to evaluate.
    Formula(String),
}

/// A score rule, checked, with its pattern compiled.
#[derive(Debug, Clone)]
pub struct CompiledScore {
    /// The score's name.
    pub name: String,
    /// The rule as the file states it.
    pub rule: ScoreRule,
    /// The agents scored: the rule's own, or else the players.
    pub agents: Vec<String>,
    /// The compiled `pattern` (case-insensitive).
    pub pattern: Regex,
}

/// The figures `sopsim bench` reports for every scenario, outcomes or not, followed by
/// [`QUALITY_FIGURES`].
pub const GENERIC_FIGURES: &[&str] = &[
    "turns",
    "reached_end",
    "turns_to_end",
    "llm_calls",
    "llm_calls.act",
    "llm_calls.route",
    "llm_calls.transit",
    "llm_calls.summary",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_per_turn",
    "controller_failures",
    "judge_failures",
];

/// Whether a figure is bounded: a rate, share, probability or index within [0, 1], or
/// a score on a scale (a judged dimension, a probe's answer). Its interval must stay
/// inside the bounds.
pub fn is_bounded_figure(name: &str) -> bool {
    matches!(
        name,
        "cooperation_rate" | "equality" | "reached_end" | "ended_early"
    ) || [
        "share.",
        "p.",
        "quality.",
        "cooperation_rate.",
        "judge.",
        "probe.",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// The reply-quality figures ([`ReplyQuality`](crate::quality::ReplyQuality)), shown as a table of their own.
pub const QUALITY_FIGURES: &[&str] = &[
    "quality.copy",
    "quality.label",
    "quality.narration",
    "quality.echo",
    "quality.empty",
    "quality.cut",
    "quality.stage",
    "quality.impersonation",
    "quality.foreign",
    "quality.paraphrase",
    "quality.off_stake",
    "quality.refusal",
    "quality.distinct_2",
];
