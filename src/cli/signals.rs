//! Stop signals: Ctrl-C (SIGINT), SIGTERM (how Slurm and Kubernetes stop a job) and
//! SIGHUP (the terminal went away). The first cancels the run's token: what the run
//! waits on (a model call, a tool call, a retry's wait) is abandoned, every finished
//! turn is kept and every file written. A second exits at once, and so does the
//! process once the grace (`--stop-grace`, 10 s by default) has passed, whatever it
//! was doing: Slurm and Kubernetes kill 30 s after SIGTERM. Either way the exit status
//! is 128 + the first signal's number, as a shell reports a process a signal ended:
//! 130, 143 or 129.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sopsim::error::CancelToken;

/// How long after the first stop signal the process exits whatever it is doing.
static GRACE: OnceLock<Duration> = OnceLock::new();

/// Sets the grace `--stop-grace` asks for (default 10 s); once, before any signal.
pub(super) fn set_grace(grace: Duration) {
    let _ = GRACE.set(grace);
}

fn grace() -> Duration {
    GRACE.get().copied().unwrap_or(Duration::from_secs(10))
}

const SIGHUP: u8 = 1;
const SIGINT: u8 = 2;
const SIGTERM: u8 = 15;

/// Which stop signal came first, once one has.
#[derive(Clone, Default)]
pub(super) struct StopSignals {
    first: Arc<AtomicU8>,
    /// What the first signal is said to do.
    notice: Arc<Mutex<&'static str>>,
}

impl StopSignals {
    /// Watches for the stop signals on a thread of its own and cancels `token` at the
    /// first; `notice` is printed then.
    pub(super) fn watch(token: CancelToken, notice: &'static str) -> StopSignals {
        let signals = StopSignals::default();
        signals.set_notice(notice);
        let (first, notice) = (signals.first.clone(), signals.notice.clone());
        let watcher = std::thread::Builder::new()
            .name("sopsim-signals".into())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                else {
                    return;
                };
                runtime.block_on(async {
                    let Some(number) = next_signal().await else {
                        return;
                    };
                    first.store(number, Ordering::SeqCst);
                    let notice = *notice.lock().unwrap_or_else(|p| p.into_inner());
                    eprintln!("\n{}: {notice} (a second one quits now)", name(number));
                    token.cancel();
                    exit_after_grace(number);
                    if next_signal().await.is_some() {
                        // A person may be typing a hidden move: give the terminal its echo back.
                        super::stdin::restore_terminal();
                        std::process::exit(128 + i32::from(number));
                    }
                });
            });
        if let Err(e) = watcher {
            tracing::warn!("a stop signal will end the process at once: {e}");
        }
        signals
    }

    /// What the first signal will be said to do from now on (a run that has ended
    /// stops nothing but the viewer).
    pub(super) fn set_notice(&self, notice: &'static str) {
        *self.notice.lock().unwrap_or_else(|p| p.into_inner()) = notice;
    }

    /// 128 + the first stop signal's number; 130 when the run was stopped otherwise.
    pub(super) fn exit_status(&self) -> u8 {
        match self.first.load(Ordering::SeqCst) {
            0 => 128 + SIGINT,
            n => 128 + n,
        }
    }
}

/// Exits with the signal's status once the grace has passed, if the process is still
/// running then: the bound on a stop that the library's abandoning should never need.
fn exit_after_grace(number: u8) {
    let grace = grace();
    let spawned = std::thread::Builder::new()
        .name("sopsim-grace".into())
        .spawn(move || {
            std::thread::sleep(grace);
            eprintln!(
                "sopsim: still not stopped {} s after {}; exiting now (every finished \
                 turn is on disk; --resume continues the run)",
                grace.as_secs(),
                name(number)
            );
            super::stdin::restore_terminal();
            std::process::exit(128 + i32::from(number));
        });
    if let Err(e) = spawned {
        tracing::warn!("no bound on the time a stop takes: {e}");
    }
}

fn name(number: u8) -> &'static str {
    match number {
        SIGINT => "Ctrl-C",
        SIGTERM => "SIGTERM",
        _ => "SIGHUP",
    }
}

/// The next stop signal's number, or `None` if none can be watched for.
#[cfg(unix)]
async fn next_signal() -> Option<u8> {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return tokio::signal::ctrl_c().await.ok().map(|()| SIGINT);
    };
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.ok().map(|()| SIGINT),
        _ = term.recv() => Some(SIGTERM),
        _ = hup.recv() => Some(SIGHUP),
    }
}

#[cfg(not(unix))]
async fn next_signal() -> Option<u8> {
    tokio::signal::ctrl_c().await.ok().map(|()| SIGINT)
}
