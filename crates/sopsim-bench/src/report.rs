//! The benchmark report: the figures of every planned run (read back by
//! `read_back.rs`) summarised per scenario and mode, the paired difference between the
//! modes, and the three files: `report.json` (deterministic: the same runs give the
//! same bytes), `timing.json` (wall time, latency and the prompt cache's share, which
//! are not) and `report.md` (both, for people).

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Serialize;

use super::plan::{Job, Settings};
use super::read_back::RunStatus;
use super::stats::{self, Difference, Method, Summary};
use sopsim::scenario::{is_bounded_figure, Mode, OutcomeRules};

/// One scenario's planned runs with their status.
pub struct ScenarioRuns<'a> {
    /// The scenario's name.
    pub name: String,
    /// The scenario file, as given.
    pub file: String,
    /// The scenario file's SHA-256.
    pub sha256: String,
    /// The scenario's outcome rules, compiled, if it has outcomes.
    pub rules: Option<&'a OutcomeRules>,
    /// The scenario's probes, whose answers it reports.
    pub probes: &'a sopsim::scenario::probes::Probes,
    /// Each planned run of the scenario with its status.
    pub runs: Vec<(Job, RunStatus)>,
}

/// `report.json`: every scenario's planned runs counted and their figures summarised
/// per mode.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The settings every run of the benchmark shares.
    pub settings: Settings,
    /// The modes each scenario ran in, in order.
    pub modes: Vec<Mode>,
    /// The seeds each scenario ran with in each mode, in order.
    pub seeds: Vec<u64>,
    /// What `difference` means, e.g. `competitive - cooperative`, paired by seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<String>,
    /// Each scenario's runs and figures.
    pub scenarios: Vec<ScenarioReport>,
}

/// One scenario's runs and figures in `report.json`.
#[derive(Debug, Default, Serialize)]
pub struct ScenarioReport {
    /// The scenario's name.
    pub scenario: String,
    /// The scenario file, as given.
    pub file: String,
    /// The scenario file's SHA-256.
    pub sha256: String,
    /// Per mode: how many runs were planned, finished, failed and unfinished.
    pub runs: IndexMap<Mode, RunCounts>,
    /// Every run that failed, with its error: counted, never dropped silently.
    pub failed_runs: Vec<FailedRun>,
    /// The figures of the report's headline table, in order.
    pub headline: Vec<String>,
    /// Every figure of the scenario by name, over its finished runs.
    pub figures: IndexMap<String, FigureReport>,
    /// Mean prompt tokens sent in each turn, over the runs that reached that turn.
    pub prompt_tokens_by_turn: IndexMap<Mode, Vec<f64>>,
    /// Per-round aggregates over the runs: series (`share.VALUE`, `mean_decision`,
    /// `gini`) → mode → each round's summary (`null` where no run has a value).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub rounds: IndexMap<String, IndexMap<Mode, Vec<Option<Summary>>>>,
    /// People's data beside the models' figures, by series name.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub people: IndexMap<String, crate::people::Comparison>,
}

/// How one mode's planned runs of a scenario went.
#[derive(Debug, Default, Serialize)]
pub struct RunCounts {
    /// Runs planned.
    pub planned: usize,
    /// Runs that finished (any end but an error or an interruption).
    pub finished: usize,
    /// Runs that failed.
    pub failed: usize,
    /// Runs not run yet, or interrupted.
    pub unfinished: usize,
    /// Finished runs by how they ended.
    pub ended_by: BTreeMap<String, usize>,
}

/// A run that failed, with why.
#[derive(Debug, Serialize)]
pub struct FailedRun {
    /// The run's id, `SCENARIO/MODE/seed-N`.
    pub id: String,
    /// The mode it ran in.
    pub mode: Mode,
    /// Its seed.
    pub seed: u64,
    /// Why it failed.
    pub error: String,
}

/// One figure of a scenario over its finished runs.
#[derive(Debug, Serialize)]
pub struct FigureReport {
    /// Per mode: the figure's summary over the runs with a value (`null` where none has).
    pub by_mode: IndexMap<Mode, Option<Summary>>,
    /// Each run's value, in the order of `seeds` (`null`: failed, unfinished, or no value).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub values: IndexMap<Mode, Vec<Option<f64>>>,
    /// The paired difference the report's `difference` names, when there are two modes
    /// and a seed with a value in both.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<Difference>,
}

/// The timing side of the report.
#[derive(Debug, Serialize)]
pub struct Timing {
    /// Scenario → timing figure (`wall_ms`, `latency_p50_ms`…) → mode → its summary
    /// over the finished runs (`null` where none has a value).
    pub scenarios: IndexMap<String, IndexMap<String, IndexMap<Mode, Option<Summary>>>>,
}

