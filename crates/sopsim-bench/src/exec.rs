//! Running the planned jobs: up to `jobs` simulations at once, spread over one actix
//! arbiter per core and sharing the model and embedding services; each run writes its
//! own folder. Cancelling stops every run at once, keeping its finished turns, and leaves
//! the unfinished ones for the next invocation.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::job::Job;
use super::BenchObserver;
use sopsim::error::CancelToken;
use sopsim::runner::{Existing, OutputFolder};
use sopsim::scenario::aiwaves::Imported;
use sopsim::scenario::Scenario;
use sopsim::simulation::{EndReason, Services};
use sopsim::{RunError, RunIo, RunOptions, ScenarioSource};
use sopsim_core::error_chain::chain;

/// A scenario ready to run: the parsed file and the services its runs use.
#[derive(Clone)]
pub struct Prepared {
    /// The parsed scenario.
    pub scenario: Arc<Scenario>,
    /// The model and embedding services its runs share.
    pub services: Services,
    /// The turn limit of every run, when set.
    pub max_turns: Option<u64>,
    /// What an imported config left out, reported as warnings in every run.
    pub imported: Imported,
    /// The file's SHA-256 when it was loaded, which every run's `run.json` keeps.
    pub sha256: String,
    /// The programs the scenario's tools may start.
    pub commands: sopsim::scenario::CommandConsent,
}

/// How one job went.
#[derive(Debug, Clone, PartialEq)]
pub enum JobResult {
    /// The run ended, by any end but an error or an interruption.
    Finished {
        /// The turns it took.
        turns: u64,
    },
    /// The run could not start or failed while running.
    Failed {
        /// Why it failed.
        error: String,
    },
    /// The run was stopped by the benchmark's cancellation; it runs again next time.
    Interrupted,
}

/// What one invocation ran.
#[derive(Debug, Clone, Default)]
pub struct Executed {
    /// Runs that finished.
    pub finished: usize,
    /// Runs that failed.
    pub failed: usize,
    /// Runs that were interrupted.
    pub interrupted: usize,
    /// Turns taken by the finished runs, in all.
    pub turns: u64,
    /// Wall-clock time the invocation spent running its jobs.
    pub wall: Duration,
    /// Jobs that were in flight at once, at most.
    pub concurrency: usize,
    /// Arbiter threads the runs were spread over.
    pub workers: usize,
    /// The open-file limit, when it lowered the number of runs at once.
    pub capped_by_open_files: Option<u64>,
    /// Why each failed run failed, by run id: the report lists these even when the
    /// run could not write its own `error.json`.
    pub failures: HashMap<String, String>,
}

/// Files a run keeps open (its folder's lock, transcript, events, world log), one it
/// opens briefly at a time (summary, environment, error) and a connection to a model
/// server.
const FILES_PER_RUN: u64 = 6;
/// Left for the process itself: standard streams, model files, the report.
const FILES_RESERVED: u64 = 64;

/// How many runs fit at once under an open-file limit of `limit`.
pub fn runs_within_open_files(limit: u64) -> usize {
    (limit.saturating_sub(FILES_RESERVED) / FILES_PER_RUN).max(1) as usize
}

/// The process's soft open-file limit, when it has one.
#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

