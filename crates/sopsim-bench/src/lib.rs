//! sopsim-bench: the benchmark of `sopsim bench`, cooperative against competitive over
//! many seeds, on the `sopsim` runtime's front door.
//!
//! The front door is [`run`] with [`BenchOptions`], told how it goes through a
//! [`BenchObserver`]; a folder's results are read back with
//! [`read_back::read_bench_files`], and the shards of a cluster's benchmark merged with
//! [`merge::merge`].
//!
//! # Layout
//!
//! A benchmark expands scenario × mode × seed into jobs ([`plan`], one [`job`] each;
//! [`shard`] picks a cluster task's share), runs the unfinished ones up to
//! `BenchOptions::jobs` at a time in one process ([`exec`], each through
//! `sopsim::run_async` into a run folder of its own, without the journal a resume
//! would read: a killed job runs again from its start), reads every run back from its
//! folder ([`read_back::read_run`], figures from [`extract`]), summarises them with
//! [`stats`] and writes `report.json`, `timing.json`, `report.md` ([`report`]) and the
//! [`plot`]s.
//!
//! ```text
//! OUT/bench.json          settings every run in OUT shares
//! OUT/manifest.jsonl      one job per line
//! OUT/runs/SCENARIO/MODE/seed-N/   a run's folder: transcript.jsonl, events.jsonl, summary.json, environment.json, run.json
//! OUT/report.json         deterministic: the same runs give the same bytes
//! OUT/timing.json         wall time, latency, throughput, peak memory
//! OUT/report.md           both, for people, with the plots
//! OUT/plots/              SVG and PNG
//! ```

mod brief;
pub mod exec;
pub mod extract;
pub mod job;
mod markdown;
pub mod merge;
mod outputs;
pub mod plan;
#[cfg(feature = "plots")]
pub mod plot;
pub mod read_back;
pub mod report;
pub mod shard;
pub mod stats;
mod summary_figures;
mod world_figures;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use std::path::Path as StdPath;

use thiserror::Error;

pub use exec::JobResult;
use exec::{Executed, Prepared};
use plan::{Job, Settings};
use read_back::RunStatus;
use report::{Report, ScenarioRuns};
pub use shard::{Shard, ShardError, ShardPlan};
use sopsim::error::{CancelToken, SimError};
use sopsim::runner::OutputFolder;
use sopsim::scenario::aiwaves::Imported;
use sopsim::scenario::{CommandConsent, Mode, OutcomeRules, Scenario};
use sopsim::setup::{self, ModelOptions, Setting, SetupError};

/// Seeds one benchmark may plan: each is a run folder per scenario and mode.
pub const MAX_SEEDS: u64 = 1_000_000;

/// Why a benchmark could not be planned, run or reported.
#[derive(Debug, Error)]
pub enum BenchError {
    #[error(transparent)]
    Setup(#[from] SetupError),
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
        source: plan::Unreadable,
    },
    #[error("{0}: it holds a run (its run.json), not a benchmark; use another output folder")]
    HoldsARun(PathBuf),
    #[error("{out}: its runs used {earlier}; this benchmark uses {now}; use another output folder to compare them")]
    OtherSettings {
        out: PathBuf,
        earlier: String,
        now: String,
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
        source: merge::ShardFolderError,
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
    File(#[from] sopsim::runner::FolderFileError),
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
            BenchError::File(e) => !matches!(e, sopsim::runner::FolderFileError::Io { .. }),
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
            _ => None,
        }
    }
}

/// Told how a benchmark goes (the command line draws a progress bar).
pub trait BenchObserver: Sync {
    /// `total` runs to do this time; `done` were finished by earlier invocations.
    fn planned(&self, _total: usize, _done: usize) {}
    /// A run ended.
    fn run_done(&self, _job: &Job, _result: &JobResult) {}
}

/// Observes nothing.
pub struct Unobserved;

impl BenchObserver for Unobserved {}

