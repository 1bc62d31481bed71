//! The token that stops a run, or a whole benchmark: cancelled from any thread (a
//! signal handler's, a web handler's), awaited by whatever a run is waiting on, so that
//! a model call, a tool call or a retry's wait in progress is abandoned rather than
//! awaited. A leaf: the services (model clients) and the running layer both use it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Stops a run (or a whole benchmark) when cancelled: what the run waits on is
/// abandoned, every finished turn is kept. Clones share the state, so the caller keeps
/// one and hands another to the run.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<Cancelled>);

/// Whether a token was cancelled, and who waits for it to be.
#[derive(Debug, Default)]
struct Cancelled {
    flag: AtomicBool,
    waiters: tokio::sync::Notify,
}

impl CancelToken {
    /// A token that is not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels the token (from any thread, a signal handler's included).
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.waiters.notify_waiters();
    }

    /// Whether the token has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Completes once the token is cancelled.
    pub async fn cancelled(&self) {
        let notified = self.0.waiters.notified();
        tokio::pin!(notified);
        // Registered before the flag is read, so a cancel in between is not missed.
        notified.as_mut().enable();
        if !self.is_cancelled() {
            notified.await;
        }
    }
}

impl CancelToken {
    /// `work`'s output, or `None` once the token is cancelled: whatever `work` waits on
    /// is dropped then, not awaited.
    pub async fn unless_cancelled<F: std::future::Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.cancelled() => None,
            out = work => Some(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_in_progress_is_dropped_when_the_token_is_cancelled() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let token = CancelToken::new();
        let canceller = token.clone();
        let never = rt.block_on(async {
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                canceller.cancel();
            });
            token.unless_cancelled(std::future::pending::<()>()).await
        });
        assert_eq!(never, None);
        let done = rt.block_on(CancelToken::new().unless_cancelled(async { 7 }));
        assert_eq!(done, Some(7));
        assert_eq!(
            rt.block_on(token.unless_cancelled(async { 7 })),
            None,
            "a cancelled token starts nothing"
        );
    }
}
