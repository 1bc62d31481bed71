//! Why a benchmark could not be planned, run, merged or reported, and whose fault it
//! was: [`BenchError`], with the errors of a benchmark's folder and of a shard's.

use std::path::PathBuf;

use sopsim::error::SimError;
use sopsim::runner::FolderFileError;
use sopsim::setup::{Setting, SetupError};
use thiserror::Error;

use crate::job;
#[cfg(feature = "plots")]
use crate::plot;

/// Why a benchmark could not be planned, run or reported.
#[derive(Debug, Error)]
pub enum BenchError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A tournament's roster (or game) cannot be played, each problem by its field.
    #[error(transparent)]
    Roster(Box<crate::tournament::roster::RosterError>),
    #[error("{path}: a benchmark runs without people, but agent {agent:?} is human")]
    Human { path: PathBuf, agent: String },
    #[error("{path}: name {name:?} {source}; a benchmark keeps each scenario's runs in a folder of that name")]
    UnsafeName {
        path: PathBuf,
        name: String,
        #[source]
        source: job::UnsafeName,
    },
    #[error(
        "{first} and {second} are both named {name:?}; a benchmark tells scenarios apart by name"
    )]
    SameName {
        first: PathBuf,
        second: PathBuf,
        name: String,
    },
    #[error("{path}: not a sopsim benchmark's ({source}); use another output folder")]
    NotABenchmark {
        path: PathBuf,
        #[source]
        source: Unreadable,
    },
    #[error("{0}: it holds a run (its run.json), not a benchmark; use another output folder")]
    HoldsARun(PathBuf),
    #[error("{out}: its runs used {earlier}; this benchmark uses {now}; use another output folder to compare them")]
    OtherSettings {
        out: PathBuf,
        earlier: String,
        now: String,
    },
    /// People's data that cannot be set beside the scenarios' figures.
    #[error("{}: {}", .path.display(), .problems.join("; "))]
    Reference {
        /// The `--reference` file's, or the scenario's own section's.
        setting: Setting,
        path: PathBuf,
        problems: Vec<String>,
    },
    #[error("{file}: the file changed since {id} ran in {out}; use another output folder, or delete {runs} to run it again")]
    ScenarioChanged {
        file: String,
        id: String,
        out: PathBuf,
        runs: PathBuf,
    },
    #[error("{path}")]
    ShardFolder {
        path: PathBuf,
        #[source]
        source: ShardFolderError,
    },
    #[error("{other} is not a shard of the same benchmark as {first} (other settings, scenarios, modes, seeds or shard count)")]
    ShardMismatch { first: PathBuf, other: PathBuf },
    #[error("{first} and {second} are both shard {index}")]
    DoubledShard {
        index: u64,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("{count} of {of} planned runs are in no shard (run their shards again): {}", .ids.join(", "))]
    MissingRuns {
        count: usize,
        of: usize,
        ids: Vec<String>,
    },
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Stopped before any run started: nothing but the plan was written.
    #[error("interrupted while planning the runs; none ran")]
    Interrupted,
    #[error(transparent)]
    Write(#[from] SimError),
    #[error(transparent)]
    File(#[from] FolderFileError),
    #[cfg(feature = "plots")]
    #[error(transparent)]
    Plot(#[from] plot::PlotError),
}

impl BenchError {
    /// Whether the input (files, settings, the output folder) is at fault.
    pub fn is_bad_input(&self) -> bool {
        match self {
            BenchError::Setup(e) => e.is_bad_input(),
            BenchError::Io { .. }
            | BenchError::Write(_)
            | BenchError::MissingRuns { .. }
            | BenchError::Interrupted => false,
            // A link, a device or a file over its limit in the folder is the folder's
            // fault; a failed write is not.
            BenchError::File(e) => !matches!(e, FolderFileError::Io { .. }),
            #[cfg(feature = "plots")]
            BenchError::Plot(_) => false,
            _ => true,
        }
    }

    /// The setting at fault, for the errors about one.
    pub fn setting(&self) -> Option<Setting> {
        match self {
            BenchError::Setup(e) => e.setting(),
            BenchError::Human { .. }
            | BenchError::UnsafeName { .. }
            | BenchError::SameName { .. }
            | BenchError::ScenarioChanged { .. } => Some(Setting::Scenario),
            BenchError::NotABenchmark { .. }
            | BenchError::OtherSettings { .. }
            | BenchError::HoldsARun(_) => Some(Setting::Out),
            BenchError::Reference { setting, .. } => Some(*setting),
            _ => None,
        }
    }
}

/// Why a folder's `bench.json` or `manifest.jsonl` is not a benchmark's.
#[derive(Debug, Error)]
pub enum Unreadable {
    #[error("{what} at line {line}, column {column}")]
    Json {
        what: &'static str,
        line: usize,
        column: usize,
    },
    #[error("line {line}: run {id:?}: {source}")]
    UnsafeRun {
        line: usize,
        id: String,
        #[source]
        source: job::UnsafeName,
    },
}

/// What is wrong with a folder given as a shard (or with the merge's own folder).
#[derive(Debug, Error)]
pub enum ShardFolderError {
    #[error("no such folder")]
    Missing,
    #[error(transparent)]
    Unreadable(Box<BenchError>),
    #[error("a whole benchmark, not a shard")]
    NotAShard,
    #[error("name at least one shard folder to merge")]
    NoShards,
    #[error("its bench.json does not describe its plan (edited by hand?)")]
    PlanEdited,
    #[error("run {id}: {why}")]
    RunEdited { id: String, why: String },
    #[error("its bench.json names scenario {name:?}, which {source}")]
    UnsafeScenario {
        name: String,
        #[source]
        source: job::UnsafeName,
    },
}
