//! The benchmark plan: scenario × mode × seed expanded into jobs, the manifest that
//! records them (`manifest.jsonl`), the settings they were run with (`bench.json`), and
//! which of them are already finished, so a rerun picks up where the last one stopped.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use super::job::Job;
use super::BenchError;
use crate::output::write_json;

/// The most a benchmark folder's `bench.json`, `manifest.jsonl` or a run's
/// `summary.json` may hold: a shard folder comes from elsewhere, and one of them as a
/// link to `/dev/zero` must not fill memory (a FIFO is refused as not a regular file).
pub const MAX_FOLDER_FILE_BYTES: u64 = 64 << 20;

fn read_folder_file(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::files::read_bounded(path, MAX_FOLDER_FILE_BYTES)
}

/// Why a folder's `bench.json` or `manifest.jsonl` is not a benchmark's.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error(transparent)]
    Settings(serde_json::Error),
    #[error("line {line}: not a manifest entry ({source})")]
    Manifest {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("line {line}: run {id:?}: {source}")]
    UnsafeRun {
        line: usize,
        id: String,
        #[source]
        source: super::job::UnsafeName,
    },
}

/// What every run of one output folder must share for the runs to be comparable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The model backend as it describes itself (e.g. `local:SmolLM2…`, `scripted`).
    pub llm: String,
    pub embedder: String,
    /// `--max-turns`, when given.
    pub max_turns: Option<u64>,
    /// For one shard of a benchmark: which, and the whole plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::ShardPlan>,
}

/// A run that finished (any end but an error or an interruption) has its
/// `summary.json`; anything else runs again.
pub fn is_finished(dir: &Path) -> bool {
    #[derive(Deserialize)]
    struct Ended {
        ended_by: String,
    }
    read_folder_file(&dir.join("summary.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Ended>(&bytes).ok())
        .is_some_and(|s| s.ended_by != "error" && s.ended_by != "interrupted")
}

/// Checks the output folder against this invocation and records the plan: refuses a
/// folder made with other settings or older versions of the scenario files, keeps the
/// jobs earlier invocations planned, and writes `bench.json` and `manifest.jsonl`.
pub fn record(out: &Path, settings: &Settings, jobs: &[Job]) -> Result<(), BenchError> {
    std::fs::create_dir_all(out).map_err(|e| io_error(out, e))?;
    let settings_file = out.join("bench.json");
    if let Ok(bytes) = read_folder_file(&settings_file) {
        let earlier: Settings =
            serde_json::from_slice(&bytes).map_err(|e| BenchError::NotABenchmark {
                path: settings_file.clone(),
                source: Unreadable::Settings(e),
            })?;
        if &earlier != settings {
            return Err(BenchError::OtherSettings {
                out: out.to_path_buf(),
                earlier: describe(&earlier),
                now: describe(settings),
            });
        }
    }
    let manifest = out.join("manifest.jsonl");
    let mut all = read_manifest(&manifest)?;
    for job in jobs {
        match all.iter().find(|j| j.id == job.id) {
            Some(old) if old.sha256 != job.sha256 && is_finished(&old.dir(out)) => {
                return Err(BenchError::ScenarioChanged {
                    file: job.file.clone(),
                    id: job.id.clone(),
                    out: out.to_path_buf(),
                    runs: out.join("runs").join(&job.scenario),
                });
            }
            Some(_) => all.retain(|j| j.id != job.id),
            None => {}
        }
        all.push(job.clone());
    }
    write_json(&settings_file, settings)?;
    let mut text = String::new();
    for job in &all {
        text.push_str(&serde_json::to_string(job).map_err(|e| io_error(&manifest, e.into()))?);
        text.push('\n');
    }
    crate::files::replace_file(&manifest, text.as_bytes()).map_err(|e| io_error(&manifest, e))
}

fn describe(s: &Settings) -> String {
    let turns = s
        .max_turns
        .map(|t| format!(", at most {t} turns"))
        .unwrap_or_default();
    let shard = s
        .shard
        .as_ref()
        .map(|p| {
            format!(
                ", shard {}/{} of {} runs",
                p.shard.index, p.shard.count, p.runs
            )
        })
        .unwrap_or_default();
    format!("llm {}, embedder {}{turns}{shard}", s.llm, s.embedder)
}

/// Reads a benchmark folder's `bench.json`.
pub fn read_settings(out: &Path) -> Result<Settings, BenchError> {
    let path = out.join("bench.json");
    let bytes = read_folder_file(&path).map_err(|e| io_error(&path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| BenchError::NotABenchmark {
        path,
        source: Unreadable::Settings(e),
    })
}

/// Reads a benchmark folder's `manifest.jsonl`.
pub fn read_jobs(out: &Path) -> Result<Vec<Job>, BenchError> {
    read_manifest(&out.join("manifest.jsonl"))
}

/// Writes a benchmark folder's `bench.json` and `manifest.jsonl` as given.
pub fn write(out: &Path, settings: &Settings, jobs: &[Job]) -> Result<(), BenchError> {
    write_json(&out.join("bench.json"), settings)?;
    let manifest = out.join("manifest.jsonl");
    let mut text = String::new();
    for job in jobs {
        text.push_str(&serde_json::to_string(job).map_err(|e| io_error(&manifest, e.into()))?);
        text.push('\n');
    }
    crate::files::replace_file(&manifest, text.as_bytes()).map_err(|e| io_error(&manifest, e))
}

fn read_manifest(path: &Path) -> Result<Vec<Job>, BenchError> {
    let text = match crate::files::read_text_bounded(path, MAX_FOLDER_FILE_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(path, e)),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let unreadable = |source| BenchError::NotABenchmark {
                path: path.to_path_buf(),
                source,
            };
            let job: Job = serde_json::from_str(l).map_err(|source| {
                unreadable(Unreadable::Manifest {
                    line: i + 1,
                    source,
                })
            })?;
            job.check().map_err(|source| {
                unreadable(Unreadable::UnsafeRun {
                    line: i + 1,
                    id: job.id.clone(),
                    source,
                })
            })?;
            Ok(job)
        })
        .collect()
}

fn io_error(path: &Path, source: std::io::Error) -> BenchError {
    BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}
