//! One run's outcome figures: decisions, payoffs and scores read from its transcript
//! with the scenario's outcome rules (its summary's figures are `summary_figures.rs`'s,
//! its world's `world_figures.rs`'s). Pure: the input is what `sopsim run` wrote, so a
//! report can always be rebuilt from the run folders.

use std::collections::HashMap;

use indexmap::IndexMap;

use sopsim::scenario::{
    choice_key, evaluate_formula, CompiledDecision, CompiledPayoff, CompiledScore, DecisionValue,
    FormulaInputs, OutcomeRules, Reduce, Take,
};
use sopsim_core::memory::Message;

/// A figure per name; `None` where a run has no value (e.g. `turns_to_end` of a run
/// that never reached the end).
pub type Figures = IndexMap<String, Option<f64>>;

/// Why a finished run's outcomes could not be read out.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    /// The payoff table has no row for the choices made, given as its key.
    #[error("outcomes.payoff.table has no row {0:?}")]
    NoRow(String),
    /// The networks pairwise payoffs are played on could not be drawn.
    #[error("outcomes.payoff.pairwise")]
    Network(#[source] sopsim_core::network::NetworkError),
    /// The payoff formula could not be evaluated in a round.
    #[error("outcomes.payoff.formula: round {round}")]
    Formula {
        /// The round, from 1.
        round: usize,
        /// Why the formula failed.
        #[source]
        source: sopsim::scenario::FormulaError,
    },
}

/// A move as read from a decision: a normalised choice or a number.
#[derive(Debug, Clone, PartialEq)]
enum Move {
    Choice(String),
    Number(f64),
}

/// Per-round aggregates of one run: series name (`share.VALUE`, `mean_decision`,
/// `gini`) → one value per round (`None` where a round has none).
pub type RoundSeries = IndexMap<String, Vec<Option<f64>>>;

/// The outcome figures of one run's transcript, in `rules.figure_names()` order;
/// `seed` is the run's (pairwise games are played on the networks it drew).
pub fn outcome_figures(
    rules: &OutcomeRules,
    transcript: &[Message],
    seed: u64,
) -> Result<Figures, OutcomeError> {
    outcomes(rules, transcript, seed).map(|(figures, _)| figures)
}

/// [`outcome_figures`] and the run's per-round series.
pub fn outcomes(
    rules: &OutcomeRules,
    transcript: &[Message],
    seed: u64,
) -> Result<(Figures, RoundSeries), OutcomeError> {
    let mut f = Figures::new();
    let mut series = RoundSeries::new();
    if let Some(decision) = &rules.decision {
        decisions(rules, decision, transcript, seed, &mut f, &mut series)?;
    }
    for score in &rules.scores {
        scores(score, transcript, &mut f);
    }
    // Order as declared, so every run's figures line up.
    let figures = rules
        .figure_names()
        .into_iter()
        .map(|name| {
            let v = f.get(&name).copied().flatten();
            (name, v)
        })
        .collect();
    Ok((figures, series))
}

/// Messages of the decision's state grouped by visit (one round each), in order.
fn rounds<'a>(decision: &CompiledDecision, transcript: &'a [Message]) -> Vec<Vec<&'a Message>> {
    let Some(state) = &decision.rule.state else {
        return vec![transcript.iter().collect()];
    };
    let mut by_visit: IndexMap<u32, Vec<&Message>> = IndexMap::new();
    for m in transcript.iter().filter(|m| &m.state == state) {
        by_visit.entry(m.visit).or_default().push(m);
    }
    by_visit.into_values().collect()
}

/// A choice or a number as the rule reads it, if it is a valid one.
fn readable(rule: &sopsim::scenario::DecisionRule, values: &[String], text: &str) -> Option<Move> {
    if values.is_empty() {
        let n: f64 = text.trim().parse().ok()?;
        let in_range = rule.range.is_none_or(|[lo, hi]| (lo..=hi).contains(&n));
        (n.is_finite() && in_range).then_some(Move::Number(n))
    } else {
        let key = choice_key(text);
        values.contains(&key).then_some(Move::Choice(key))
    }
}

