//! A benchmark's runs read back from their folders: each run's status and figures
//! (its transcript with the outcome rules, its summary, its world), whether a finished
//! run's files agree with each other, and a whole benchmark's folder as
//! `sopsim bench --out` wrote it, each file only as a regular file within a limit.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::extract::{self, Figures};
use super::plan::{Job, MAX_FOLDER_FILE_BYTES};
use super::summary_figures::{generic_figures, timing_figures, SummaryFigures};
use super::world_figures::world_figures;
use sopsim::runner::{FolderFileError, OutputFolder};
use sopsim::scenario::{Mode, OutcomeRules};
use sopsim_core::error_chain::chain;
use sopsim_core::memory::Message;

/// What the report knows of one planned run.
#[derive(Debug, Clone)]
pub enum RunStatus {
    /// The run finished (any end but an error or an interruption) and its files agree.
    Finished {
        /// Its figures: its summary's, its outcomes', its world's, its judgement's and its
        /// probes'.
        figures: Figures,
        /// Per-round aggregates of the decisions (share of each choice, mean, Gini).
        rounds: Box<extract::RoundSeries>,
        /// Its wall time, model latency and prompt cache shares, which differ between
        /// runs of the same seed.
        timing: Figures,
        /// How it ended, as its summary's `ended_by` says.
        ended_by: String,
        /// The prompt tokens sent in each of its turns.
        prompt_tokens_by_turn: Vec<u64>,
    },
    /// The run failed, or its files could not be read or disagree.
    Failed {
        /// Why it failed.
        error: String,
    },
    /// Not run yet, or interrupted.
    Unfinished,
}

/// Reads one run's folder (in the benchmark's folder `bench`) and computes its figures.
pub fn read_run(
    bench: &OutputFolder,
    job: &Job,
    rules: Option<&OutcomeRules>,
    probes: &sopsim::scenario::probes::Probes,
) -> RunStatus {
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
                sopsim::runner::WORLD_FILE,
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
    match dir.read_json::<sopsim::simulation::Judgement>(
        sopsim::runner::JUDGEMENT_FILE,
        MAX_FOLDER_FILE_BYTES,
    ) {
        Ok(judgement) => figures.extend(sopsim::simulation::judged_figures(&judgement)),
        Err(e) if e.is_missing() => {}
        Err(e) => return RunStatus::Failed { error: chain(&e) },
    }
    if !probes.is_empty() {
        let lines = match dir.read_json_lines::<sopsim::scenario::probes::ProbeLine>(
            sopsim::runner::PROBES_FILE,
            MAX_TRANSCRIPT_BYTES,
        ) {
            Ok(lines) => lines,
            Err(e) => return RunStatus::Failed { error: chain(&e) },
        };
        let (answers, series) = sopsim::scenario::probes::figures(probes, &lines);
        figures.extend(answers);
        rounds.extend(series);
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
    /// The folder's `report.json`, known to have a report's shape.
    pub report: serde_json::Value,
    /// Run id (`SCENARIO/MODE/seed-N`) → its summary's `ended_by`, for every run of
    /// the report that has a summary.
    pub ended_by: BTreeMap<String, String>,
}

/// Why a benchmark's folder cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum BenchFilesError {
    /// A file of the folder could not be read, or is not what sopsim writes.
    #[error(transparent)]
    File(#[from] FolderFileError),
    /// `report.json` names a scenario whose name cannot be a folder's.
    #[error("{}: scenario {name:?} {source}", .path.display())]
    UnsafeName {
        /// The `report.json` file.
        path: std::path::PathBuf,
        /// The scenario's name.
        name: String,
        /// Why the name cannot be a folder's.
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
