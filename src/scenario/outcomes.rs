//! The `outcomes` section of a scenario: what `sopsim bench` reads out of a finished run
//! (decisions and scores from the agents' messages, payoffs over the decisions), and
//! its compiled form, which validation builds once to report every problem by field.

use indexmap::IndexMap;
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::format::Scenario;
use super::path::FieldPath;

/// What a benchmark measures in each run, besides the generic figures (turns, calls,
/// tokens, latency) every scenario gets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Outcomes {
    /// The agents scored, in the order of the payoff table's keys and values (default:
    /// every agent with a role in the decision's state, in file order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub players: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payoff: Option<Payoff>,
    /// Extra per-agent numbers read from messages, by name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub scores: IndexMap<String, ScoreRule>,
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
    Number(f64),
    Choice(String),
}

/// Which of several matches counts.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Take {
    First,
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
    #[serde(default)]
    pub reduce: Reduce,
}

/// How an agent's matches become one score.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Reduce {
    First,
    #[default]
    Last,
    Sum,
    Mean,
    Count,
}

/// The outcome rules, checked and ready to apply to transcripts.
#[derive(Debug, Clone)]
pub struct OutcomeRules {
    pub players: Vec<String>,
    pub decision: Option<CompiledDecision>,
    pub payoff: Option<CompiledPayoff>,
    pub scores: Vec<CompiledScore>,
    /// The headline figures, in order.
    pub report: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct CompiledDecision {
    pub rule: DecisionRule,
    pub pattern: Option<Regex>,
    /// Whether the players decide with a `choice` component (then runs report the
    /// probabilities the model gave: `p.VALUE`, or `expected_decision` for numbers).
    pub chosen: bool,
}

#[derive(Debug, Clone)]
pub enum CompiledPayoff {
    /// Joint key (normalised choices joined by `,`) → payoffs in player order.
    Table(IndexMap<String, Vec<f64>>),
    Formula(String),
}

#[derive(Debug, Clone)]
pub struct CompiledScore {
    pub name: String,
    pub rule: ScoreRule,
    pub agents: Vec<String>,
    pub pattern: Regex,
}

/// The figures `sopsim bench` reports for every scenario, outcomes or not.
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

/// Joint choice tables grow as values^players; beyond this the file is unreadable anyway.
const MAX_TABLE_ROWS: usize = 4096;

impl OutcomeRules {
    /// Checks the section against the scenario; every problem comes back with its field.
    pub fn compile(
        outcomes: &Outcomes,
        scenario: &Scenario,
        path: &FieldPath,
    ) -> Result<Self, Vec<(FieldPath, String)>> {
        let mut problems = Vec::new();
        let decision = outcomes
            .decision
            .as_ref()
            .and_then(|d| compile_decision(d, scenario, &path.key("decision"), &mut problems));
        let players = if outcomes.players.is_empty() {
            default_players(scenario, outcomes.decision.as_ref())
        } else {
            for (i, p) in outcomes.players.iter().enumerate() {
                if !scenario.agents.contains_key(p) {
                    problems.push((path.key("players").index(i), format!("unknown agent {p:?}")));
                }
            }
            outcomes.players.clone()
        };
        let payoff = outcomes.payoff.as_ref().and_then(|p| {
            compile_payoff(p, outcomes, &players, &path.key("payoff"), &mut problems)
        });
        let scores = outcomes
            .scores
            .iter()
            .filter_map(|(name, rule)| {
                compile_score(
                    name,
                    rule,
                    scenario,
                    &players,
                    &path.key("scores").key(name),
                    &mut problems,
                )
            })
            .collect::<Vec<_>>();
        let mut rules = OutcomeRules {
            players,
            decision,
            payoff,
            scores,
            report: Vec::new(),
        };
        let known = rules.figure_names();
        if outcomes.report.is_empty() {
            rules.report = known;
        } else {
            for (i, f) in outcomes.report.iter().enumerate() {
                if !known.contains(f) && !GENERIC_FIGURES.contains(&f.as_str()) {
                    problems.push((
                        path.key("report").index(i),
                        format!("unknown figure {f:?} (known: {})", known.join(", ")),
                    ));
                }
            }
            rules.report = outcomes.report.clone();
        }
        if problems.is_empty() {
            Ok(rules)
        } else {
            Err(problems)
        }
    }