/// What `sopsim bench` was asked to do.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub scenarios: Vec<PathBuf>,
    pub modes: Vec<Mode>,
    pub seeds: u64,
    pub first_seed: u64,
    pub jobs: usize,
    pub out: PathBuf,
    pub max_turns: Option<u64>,
    pub models: ModelOptions,
    /// Folders besides each scenario's own that its files may be in.
    pub allowed_paths: Vec<PathBuf>,
    /// Run only this shard of the plan.
    pub shard: Option<Shard>,
    /// The programs the scenarios' tools may start (none unless the user allows them).
    pub allowed_commands: CommandConsent,
}

/// What a benchmark invocation ran and concluded.
pub struct BenchRun {
    pub report: Report,
    pub executed: Executed,
    /// Runs already finished by an earlier invocation.
    pub skipped: usize,
    /// The process's peak resident memory, when the OS tells.
    pub peak_rss_mib: Option<f64>,
}

impl BenchRun {
    pub fn runs_per_s(&self) -> f64 {
        let runs = (self.executed.finished + self.executed.failed) as f64;
        runs / self.executed.wall.as_secs_f64().max(1e-9)
    }

    pub fn turns_per_s(&self) -> f64 {
        self.executed.turns as f64 / self.executed.wall.as_secs_f64().max(1e-9)
    }

    /// Failed and unfinished runs across the report.
    pub fn incomplete(&self) -> (usize, usize) {
        self.report
            .scenarios
            .iter()
            .flat_map(|s| s.runs.values())
            .fold((0, 0), |(f, u), c| (f + c.failed, u + c.unfinished))
    }
}

struct Loaded {
    path: PathBuf,
    sha256: String,
    scenario: Arc<Scenario>,
    rules: Option<OutcomeRules>,
    /// What an imported aiwaves config could not carry over.
    imported: Imported,
}

/// Locks a benchmark's output folder, or fails at once if another process holds it.
fn lock_folder(out: &StdPath) -> Result<sopsim::runner::FolderLock, BenchError> {
    sopsim::runner::FolderLock::take(out).map_err(|source| {
        SetupError::Out {
            path: out.to_path_buf(),
            source,
        }
        .into()
    })
}

