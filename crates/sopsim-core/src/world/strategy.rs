//! Strategy players: an agent that decides by a rule instead of a model, from the last
//! moves the world keeps. The built-ins of repeated games (always cooperate or
//! defect, tit-for-tat, grim trigger, alternate, random with a probability, defect
//! once then cooperate) or a formula over the history. Pure and exact: the same
//! history and seed give the same move.

use std::sync::Arc;

use indexmap::IndexMap;
use minijinja::value::Value;

use super::{Moves, Roster, WorldView};
use crate::scenario::{expr, BuiltIn, StrategySpec};

/// A strategy's move: the option, and the probability it had of each.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyMove {
    /// The option played.
    pub value: String,
    /// The probability the strategy gave each option.
    pub probabilities: IndexMap<String, f64>,
}

/// The most others whose moves a formula gets one by one (`others_last`); beyond, it
/// gets how many made each move (`others_counts`).
const OTHERS_LISTED: usize = 256;

/// How many of `agent`'s others made each move last round: its neighbours', or every
/// other agent's (from the round's counts less its own).
pub fn others(
    roster: &Roster,
    last: &[Option<Arc<str>>],
    counts: &IndexMap<Arc<str>, u32>,
    agent: u32,
) -> Vec<(Arc<str>, u32)> {
    match roster
        .neighbours
        .get(agent as usize)
        .and_then(Option::as_ref)
    {
        Some(list) => {
            let mut by: IndexMap<Arc<str>, u32> = IndexMap::new();
            for n in list.iter() {
                if let Some(Some(m)) = last.get(*n as usize) {
                    *by.entry(m.clone()).or_default() += 1;
                }
            }
            by.into_iter().collect()
        }
        None => {
            let own = last.get(agent as usize).cloned().flatten();
            counts
                .iter()
                .map(|(m, n)| (m.clone(), n - u32::from(own.as_ref() == Some(m))))
                .collect()
        }
    }
}

/// Everything a strategy decides on.
pub struct Situation<'a> {
    /// The world as the turn sees it.
    pub view: &'a WorldView,
    /// The state the move is made in.
    pub state: &'a str,
    /// The agent's number, in the scenario's agent order.
    pub agent: u32,
    /// The agent's name.
    pub name: &'a str,
    /// The options the agent may choose among.
    pub options: &'a [String],
    /// The move that counts as cooperating, when there is one.
    pub cooperate: Option<&'a str>,
    /// The move that counts as defecting, when there is one.
    pub defect: Option<&'a str>,
    /// The run's seed (`random` draws from it).
    pub seed: u64,
}

/// The strategy's move; the error says why it has none (a formula that fails or
/// names no option).
pub fn decide(spec: &StrategySpec, s: &Situation<'_>) -> Result<StrategyMove, String> {
    let empty = Moves::default();
    let moves = s.view.moves.get(s.state).unwrap_or(&empty);
    let round = moves.rounds + 1;
    let own_last = moves.last.get(s.agent as usize).cloned().flatten();
    let roster = s.view.roster.as_deref();
    let others = roster.map_or_else(Vec::new, |r| others(r, &moves.last, &moves.counts, s.agent));
    let need = |m: Option<&str>, which: &str| {
        m.map(String::from)
            .ok_or_else(|| format!("the strategy needs its `{which}` move"))
    };
    let certain = |value: String| StrategyMove {
        probabilities: s
            .options
            .iter()
            .map(|o| (o.clone(), f64::from(u8::from(*o == value))))
            .collect(),
        value,
    };
    let Some(rule) = spec.rule else {
        return formula_move(spec, s, round, own_last, &others).map(certain);
    };
    let (c, d) = (s.cooperate, s.defect);
    Ok(match rule {
        BuiltIn::AlwaysCooperate => certain(need(c, "cooperate")?),
        BuiltIn::AlwaysDefect => certain(need(d, "defect")?),
        BuiltIn::Alternate if round % 2 == 1 => certain(need(c, "cooperate")?),
        BuiltIn::Alternate => certain(need(d, "defect")?),
        BuiltIn::DefectOnceThenCooperate if round == 1 => certain(need(d, "defect")?),
        BuiltIn::DefectOnceThenCooperate => certain(need(c, "cooperate")?),
        BuiltIn::GrimTrigger => {
            let pulled = moves
                .triggered
                .get(s.agent as usize)
                .copied()
                .unwrap_or(false);
            certain(need(if pulled { d } else { c }, "cooperate")?)
        }
        BuiltIn::TitForTat => certain(match answer(&others, s.options) {
            Some(m) => m,
            None => need(c, "cooperate")?,
        }),
        BuiltIn::Random => {
            let p = spec.p.unwrap_or(0.5).clamp(0.0, 1.0);
            let key = format!("{}:{}:{}", s.seed, s.name, round);
            let draw = xxhash_rust::xxh3::xxh3_64(key.as_bytes()) as f64 / u64::MAX as f64;
            let (c, d) = (need(c, "cooperate")?, need(d, "defect")?);
            let mut probabilities: IndexMap<String, f64> =
                s.options.iter().map(|o| (o.clone(), 0.0)).collect();
            probabilities.insert(c.clone(), p);
            *probabilities.entry(d.clone()).or_default() += 1.0 - p;
            StrategyMove {
                value: if draw < p { c } else { d },
                probabilities,
            }
        }
    })
}

