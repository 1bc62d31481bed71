//! The benchmark report: every planned run read back from its folder, figures
//! summarised per scenario and mode, the paired difference between the modes, and the
//! three files: `report.json` (deterministic: the same runs give the same bytes),
//! `timing.json` (wall time and latency, which are not) and `report.md` (both, for people).

use std::collections::BTreeMap;
use std::path::Path;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::plan::MAX_FOLDER_FILE_BYTES;

use super::extract::{self, Figures};
use super::plan::{Job, Settings};
use super::stats::{self, Difference, Method, Summary};
use super::summary_figures::{generic_figures, timing_figures, SummaryFigures};
use super::world_figures::world_figures;
use crate::error_chain::chain;
use crate::memory::Message;
use crate::output_folder::{FolderFileError, OutputFolder};
use crate::scenario::{is_bounded_figure, Mode, OutcomeRules};

/// What the report knows of one planned run.
#[derive(Debug, Clone)]
pub enum RunStatus {
    Finished {
        figures: Figures,
        /// Per-round aggregates of the decisions (share of each choice, mean, Gini).
        rounds: Box<extract::RoundSeries>,
        timing: Figures,
        ended_by: String,
        prompt_tokens_by_turn: Vec<u64>,
    },
    Failed {
        error: String,
    },
    /// Not run yet, or interrupted.
    Unfinished,
}

/// Reads one run's folder (in the benchmark's folder `bench`) and computes its figures.
pub fn read_run(bench: &OutputFolder, job: &Job, rules: Option<&OutcomeRules>) -> RunStatus {
    let failed = |e: FolderFileError| RunStatus::Failed {
        error: format!("cannot read {}", chain(&e)),
    };
    let dir = match bench.sub(&job.rel_dir()) {
        Ok(dir) => dir,
        Err(e) if e.is_missing() => return RunStatus::Unfinished,
        Err(e) => return failed(e),
    };
    let summary = match dir.read_if_there("summary.json", MAX_FOLDER_FILE_BYTES) {
        Ok(bytes) => bytes.and_then(|b| serde_json::from_slice::<SummaryFigures>(&b).ok()),
        Err(e) => return failed(e),
    };
    let Some(summary) = summary else {
        return match dir.read_if_there("error.json", MAX_FOLDER_FILE_BYTES) {
            Ok(Some(bytes)) => RunStatus::Failed {
                error: serde_json::from_slice::<serde_json::Value>(&bytes)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(String::from))
                    .unwrap_or_else(|| "unreadable error.json".into()),
            },
            Ok(None) => RunStatus::Unfinished,
            Err(e) => failed(e),
        };
    };
    match summary.ended_by.as_str() {
        "error" => {
            return RunStatus::Failed {
                error: summary.error.clone().unwrap_or_default(),
            }
        }
        "interrupted" => return RunStatus::Unfinished,
        _ => {}
    }
    let transcript = match dir.read_json_lines::<Message>("transcript.jsonl", MAX_TRANSCRIPT_BYTES)
    {
        Ok(t) => t,
        Err(e) => return RunStatus::Failed { error: chain(&e) },
    };
    if let Err(error) = summary_matches(&summary, &transcript) {
        return RunStatus::Failed { error };
    }
    let mut figures = generic_figures(&summary);
    let mut rounds: Box<extract::RoundSeries> = Box::default();
    if let Some(rules) = rules {
        match extract::outcomes(rules, &transcript, summary.seed) {
            Ok((outcomes, series)) => {
                figures.extend(outcomes);
                rounds = Box::new(series);
            }
            Err(e) => return RunStatus::Failed { error: chain(&e) },
        }
        if let Some(w) = &rules.world {
            let lines = match dir.read_json_lines::<serde_json::Value>(
                crate::output::WORLD_FILE,
                MAX_TRANSCRIPT_BYTES,
            ) {
                Ok(lines) => lines,
                Err(e) => return RunStatus::Failed { error: chain(&e) },
            };
            match world_figures(w, &lines, &summary.ended_by) {
                Ok((world, series)) => {
                    figures.extend(world);
                    rounds.extend(series);
                }
                Err(error) => return RunStatus::Failed { error },
            }
        }
    }
    RunStatus::Finished {
        figures,
        rounds,
        timing: timing_figures(&summary),
        ended_by: summary.ended_by,
        prompt_tokens_by_turn: summary.prompt_tokens_by_turn,
    }
}