/// The player's readable decision among its messages in one round: the `decision`
/// its choice component stored, else what the pattern reads in its text; and the
/// probabilities the model gave the options, when it did.
fn read_decision(
    decision: &CompiledDecision,
    values: &[String],
    own: &[&Message],
) -> (Option<Move>, Option<indexmap::IndexMap<String, f64>>) {
    let rule = &decision.rule;
    let chosen: Vec<_> = own
        .iter()
        .filter_map(|m| m.decision.as_ref())
        .filter_map(|d| Some((readable(rule, values, &d.value)?, d.probabilities.clone())))
        .collect();
    if let Some((d, p)) = take(rule.take, chosen) {
        return (Some(d), p);
    }
    let Some(pattern) = &decision.pattern else {
        return (None, None);
    };
    let texts: Vec<Move> = own
        .iter()
        .flat_map(|m| pattern.captures_iter(&m.content))
        .filter_map(|caps| readable(rule, values, caps.get(1).or_else(|| caps.get(0))?.as_str()))
        .collect();
    (take(rule.take, texts), None)
}

fn take<T>(which: Take, mut all: Vec<T>) -> Option<T> {
    match which {
        Take::First => (!all.is_empty()).then(|| all.remove(0)),
        Take::Last => all.pop(),
    }
}

