//! Progress on stderr: a model being fetched, a benchmark's runs.

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use sopsim::models::{FetchEvent, FetchObserver};
use sopsim_bench::plan::Job;
use sopsim_bench::{BenchObserver, JobResult};

/// Shows a model fetch: what runs, and a bar of the bytes checked.
#[derive(Default)]
pub(super) struct FetchProgress {
    bar: Mutex<Option<ProgressBar>>,
}

impl FetchObserver for FetchProgress {
    fn event(&self, event: FetchEvent) {
        let mut bar = self.bar.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            FetchEvent::Waiting { model, lock } => eprintln!(
                "sopsim: another sopsim is fetching {model}; waiting for it (lock {})…",
                lock.display()
            ),
            FetchEvent::Starting { model, dir } => {
                eprintln!(
                    "sopsim: {model} is not in {} yet; fetching it (once)…",
                    dir.display()
                )
            }
            FetchEvent::Running { command } => eprintln!("sopsim: {command}"),
            FetchEvent::Downloaded { model, done, total } => {
                let b = bar.get_or_insert_with(|| {
                    bytes_bar(
                        total,
                        format!("downloading {model}"),
                        "{msg} [{bar:30}] {bytes}/{total_bytes} · {bytes_per_sec} · ETA {eta}",
                    )
                });
                b.set_position(done);
            }
            FetchEvent::Progress { model, done, total } => {
                let message = format!("unpacking {model}");
                if bar.as_ref().is_some_and(|b| b.message() != message) {
                    if let Some(b) = bar.take() {
                        b.finish_and_clear();
                    }
                }
                let b = bar.get_or_insert_with(|| {
                    bytes_bar(total, message, "{msg} [{bar:30}] {bytes}/{total_bytes}")
                });
                b.set_position(done);
            }
            FetchEvent::Done { model, dir } => {
                if let Some(b) = bar.take() {
                    b.finish_and_clear();
                }
                eprintln!("sopsim: {model} ready in {}", dir.display());
            }
        }
    }
}

fn bytes_bar(total: u64, message: String, template: &str) -> ProgressBar {
    let b = ProgressBar::new(total).with_message(message);
    if let Ok(style) = ProgressStyle::with_template(template) {
        b.set_style(style.progress_chars("=> "));
    }
    b
}

/// A bar of a benchmark's runs, with failures printed above it as they happen.
pub(super) struct BenchProgress {
    bar: ProgressBar,
    failed: Mutex<usize>,
}

impl BenchProgress {
    /// Drawn on stderr unless `quiet`.
    pub(super) fn new(quiet: bool) -> Self {
        let target = if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        if let Ok(style) =
            ProgressStyle::with_template("{bar:30} {pos}/{len} runs · {elapsed} · ETA {eta} {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        Self {
            bar,
            failed: Mutex::new(0),
        }
    }

    /// A line above the bar (or on stderr when there is none).
    pub(super) fn println(&self, text: &str) {
        let text = super::terminal::printable(text);
        if self.bar.is_hidden() {
            eprintln!("{text}");
        } else {
            self.bar.println(text);
        }
    }

    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl BenchObserver for BenchProgress {
    fn planned(&self, total: usize, _done: usize) {
        self.bar.set_length(total as u64);
    }

    fn run_done(&self, job: &Job, result: &JobResult) {
        if let JobResult::Failed { error } = result {
            let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            *failed += 1;
            self.println(&format!("{}: failed: {error}", job.id));
            self.bar.set_message(format!("{failed} failed"));
        }
        self.bar.inc(1);
    }
}

/// A bar of a long simultaneous round's turns on stderr (a population's round can take
/// minutes, and its messages are shown only once all are in).
#[derive(Default)]
pub(super) struct RoundBar {
    bar: Mutex<Option<ProgressBar>>,
}

impl RoundBar {
    /// Rounds of fewer turns than this pass too quickly to need a bar.
    const FROM_TURNS: u64 = 1000;
}

impl sopsim::events::EventSink for RoundBar {
    fn wants_tokens(&self) -> bool {
        false
    }

    fn emit(&self, event: &sopsim::events::SimEvent) {
        use sopsim::events::SimEvent;
        let (done, of) = match *event {
            SimEvent::RoundProgress { done, of } => (done, of),
            // A round that ends another way (an error, input closed) takes its bar.
            SimEvent::RoundEnded { .. } | SimEvent::Finished { .. } => {
                let mut bar = self.bar.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(b) = bar.take() {
                    b.finish_and_clear();
                }
                return;
            }
            _ => return,
        };
        if of < Self::FROM_TURNS {
            return;
        }
        let mut bar = self.bar.lock().unwrap_or_else(|p| p.into_inner());
        let b = bar.get_or_insert_with(|| {
            let b = ProgressBar::with_draw_target(Some(of), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{bar:30} {pos}/{len} turns of the round · ETA {eta}")
            {
                b.set_style(style.progress_chars("=> "));
            }
            b
        });
        b.set_position(done);
        if done >= of {
            b.finish_and_clear();
            *bar = None;
        }
    }
}
