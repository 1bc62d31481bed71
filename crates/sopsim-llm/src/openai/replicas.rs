//! Several servers of one model as one backend, for a user who runs a few llama.cpp or
//! vLLM servers without a load balancer in front.
//!
//! Each call goes to the live server with the fewest calls in flight (ties taken in
//! turn, so an idle pool is used evenly). A server that fails an attempt (a 429, a
//! 5xx, a timeout, a stream that stalls) while another could take the call is not
//! waited for: it rests for the wait it needed, and the call goes to another at once.
//! A server that fails as many attempts in a row as a call may make, or one call's
//! every attempt, or its deadline, is left out for the rest of the run, with a
//! warning. A request a server refuses (a 4xx) would be refused by all of them, so it
//! fails as it would with one server. The last live server is never left out: its
//! failure is the call's, as with a single server.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::{redact::shown, CallFailed, OpenAiBackend};
use crate::{Completion, LlmBackend, LlmError, LlmRequest, TokenSink};

/// One server of the pool.
struct Replica {
    backend: OpenAiBackend,
    /// Calls sent here and not yet answered (those waiting for a slot included).
    in_flight: AtomicUsize,
    /// Left out after it failed a call through every attempt.
    down: AtomicBool,
    /// Attempts failed in a row, over every call.
    failures: AtomicU32,
    /// Not to be called before this, unless no other server can be.
    resting_until: Mutex<Option<Instant>>,
}

impl Replica {
    fn resting(&self, now: Instant) -> bool {
        self.resting_until
            .lock()
            .map(|r| r.is_some_and(|until| until > now))
            .unwrap_or(false)
    }

    fn rest(&self, rest: Duration) {
        if let Ok(mut r) = self.resting_until.lock() {
            *r = Some(Instant::now() + rest);
        }
    }

    fn live(&self) -> bool {
        !self.down.load(Ordering::Relaxed)
    }
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
                    failures: AtomicU32::new(0),
                    resting_until: Mutex::new(None),
                })
                .collect(),
            next: AtomicUsize::new(0),
            notes: Mutex::new(notes),
        }
    }

    /// The live server with the fewest calls in flight, counted as taken: one that is
    /// not resting if there is one; `None` when every server is left out.
    fn pick(&self) -> Option<(&Replica, InFlight<'_>)> {
        let n = self.replicas.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let now = Instant::now();
        let chosen = (0..n)
            .map(|k| &self.replicas[(start + k) % n])
            .filter(|r| r.live())
            .min_by_key(|r| (r.resting(now), r.in_flight.load(Ordering::Relaxed)))?;
        chosen.in_flight.fetch_add(1, Ordering::Relaxed);
        Some((chosen, InFlight(&chosen.in_flight)))
    }

    /// Whether a live server other than `replica` could take a call now.
    fn another_ready(&self, replica: &Replica) -> bool {
        let now = Instant::now();
        self.replicas
            .iter()
            .any(|r| !std::ptr::eq(r, replica) && r.live() && !r.resting(now))
    }

    /// Counts a failed attempt of `replica`; one failing as many in a row as a call may
    /// make is left out (`false`: it is the last live server).
    fn failed_attempt(&self, replica: &Replica, why: &LlmError) -> bool {
        let attempts = replica.backend.options().retry.attempts.max(1);
        if replica.failures.fetch_add(1, Ordering::Relaxed) + 1 >= attempts {
            return self.leave_out(replica, why);
        }
        true
    }

    /// Leaves `replica` out, once, with a warning that names it and why; `false` when
    /// it is the last live server, which stays.
    fn leave_out(&self, replica: &Replica, why: &LlmError) -> bool {
        let others = self
            .replicas
            .iter()
            .filter(|r| !std::ptr::eq(*r, replica) && r.live())
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
            first.options().model.as_deref().unwrap_or("default"),
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
                let hand_off = || self.another_ready(replica);
                match replica
                    .backend
                    .call(&request, stream.clone(), &hand_off)
                    .await
                {
                    Ok(c) => {
                        replica.failures.store(0, Ordering::Relaxed);
                        return Ok(c);
                    }
                    Err(CallFailed::Refused(e)) => return Err(e),
                    Err(CallFailed::HandedOff { rest, error }) => {
                        replica.rest(rest);
                        if !self.failed_attempt(replica, &error) {
                            return Err(error);
                        }
                    }
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
    use crate::openai::OpenAiOptions;

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
    fn a_resting_server_is_passed_over_while_another_can_take_the_call() {
        let p = pool(2);
        p.replicas[0].rest(Duration::from_secs(60));
        assert!(p.another_ready(&p.replicas[0]));
        assert!(!p.another_ready(&p.replicas[1]), "the other one rests");
        for _ in 0..3 {
            let (r, _) = p.pick().unwrap();
            assert_eq!(r.backend.endpoint(), "http://127.0.0.1:10/v1");
        }
        p.replicas[1].rest(Duration::from_secs(60));
        assert!(p.pick().is_some(), "when all rest, one is still called");
        let why = LlmError::failed("openai", "HTTP 429");
        let attempts = p.replicas[0].backend.options().retry.attempts;
        for _ in 1..attempts {
            assert!(p.failed_attempt(&p.replicas[0], &why));
        }
        assert!(
            p.replicas[0].live(),
            "not yet as many failures as a call's attempts"
        );
        assert!(p.failed_attempt(&p.replicas[0], &why));
        assert!(!p.replicas[0].live(), "left out");
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
