//! Human turns: a person types an agent's lines. When input ends, the run ends cleanly.
//! The command line reads them from standard input; a caller may supply any source.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::future::BoxFuture;

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