fn decisions(
    rules: &OutcomeRules,
    decision: &CompiledDecision,
    transcript: &[Message],
    seed: u64,
    f: &mut Figures,
    series: &mut RoundSeries,
) -> Result<(), OutcomeError> {
    let default = decision.rule.default.as_ref().map(|d| match d {
        DecisionValue::Number(n) => Move::Number(*n),
        DecisionValue::Choice(c) => Move::Choice(choice_key(c)),
    });
    let values: Vec<String> = decision.rule.values.iter().map(|v| choice_key(v)).collect();
    let rounds = rounds(decision, transcript);
    let pairs = if rules.pairwise {
        let neighbours =
            sopsim_core::network::draw_all(rules.populations.iter().map(|(_, p)| p), seed)
                .map_err(OutcomeError::Network)?;
        Some(Pairs::new(&rules.members, neighbours))
    } else {
        None
    };
    let mut failures = 0u64;
    let mut cooperation = Vec::new();
    let mut payoffs = vec![0.0; rules.players.len()];
    let mut shares: IndexMap<String, u64> = values.iter().map(|v| (v.clone(), 0)).collect();
    // The model's probabilities of each value, over every decision that has them: the
    // listed values, or for a range the numbers its choice components offer.
    let numeric = values.is_empty();
    let offered = if numeric { &decision.options } else { &values };
    let mut probability_sums: IndexMap<String, f64> =
        offered.iter().map(|v| (v.clone(), 0.0)).collect();
    let mut expected: Vec<f64> = Vec::new();
    let mut with_probabilities = 0u64;
    // Each player's cooperation over the rounds: (sum, rounds).
    let mut cooperated = vec![(0.0, 0u64); rules.players.len()];
    for (r, messages) in rounds.iter().enumerate() {
        let mut by_player: HashMap<&str, Vec<&Message>> = HashMap::new();
        for m in messages {
            by_player.entry(m.name.as_str()).or_default().push(m);
        }
        let mut joint = Vec::with_capacity(rules.players.len());
        let mut round_shares: IndexMap<&str, u64> =
            values.iter().map(|v| (v.as_str(), 0)).collect();
        let mut round_numbers: Vec<f64> = Vec::new();
        for (at, player) in rules.players.iter().enumerate() {
            let own = by_player
                .get(player.as_str())
                .map_or(&[][..], Vec::as_slice);
            let (read, probabilities) = read_decision(decision, &values, own);
            if let Some(p) = probabilities {
                with_probabilities += 1;
                let mut mean = 0.0;
                for (option, x) in &p {
                    let key = if numeric {
                        option.trim().to_string()
                    } else {
                        choice_key(option)
                    };
                    if let Some(sum) = probability_sums.get_mut(&key) {
                        *sum += x;
                    }
                    if let Ok(n) = option.trim().parse::<f64>() {
                        mean += n * x;
                    }
                }
                expected.push(mean);
            }
            match &read {
                Some(d) => {
                    let c = cooperation_of(decision, d);
                    if let Some(c) = c {
                        cooperated[at].0 += c;
                        cooperated[at].1 += 1;
                    }
                    cooperation.push(c);
                    match d {
                        Move::Choice(c) => {
                            *shares.entry(c.clone()).or_default() += 1;
                            if let Some(n) = round_shares.get_mut(c.as_str()) {
                                *n += 1;
                            }
                        }
                        Move::Number(n) => round_numbers.push(*n),
                    }
                }
                None => failures += 1,
            }
            joint.push(read.or_else(|| default.clone()));
        }
        let read_in_round: u64 = round_shares.values().sum();
        for (v, n) in &round_shares {
            let share = (read_in_round > 0).then(|| *n as f64 / read_in_round as f64);
            push_round(series, &format!("share.{v}"), r, share);
        }
        if numeric {
            let mean = (!round_numbers.is_empty())
                .then(|| round_numbers.iter().sum::<f64>() / round_numbers.len() as f64);
            push_round(series, "mean_decision", r, mean);
        }
        let earned = match &rules.payoff {
            Some(CompiledPayoff::Table(table)) if pairs.is_some() => pairs
                .as_ref()
                .map(|p| p.payoffs(table, &joint))
                .transpose()?,
            Some(payoff) => match joint.into_iter().collect::<Option<Vec<_>>>() {
                Some(joint) => Some(round_payoffs(payoff, &values, &joint, r + 1)?),
                None => None,
            },
            None => None,
        };
        if rules.payoff.is_some() {
            let gini = earned.as_deref().and_then(crate::stats::gini);
            push_round(series, "gini", r, gini);
        }
        for (total, p) in payoffs.iter_mut().zip(earned.unwrap_or_default()) {
            *total += p;
        }
    }
    if rules.payoff.is_some() {
        let mut by_population: HashMap<usize, (f64, usize)> = HashMap::new();
        for ((player, p), member) in rules.players.iter().zip(&payoffs).zip(&rules.members) {
            match member {
                None => {
                    f.insert(format!("payoff.{player}"), Some(*p));
                }
                Some((population, _)) => {
                    let e = by_population.entry(*population).or_default();
                    e.0 += p;
                    e.1 += 1;
                }
            }
        }
        for (population, (sum, n)) in by_population {
            let key = &rules.populations[population].0;
            f.insert(format!("payoff.{key}"), Some(sum / n as f64));
        }
        f.insert("welfare".into(), Some(payoffs.iter().sum()));
        if let Some(labels) = &rules.played_by {
            for (label, mean) in mean_by(labels, &payoffs, |p| Some(*p)) {
                f.insert(format!("payoff.by.{label}"), mean);
            }
        }
        f.insert(
            "equality".into(),
            crate::stats::gini(&payoffs).map(|g| 1.0 - g),
        );
    }
    let read: u64 = shares.values().sum();
    for (v, n) in shares {
        f.insert(
            format!("share.{v}"),
            (read > 0).then(|| n as f64 / read as f64),
        );
    }
    let rates: Vec<f64> = cooperation.into_iter().flatten().collect();
    f.insert(
        "cooperation_rate".into(),
        (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64),
    );
    if let Some(labels) = &rules.played_by {
        let rate = |(sum, n): &(f64, u64)| (*n > 0).then(|| sum / *n as f64);
        for (label, mean) in mean_by(labels, &cooperated, rate) {
            f.insert(format!("cooperation_rate.by.{label}"), mean);
        }
    }
    f.insert("rounds".into(), Some(rounds.len() as f64));
    f.insert("decision_failures".into(), Some(failures as f64));
    if decision.chosen {
        let n = with_probabilities as f64;
        for (v, sum) in probability_sums {
            f.insert(format!("p.{v}"), (with_probabilities > 0).then(|| sum / n));
        }
        f.insert(
            "expected_decision".into(),
            (!expected.is_empty()).then(|| expected.iter().sum::<f64>() / expected.len() as f64),
        );
    }
    Ok(())
}

