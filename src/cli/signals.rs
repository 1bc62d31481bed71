//! Stop signals: Ctrl-C (SIGINT), SIGTERM (how Slurm and Kubernetes stop a job) and
//! SIGHUP (the terminal went away). The first cancels the run's token (it stops at the
//! next turn boundary, keeps every finished turn and writes every file); a second exits
//! at once. Either way the exit status is 128 + the first signal's number, as a shell
//! reports a process a signal ended: 130, 143 or 129.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use sopsim::error::CancelToken;

const SIGHUP: u8 = 1;
const SIGINT: u8 = 2;
const SIGTERM: u8 = 15;

/// Which stop signal came first, once one has.
#[derive(Clone, Default)]
pub struct StopSignals {
    first: Arc<AtomicU8>,
    /// What the first signal is said to do.
    notice: Arc<Mutex<&'static str>>,
}

impl StopSignals {
    /// Watches for the stop signals on a thread of its own and cancels `token` at the
    /// first; `notice` is printed then.
    pub fn watch(token: CancelToken, notice: &'static str) -> StopSignals {
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
    pub fn set_notice(&self, notice: &'static str) {
        *self.notice.lock().unwrap_or_else(|p| p.into_inner()) = notice;
    }

    /// 128 + the first stop signal's number; 130 when the run was stopped otherwise.
    pub fn exit_status(&self) -> u8 {
        match self.first.load(Ordering::SeqCst) {
            0 => 128 + SIGINT,
            n => 128 + n,
        }
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