/// Runs `jobs` (those not yet finished), `concurrency` at a time.
pub fn execute(
    out: &Path,
    jobs: Vec<Job>,
    prepared: &HashMap<String, Prepared>,
    concurrency: usize,
    observer: &dyn BenchObserver,
    cancel: CancelToken,
) -> Executed {
    let started = Instant::now();
    let total = jobs.len();
    let mut concurrency = concurrency.clamp(1, total.max(1));
    let mut capped_by_open_files = None;
    if let Some(limit) = open_file_limit() {
        let fit = runs_within_open_files(limit);
        if concurrency > fit {
            concurrency = fit;
            capped_by_open_files = Some(limit);
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = concurrency.min(cores);
    let queue: Arc<Mutex<VecDeque<(Job, Prepared)>>> = Arc::new(Mutex::new(
        jobs.into_iter()
            .map(|j| {
                let p = prepared[&j.scenario].clone();
                (j, p)
            })
            .collect(),
    ));
    let mut executed = Executed {
        concurrency,
        workers,
        capped_by_open_files,
        ..Executed::default()
    };
    actix::System::new().block_on(async {
        let arbiters: Vec<actix::Arbiter> = (0..workers).map(|_| actix::Arbiter::new()).collect();
        let (tx, mut rx) = mpsc::unbounded_channel();
        for lane in 0..concurrency {
            let (queue, tx, cancel, out) =
                (queue.clone(), tx.clone(), cancel.clone(), out.to_path_buf());
            arbiters[lane % workers].spawn_fn(move || {
                actix::spawn(lane_loop(queue, tx, cancel, out));
            });
        }
        drop(tx);
        while let Some((job, result)) = rx.recv().await {
            match &result {
                JobResult::Finished { turns } => {
                    executed.finished += 1;
                    executed.turns += turns;
                }
                JobResult::Failed { error } => {
                    executed.failed += 1;
                    executed.failures.insert(job.id.clone(), error.clone());
                }
                JobResult::Interrupted => executed.interrupted += 1,
            }
            observer.run_done(&job, &result);
        }
        // Joined, not just stopped: their actors hold the runs' files open until
        // they are dropped, and the report reads those files next.
        for arbiter in arbiters {
            arbiter.stop();
            let _ = arbiter.join();
        }
    });
    executed.wall = started.elapsed();
    executed
}

/// One lane: takes the next job until none are left or the benchmark is interrupted.
async fn lane_loop(
    queue: Arc<Mutex<VecDeque<(Job, Prepared)>>>,
    results: mpsc::UnboundedSender<(Job, JobResult)>,
    cancel: CancelToken,
    out: PathBuf,
) {
    loop {
        if cancel.is_cancelled() {
            return;
        }
        let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        let Some((job, prepared)) = next else { return };
        let result = run_job(&job, &prepared, &out, cancel.clone()).await;
        if results.send((job, result)).is_err() {
            return;
        }
    }
}

/// Runs one job into its folder, replacing whatever an unfinished attempt left there,
/// through the runtime's one way in: a job's folder is a run's folder, as `sopsim run
/// --out` writes it.
async fn run_job(job: &Job, prepared: &Prepared, out: &Path, cancel: CancelToken) -> JobResult {
    let dir_path = job.dir(out);
    let bench = OutputFolder::new(out);
    let rel = job.rel_dir();
    if let Err(e) = bench
        .remove_tree(&rel)
        .and_then(|()| bench.create_dirs(&rel))
    {
        return JobResult::Failed {
            error: format!("cannot clear {}: {e}", dir_path.display()),
        };
    }
    let opts = RunOptions {
        out: Some(dir_path),
        mode: Some(job.mode),
        seed: job.seed,
        max_turns: prepared.max_turns,
        allowed_commands: prepared.commands.clone(),
        existing: Existing::Replace,
        // A killed job runs again from its start: no journal to resume it from.
        resumable: false,
        ..RunOptions::new(ScenarioSource::Loaded {
            origin: PathBuf::from(&job.file),
            scenario: prepared.scenario.clone(),
            imported: prepared.imported.clone(),
            sha256: prepared.sha256.clone(),
        })
    };
    let io = RunIo {
        services: Some(prepared.services.clone()),
        cancel,
        ..RunIo::default()
    };
    let error = match sopsim::run_async(opts, io).await {
        Ok(outcome) if outcome.summary.ended_by == EndReason::Interrupted => {
            return JobResult::Interrupted
        }
        Ok(outcome) => {
            return JobResult::Finished {
                turns: outcome.summary.turns,
            }
        }
        // What the run itself failed of, as its summary says it: where its turns are
        // is the benchmark's to know.
        Err(RunError::Failed { source, .. }) => chain(&source),
        Err(e) => chain(&e),
    };
    let _ = bench.replace_json(
        &format!("{rel}/error.json"),
        &serde_json::json!({ "id": job.id, "error": error }),
    );
    JobResult::Failed { error }
}
