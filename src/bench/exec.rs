//! Running the planned jobs: up to `--jobs` simulations at once, spread over one actix
//! arbiter per core and sharing the model and embedding services; each run writes its
//! own folder. Ctrl-C stops every run at its next turn boundary and leaves the
//! unfinished ones for the next invocation.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::mpsc;

use super::plan::Job;
use crate::events::{EventSink, FrontendLog};
use crate::output::{RunDir, TranscriptWriter};
use crate::scenario::Scenario;
use crate::sim::{self, EndReason, RunConfig, Services};

/// A scenario ready to run: the parsed file and the services its runs use.
#[derive(Clone)]
pub struct Prepared {
    pub scenario: Arc<Scenario>,
    pub services: Services,
    /// `--max-turns`.
    pub max_turns: Option<u64>,
    /// Reported as warnings in every run (what an imported config left out).
    pub notes: Vec<String>,
}

/// How one job went.
#[derive(Debug, Clone, PartialEq)]
pub enum JobResult {
    Finished { turns: u64 },
    Failed { error: String },
    Interrupted,
}

/// What one invocation ran.
#[derive(Debug, Clone, Default)]
pub struct Executed {
    pub finished: usize,
    pub failed: usize,
    pub interrupted: usize,
    pub turns: u64,
    pub wall: Duration,
    /// Jobs that were in flight at once, at most.
    pub concurrency: usize,
    /// Arbiter threads the runs were spread over.
    pub workers: usize,
}

/// Runs `jobs` (those not yet finished), `concurrency` at a time.
pub fn execute(
    out: &Path,
    jobs: Vec<Job>,
    prepared: &HashMap<String, Prepared>,
    concurrency: usize,
    show_progress: bool,
) -> Executed {
    let started = Instant::now();
    let total = jobs.len();
    let concurrency = concurrency.clamp(1, total.max(1));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = concurrency.min(cores);
    let progress = progress_bar(total as u64, show_progress);
    let cancel = Arc::new(AtomicBool::new(false));
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
        ..Executed::default()
    };
    actix::System::new().block_on(async {
        let interrupt = cancel.clone();
        let bar = progress.clone();
        actix::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                bar.println("interrupted: stopping every run at its next turn (press Ctrl-C again to quit now)");
                interrupt.store(true, Ordering::Relaxed);
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        });
        let arbiters: Vec<actix::Arbiter> = (0..workers).map(|_| actix::Arbiter::new()).collect();
        let (tx, mut rx) = mpsc::unbounded_channel();
        for lane in 0..concurrency {
            let (queue, tx, cancel, out) = (queue.clone(), tx.clone(), cancel.clone(), out.to_path_buf());
            arbiters[lane % workers].spawn_fn(move || {
                actix::spawn(lane_loop(queue, tx, cancel, out));
            });
        }
        drop(tx);
        while let Some((job, result)) = rx.recv().await {
            match result {
                JobResult::Finished { turns } => {
                    executed.finished += 1;
                    executed.turns += turns;
                }
                JobResult::Failed { error } => {
                    executed.failed += 1;
                    progress.println(format!("{}: failed: {error}", job.id));
                }
                JobResult::Interrupted => executed.interrupted += 1,
            }
            if executed.failed > 0 {
                progress.set_message(format!("{} failed", executed.failed));
            }
            progress.inc(1);
        }
        for arbiter in &arbiters {
            arbiter.stop();
        }
    });
    progress.finish_and_clear();
    executed.wall = started.elapsed();
    executed
}

fn progress_bar(total: u64, show: bool) -> ProgressBar {
    let target = if show {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs · {elapsed} · ETA {eta} {msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// One lane: takes the next job until none are left or the benchmark is interrupted.
async fn lane_loop(
    queue: Arc<Mutex<VecDeque<(Job, Prepared)>>>,
    results: mpsc::UnboundedSender<(Job, JobResult)>,
    cancel: Arc<AtomicBool>,
    out: PathBuf,
) {
    loop {
        if cancel.load(Ordering::Relaxed) {
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

/// Runs one job into its folder, replacing whatever an unfinished attempt left there.
async fn run_job(job: &Job, prepared: &Prepared, out: &Path, cancel: Arc<AtomicBool>) -> JobResult {
    let dir_path = job.dir(out);
    let failed = |error: String| {
        let _ = crate::output::write_json(
            &dir_path.join("error.json"),
            &serde_json::json!({ "id": job.id, "error": error }),
        );
        JobResult::Failed { error }
    };
    if dir_path.exists() {
        if let Err(e) = std::fs::remove_dir_all(&dir_path) {
            return JobResult::Failed {
                error: format!("cannot clear {}: {e}", dir_path.display()),
            };
        }
    }
    let dir = match RunDir::create(&dir_path) {
        Ok(d) => d,
        Err(e) => {
            return JobResult::Failed {
                error: e.to_string(),
            }
        }
    };
    let transcript = match TranscriptWriter::create(&dir.path("transcript.jsonl")) {
        Ok(t) => t,
        Err(e) => return failed(e.to_string()),
    };
    let conversation = format!("{}-{}-{}", job.scenario, job.mode.as_str(), job.seed);
    let events = match FrontendLog::create(&dir.path("events.jsonl"), conversation, job.seed) {
        Ok(e) => Arc::new(e),
        Err(e) => return failed(format!("events.jsonl: {e}")),
    };
    let config = RunConfig {
        mode: Some(job.mode),
        seed: job.seed,
        max_turns: prepared.max_turns,
        notes: prepared.notes.clone(),
        sinks: vec![events.clone() as Arc<dyn EventSink>],
        transcript: Some(transcript),
        cancel: Some(cancel),
        ..RunConfig::default()
    };
    let outcome = match sim::run(prepared.scenario.clone(), &prepared.services, config).await {
        Ok(o) => o,
        Err(e) => return failed(e.to_string()),
    };
    if let Err(e) = dir.write_final(&outcome.environment, &outcome.summary) {
        return failed(e.to_string());
    }
    if let Some(e) = events.error() {
        return failed(format!("events.jsonl: {e}"));
    }
    match outcome.summary.ended_by {
        EndReason::Error => JobResult::Failed {
            error: outcome.summary.error.unwrap_or_default(),
        },
        EndReason::Interrupted => JobResult::Interrupted,
        _ => JobResult::Finished {
            turns: outcome.summary.turns,
        },
    }
}