/// The mean of `of(value)` over the players of each label, in the labels' order.
fn mean_by<T>(
    labels: &[String],
    values: &[T],
    of: impl Fn(&T) -> Option<f64>,
) -> IndexMap<String, Option<f64>> {
    let mut sums: IndexMap<String, (f64, u64)> = IndexMap::new();
    for (label, v) in labels.iter().zip(values) {
        let e = sums.entry(label.clone()).or_default();
        if let Some(x) = of(v) {
            e.0 += x;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(l, (sum, n))| (l, (n > 0).then(|| sum / n as f64)))
        .collect()
}

/// Sets round `r` of series `name`, creating it (with earlier rounds empty) if new.
pub(super) fn push_round(series: &mut RoundSeries, name: &str, r: usize, value: Option<f64>) {
    let values = series.entry(name.to_string()).or_default();
    values.resize(r, None);
    values.push(value);
}

fn choice(m: &Option<Move>) -> Option<&str> {
    match m {
        Some(Move::Choice(c)) => Some(c.as_str()),
        _ => None,
    }
}

/// The players of games on the networks: each one's population and member number, who
/// its neighbours are, and where each member sits among the players. Made once a run.
struct Pairs<'a> {
    members: &'a [Option<(usize, u32)>],
    neighbours: Vec<sopsim_core::network::Neighbours>,
    /// Player position by (population, member).
    at: HashMap<(usize, u32), usize>,
}

