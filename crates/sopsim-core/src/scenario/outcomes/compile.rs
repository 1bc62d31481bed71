//! Compiling the `outcomes` section against its scenario: every problem reported with
//! its field, tables checked for every joint decision, patterns and formulas tried.

use regex::{Regex, RegexBuilder};

use super::*;
use crate::scenario::format::Scenario;

mod payoff;

use crate::scenario::path::FieldPath;
use payoff::compile_payoff;

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
        let populations: Vec<(String, crate::scenario::PopulationSpec)> = scenario
            .populations
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        let members: Vec<Option<(usize, u32)>> = players
            .iter()
            .map(|p| {
                let m = scenario.agents.get(p)?.member.as_ref()?;
                let at = scenario.populations.get_index_of(&m.population)?;
                Some((at, m.index))
            })
            .collect();
        let pairwise = outcomes.payoff.as_ref().is_some_and(|p| p.pairwise);
        if pairwise && members.iter().any(Option::is_none) {
            problems.push((
                path.key("payoff").key("pairwise"),
                "pairwise games are played on populations' networks: every player must be a \
                 population member"
                    .into(),
            ));
        }
        let world = scenario.world.as_ref().map(|w| WorldFigures {
            variables: w
                .variables
                .iter()
                .map(|(k, v)| (k.clone(), v.per_agent))
                .collect(),
            measures: outcomes.measures.clone(),
            initial: w
                .variables
                .iter()
                .filter_map(|(k, v)| match v.initial {
                    crate::scenario::Initial::Number(x) => Some((k.clone(), x)),
                    crate::scenario::Initial::Draw(_) => None,
                })
                .collect(),
        });
        if world.is_none() && !outcomes.measures.is_empty() {
            problems.push((
                path.key("measures"),
                "measures are over the world's history, and the scenario has no `world`".into(),
            ));
        }
        for (name, formula) in &outcomes.measures {
            let at = path.key("measures").key(name);
            let bounded = crate::scenario::Bounded {
                leaf: &crate::scenario::expr::measure_leaf,
                sizes: crate::scenario::expr::measure_sizes(scenario.sop.max_turns),
            };
            match crate::scenario::expr::formula_names(formula, bounded) {
                Ok(names) => {
                    for n in names {
                        let head = n.split('.').next().unwrap_or_default();
                        if !["final", "initial", "history", "rounds", "ended_early"].contains(&head)
                        {
                            problems.push((
                                at.clone(),
                                format!(
                                    "unknown name {head:?} (here: final, initial, history, rounds, ended_early)"
                                ),
                            ));
                        }
                    }
                }
                Err(e) => problems.push((at, crate::error_chain::chain(&e))),
            }
        }
        let labels: Vec<String> = players
            .iter()
            .map(|p| player_label(scenario, p, outcomes.decision.as_ref()))
            .collect();
        let played_by = {
            let mut distinct = labels.clone();
            distinct.sort();
            distinct.dedup();
            (distinct.len() > 1).then_some(labels)
        };
        let mut rules = OutcomeRules {
            played_by,
            players,
            members,
            populations,
            pairwise,
            decision,
            payoff,
            scores,
            world,
            report: Vec::new(),
        };
        let known = rules.figure_names();
        // A part that failed to compile has already been reported; the figures it would
        // have produced are not "unknown" on top of that.
        let broken = |f: &str| {
            let decision_broken = outcomes.decision.is_some() && rules.decision.is_none();
            let payoff_broken = outcomes.payoff.is_some() && rules.payoff.is_none();
            (decision_broken
                && ([
                    "cooperation_rate",
                    "rounds",
                    "decision_failures",
                    "expected_decision",
                ]
                .contains(&f)
                    || f.starts_with("p.")
                    || f.starts_with("share.")))
                || (payoff_broken
                    && (f.starts_with("payoff.") || f == "welfare" || f == "equality"))
                || outcomes.scores.keys().any(|name| {
                    !rules.scores.iter().any(|s| &s.name == name)
                        && f.starts_with(&format!("score.{name}."))
                })
        };
        if outcomes.report.is_empty() {
            rules.report = known;
        } else {
            for (i, f) in outcomes.report.iter().enumerate() {
                if !known.contains(f)
                    && !GENERIC_FIGURES.contains(&f.as_str())
                    && !QUALITY_FIGURES.contains(&f.as_str())
                    && !broken(f)
                {
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
            // Members are many: their population's mean stands for them.
            names.extend(
                self.players
                    .iter()
                    .zip(&self.members)
                    .filter(|(_, m)| m.is_none())
                    .map(|(p, _)| format!("payoff.{p}")),
            );
            names.extend(
                self.populations
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| self.members.iter().flatten().any(|(p, _)| p == i))
                    .map(|(_, (key, _))| format!("payoff.{key}")),
            );
            names.extend(["welfare".to_string(), "equality".to_string()]);
        }
        if let Some(d) = &self.decision {
            if !d.rule.cooperative.is_empty() || d.rule.range.is_some() {
                names.push("cooperation_rate".into());
            }
            names.extend(["rounds".to_string(), "decision_failures".to_string()]);
            names.extend(
                d.rule
                    .values
                    .iter()
                    .map(|v| format!("share.{}", choice_key(v))),
            );
            if d.chosen {
                if d.rule.values.is_empty() {
                    names.push("expected_decision".into());
                    names.extend(d.options.iter().map(|v| format!("p.{v}")));
                } else {
                    names.extend(d.rule.values.iter().map(|v| format!("p.{}", choice_key(v))));
                }
            }
        }
        for s in &self.scores {
            names.extend(s.agents.iter().map(|a| format!("score.{}.{a}", s.name)));
            names.push(format!("score.{}", s.name));
        }
        if let Some(w) = &self.world {
            names.extend(w.names());
        }
        if let Some(labels) = &self.played_by {
            let mut seen = Vec::new();
            for l in labels {
                if !seen.contains(l) {
                    seen.push(l.clone());
                }
            }
            for l in &seen {
                if self.payoff.is_some() {
                    names.push(format!("payoff.by.{l}"));
                }
                if self
                    .decision
                    .as_ref()
                    .is_some_and(|d| !d.rule.cooperative.is_empty() || d.rule.range.is_some())
                {
                    names.push(format!("cooperation_rate.by.{l}"));
                }
            }
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
    let mut offered: Vec<String> = Vec::new();
    for o in chosen.iter().flat_map(|(_, options)| options) {
        if !offered.contains(o) {
            offered.push(o.clone());
        }
    }
    Some(CompiledDecision {
        rule: d.clone(),
        pattern,
        chosen: !chosen.is_empty(),
        options: offered,
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

/// What plays `player` in the decision's state: its strategy, the backend and model
/// its settings name, or the run's own backend.
fn player_label(scenario: &Scenario, player: &str, decision: Option<&DecisionRule>) -> String {
    let Some(agent) = scenario.agents.get(player) else {
        return "run".into();
    };
    if let Some(s) = &agent.strategy {
        return s.label();
    }
    let state = decision.and_then(|d| d.state.as_deref());
    let role = state.and_then(|s| agent.roles.get(s)).map(String::as_str);
    let settings = scenario.settings_for(state.unwrap_or(&scenario.sop.start), role, Some(player));
    match settings.backend {
        Some(b) => format!(
            "{}:{}",
            b.as_str(),
            settings.model.as_deref().unwrap_or("default")
        ),
        None => "run".into(),
    }
}