/// Whether the files of `job`'s finished run in `bench` agree with each other.
pub(super) fn check_run(bench: &OutputFolder, job: &Job) -> Result<(), String> {
    let dir = bench.sub(&job.rel_dir()).map_err(|e| chain(&e))?;
    let summary: SummaryFigures = dir
        .read_json("summary.json", MAX_FOLDER_FILE_BYTES)
        .map_err(|e| chain(&e))?;
    let transcript: Vec<Message> = dir
        .read_json_lines("transcript.jsonl", MAX_TRANSCRIPT_BYTES)
        .map_err(|e| chain(&e))?;
    summary_matches(&summary, &transcript)
}

/// Whether a finished run's `summary.json` counts the turns its transcript holds: a
/// turn says one message besides its tool results.
pub(super) fn summary_matches(
    summary: &SummaryFigures,
    transcript: &[Message],
) -> Result<(), String> {
    let said = transcript.iter().filter(|m| !m.kind.is_tool()).count() as u64;
    if said == summary.turns {
        return Ok(());
    }
    Err(format!(
        "summary.json counts {} turns, and transcript.jsonl holds {said} (was either edited by hand?)",
        summary.turns
    ))
}

/// A benchmark's folder read back: `report.json`, and how each of its runs ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchFiles {
    pub report: serde_json::Value,
    /// Run id (`SCENARIO/MODE/seed-N`) → its summary's `ended_by`, for every run of
    /// the report that has a summary.
    pub ended_by: BTreeMap<String, String>,
}

/// Why a benchmark's folder cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum BenchFilesError {
    #[error(transparent)]
    File(#[from] FolderFileError),
    #[error("{}: scenario {name:?} {source}", .path.display())]
    UnsafeName {
        path: std::path::PathBuf,
        name: String,
        #[source]
        source: super::job::UnsafeName,
    },
}

