//! The `world` section: named numbers that carry from round to round (fish in a
//! lake, money in each wallet), updated after each round of a state by formulas over
//! the round's decisions; conditions that end the run; and the `strategy` of an agent
//! that plays by a rule instead of a model. Types and their checks; the running world
//! is `crate::world`.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::format::Scenario;
use super::population::Distribution;

/// Numbers that carry from round to round.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorldSpec {
    /// The state whose visits are the world's rounds (`round` counts them): default,
    /// the state the first variable's `update` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The variables by name, updated in this order after each round of their state;
    /// each formula sees the values from before its own step. Prompts show them as
    /// `{{ world.NAME }}` (global) and `{{ me.NAME }}` (per agent).
    pub variables: IndexMap<String, VariableSpec>,
    /// Conditions that end the run after a round, by name: a formula over `world`
    /// and `round` that is true or false (`"world.fish < 5"`). The first true one
    /// ends the run (`ended_by: end_if`, `ended_if` naming it).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub end_if: IndexMap<String, String>,
    /// The most bytes a text that shows the world may render, and a value a formula
    /// or template makes may hold (default 1 MiB, at most 64 MiB). `validate` refuses
    /// what can be seen to make more; a render that writes more stops the run, naming
    /// the text, the round and the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1024, max = 67108864))]
    pub max_render_bytes: Option<u64>,
}

/// One variable of the world.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VariableSpec {
    /// One value per agent (a wallet, a catch) rather than one for the world.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_agent: bool,
    /// The value before the first round: a number, or for a per-agent variable a
    /// seeded draw for each agent (`{"uniform": [lo, hi]}`, `{"integers": [lo, hi]}`,
    /// `{"one_of": [numbers]}`).
    pub initial: Initial,
    /// The smallest and largest values it may take: a value outside stops the run,
    /// naming the variable, the round and the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// The largest value it may take: a value above it stops the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// The state after each of whose visits `update` runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The new value, a formula (minijinja syntax) over the round's decisions in that
    /// state (`sum`, `mean`, `min`, `max`, `n`, `counts`, and for a per-agent
    /// variable the agent's own: `own`, `others_sum`, `others_mean`, `name`, `payoff`
    /// when the outcomes pay the round), the variables (`world.NAME`, and `me.NAME` in
    /// a per-agent formula), `round` and `rounds`. Without it the variable keeps its
    /// value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<String>,
}

/// A variable's first value.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum Initial {
    /// One number: the variable's value, or every agent's.
    Number(f64),
    /// A seeded draw for each agent (a per-agent variable only).
    Draw(Distribution),
}

/// How an agent plays without a model: a built-in rule, or a formula over the history.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StrategySpec {
    /// A built-in rule (or give `formula`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<BuiltIn>,
    /// `random`: the probability of cooperating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub p: Option<f64>,
    /// The move as a formula (minijinja syntax) that gives one of the options, over
    /// `round` (from 1), `own_last` and `opponent_last` (the last moves, `none` in the
    /// first round), `others_last` (the others' last moves), `cooperate` and `defect`
    /// (the two moves below), `options`, `world` and `me`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// The move that counts as cooperating (default: the decision's first
    /// `cooperative` value, or the top of a numeric range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooperate: Option<String>,
    /// The move that counts as defecting (default: the first value that does not
    /// cooperate, or the bottom of a numeric range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defect: Option<String>,
    /// What the player says, a template over `choice`, `round`, `world` and `me`
    /// (default: the choice alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub say: Option<String>,
}

/// The built-in strategies of repeated games.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BuiltIn {
    /// Always cooperates.
    AlwaysCooperate,
    /// Always defects.
    AlwaysDefect,
    /// Cooperates first, then does what the others did last (most of them, if several).
    TitForTat,
    /// Cooperates until any other defects, then defects for ever.
    GrimTrigger,
    /// Cooperates, defects, cooperates… by round.
    Alternate,
    /// Cooperates with probability `p`, drawn from the run's seed.
    Random,
    /// Defects in the first round, then cooperates (Akata et al.'s test of
    /// forgiveness).
    DefectOnceThenCooperate,
}

impl BuiltIn {
    /// The rule's name, as a scenario file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            BuiltIn::AlwaysCooperate => "always_cooperate",
            BuiltIn::AlwaysDefect => "always_defect",
            BuiltIn::TitForTat => "tit_for_tat",
            BuiltIn::GrimTrigger => "grim_trigger",
            BuiltIn::Alternate => "alternate",
            BuiltIn::Random => "random",
            BuiltIn::DefectOnceThenCooperate => "defect_once_then_cooperate",
        }
    }
}

impl StrategySpec {
    /// How the strategy is named in figures: `strategy:tit_for_tat`, or
    /// `strategy:formula`.
    pub fn label(&self) -> String {
        match self.rule {
            Some(rule) => format!("strategy:{}", rule.as_str()),
            None => "strategy:formula".to_string(),
        }
    }
}

impl WorldSpec {
    /// The state whose visits count as the world's rounds.
    pub fn round_state(&self) -> Option<&str> {
        self.state
            .as_deref()
            .or_else(|| self.variables.values().find_map(|v| v.state.as_deref()))
    }
}

/// The moves that cooperate and defect for `agent`'s strategy: its own `cooperate` and
/// `defect`, else the outcomes' cooperative values, else a numeric range's top and
/// bottom. Either may be missing (validation says so).
pub fn moves_of(
    scenario: &Scenario,
    agent: &str,
    spec: &StrategySpec,
) -> (Option<String>, Option<String>) {
    let options = options_of(scenario, agent);
    let numeric: Option<Vec<f64>> = options.iter().map(|o| o.trim().parse().ok()).collect();
    let cooperative: Vec<String> = scenario
        .outcomes
        .as_ref()
        .and_then(|o| o.decision.as_ref())
        .map(|d| d.cooperative.clone())
        .unwrap_or_default();
    let is_cooperative = |o: &String| cooperative.iter().any(|c| c.eq_ignore_ascii_case(o.trim()));
    let (cooperate, defect) = match numeric.filter(|n| !n.is_empty()) {
        Some(numbers) => {
            let at = |pick: fn(f64, f64) -> bool| {
                let mut best = 0;
                for (i, n) in numbers.iter().enumerate() {
                    if pick(*n, numbers[best]) {
                        best = i;
                    }
                }
                options.get(best).cloned()
            };
            (at(|a, b| a > b), at(|a, b| a < b))
        }
        None => (
            options.iter().find(|o| is_cooperative(o)).cloned(),
            options
                .iter()
                .find(|o| !cooperative.is_empty() && !is_cooperative(o))
                .cloned(),
        ),
    };
    (
        spec.cooperate.clone().or(cooperate),
        spec.defect.clone().or(defect),
    )
}

/// The options of the first choice the agent makes, in state order.
pub fn options_of(scenario: &Scenario, agent: &str) -> Vec<String> {
    let Some(spec) = scenario.agents.get(agent) else {
        return Vec::new();
    };
    scenario
        .sop
        .states
        .iter()
        .filter_map(|(state, st)| {
            let role = spec.roles.get(state)?;
            st.components.get(role)?.choice.as_ref()
        })
        .map(|c| c.options())
        .next()
        .unwrap_or_default()
}
