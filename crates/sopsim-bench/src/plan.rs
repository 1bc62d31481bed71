//! The benchmark plan: scenario × mode × seed expanded into jobs, the manifest that
//! records them (`manifest.jsonl`), the settings they were run with (`bench.json`), and
//! which of them are already finished, so a rerun picks up where the last one stopped.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use super::job::Job;
pub use crate::error::Unreadable;
use crate::BenchError;
use sopsim::runner::{FolderFileError, OutputFolder};
use sopsim::scenario::Mode;

/// A benchmark's settings in its folder.
pub const SETTINGS_FILE: &str = "bench.json";
/// Every run a benchmark planned, one JSON line each.
pub const MANIFEST_FILE: &str = "manifest.jsonl";

/// The most a benchmark folder's `bench.json`, `manifest.jsonl` or a run's
/// `summary.json` may hold: a shard folder comes from elsewhere, and one of them as a
/// link to `/dev/zero` must not fill memory (a FIFO is refused as not a regular file).
pub const MAX_FOLDER_FILE_BYTES: u64 = 64 << 20;

/// What every run of one output folder must share for the runs to be comparable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The model backend as it describes itself (e.g. `local:SmolLM2…`, `scripted`).
    pub llm: String,
    /// The embedding service's name.
    pub embedder: String,
    /// `--max-turns`, when given.
    pub max_turns: Option<u64>,
    /// For one shard of a benchmark: which, and the whole plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::ShardPlan>,
    /// The judge given for every run in the scenarios' judges' place, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// People's data (a `--reference` file) set beside every scenario's figures, as
    /// JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// A run that finished (any end but an error or an interruption) has its
/// `summary.json`; anything else runs again.
pub fn is_finished(dir: &Path) -> bool {
    #[derive(Deserialize)]
    struct Ended {
        ended_by: String,
    }
    OutputFolder::new(dir)
        .read_json::<Ended>("summary.json", MAX_FOLDER_FILE_BYTES)
        .is_ok_and(|s| s.ended_by != "error" && s.ended_by != "interrupted")
}

/// A folder file's error as a benchmark's: JSON that is not the benchmark's says so,
/// anything else is the file's own error.
fn not_a_benchmark(e: FolderFileError) -> BenchError {
    match e {
        FolderFileError::Json {
            path,
            what,
            line,
            column,
        } => BenchError::NotABenchmark {
            path,
            source: Unreadable::Json { what, line, column },
        },
        e => BenchError::File(e),
    }
}

/// Every run of a benchmark, scenario by scenario, each scenario's modes in the order
/// given and each mode's seeds in order: the order the runs start in and the
/// manifest's.
pub fn expand(files: &[(&str, &Path, &str)], modes: &[Mode], seeds: &[u64]) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(files.len() * modes.len() * seeds.len());
    for (scenario, path, sha256) in files {
        for mode in modes {
            for seed in seeds {
                jobs.push(Job::new(scenario, path, sha256, *mode, *seed));
            }
        }
    }
    jobs
}

/// Checks the output folder against this invocation and records the plan: refuses a
/// folder made with other settings or older versions of the scenario files, keeps the
/// jobs earlier invocations planned, and writes `bench.json` and `manifest.jsonl`.
pub fn record(out: &Path, settings: &Settings, jobs: &[Job]) -> Result<(), BenchError> {
    std::fs::create_dir_all(out).map_err(|e| io_error(out, e))?;
    let folder = OutputFolder::new(out);
    if folder.entry(sopsim::runner::RUN_FILE)? != sopsim::runner::Entry::Nothing {
        return Err(BenchError::HoldsARun(out.to_path_buf()));
    }
    if let Some(earlier) = read_settings_if_there(&folder)? {
        if &earlier != settings {
            return Err(BenchError::OtherSettings {
                out: out.to_path_buf(),
                earlier: describe(&earlier),
                now: describe(settings),
            });
        }
    }
    let earlier = read_manifest(&folder)?;
    let all = merged(earlier, jobs, |old| is_finished(&old.dir(out))).map_err(|job| {
        BenchError::ScenarioChanged {
            file: job.file.clone(),
            id: job.id.clone(),
            out: out.to_path_buf(),
            runs: out.join("runs").join(&job.scenario),
        }
    })?;
    write(out, settings, &all)
}

/// The plan a rerun records: the earlier plan's jobs that this invocation does not
/// plan again keep their order, and this invocation's jobs follow in theirs. A job
/// planned again from a changed scenario file while its earlier run had finished is
/// the error (its finished run would be mixed with new ones); one that had not
/// finished simply runs from the new file. Linear in the jobs, for plans of 100,000.
fn merged(
    earlier: Vec<Job>,
    jobs: &[Job],
    finished: impl Fn(&Job) -> bool,
) -> Result<Vec<Job>, &Job> {
    let planned: std::collections::HashMap<&str, &Job> =
        jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let mut all = Vec::with_capacity(earlier.len() + jobs.len());
    for old in earlier {
        match planned.get(old.id.as_str()) {
            Some(job) if old.sha256 != job.sha256 && finished(&old) => return Err(job),
            Some(_) => {}
            None => all.push(old),
        }
    }
    all.extend_from_slice(jobs);
    Ok(all)
}