fn load(path: &StdPath, allowed: &[PathBuf]) -> Result<Loaded, BenchError> {
    let sopsim::Loaded { scenario, imported } = sopsim::load(path, allowed)?;
    if let Some((name, _)) = scenario.agents.iter().find(|(_, a)| a.human) {
        return Err(BenchError::Human {
            path: path.to_path_buf(),
            agent: name.clone(),
        });
    }
    let bytes = sopsim_core::files::read_bounded(path, sopsim::scenario::MAX_SCENARIO_BYTES)
        .map_err(|source| BenchError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    // Validation compiled the outcomes already, so this succeeds for a loaded file.
    // A world's figures are outcomes too, with or without an `outcomes` section.
    let outcomes = match (&scenario.outcomes, &scenario.world) {
        (Some(o), _) => Some(o.clone()),
        (None, Some(_)) => Some(sopsim::scenario::Outcomes::default()),
        (None, None) => None,
    };
    let rules = outcomes.as_ref().and_then(|o| {
        OutcomeRules::compile(
            o,
            &scenario,
            &sopsim::scenario::FieldPath::root().key("outcomes"),
        )
        .ok()
    });
    Ok(Loaded {
        path: path.to_path_buf(),
        sha256: sopsim_core::digest::sha256_hex(&bytes),
        scenario: Arc::new(scenario),
        rules,
        imported,
    })
}

/// Peak resident memory of this process, from `/proc/self/status` (Linux).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Runs the benchmark and writes its report, telling `observer` how it goes and
/// stopping every run at its next turn once `cancel` is cancelled.
pub fn run(
    opts: &BenchOptions,
    observer: &dyn BenchObserver,
    cancel: CancelToken,
) -> Result<BenchRun, BenchError> {
    check_counts(opts)?;
    let mut loaded = load_all(&opts.scenarios, &opts.allowed_paths)?;
    for l in &loaded {
        opts.allowed_commands
            .check(&l.scenario)
            .map_err(|refused| SetupError::NotAllowed {
                path: l.path.clone(),
                refused,
            })?;
    }
    let stopped = || {
        if cancel.is_cancelled() {
            Err(BenchError::Interrupted)
        } else {
            Ok(())
        }
    };
    let seeds = plan_seeds(opts)?;
    let runs_each = seeds.len() * opts.modes.len();
    // A shard keeps its own share of the plan.
    let planned = (runs_each as u64).saturating_mul(loaded.len() as u64);
    setup::check_plan_fits(planned / opts.shard.map_or(1, |s| s.count.max(1)))?;
    for l in &loaded {
        setup::check_memory(&l.path, &l.scenario, opts.jobs.min(runs_each).max(1))?;
        setup::check_round_fits(&l.scenario, opts.max_turns)?;
    }
    let files: Vec<(&str, &StdPath, &str)> = loaded
        .iter()
        .map(|l| {
            (
                l.scenario.name.as_str(),
                l.path.as_path(),
                l.sha256.as_str(),
            )
        })
        .collect();
    let mut jobs = plan::expand(&files, &opts.modes, &seeds);
    stopped()?;
    let (prepared, embedder) = prepare(&mut loaded, opts)?;
    stopped()?;
    let llm_name = prepared
        .values()
        .next()
        .map(|p| p.services.llm.describe())
        .unwrap_or_default();
    let shard_plan = opts
        .shard
        .map(|shard| ShardPlan::new(shard, &jobs, &opts.modes, opts.first_seed, opts.seeds));
    if let Some(shard) = opts.shard {
        jobs = shard.select(&jobs);
    }
    let settings = Settings {
        llm: llm_name,
        embedder,
        max_turns: opts.max_turns,
        shard: shard_plan,
    };
    // Held until the report is written: two benchmarks into one folder would run the
    // same jobs into the same run folders.
    let _lock = lock_folder(&opts.out)?;
    plan::record(&opts.out, &settings, &jobs)?;

    // Which runs are finished is read from their folders: a check of the token every
    // few thousand keeps a plan of a million runs stoppable.
    let mut pending: Vec<Job> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        if i % 4096 == 0 {
            stopped()?;
        }
        if !plan::is_finished(&job.dir(&opts.out)) {
            pending.push(job.clone());
        }
    }
    let skipped = jobs.len() - pending.len();
    observer.planned(pending.len(), skipped);
    let executed = exec::execute(&opts.out, pending, &prepared, opts.jobs, observer, cancel);

    let report_inputs: Vec<ReportInput> = loaded.iter().map(ReportInput::of).collect();
    report_folder(
        &opts.out,
        &report_inputs,
        &settings,
        &opts.modes,
        &seeds,
        &jobs,
        executed,
        skipped,
    )
}

/// Refuses a benchmark of nothing: no scenario, no seed, no run at a time.
fn check_counts(opts: &BenchOptions) -> Result<(), BenchError> {
    if opts.scenarios.is_empty() {
        return Err(SetupError::NoScenarios.into());
    }
    if opts.seeds == 0 {
        return Err(SetupError::Count {
            setting: Setting::Seeds,
            what: "the number of seeds",
        }
        .into());
    }
    if opts.jobs == 0 {
        return Err(SetupError::Count {
            setting: Setting::Jobs,
            what: "the number of runs at once",
        }
        .into());
    }
    let repeated = opts
        .modes
        .iter()
        .enumerate()
        .find(|(i, m)| opts.modes[..*i].contains(m));
    if let Some((_, m)) = repeated {
        return Err(SetupError::Repeated {
            setting: Setting::Modes,
            what: "the list of modes",
            repeated: m.as_str().to_string(),
        }
        .into());
    }
    Ok(())
}

/// Loads every scenario; a benchmark tells them apart by name, so names must differ.
fn load_all(paths: &[PathBuf], allowed: &[PathBuf]) -> Result<Vec<Loaded>, BenchError> {
    let loaded = paths
        .iter()
        .map(|p| load(p, allowed))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, a) in loaded.iter().enumerate() {
        job::check_folder_name(&a.scenario.name).map_err(|source| BenchError::UnsafeName {
            path: a.path.clone(),
            name: a.scenario.name.clone(),
            source,
        })?;
        if let Some(b) = loaded[..i]
            .iter()
            .find(|b| b.scenario.name == a.scenario.name)
        {
            return Err(BenchError::SameName {
                first: b.path.clone(),
                second: a.path.clone(),
                name: a.scenario.name.clone(),
            });
        }
    }
    Ok(loaded)
}

