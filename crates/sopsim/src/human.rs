//! Human turns: a person types an agent's lines. When input ends, the run ends cleanly.
//! The command line reads them from standard input; a caller may supply any source.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::error::CancelToken;

/// Where human turns come from.
pub trait HumanInput: Send + Sync {
    /// The next line for `name` playing `role`; `None` when input has ended.
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>>;

    /// A move in a simultaneous round: like [`HumanInput::read_turn`], but the others
    /// of the round must not see it before the round is in (a terminal hides the typed
    /// line). Reads of one round may be in flight at once; a source that can only
    /// take one line at a time serves them in the order they were asked, which is the
    /// order of the state's roles.
    fn read_move<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        self.read_turn(name, role)
    }
}

/// Lines given up front (tests and scripts); ends when they run out.
#[derive(Default)]
pub struct LinesInput(Mutex<VecDeque<String>>);

impl LinesInput {
    /// A source that gives `lines` in order, one per turn.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(lines: I) -> Self {
        Self(Mutex::new(lines.into_iter().map(Into::into).collect()))
    }
}

impl HumanInput for LinesInput {
    fn read_turn<'a>(&'a self, _name: &'a str, _role: &'a str) -> BoxFuture<'a, Option<String>> {
        let next = self.0.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        Box::pin(async move { next })
    }
}

/// A source whose pending read ends, as if input had ended, once the run is cancelled:
/// a Ctrl-C while a person is typing stops the run then, not at their next line. The
/// unfinished turn is not kept, so a resumed run asks for it again.
pub(crate) struct UntilCancelled {
    inner: Arc<dyn HumanInput>,
    cancel: CancelToken,
}

impl UntilCancelled {
    pub(crate) fn new(inner: Arc<dyn HumanInput>, cancel: CancelToken) -> Self {
        Self { inner, cancel }
    }

    async fn read(&self, typed: BoxFuture<'_, Option<String>>) -> Option<String> {
        tokio::select! {
            line = typed => line,
            () = self.cancel.cancelled() => None,
        }
    }
}

impl HumanInput for UntilCancelled {
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.read(self.inner.read_turn(name, role)))
    }

    fn read_move<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.read(self.inner.read_move(name, role)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A person who never types.
    struct Silent;

    impl HumanInput for Silent {
        fn read_turn<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Option<String>> {
            Box::pin(futures::future::pending())
        }
    }

    #[tokio::test]
    async fn a_cancelled_run_stops_waiting_for_a_line() {
        let cancel = CancelToken::new();
        let input = UntilCancelled::new(Arc::new(Silent), cancel.clone());
        let read = input.read_turn("Ann", "customer");
        cancel.cancel();
        assert_eq!(read.await, None);
        let typed = UntilCancelled::new(Arc::new(LinesInput::new(["hi"])), CancelToken::new());
        assert_eq!(
            typed.read_move("Ann", "customer").await.as_deref(),
            Some("hi")
        );
    }
}