/// Settings as a message names them: the backends, the turn limit and the shard.
pub(super) fn describe(s: &Settings) -> String {
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
    let judge = match &s.judge {
        Some(spec) => format!(", judged by {spec}"),
        None => String::new(),
    };
    format!(
        "llm {}, embedder {}{turns}{shard}{judge}",
        s.llm, s.embedder
    )
}

/// Reads a benchmark folder's `bench.json`.
pub fn read_settings(out: &Path) -> Result<Settings, BenchError> {
    OutputFolder::new(out)
        .read_json(SETTINGS_FILE, MAX_FOLDER_FILE_BYTES)
        .map_err(not_a_benchmark)
}

fn read_settings_if_there(folder: &OutputFolder) -> Result<Option<Settings>, BenchError> {
    match folder.read_json(SETTINGS_FILE, MAX_FOLDER_FILE_BYTES) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.is_missing() => Ok(None),
        Err(e) => Err(not_a_benchmark(e)),
    }
}

/// Reads a benchmark folder's `manifest.jsonl`.
pub fn read_jobs(out: &Path) -> Result<Vec<Job>, BenchError> {
    read_manifest(&OutputFolder::new(out))
}

/// Writes a benchmark folder's `bench.json` and `manifest.jsonl` as given.
pub fn write(out: &Path, settings: &Settings, jobs: &[Job]) -> Result<(), BenchError> {
    OutputFolder::new(out).replace_json(SETTINGS_FILE, settings)?;
    write_manifest(out, jobs)
}

/// Writes a folder's `manifest.jsonl`: one job per line.
pub fn write_manifest(out: &Path, jobs: &[Job]) -> Result<(), BenchError> {
    let folder = OutputFolder::new(out);
    let mut text = String::new();
    for job in jobs {
        let line = serde_json::to_string(job)
            .map_err(|e| io_error(&folder.path(MANIFEST_FILE), e.into()))?;
        text.push_str(&line);
        text.push('\n');
    }
    Ok(folder.replace(MANIFEST_FILE, text.as_bytes())?)
}

fn read_manifest(folder: &OutputFolder) -> Result<Vec<Job>, BenchError> {
    let jobs: Vec<Job> = match folder.read_json_lines(MANIFEST_FILE, MAX_FOLDER_FILE_BYTES) {
        Ok(jobs) => jobs,
        Err(e) if e.is_missing() => return Ok(Vec::new()),
        Err(e) => return Err(not_a_benchmark(e)),
    };
    for (i, job) in jobs.iter().enumerate() {
        job.check().map_err(|source| BenchError::NotABenchmark {
            path: folder.path(MANIFEST_FILE),
            source: Unreadable::UnsafeRun {
                line: i + 1,
                id: job.id.clone(),
                source,
            },
        })?;
    }
    Ok(jobs)
}

fn io_error(path: &Path, source: std::io::Error) -> BenchError {
    BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(scenario: &str, sha: &str, seed: u64) -> Job {
        Job::new(scenario, Path::new("x.json"), sha, Mode::Cooperative, seed)
    }

    fn ids(jobs: &[Job]) -> Vec<&str> {
        jobs.iter().map(|j| j.id.as_str()).collect()
    }

    #[test]
    fn runs_go_by_scenario_then_mode_then_seed() {
        let files = [
            ("b", Path::new("b.json"), "1"),
            ("a", Path::new("a.json"), "2"),
        ];
        let jobs = expand(&files, &[Mode::Competitive, Mode::Cooperative], &[4, 5]);
        assert_eq!(
            ids(&jobs),
            [
                "b/competitive/seed-4",
                "b/competitive/seed-5",
                "b/cooperative/seed-4",
                "b/cooperative/seed-5",
                "a/competitive/seed-4",
                "a/competitive/seed-5",
                "a/cooperative/seed-4",
                "a/cooperative/seed-5"
            ]
        );
        assert_eq!(
            (jobs[4].file.as_str(), jobs[4].sha256.as_str()),
            ("a.json", "2")
        );
    }

    #[test]
    fn a_rerun_keeps_the_earlier_jobs_first_and_plans_each_run_once() {
        let earlier = vec![job("a", "1", 0), job("a", "1", 1), job("b", "1", 0)];
        let now = [job("a", "1", 1), job("a", "1", 2)];
        let all = merged(earlier, &now, |_| true).unwrap();
        assert_eq!(
            ids(&all),
            [
                "a/cooperative/seed-0",
                "b/cooperative/seed-0",
                "a/cooperative/seed-1",
                "a/cooperative/seed-2"
            ]
        );
    }

    #[test]
    fn a_changed_scenario_is_refused_only_where_its_run_had_finished() {
        let earlier = vec![job("a", "old", 0), job("a", "old", 1)];
        let now = [job("a", "new", 0), job("a", "new", 1)];
        let refused = merged(earlier.clone(), &now, |j| j.seed == 1).unwrap_err();
        assert_eq!(refused.id, "a/cooperative/seed-1");
        let all = merged(earlier, &now, |_| false).unwrap();
        assert_eq!(all, now);
    }
}