impl<'a> Pairs<'a> {
    fn new(
        members: &'a [Option<(usize, u32)>],
        neighbours: Vec<sopsim_core::network::Neighbours>,
    ) -> Self {
        let at = members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some(((*m)?, i)))
            .collect();
        Self {
            members,
            neighbours,
            at,
        }
    }

    /// One round: each player's sum over its neighbours of the table's payoff to it. A
    /// pair where either decision is unreadable earns nothing. In a complete network
    /// every member is everyone's neighbour, counted by choice rather than pair by pair.
    fn payoffs(
        &self,
        table: &IndexMap<String, Vec<f64>>,
        joint: &[Option<Move>],
    ) -> Result<Vec<f64>, OutcomeError> {
        let pay = |mine: &str, theirs: &str| -> Result<f64, OutcomeError> {
            let key = format!("{mine},{theirs}");
            table
                .get(&key)
                .map(|row| row[0])
                .ok_or(OutcomeError::NoRow(key))
        };
        // Complete networks: how many of each population chose each value.
        // Ordered, so that sums are added in the same order in every run.
        let mut counts: std::collections::BTreeMap<(usize, &str), u64> = Default::default();
        for (m, d) in self.members.iter().zip(joint) {
            if let (Some((p, _)), Some(c)) = (m, choice(d)) {
                *counts.entry((*p, c)).or_default() += 1;
            }
        }
        let mut out = vec![0.0; joint.len()];
        for (i, (m, d)) in self.members.iter().zip(joint).enumerate() {
            let (Some((population, member)), Some(mine)) = (m, choice(d)) else {
                continue;
            };
            match self.neighbours.get(*population) {
                Some(Some(lists)) => {
                    for n in &lists[*member as usize] {
                        let theirs = self
                            .at
                            .get(&(*population, *n))
                            .and_then(|&j| choice(&joint[j]));
                        if let Some(theirs) = theirs {
                            out[i] += pay(mine, theirs)?;
                        }
                    }
                }
                _ => {
                    for ((p, theirs), n) in &counts {
                        if p == population {
                            let others = if *theirs == mine { n - 1 } else { *n };
                            out[i] += others as f64 * pay(mine, theirs)?;
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// 1 or 0 for a choice, the position in the range for a number; `None` when the rule
/// defines no cooperation.
fn cooperation_of(decision: &CompiledDecision, d: &Move) -> Option<f64> {
    let rule = &decision.rule;
    match d {
        Move::Choice(c) if !rule.cooperative.is_empty() => {
            Some(if rule.cooperative.iter().any(|k| &choice_key(k) == c) {
                1.0
            } else {
                0.0
            })
        }
        Move::Number(n) => rule.range.map(|[lo, hi]| (n - lo) / (hi - lo)),
        Move::Choice(_) => None,
    }
}

fn round_payoffs(
    payoff: &CompiledPayoff,
    values: &[String],
    joint: &[Move],
    round: usize,
) -> Result<Vec<f64>, OutcomeError> {
    match payoff {
        CompiledPayoff::Table(table) => {
            let key = joint
                .iter()
                .map(|d| match d {
                    Move::Choice(c) => c.clone(),
                    Move::Number(n) => n.to_string(),
                })
                .collect::<Vec<_>>()
                .join(",");
            table.get(&key).cloned().ok_or(OutcomeError::NoRow(key))
        }
        CompiledPayoff::Formula(formula) => {
            let numbers: Option<Vec<f64>> = joint
                .iter()
                .map(|d| match d {
                    Move::Number(n) => Some(*n),
                    Move::Choice(_) => None,
                })
                .collect();
            let choices: Vec<String> = joint
                .iter()
                .map(|d| match d {
                    Move::Choice(c) => c.clone(),
                    Move::Number(n) => n.to_string(),
                })
                .collect();
            (0..joint.len())
                .map(|i| {
                    let inputs = match &numbers {
                        Some(all) => FormulaInputs::numeric(all[i], all, round),
                        None => FormulaInputs::choices(&choices[i], &choices, values, round),
                    };
                    evaluate_formula(formula, &inputs)
                        .map_err(|source| OutcomeError::Formula { round, source })
                })
                .collect()
        }
    }
}

fn scores(score: &CompiledScore, transcript: &[Message], f: &mut Figures) {
    let mut total: Option<f64> = None;
    for agent in &score.agents {
        let messages = transcript
            .iter()
            .filter(|m| &m.name == agent)
            .filter(|m| score.rule.state.as_ref().is_none_or(|s| &m.state == s));
        let matches: Vec<Option<f64>> = messages
            .flat_map(|m| score.pattern.captures_iter(&m.content))
            .map(|caps| {
                caps.get(1)
                    .and_then(|g| g.as_str().trim().parse::<f64>().ok())
            })
            .collect();
        let numbers: Vec<f64> = matches
            .iter()
            .flatten()
            .copied()
            .filter(|n| n.is_finite())
            .collect();
        let value = match score.rule.reduce {
            Reduce::Count => Some(matches.len() as f64),
            Reduce::Sum => Some(numbers.iter().sum()),
            Reduce::First => numbers.first().copied(),
            Reduce::Last => numbers.last().copied(),
            Reduce::Mean => {
                (!numbers.is_empty()).then(|| numbers.iter().sum::<f64>() / numbers.len() as f64)
            }
        };
        if let Some(v) = value {
            *total.get_or_insert(0.0) += v;
        }
        f.insert(format!("score.{}.{agent}", score.name), value);
    }
    f.insert(format!("score.{}", score.name), total);
}

#[cfg(test)]
mod tests;