/// The seeds to run, once the output folder is known to be usable.
fn plan_seeds(opts: &BenchOptions) -> Result<Vec<u64>, BenchError> {
    if opts.seeds > MAX_SEEDS {
        return Err(SetupError::TooMany {
            setting: Setting::Seeds,
            what: "the number of seeds",
            max: MAX_SEEDS,
        }
        .into());
    }
    let last_seed =
        opts.first_seed
            .checked_add(opts.seeds - 1)
            .ok_or(SetupError::SeedsOverflow {
                first: opts.first_seed,
                count: opts.seeds,
            })?;
    if opts.out.exists() && !opts.out.is_dir() {
        return Err(SetupError::Out {
            path: opts.out.clone(),
            source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it is a file").into(),
        }
        .into());
    }
    Ok((opts.first_seed..=last_seed).collect())
}

/// Each scenario with the services its runs share: one model backend and one
/// embedding service for every run (the scripted backend answers from each scenario's
/// own script). Also the embedder's name.
fn prepare(
    loaded: &mut [Loaded],
    opts: &BenchOptions,
) -> Result<(HashMap<String, Prepared>, String), BenchError> {
    // The one shared backend takes the first config's server. Each scenario has only
    // just been loaded, so `make_mut` copies nothing.
    let services = setup::assemble(
        &opts.models,
        loaded
            .iter_mut()
            .map(|l| (Arc::make_mut(&mut l.scenario), &l.imported)),
    )?;
    let embedder = services
        .first()
        .map(|s| s.embed.name().to_string())
        .unwrap_or_default();
    let mut prepared = HashMap::new();
    for (l, services) in loaded.iter().zip(services) {
        prepared.insert(
            l.scenario.name.clone(),
            Prepared {
                scenario: l.scenario.clone(),
                services,
                max_turns: opts.max_turns,
                notes: l.imported.notes.clone(),
                commands: opts.allowed_commands.clone(),
            },
        );
    }
    Ok((prepared, embedder))
}

/// What the report needs of one scenario.
struct ReportInput<'a> {
    name: String,
    path: &'a StdPath,
    sha256: &'a str,
    rules: Option<&'a OutcomeRules>,
}

impl<'a> ReportInput<'a> {
    fn of(l: &'a Loaded) -> Self {
        Self {
            name: l.scenario.name.clone(),
            path: &l.path,
            sha256: &l.sha256,
            rules: l.rules.as_ref(),
        }
    }
}

/// Reads every job's run folder back and writes the report files.
#[allow(clippy::too_many_arguments)]
fn report_folder(
    out: &StdPath,
    scenarios: &[ReportInput],
    settings: &Settings,
    modes: &[Mode],
    seeds: &[u64],
    jobs: &[Job],
    executed: Executed,
    skipped: usize,
) -> Result<BenchRun, BenchError> {
    let scenario_runs: Vec<ScenarioRuns> = scenarios
        .iter()
        .map(|l| ScenarioRuns {
            name: l.name.clone(),
            file: l.path.display().to_string(),
            sha256: l.sha256.to_string(),
            rules: l.rules,
            runs: jobs
                .iter()
                .filter(|j| j.scenario == l.name)
                .map(|j| {
                    let status = match read_back::read_run(&OutputFolder::new(out), j, l.rules) {
                        RunStatus::Unfinished if executed.failures.contains_key(&j.id) => {
                            RunStatus::Failed {
                                error: executed.failures[&j.id].clone(),
                            }
                        }
                        status => status,
                    };
                    (j.clone(), status)
                })
                .collect(),
        })
        .collect();
    let (report, timing) = report::build(settings, modes, seeds, &scenario_runs);
    let run = BenchRun {
        report,
        executed,
        skipped,
        peak_rss_mib: peak_rss_mib(),
    };
    outputs::write_outputs(out, &run, &timing)?;
    Ok(run)
}