    /// The outcome figures these rules produce for every run, in report order.
    pub fn figure_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.payoff.is_some() {
            names.extend(self.players.iter().map(|p| format!("payoff.{p}")));
            names.extend(["welfare".to_string(), "equality".to_string()]);
        }
        if let Some(d) = &self.decision {
            if !d.rule.cooperative.is_empty() || d.rule.range.is_some() {
                names.push("cooperation_rate".into());
            }
            names.extend(["rounds".to_string(), "decision_failures".to_string()]);
            if d.chosen {
                if d.rule.values.is_empty() {
                    names.push("expected_decision".into());
                } else {
                    names.extend(d.rule.values.iter().map(|v| format!("p.{}", choice_key(v))));
                }
            }
        }
        for s in &self.scores {
            names.extend(s.agents.iter().map(|a| format!("score.{}.{a}", s.name)));
            names.push(format!("score.{}", s.name));
        }
        names
    }
}

fn default_players(scenario: &Scenario, decision: Option<&DecisionRule>) -> Vec<String> {
    let state = decision.and_then(|d| d.state.as_deref());
    scenario
        .agents
        .iter()
        .filter(|(_, a)| state.is_none_or(|s| a.roles.contains_key(s)))
        .map(|(name, _)| name.clone())
        .collect()
}

fn regex(pattern: &str, path: FieldPath, problems: &mut Vec<(FieldPath, String)>) -> Option<Regex> {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| problems.push((path, format!("not a valid regular expression: {e}"))))
        .ok()
}

fn known_state(
    state: &Option<String>,
    scenario: &Scenario,
    path: FieldPath,
    problems: &mut Vec<(FieldPath, String)>,
) {
    if let Some(s) = state {
        if !scenario.sop.states.contains_key(s) {
            problems.push((path, format!("unknown state {s:?}")));
        }
    }
}

/// Normalises a choice for comparison: trimmed, upper case.
pub fn choice_key(text: &str) -> String {
    text.trim().to_uppercase()
}

