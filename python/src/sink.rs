//! Where a run's events and a benchmark's progress go in Python: a callable, called
//! with the GIL held, from the run's own threads.

use std::sync::Mutex;

use pyo3::prelude::*;
use sopsim::error::CancelToken;
use sopsim::events::{EventSink, Payloads, SimEvent};
use sopsim_bench::plan::Job;
use sopsim_bench::{BenchObserver, JobResult};

/// Keeps each event's payload (as `events.jsonl` holds it) and hands it to `callback`.
/// An exception in the callback stops the run, and is raised when the run returns.
pub(crate) struct PythonSink {
    callback: Option<Py<PyAny>>,
    state: Mutex<State>,
}

struct State {
    payloads: Payloads,
    events: Vec<String>,
    error: Option<PyErr>,
    cancel: Option<CancelToken>,
}

impl PythonSink {
    pub(crate) fn new(callback: Option<Py<PyAny>>, conversation_id: String, seed: u64) -> Self {
        Self {
            callback,
            state: Mutex::new(State {
                payloads: Payloads::new(conversation_id, seed),
                events: Vec::new(),
                error: None,
                cancel: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token a callback's exception cancels.
    pub(crate) fn cancel_with(&self, cancel: CancelToken) {
        self.state().cancel = Some(cancel);
    }

    pub(crate) fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut self.state().events)
    }

    pub(crate) fn take_error(&self) -> Option<PyErr> {
        self.state().error.take()
    }
}

impl EventSink for PythonSink {
    /// The callback gets `events.jsonl`'s payloads, which streamed pieces are not.
    fn wants_tokens(&self) -> bool {
        false
    }

    fn emit(&self, event: &SimEvent) {
        let text = {
            let mut st = self.state();
            let Some(payload) = st.payloads.next(event) else {
                return;
            };
            let text = payload.to_string();
            st.events.push(text.clone());
            if st.error.is_some() {
                return;
            }
            text
        };
        let Some(callback) = &self.callback else {
            return;
        };
        if let Err(e) = Python::attach(|py| callback.call1(py, (text,)).map(|_| ())) {
            let mut st = self.state();
            if let Some(cancel) = &st.cancel {
                cancel.cancel();
            }
            st.error.get_or_insert(e);
        }
    }
}

/// Tells a Python callable `progress(done, total)` as a benchmark's runs end. An
/// exception in the callable stops the benchmark (its finished runs are kept), and is
/// raised when the benchmark returns.
pub(crate) struct Progress {
    callback: Option<Py<PyAny>>,
    counts: Mutex<(usize, usize)>,
    error: Mutex<Option<PyErr>>,
    cancel: CancelToken,
}

impl Progress {
    pub(crate) fn new(callback: Option<Py<PyAny>>, cancel: CancelToken) -> Self {
        Self {
            callback,
            counts: Mutex::new((0, 0)),
            error: Mutex::new(None),
            cancel,
        }
    }

    pub(crate) fn take_error(&self) -> Option<PyErr> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn tell(&self, done: usize, total: usize) {
        let Some(callback) = &self.callback else {
            return;
        };
        if let Err(e) = Python::attach(|py| callback.call1(py, (done, total)).map(|_| ())) {
            self.cancel.cancel();
            self.error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    }
}

impl BenchObserver for Progress {
    /// Runs an earlier call finished count as done: a rerun of a finished benchmark
    /// tells `(n, n)`, not `(0, 0)`.
    fn planned(&self, total: usize, done: usize) {
        let all = total + done;
        *self.counts.lock().unwrap_or_else(|p| p.into_inner()) = (done, all);
        self.tell(done, all);
    }

    fn run_done(&self, _job: &Job, _result: &JobResult) {
        let (done, total) = {
            let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            c.0 += 1;
            *c
        };
        self.tell(done, total);
    }
}