/// Reads the benchmark the command line wrote into `dir` (`sopsim bench --out`):
/// `report.json` and each run's `summary.json`, only as regular files inside it, each
/// within a limit. A folder without `report.json` is not a benchmark's
/// ([`FolderFileError::is_missing`]).
pub fn read_bench_files(dir: &Path) -> Result<BenchFiles, BenchFilesError> {
    #[derive(serde::Deserialize)]
    struct Ended {
        ended_by: String,
    }
    /// The shape every `report.json` sopsim writes has; JSON of another shape is
    /// refused as not what sopsim wrote. Its fields are read only to check it.
    #[derive(serde::Deserialize)]
    struct ReportShape {
        #[serde(rename = "scenarios")]
        _scenarios: Vec<ScenarioShape>,
        #[serde(rename = "modes")]
        _modes: Vec<String>,
        #[serde(rename = "seeds")]
        _seeds: Vec<u64>,
    }
    #[derive(serde::Deserialize)]
    struct ScenarioShape {
        #[serde(rename = "scenario")]
        _scenario: String,
        #[serde(default, rename = "figures")]
        _figures: BTreeMap<String, FigureShape>,
    }
    #[derive(serde::Deserialize)]
    struct FigureShape {
        #[serde(default, rename = "values")]
        _values: BTreeMap<String, Vec<Option<f64>>>,
    }
    let folder = OutputFolder::new(dir);
    let report: serde_json::Value = folder.read_json("report.json", MAX_FOLDER_FILE_BYTES)?;
    ReportShape::deserialize(&report)
        .map_err(|e| FolderFileError::json(folder.path("report.json"), &e))?;
    let strings = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| match v {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect()
    };
    let (modes, seeds) = (strings("modes"), strings("seeds"));
    let mut ended_by = BTreeMap::new();
    for sc in report["scenarios"].as_array().into_iter().flatten() {
        let Some(name) = sc["scenario"].as_str() else {
            continue;
        };
        super::job::check_folder_name(name).map_err(|source| BenchFilesError::UnsafeName {
            path: folder.path("report.json"),
            name: name.to_string(),
            source,
        })?;
        for mode in modes.iter().filter(|m| m.parse::<Mode>().is_ok()) {
            for seed in seeds.iter().filter(|s| s.parse::<u64>().is_ok()) {
                let id = format!("{name}/{mode}/seed-{seed}");
                let summary = format!("runs/{id}/summary.json");
                match folder.read_json::<Ended>(&summary, MAX_FOLDER_FILE_BYTES) {
                    Ok(e) => {
                        ended_by.insert(id, e.ended_by);
                    }
                    Err(e) if e.is_missing() => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Ok(BenchFiles { report, ended_by })
}

/// The most a run's transcript may hold when a report reads it (tens of thousands of
/// turns; a link to `/dev/zero` is refused, not read).
const MAX_TRANSCRIPT_BYTES: u64 = 1 << 30;

/// One scenario's planned runs with their status.
pub struct ScenarioRuns<'a> {
    pub name: String,
    pub file: String,
    pub sha256: String,
    pub rules: Option<&'a OutcomeRules>,
    pub runs: Vec<(Job, RunStatus)>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub settings: Settings,
    pub modes: Vec<Mode>,
    pub seeds: Vec<u64>,
    /// What `difference` means, e.g. `competitive - cooperative`, paired by seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<String>,
    pub scenarios: Vec<ScenarioReport>,
}

#[derive(Debug, Default, Serialize)]
pub struct ScenarioReport {
    pub scenario: String,
    pub file: String,
    pub sha256: String,
    pub runs: IndexMap<Mode, RunCounts>,
    /// Every run that failed, with its error: counted, never dropped silently.
    pub failed_runs: Vec<FailedRun>,
    pub headline: Vec<String>,
    pub figures: IndexMap<String, FigureReport>,
    /// Mean prompt tokens sent in each turn, over the runs that reached that turn.
    pub prompt_tokens_by_turn: IndexMap<Mode, Vec<f64>>,
    /// Per-round aggregates over the runs: series (`share.VALUE`, `mean_decision`,
    /// `gini`) → mode → each round's summary (`null` where no run has a value).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub rounds: IndexMap<String, IndexMap<Mode, Vec<Option<Summary>>>>,
}

#[derive(Debug, Default, Serialize)]
pub struct RunCounts {
    pub planned: usize,
    pub finished: usize,
    pub failed: usize,
    pub unfinished: usize,
    /// Finished runs by how they ended.
    pub ended_by: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize)]
pub struct FailedRun {
    pub id: String,
    pub mode: Mode,
    pub seed: u64,
    pub error: String,
}

#[derive(Debug, Serialize)]
pub struct FigureReport {
    pub by_mode: IndexMap<Mode, Option<Summary>>,
    /// Each run's value, in the order of `seeds` (`null`: failed, unfinished, or no value).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub values: IndexMap<Mode, Vec<Option<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<Difference>,
}

/// The timing side of the report.
#[derive(Debug, Serialize)]
pub struct Timing {
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
        let mut names: Vec<String> = crate::scenario::GENERIC_FIGURES
            .iter()
            .chain(crate::scenario::QUALITY_FIGURES)
            .map(|s| s.to_string())
            .collect();
        if let Some(rules) = sc.rules {
            names.extend(rules.figure_names());
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
        let timing_figures = ["wall_ms", "latency_p50_ms", "latency_p95_ms"]
            .iter()
            .map(|f| {
                let by_mode = modes
                    .iter()
                    .map(|m| {
                        (
                            *m,
                            stats::summarize(
                                &only_values(&values(&finished, *m, f, true)),
                                Method::StudentT,
                            ),
                        )
                    })
                    .collect();
                (f.to_string(), by_mode)
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