/// The default headline when a scenario has no outcomes section.
const GENERIC_HEADLINE: &[&str] = &[
    "turns",
    "reached_end",
    "llm_calls",
    "prompt_tokens_per_turn",
];

/// Values of `figure` per seed among one mode's finished runs.
fn values(runs: &[&(Job, RunStatus)], mode: Mode, figure: &str, timing: bool) -> Vec<(u64, f64)> {
    runs.iter()
        .filter(|(j, _)| j.mode == mode)
        .filter_map(|(j, s)| match s {
            RunStatus::Finished {
                figures, timing: t, ..
            } => {
                let source = if timing { t } else { figures };
                source.get(figure).copied().flatten().map(|v| (j.seed, v))
            }
            _ => None,
        })
        .collect()
}

/// The timing figures of the finished runs, each once, in the order they first come.
fn timing_names(runs: &[&(Job, RunStatus)]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (_, status) in runs {
        if let RunStatus::Finished { timing, .. } = status {
            for name in timing.keys() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
    }
    names
}

fn only_values(pairs: &[(u64, f64)]) -> Vec<f64> {
    pairs.iter().map(|(_, v)| *v).collect()
}

/// Summarises every scenario; `difference` is the second mode minus the first.
pub fn build(
    settings: &Settings,
    modes: &[Mode],
    seeds: &[u64],
    scenarios: &[ScenarioRuns],
) -> (Report, Timing) {
    let mut reports = Vec::new();
    let mut timing = Timing {
        scenarios: IndexMap::new(),
    };
    for sc in scenarios {
        let mut counts: IndexMap<Mode, RunCounts> =
            modes.iter().map(|m| (*m, RunCounts::default())).collect();
        let mut failed_runs = Vec::new();
        for (job, status) in &sc.runs {
            let c = counts.entry(job.mode).or_default();
            c.planned += 1;
            match status {
                RunStatus::Finished { ended_by, .. } => {
                    c.finished += 1;
                    *c.ended_by.entry(ended_by.clone()).or_default() += 1;
                }
                RunStatus::Failed { error } => {
                    c.failed += 1;
                    failed_runs.push(FailedRun {
                        id: job.id.clone(),
                        mode: job.mode,
                        seed: job.seed,
                        error: error.clone(),
                    });
                }
                RunStatus::Unfinished => c.unfinished += 1,
            }
        }
        // The figures come from finished runs only: the rest of a large plan is not
        // gone through once per figure.
        let finished: Vec<&(Job, RunStatus)> = sc
            .runs
            .iter()
            .filter(|(_, s)| matches!(s, RunStatus::Finished { .. }))
            .collect();
        let mut names: Vec<String> = sopsim::scenario::GENERIC_FIGURES
            .iter()
            .chain(sopsim::scenario::QUALITY_FIGURES)
            .map(|s| s.to_string())
            .collect();
        if let Some(rules) = sc.rules {
            names.extend(rules.figure_names());
        }
        names.extend(sopsim::scenario::probes::figure_names(sc.probes));
        // A judge's figures are its rubric's, as the runs' judgements give them.
        for (_, status) in &finished {
            if let RunStatus::Finished { figures, .. } = status {
                for name in figures.keys().filter(|n| n.starts_with("judge.")) {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
        }
        let figures = names
            .iter()
            .map(|name| {
                let per_mode: Vec<Vec<(u64, f64)>> = modes
                    .iter()
                    .map(|m| values(&finished, *m, name, false))
                    .collect();
                let method = Method::for_figure(is_bounded_figure(name));
                let by_mode = modes
                    .iter()
                    .zip(&per_mode)
                    .map(|(m, v)| (*m, rounded(stats::summarize(&only_values(v), method))))
                    .collect();
                let difference = (per_mode.len() == 2)
                    .then(|| stats::paired(&per_mode[0], &per_mode[1], method))
                    .flatten()
                    .map(|d| Difference {
                        mean: r6(d.mean),
                        sd: d.sd.map(r6),
                        ci95: d.ci95.map(|[lo, hi]| [r6(lo), r6(hi)]),
                        p: d.p.map(r6),
                        ..d
                    });
                let values = modes
                    .iter()
                    .zip(&per_mode)
                    .map(|(m, v)| {
                        let known: BTreeMap<u64, f64> = v.iter().copied().collect();
                        let at = |s: &u64| known.get(s).copied().map(r6);
                        (*m, seeds.iter().map(at).collect())
                    })
                    .collect();
                (
                    name.clone(),
                    FigureReport {
                        by_mode,
                        values,
                        difference,
                    },
                )
            })
            .collect();
        let headline = match sc.rules {
            Some(rules) => rules.report.clone(),
            None => GENERIC_HEADLINE.iter().map(|s| s.to_string()).collect(),
        };
        let prompt_tokens_by_turn = modes
            .iter()
            .map(|m| (*m, mean_by_turn(&finished, *m)))
            .collect();
        let rounds = round_summaries(&finished, modes);
        let timing_figures = timing_names(&finished)
            .into_iter()
            .map(|f| {
                // A share's interval stays within 0 and 1.
                let method = match crate::summary_figures::is_share(&f) {
                    true => Method::Bootstrap,
                    false => Method::StudentT,
                };
                let by_mode = modes
                    .iter()
                    .map(|m| {
                        let pairs = values(&finished, *m, &f, true);
                        (*m, stats::summarize(&only_values(&pairs), method))
                    })
                    .collect();
                (f, by_mode)
            })
            .collect();
        timing.scenarios.insert(sc.name.clone(), timing_figures);
        reports.push(ScenarioReport {
            scenario: sc.name.clone(),
            file: sc.file.clone(),
            sha256: sc.sha256.clone(),
            runs: counts,
            failed_runs,
            headline,
            figures,
            prompt_tokens_by_turn,
            rounds,
            people: IndexMap::new(),
        });
    }
    let report = Report {
        settings: settings.clone(),
        modes: modes.to_vec(),
        seeds: seeds.to_vec(),
        difference: (modes.len() == 2).then(|| {
            format!(
                "{} - {}, paired by seed",
                modes[1].as_str(),
                modes[0].as_str()
            )
        }),
        scenarios: reports,
    };
    (report, timing)
}

/// Each per-round series summarised over the runs of each mode, round by round.
fn round_summaries(
    runs: &[&(Job, RunStatus)],
    modes: &[Mode],
) -> IndexMap<String, IndexMap<Mode, Vec<Option<Summary>>>> {
    let mut names: Vec<&String> = Vec::new();
    for (_, status) in runs {
        if let RunStatus::Finished { rounds, .. } = status {
            for name in rounds.keys() {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let method = Method::for_figure(name == "gini" || is_bounded_figure(name));
            let by_mode = modes
                .iter()
                .map(|mode| {
                    let series: Vec<&Vec<Option<f64>>> = runs
                        .iter()
                        .filter(|(j, _)| j.mode == *mode)
                        .filter_map(|(_, s)| match s {
                            RunStatus::Finished { rounds, .. } => rounds.get(name),
                            _ => None,
                        })
                        .collect();
                    let longest = series.iter().map(|s| s.len()).max().unwrap_or(0);
                    let per_round = (0..longest)
                        .map(|r| {
                            let at: Vec<f64> = series
                                .iter()
                                .filter_map(|s| s.get(r).copied().flatten())
                                .collect();
                            rounded(stats::summarize(&at, method))
                        })
                        .collect();
                    (*mode, per_round)
                })
                .collect();
            (name.clone(), by_mode)
        })
        .collect()
}

fn mean_by_turn(runs: &[&(Job, RunStatus)], mode: Mode) -> Vec<f64> {
    let series: Vec<&Vec<u64>> = runs
        .iter()
        .filter(|(j, _)| j.mode == mode)
        .filter_map(|(_, s)| match s {
            RunStatus::Finished {
                prompt_tokens_by_turn,
                ..
            } => Some(prompt_tokens_by_turn),
            _ => None,
        })
        .collect();
    let longest = series.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..longest)
        .map(|t| {
            let at: Vec<f64> = series
                .iter()
                .filter_map(|s| s.get(t))
                .map(|v| *v as f64)
                .collect();
            r6(at.iter().sum::<f64>() / at.len() as f64)
        })
        .collect()
}

/// A figure as reports keep it: rounded to six decimals (−0 as 0), so a report reads
/// easily and compares byte for byte.
fn r6(f: f64) -> f64 {
    let r = (f * 1e6).round() / 1e6;
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

/// A summary with its figures as reports keep them ([`r6`]).
fn rounded(s: Option<Summary>) -> Option<Summary> {
    s.map(|s| Summary {
        mean: r6(s.mean),
        sd: s.sd.map(r6),
        ci95: s.ci95.map(|[lo, hi]| [r6(lo), r6(hi)]),
        min: r6(s.min),
        max: r6(s.max),
        ..s
    })
}

/// JSON with every number rounded to 6 decimals, so reports read easily and compare
/// byte for byte.
pub fn to_json<T: Serialize>(value: &T) -> serde_json::Value {
    fn round(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Number(n) if n.is_f64() => {
                if let Some(f) = n.as_f64() {
                    let r = (f * 1e6).round() / 1e6;
                    *v = serde_json::Number::from_f64(if r == 0.0 { 0.0 } else { r })
                        .map_or(serde_json::Value::Null, serde_json::Value::Number);
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(round),
            serde_json::Value::Object(o) => o.values_mut().for_each(round),
            _ => {}
        }
    }
    let mut json = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
    round(&mut json);
    json
}
