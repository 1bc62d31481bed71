//! A run's world figures from its `world.jsonl`: rounds survived, whether the world
//! ended the run, each variable's last, mean and least value and its series by round,
//! and the scenario's measures over the world's history.

use indexmap::IndexMap;

use super::extract::{push_round, Figures, RoundSeries};

/// A run's world figures from its `world.jsonl` (`lines`, one JSON object a round of a
/// state): rounds played, whether an `end_if` ended it, each variable's last, mean and
/// least value over the rounds (a per-agent variable's mean over the agents), the
/// measures; and each variable's series by round.
pub(crate) fn world_figures(
    w: &sopsim::scenario::WorldFigures,
    lines: &[serde_json::Value],
    ended_by: &str,
) -> Result<(Figures, RoundSeries), String> {
    // The world after each round: the last line of that round.
    let mut by_round: IndexMap<u64, &serde_json::Value> = IndexMap::new();
    for line in lines {
        let round = line["round"].as_u64().unwrap_or(0);
        if round > 0 {
            by_round.insert(round, line);
        }
    }
    let value_of = |line: &serde_json::Value, name: &str, per_agent: bool| -> Option<f64> {
        if per_agent {
            let all = line["agents"][name].as_array()?;
            let values: Vec<f64> = all.iter().filter_map(serde_json::Value::as_f64).collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        } else {
            line["world"][name].as_f64()
        }
    };
    let mut f = Figures::new();
    let mut series = RoundSeries::new();
    let rounds = by_round.len();
    let ended_early = f64::from(u8::from(ended_by == "end_if"));
    f.insert("rounds_survived".into(), Some(rounds as f64));
    f.insert("ended_early".into(), Some(ended_early));
    let mut finals: IndexMap<String, f64> = IndexMap::new();
    let mut history: IndexMap<String, Vec<f64>> = IndexMap::new();
    for (name, per_agent) in &w.variables {
        let values: Vec<f64> = by_round
            .values()
            .filter_map(|l| value_of(l, name, *per_agent))
            .collect();
        let last = values.last().copied();
        let mean = (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
        let min = values.iter().copied().reduce(f64::min);
        f.insert(format!("world.{name}.final"), last);
        f.insert(format!("world.{name}.mean"), mean);
        f.insert(format!("world.{name}.min"), min);
        for (r, v) in values.iter().enumerate() {
            push_round(&mut series, &format!("world.{name}"), r, Some(*v));
        }
        if let Some(last) = last {
            finals.insert(name.clone(), last);
        }
        history.insert(name.clone(), values);
    }
    if !w.measures.is_empty() {
        let ctx = minijinja_context(&finals, &w.initial, &history, rounds, ended_early);
        for (name, formula) in &w.measures {
            let value = sopsim::scenario::expr::evaluate_measure(formula, &ctx, rounds as u64)
                .map_err(|why| format!("outcomes.measures.{name}: {why}"))?;
            f.insert(format!("measure.{name}"), Some(value));
        }
    }
    Ok((f, series))
}

/// What a measure sees, as JSON.
fn minijinja_context(
    finals: &IndexMap<String, f64>,
    initial: &IndexMap<String, f64>,
    history: &IndexMap<String, Vec<f64>>,
    rounds: usize,
    ended_early: f64,
) -> serde_json::Value {
    serde_json::json!({
        "final": finals, "initial": initial, "history": history,
        "rounds": rounds, "ended_early": ended_early,
    })
}