fn compile_decision(
    d: &DecisionRule,
    scenario: &Scenario,
    path: &FieldPath,
    problems: &mut Vec<(FieldPath, String)>,
) -> Option<CompiledDecision> {
    known_state(&d.state, scenario, path.key("state"), problems);
    let values: Vec<String> = d.values.iter().map(|v| choice_key(v)).collect();
    for (i, c) in d.cooperative.iter().enumerate() {
        if !values.contains(&choice_key(c)) {
            problems.push((
                path.key("cooperative").index(i),
                format!("{c:?} is not one of values ({})", d.values.join(", ")),
            ));
        }
    }
    if !d.values.is_empty() && d.range.is_some() {
        problems.push((
            path.key("range"),
            "range is for numeric decisions; drop it or values".into(),
        ));
    }
    if let Some([lo, hi]) = d.range {
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            problems.push((
                path.key("range"),
                format!("[{lo}, {hi}] is not a range: min must be below max"),
            ));
        }
    }
    match (&d.default, d.values.is_empty()) {
        (Some(DecisionValue::Choice(c)), false) if !values.contains(&choice_key(c)) => problems
            .push((
                path.key("default"),
                format!("{c:?} is not one of values ({})", d.values.join(", ")),
            )),
        (Some(DecisionValue::Choice(c)), true) => problems.push((
            path.key("default"),
            format!("{c:?} is not a number (this decision has no values, so it is numeric)"),
        )),
        (Some(DecisionValue::Number(n)), false) => problems.push((
            path.key("default"),
            format!("{n} is not one of values ({})", d.values.join(", ")),
        )),
        _ => {}
    }
    let chosen = choice_components(scenario, d.state.as_deref());
    for (at, options) in &chosen {
        for o in options {
            let readable = if values.is_empty() {
                o.parse::<f64>()
                    .is_ok_and(|n| d.range.is_none_or(|[lo, hi]| (lo..=hi).contains(&n)))
            } else {
                values.contains(&choice_key(o))
            };
            if !readable {
                problems.push((
                    path.clone(),
                    format!(
                        "the choice option {o:?} of {at} is not a decision value here ({})",
                        if values.is_empty() {
                            "a number in range".to_string()
                        } else {
                            d.values.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    let pattern = match &d.pattern {
        Some(p) => Some(regex(p, path.key("pattern"), problems)?),
        None if chosen.is_empty() => {
            problems.push((
                path.key("pattern"),
                "give a pattern to read decisions from the text, or a choice component to the players' roles".into(),
            ));
            return None;
        }
        None => None,
    };
    Some(CompiledDecision {
        rule: d.clone(),
        pattern,
        chosen: !chosen.is_empty(),
    })
}

/// Every `choice` component in `state` (or anywhere), by where it is, with its options.
fn choice_components(scenario: &Scenario, state: Option<&str>) -> Vec<(String, Vec<String>)> {
    scenario
        .sop
        .states
        .iter()
        .filter(|(name, _)| state.is_none_or(|s| s == name.as_str()))
        .flat_map(|(name, st)| {
            st.components.iter().filter_map(move |(role, c)| {
                c.choice
                    .as_ref()
                    .map(|ch| (format!("sop.states.{name}.components.{role}"), ch.options()))
            })
        })
        .collect()
}

fn compile_payoff(
    p: &Payoff,
    outcomes: &Outcomes,
    players: &[String],
    path: &FieldPath,
    problems: &mut Vec<(FieldPath, String)>,
) -> Option<CompiledPayoff> {
    let Some(decision) = &outcomes.decision else {
        problems.push((path.clone(), "a payoff needs a decision to pay for".into()));
        return None;
    };
    match (p.table.is_empty(), &p.formula) {
        (false, Some(_)) | (true, None) => {
            problems.push((path.clone(), "give exactly one of table and formula".into()));
            None
        }
        (true, Some(formula)) => {
            // A trial evaluation catches unknown names and non-numbers before any run.
            let trial = if decision.values.is_empty() {
                FormulaInputs::numeric(1.0, &[1.0, 2.0], 1)
            } else {
                let values: Vec<String> = decision.values.iter().map(|v| choice_key(v)).collect();
                FormulaInputs::choices(&values[0], &values[..1], &values, 1)
            };
            let env = minijinja::Environment::new();
            if let Ok(expr) = env.compile_expression(formula) {
                let mut unknown: Vec<String> = expr
                    .undeclared_variables(false)
                    .into_iter()
                    .filter(|v| !FORMULA_NAMES.contains(&v.as_str()))
                    .collect();
                if !unknown.is_empty() {
                    unknown.sort();
                    problems.push((
                        path.key("formula"),
                        format!(
                            "unknown name(s) {} (known: {})",
                            unknown.join(", "),
                            FORMULA_NAMES.join(", ")
                        ),
                    ));
                    return None;
                }
            }
            match evaluate_formula(formula, &trial) {
                Ok(_) => Some(CompiledPayoff::Formula(formula.clone())),
                Err(e) => {
                    problems.push((path.key("formula"), e));
                    None
                }
            }
        }
        (false, None) => {
            if decision.values.is_empty() {
                problems.push((
                    path.key("table"),
                    "a table needs choice decisions (decision.values); use formula for numbers"
                        .into(),
                ));
                return None;
            }
            let values: Vec<String> = decision.values.iter().map(|v| choice_key(v)).collect();
            let rows = values
                .len()
                .checked_pow(players.len() as u32)
                .unwrap_or(usize::MAX);
            if rows > MAX_TABLE_ROWS {
                problems.push((
                    path.key("table"),
                    format!(
                        "{} values over {} players make {rows} combinations; use formula",
                        values.len(),
                        players.len()
                    ),
                ));
                return None;
            }
            let mut table = IndexMap::new();
            for (key, pay) in &p.table {
                let parts: Vec<String> = key.split(',').map(choice_key).collect();
                let kpath = path.key("table").key(key);
                if parts.len() != players.len() {
                    problems.push((
                        kpath,
                        format!(
                            "names {} decisions; there are {} players ({})",
                            parts.len(),
                            players.len(),
                            players.join(", ")
                        ),
                    ));
                    continue;
                }
                if let Some(bad) = parts.iter().find(|c| !values.contains(c)) {
                    problems.push((
                        kpath,
                        format!(
                            "{bad:?} is not one of decision.values ({})",
                            decision.values.join(", ")
                        ),
                    ));
                    continue;
                }
                if pay.len() != players.len() {
                    problems.push((
                        kpath,
                        format!("{} payoffs for {} players", pay.len(), players.len()),
                    ));
                    continue;
                }
                table.insert(parts.join(","), pay.clone());
            }
            let missing: Vec<String> = joint_keys(&values, players.len())
                .into_iter()
                .filter(|k| !table.contains_key(k))
                .collect();
            if !missing.is_empty() && problems.is_empty() {
                problems.push((
                    path.key("table"),
                    format!("missing combinations: {}", missing.join("; ")),
                ));
            }
            Some(CompiledPayoff::Table(table))
        }
    }
}

/// The names a payoff formula may use.
const FORMULA_NAMES: &[&str] = &[
    "own",
    "sum",
    "mean",
    "min",
    "max",
    "n",
    "others_sum",
    "others_mean",
    "counts",
    "round",
];

/// The variables a payoff formula sees for one player in one round.
#[derive(Debug, Clone, Serialize)]
pub struct FormulaInputs {
    own: serde_json::Value,
    n: usize,
    round: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    sum: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    others_sum: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    others_mean: Option<f64>,
    counts: IndexMap<String, usize>,
}

impl FormulaInputs {
    /// `own` among the numeric decisions `all` (which include it once).
    pub fn numeric(own: f64, all: &[f64], round: usize) -> Self {
        let n = all.len();
        let sum: f64 = all.iter().sum();
        let others = n.saturating_sub(1);
        Self {
            own: own.into(),
            n,
            round,
            sum: Some(sum),
            mean: Some(sum / n as f64),
            min: all.iter().copied().reduce(f64::min),
            max: all.iter().copied().reduce(f64::max),
            others_sum: Some(sum - own),
            others_mean: (others > 0).then(|| (sum - own) / others as f64),
            counts: IndexMap::new(),
        }
    }

    /// `own` among the choices `all`; `counts` has every one of `values`, chosen or not.
    pub fn choices(own: &str, all: &[String], values: &[String], round: usize) -> Self {
        let mut counts: IndexMap<String, usize> = values.iter().map(|v| (v.clone(), 0)).collect();
        for c in all {
            *counts.entry(c.clone()).or_insert(0) += 1;
        }
        Self {
            own: own.into(),
            n: all.len(),
            round,
            sum: None,
            mean: None,
            min: None,
            max: None,
            others_sum: None,
            others_mean: None,
            counts,
        }
    }
}

/// One player's payoff from a formula; an error says what is wrong with it.
pub fn evaluate_formula(formula: &str, inputs: &FormulaInputs) -> Result<f64, String> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    let expr = env
        .compile_expression(formula)
        .map_err(|e| format!("not a valid expression: {e}"))?;
    let value = expr
        .eval(minijinja::Value::from_serialize(inputs))
        .map_err(|e| format!("cannot evaluate: {e}"))?;
    f64::try_from(value.clone())
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("gives {value}, not a finite number"))
}

/// Every joint decision, as table keys.
fn joint_keys(values: &[String], players: usize) -> Vec<String> {
    let mut keys = vec![String::new()];
    for i in 0..players {
        keys = keys
            .iter()
            .flat_map(|k| {
                values.iter().map(move |v| {
                    if i == 0 {
                        v.clone()
                    } else {
                        format!("{k},{v}")
                    }
                })
            })
            .collect();
    }
    keys
}

fn compile_score(
    name: &str,
    rule: &ScoreRule,
    scenario: &Scenario,
    players: &[String],
    path: &FieldPath,
    problems: &mut Vec<(FieldPath, String)>,
) -> Option<CompiledScore> {
    known_state(&rule.state, scenario, path.key("state"), problems);
    if name.is_empty() || name.contains('.') {
        problems.push((
            path.clone(),
            "a score's name must be non-empty and have no '.'".into(),
        ));
    }
    for (i, a) in rule.agents.iter().enumerate() {
        if !scenario.agents.contains_key(a) {
            problems.push((path.key("agents").index(i), format!("unknown agent {a:?}")));
        }
    }
    let pattern = regex(&rule.pattern, path.key("pattern"), problems)?;
    if rule.reduce != Reduce::Count && pattern.captures_len() < 2 {
        problems.push((
            path.key("pattern"),
            "needs a capture group around the number, e.g. \"score: (\\\\d+)\"".into(),
        ));
    }
    Some(CompiledScore {
        name: name.to_string(),
        agents: if rule.agents.is_empty() {
            players.to_vec()
        } else {
            rule.agents.clone()
        },
        rule: rule.clone(),
        pattern,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joint_keys_cover_every_combination_in_player_order() {
        let v = ["C".to_string(), "D".to_string()];
        assert_eq!(joint_keys(&v, 2), ["C,C", "C,D", "D,C", "D,D"]);
        assert_eq!(joint_keys(&v, 1), ["C", "D"]);
    }
}
