//! Several servers of one model as one backend, for a user who runs a few llama.cpp or
//! vLLM servers without a load balancer in front.
//!
//! Each call goes to the live server with the fewest calls in flight (ties taken in
//! turn, so an idle pool is used evenly). A server that keeps failing through every
//! attempt of a call is left out for the rest of the run, with a warning, and the call
//! goes to another; a request a server refuses (a 4xx) would be refused by all of
//! them, so it fails as it would with one server. The last live server is never left
//! out: its failure is the call's, as with a single server.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use futures::future::BoxFuture;

use super::{redact::shown, CallFailed, OpenAiBackend};
use crate::llm::{Completion, LlmBackend, LlmError, LlmRequest, TokenSink};

/// One server of the pool.
struct Replica {
    backend: OpenAiBackend,
    /// Calls sent here and not yet answered (those waiting for a slot included).
    in_flight: AtomicUsize,
    /// Left out after it failed a call through every attempt.
    down: AtomicBool,
}

/// Replicas of one model, as one backend.
pub struct Replicas {
    replicas: Vec<Replica>,
    /// Where the search for the least-loaded server starts: moves on with each call.
    next: AtomicUsize,
    /// The set-up notes, and a warning for each server left out.
    notes: Mutex<Vec<String>>,
}

/// Takes a call off its server's count however the call ends.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Replicas {
    /// The pool of `backends`, in the order the user gave them (at least one).
    pub fn new(backends: Vec<OpenAiBackend>) -> Self {
        let mut notes: Vec<String> = Vec::new();
        for note in backends.iter().flat_map(|b| b.notes.iter()) {
            if !notes.contains(note) {
                notes.push(note.clone());
            }
        }
        Self {
            replicas: backends
                .into_iter()
                .map(|backend| Replica {
                    backend,
                    in_flight: AtomicUsize::new(0),
                    down: AtomicBool::new(false),
                })
                .collect(),
            next: AtomicUsize::new(0),
            notes: Mutex::new(notes),
        }
    }

    /// The live server with the fewest calls in flight, counted as taken; `None`
    /// when every server is left out.
    fn pick(&self) -> Option<(&Replica, InFlight<'_>)> {
        let n = self.replicas.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let chosen = (0..n)
            .map(|k| &self.replicas[(start + k) % n])
            .filter(|r| !r.down.load(Ordering::Relaxed))
            .min_by_key(|r| r.in_flight.load(Ordering::Relaxed))?;
        chosen.in_flight.fetch_add(1, Ordering::Relaxed);
        Some((chosen, InFlight(&chosen.in_flight)))
    }

    /// Leaves `replica` out, once, with a warning that names it and why; `false` when
    /// it is the last live server, which stays.
    fn leave_out(&self, replica: &Replica, why: &LlmError) -> bool {
        let others = self
            .replicas
            .iter()
            .filter(|r| !std::ptr::eq(*r, replica) && !r.down.load(Ordering::Relaxed))
            .count();
        if others == 0 {
            return false;
        }
        if replica.down.swap(true, Ordering::Relaxed) {
            return true;
        }
        let live = others;
        let text = format!(
            "the server at {} kept failing and was left out for the rest of the run \
             ({live} of {} still serving): {why}",
            shown(replica.backend.endpoint()),
            self.replicas.len()
        );
        tracing::warn!("{text}");
        if let Ok(mut notes) = self.notes.lock() {
            notes.push(text);
        }
        true
    }

    /// Calls in flight on each server, in the order given.
    #[cfg(test)]
    fn loads(&self) -> Vec<usize> {
        self.replicas
            .iter()
            .map(|r| r.in_flight.load(Ordering::Relaxed))
            .collect()
    }
}

impl LlmBackend for Replicas {
    fn describe(&self) -> String {
        let first = &self.replicas[0].backend;
        let servers: Vec<String> = self
            .replicas
            .iter()
            .map(|r| shown(r.backend.endpoint()))
            .collect();
        format!(
            "openai:{}@[{}]",
            first.options.model.as_deref().unwrap_or("default"),
            servers.join(", ")
        )
    }

    fn notes(&self) -> Vec<String> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }

    fn native_tools(&self) -> bool {
        true
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            loop {
                // The last live server is never left out, so there is always one.
                let Some((replica, _counted)) = self.pick() else {
                    return Err(LlmError::failed("openai", "no server to call"));
                };
                match replica.backend.call(&request, stream.clone()).await {
                    Ok(c) => return Ok(c),
                    Err(CallFailed::Refused(e)) => return Err(e),
                    Err(CallFailed::ServerGaveUp(e)) => {
                        if !self.leave_out(replica, &e) {
                            return Err(e);
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::openai::OpenAiOptions;

    fn pool(n: usize) -> Replicas {
        Replicas::new(
            (0..n)
                .map(|i| {
                    OpenAiBackend::new(OpenAiOptions {
                        base_url: format!("http://127.0.0.1:{}/v1", 9 + i),
                        model: Some("m".into()),
                        ..OpenAiOptions::default()
                    })
                    .unwrap()
                })
                .collect(),
        )
    }

    #[test]
    fn calls_go_to_the_least_loaded_live_server_and_idle_ones_in_turn() {
        let p = pool(3);
        let (_, a) = p.pick().unwrap();
        let (_, b) = p.pick().unwrap();
        assert_eq!(p.loads(), [1, 1, 0]);
        let (third, c) = p.pick().unwrap();
        assert_eq!(third.backend.endpoint(), "http://127.0.0.1:11/v1");
        drop((a, c));
        assert_eq!(p.loads(), [0, 1, 0]);
        p.leave_out(&p.replicas[0], &LlmError::failed("openai", "refused"));
        let (r, _d) = p.pick().unwrap();
        assert_eq!(r.backend.endpoint(), "http://127.0.0.1:11/v1");
        drop(b);
        assert_eq!(p.notes().len(), 1, "one warning for the server left out");
        assert!(p.describe().contains("127.0.0.1:10"));
    }

    #[test]
    fn the_last_live_server_is_never_left_out() {
        let p = pool(2);
        let why = LlmError::failed("openai", "refused");
        assert!(p.leave_out(&p.replicas[0], &why));
        assert!(!p.leave_out(&p.replicas[1], &why), "the last one stays");
        let (r, _) = p.pick().unwrap();
        assert_eq!(r.backend.endpoint(), "http://127.0.0.1:10/v1");
        assert_eq!(p.notes().len(), 1);
    }
}