/// What the others did last, as one move: the move most of them made (ties to the
/// earlier made), or for numbers their mean, the nearest option; `None` before any.
fn answer(others: &[(Arc<str>, u32)], options: &[String]) -> Option<String> {
    let total: u32 = others.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let numbers: Option<Vec<(f64, u32)>> = others
        .iter()
        .map(|(m, n)| Some((m.trim().parse::<f64>().ok()?, *n)))
        .collect();
    let option_numbers: Option<Vec<f64>> = options.iter().map(|o| o.trim().parse().ok()).collect();
    if let (Some(numbers), Some(opts)) = (numbers, option_numbers) {
        let mean = numbers.iter().map(|(x, n)| x * f64::from(*n)).sum::<f64>() / f64::from(total);
        let nearest = (0..opts.len())
            .min_by(|a, b| (opts[*a] - mean).abs().total_cmp(&(opts[*b] - mean).abs()))?;
        return options.get(nearest).cloned();
    }
    let (most, _) = others
        .iter()
        .enumerate()
        .max_by_key(|(i, (_, n))| (*n, std::cmp::Reverse(*i)))
        .map(|(_, m)| m)?;
    Some(most.to_string())
}

/// A formula strategy's move: its value must be one of the options.
fn formula_move(
    spec: &StrategySpec,
    s: &Situation<'_>,
    round: u32,
    own_last: Option<Arc<str>>,
    others: &[(Arc<str>, u32)],
) -> Result<String, String> {
    let formula = spec
        .formula
        .as_deref()
        .ok_or("the strategy has no rule or formula")?;
    let moves = s.view.moves.get(s.state);
    let listed: Option<Vec<String>> = match (s.view.roster.as_deref(), moves) {
        (Some(r), Some(m)) => {
            let ids: Option<Vec<u32>> =
                match r.neighbours.get(s.agent as usize).and_then(Option::as_ref) {
                    Some(list) => Some(list.to_vec()),
                    None if r.names.len() <= OTHERS_LISTED + 1 => Some(
                        (0..r.names.len() as u32)
                            .filter(|i| *i != s.agent)
                            .collect(),
                    ),
                    None => None,
                };
            ids.map(|ids| {
                ids.iter()
                    .filter_map(|i| m.last.get(*i as usize).cloned().flatten())
                    .map(|m| m.to_string())
                    .collect()
            })
        }
        _ => Some(Vec::new()),
    };
    let opponent = listed
        .as_ref()
        .filter(|l| l.len() == 1)
        .map(|l| l[0].clone());
    let counts: IndexMap<String, u32> = others.iter().map(|(m, n)| (m.to_string(), *n)).collect();
    let me = super::view::me_value(s.view, s.agent);
    let ctx = minijinja::context! {
        round => round,
        own_last => own_last.map(|m| m.to_string()),
        opponent_last => opponent,
        others_last => listed,
        others_counts => counts,
        cooperate => s.cooperate,
        defect => s.defect,
        options => s.options,
        world => Value::from_serialize(&*s.view.globals),
        me => me,
    };
    let env = expr::environment();
    let leaf = |n: &str| Some(expr::leaf(n, false));
    let bounded = crate::scenario::Bounded {
        leaf: &leaf,
        sizes: s.view.sizes,
    };
    let compiled = crate::scenario::compile_formula(&env, formula, bounded)
        .map_err(|e| crate::error_chain::chain(&e))?;
    let value = compiled.eval(ctx).map_err(|e| expr::evaluation_error(&e))?;
    let text = match value.as_str() {
        Some(t) => t.to_string(),
        None => value.to_string(),
    };
    let matching = |o: &String| {
        o.trim().eq_ignore_ascii_case(text.trim())
            || matches!((o.trim().parse::<f64>(), text.trim().parse::<f64>()), (Ok(a), Ok(b)) if a == b)
    };
    s.options
        .iter()
        .find(|o| matching(o))
        .cloned()
        .ok_or_else(|| format!("gives {text:?}, which is none of the options"))
}
