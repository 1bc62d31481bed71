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
    /// The settings or a scenario file cannot be set up, as for a single run.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A tournament's roster (or game) cannot be played, each problem by its field.
    #[error(transparent)]
    Roster(Box<crate::tournament::roster::RosterError>),
    /// A scenario has an agent played by a person; a benchmark runs without people.
    #[error("{path}: a benchmark runs without people, but agent {agent:?} is human")]
    Human {
        /// The scenario file.
        path: PathBuf,
        /// The agent played by a person.
        agent: String,
    },
    /// A scenario's name cannot be the name of the folder its runs are kept in.
    #[error("{path}: name {name:?} {source}; a benchmark keeps each scenario's runs in a folder of that name")]
    UnsafeName {
        /// The scenario file.
        path: PathBuf,
        /// The scenario's name.
        name: String,
        /// Why the name cannot be a folder's.
        #[source]
        source: job::UnsafeName,
    },
    /// Two scenario files give their scenarios the same name.
    #[error(
        "{first} and {second} are both named {name:?}; a benchmark tells scenarios apart by name"
    )]
    SameName {
        /// The file given first.
        first: PathBuf,
        /// The file given later.
        second: PathBuf,
        /// The name both scenarios have.
        name: String,
    },
    /// The output folder's `bench.json` or `manifest.jsonl` is not a benchmark's.
    #[error("{path}: not a sopsim benchmark's ({source}); use another output folder")]
    NotABenchmark {
        /// The file that is not a benchmark's.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: Unreadable,
    },
    /// The output folder holds a single run (its `run.json`), not a benchmark.
    #[error("{0}: it holds a run (its run.json), not a benchmark; use another output folder")]
    HoldsARun(PathBuf),
    /// The output folder's runs were made with other settings than this benchmark's.
    #[error("{out}: its runs used {earlier}; this benchmark uses {now}; use another output folder to compare them")]
    OtherSettings {
        /// The output folder.
        out: PathBuf,
        /// The settings its runs were made with, in words.
        earlier: String,
        /// This benchmark's settings, in words.
        now: String,
    },
    /// People's data that cannot be set beside the scenarios' figures.
    #[error("{}: {}", .path.display(), .problems.join("; "))]
    Reference {
        /// The `--reference` file's, or the scenario's own section's.
        setting: Setting,
        /// The file the problems are in.
        path: PathBuf,
        /// What is wrong, one problem each.
        problems: Vec<String>,
    },
    /// A scenario file changed since a run of it finished in the output folder.
    #[error("{file}: the file changed since {id} ran in {out}; use another output folder, or delete {runs} to run it again")]
    ScenarioChanged {
        /// The scenario file, as given.
        file: String,
        /// The id of a run made from the file as it was.
        id: String,
        /// The output folder.
        out: PathBuf,
        /// The folder of the scenario's runs, to delete to run them again.
        runs: PathBuf,
    },
    /// A folder given as a shard (or the merge's own folder) cannot be merged.
    #[error("{path}")]
    ShardFolder {
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: ShardFolderError,
    },
    /// A folder given as a shard is not a shard of the same benchmark as the first.
    #[error("{other} is not a shard of the same benchmark as {first} (other settings, scenarios, modes, seeds or shard count)")]
    ShardMismatch {
        /// The first shard folder given.
        first: PathBuf,
        /// The shard folder that differs from it.
        other: PathBuf,
    },
    /// Two folders given to merge are the same shard of the benchmark.
    #[error("{first} and {second} are both shard {index}")]
    DoubledShard {
        /// The shard's index, from 0.
        index: u64,
        /// The folder given first.
        first: PathBuf,
        /// The folder given later.
        second: PathBuf,
    },
    /// Planned runs that no shard finished, when a merge does not allow missing runs.
    #[error("{count} of {of} planned runs are in no shard (run their shards again): {}", .ids.join(", "))]
    MissingRuns {
        /// How many planned runs are missing.
        count: usize,
        /// How many runs the plan has.
        of: usize,
        /// The missing runs' ids.
        ids: Vec<String>,
    },
    /// A file or folder could not be created, read or written.
    #[error("{path}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Stopped before any run started: nothing but the plan was written.
    #[error("interrupted while planning the runs; none ran")]
    Interrupted,
    /// The `sopsim` runtime failed, with its own error.
    #[error(transparent)]
    Write(#[from] SimError),
    /// A file of a folder could not be opened, read or written.
    #[error(transparent)]
    File(#[from] FolderFileError),
    /// A plot could not be drawn or written.
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
    /// The file is not JSON of the shape a benchmark's file has.
    #[error("{what} at line {line}, column {column}")]
    Json {
        /// What is wrong: not valid JSON, cut short, of the wrong shape or unreadable.
        what: &'static str,
        /// The line of the file the error is at, from 1.
        line: usize,
        /// The column of that line the error is at.
        column: usize,
    },
    /// A run of `manifest.jsonl` whose scenario or id could lead outside the run folders.
    #[error("line {line}: run {id:?}: {source}")]
    UnsafeRun {
        /// The manifest's line the run is on, from 1.
        line: usize,
        /// The run's id, as the line gives it.
        id: String,
        /// What is wrong with its scenario or id.
        #[source]
        source: job::UnsafeName,
    },
}

/// What is wrong with a folder given as a shard (or with the merge's own folder).
#[derive(Debug, Error)]
pub enum ShardFolderError {
    /// The folder does not exist.
    #[error("no such folder")]
    Missing,
    /// The folder's `bench.json` or `manifest.jsonl` cannot be read as a benchmark's.
    #[error(transparent)]
    Unreadable(Box<BenchError>),
    /// The folder holds a whole benchmark, not a shard of one.
    #[error("a whole benchmark, not a shard")]
    NotAShard,
    /// No shard folder was given to merge.
    #[error("name at least one shard folder to merge")]
    NoShards,
    /// The plan in the folder's `bench.json` disagrees with its own run count or the
    /// digest of its run ids.
    #[error("its bench.json does not describe its plan (edited by hand?)")]
    PlanEdited,
    /// A finished run's files disagree with each other.
    #[error("run {id}: {why}")]
    RunEdited {
        /// The run's id.
        id: String,
        /// What disagrees.
        why: String,
    },
    /// The folder's `bench.json` names a scenario whose name cannot be a folder's.
    #[error("its bench.json names scenario {name:?}, which {source}")]
    UnsafeScenario {
        /// The scenario's name.
        name: String,
        /// Why the name cannot be a folder's.
        #[source]
        source: job::UnsafeName,
    },
}
