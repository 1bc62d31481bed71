//! When to try a request again, and how long to wait: exponential backoff with equal
//! jitter (a random wait between half the ceiling and the ceiling), bounded attempts,
//! and the server's `Retry-After` when it sends one. [`with_retries`] is the one loop
//! every call to a server goes through.
//!
//! Hand-written rather than a backoff crate's policy: between attempts the loop also
//! gives up at once on a `Retry-After` past the longest wait, asks whether another
//! replica should take the call instead of waiting (`hand_off`), and sleeps with the
//! caller's sleep (the run's cancellable timer, or the blocking callers' runtime),
//! which such a policy would need wrapped anyway.

use std::future::Future;
use std::time::{Duration, SystemTime};

use rand::Rng;

/// Retry settings for one endpoint.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The longest wait before the first retry; the ceiling doubles with each attempt.
    pub base: Duration,
    /// The longest wait between attempts; a server asking for more is not waited for.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            base: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Whether an HTTP status is worth retrying: rate limits and server errors.
pub fn retryable_status(status: u16) -> bool {
    status == 429 || status == 408 || (500..600).contains(&status)
}

/// What went wrong in one attempt, as the user reads it (the status, the server's
/// words, which part of the exchange broke), with the error behind it kept as the
/// source when there is one. The description already quotes that error's own text,
/// so a chain of causes says it once.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct Cause {
    text: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Cause {
    /// A cause described by `text`, with the error that made it.
    pub fn caused_by(
        text: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            text: text.into(),
            source: Some(Box::new(source)),
        }
    }
}

impl From<String> for Cause {
    fn from(text: String) -> Self {
        Self { text, source: None }
    }
}

impl From<&str> for Cause {
    fn from(text: &str) -> Self {
        text.to_string().into()
    }
}

/// How one attempt failed.
#[derive(Debug)]
pub enum AttemptError {
    /// Worth another attempt after the policy's wait, or the server's `after`.
    Retry {
        /// What went wrong.
        cause: Cause,
        /// The wait the server asked for (`Retry-After`), if it did.
        after: Option<Duration>,
    },
    /// Worth another attempt at once (the answer, not the server, was at fault).
    Again(Cause),
    /// Not worth another attempt.
    Fatal(Cause),
}

impl AttemptError {
    /// A failure worth another attempt after the policy's wait.
    pub fn retry(cause: impl Into<Cause>) -> Self {
        AttemptError::Retry {
            cause: cause.into(),
            after: None,
        }
    }

    /// What went wrong.
    pub fn into_cause(self) -> Cause {
        match self {
            AttemptError::Retry { cause, .. }
            | AttemptError::Again(cause)
            | AttemptError::Fatal(cause) => cause,
        }
    }
}

/// Why [`with_retries`] stopped without a result. The message quotes the last cause,
/// which is also the source.
#[derive(Debug, thiserror::Error)]
pub enum GaveUp {
    /// Every attempt the policy allows failed.
    #[error("gave up after {attempts} attempt(s); last: {last}")]
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// Why the last attempt failed.
        #[source]
        last: Cause,
    },
    /// The server asked for a wait (`Retry-After`) longer than the policy ever waits.
    #[error(
        "the server asks to wait {} s before another attempt, longer than the {} s a call \
         waits; last: {last}",
        .asked.as_secs(), .most.as_secs()
    )]
    WaitTooLong {
        /// The wait the server asked for.
        asked: Duration,
        /// The policy's longest wait.
        most: Duration,
        /// Why the last attempt failed.
        #[source]
        last: Cause,
    },
    /// Another server could take the call at once: the wait this one needs (`rest`)
    /// is not spent.
    #[error("handed to another server; last: {last}")]
    HandedOff {
        /// The wait this server needs before another attempt.
        rest: Duration,
        /// Why the last attempt failed.
        #[source]
        last: Cause,
    },
    /// An attempt failed in a way not worth retrying.
    #[error(transparent)]
    Fatal(Cause),
}

/// Runs `attempt(1)`, `attempt(2)`, … until one succeeds, one fails for good, or
/// `policy.attempts` have been made, waiting with `sleep` between attempts as the
/// policy says. A server that asks for a longer wait than the policy's longest is not
/// waited for. Before a wait, `hand_off()` says whether another server could take the
/// call at once: then the wait is not spent here. `what` names the call in the log.
pub async fn with_retries<T, A, AF, S, SF>(
    policy: &RetryPolicy,
    what: &str,
    mut attempt: A,
    sleep: S,
    hand_off: &(dyn Fn() -> bool + Sync),
) -> Result<T, GaveUp>
where
    A: FnMut(u32) -> AF,
    AF: Future<Output = Result<T, AttemptError>>,
    S: Fn(Duration) -> SF,
    SF: Future<Output = ()>,
{
    let attempts = policy.attempts.max(1);
    let mut n = 1;
    loop {
        let (cause, wait) = match attempt(n).await {
            Ok(value) => return Ok(value),
            Err(AttemptError::Fatal(cause)) => return Err(GaveUp::Fatal(cause)),
            Err(AttemptError::Again(cause)) => (cause, Duration::ZERO),
            Err(AttemptError::Retry { cause, after }) => match after {
                Some(asked) if asked > policy.max_delay => {
                    if hand_off() {
                        return Err(GaveUp::HandedOff {
                            rest: asked,
                            last: cause,
                        });
                    }
                    return Err(GaveUp::WaitTooLong {
                        asked,
                        most: policy.max_delay,
                        last: cause,
                    });
                }
                _ => {
                    let wait = policy.delay(n, after, &mut rand::rng());
                    if hand_off() {
                        return Err(GaveUp::HandedOff {
                            rest: wait,
                            last: cause,
                        });
                    }
                    (cause, wait)
                }
            },
        };
        if n >= attempts {
            return Err(GaveUp::Exhausted {
                attempts: n,
                last: cause,
            });
        }
        tracing::warn!(attempt = n, ?wait, %cause, "retrying the {what}");
        if !wait.is_zero() {
            sleep(wait).await;
        }
        n += 1;
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1` (attempts count from 1).
    pub fn delay(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        rng: &mut impl Rng,
    ) -> Duration {
        if let Some(server) = retry_after {
            return server.min(self.max_delay);
        }
        let ceiling = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max_delay);
        ceiling.mul_f64(rng.random_range(0.5..=1.0))
    }
}

/// The wait a response's `Retry-After` header asks for, if it has a readable one.
pub(super) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()))
}

/// Parses a `Retry-After` value: seconds, or an HTTP date.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn run<T>(
        policy: &RetryPolicy,
        attempt: impl FnMut(u32) -> Result<T, AttemptError>,
    ) -> (Result<T, GaveUp>, Vec<Duration>) {
        let waits = std::cell::RefCell::new(Vec::new());
        let mut attempt = attempt;
        let result = futures::executor::block_on(with_retries(
            policy,
            "test call",
            |n| std::future::ready(attempt(n)),
            |d| {
                waits.borrow_mut().push(d);
                std::future::ready(())
            },
            &|| false,
        ));
        (result, waits.into_inner())
    }

    #[test]
    fn the_loop_retries_waits_and_gives_up_as_the_policy_says() {
        let policy = RetryPolicy {
            attempts: 3,
            ..RetryPolicy::default()
        };
        let retry = |after| AttemptError::Retry {
            cause: "busy".into(),
            after,
        };
        // Succeeds on the third attempt, after the server's wait and then a backoff.
        let (ok, waits) = run(&policy, |n| match n {
            1 => Err(retry(Some(Duration::from_secs(2)))),
            2 => Err(retry(None)),
            _ => Ok(n),
        });
        assert_eq!(ok.unwrap(), 3);
        assert_eq!(waits[0], Duration::from_secs(2));
        assert!(waits[1] >= Duration::from_millis(500) && waits[1] <= Duration::from_secs(1));
        // Bad answers are asked again at once; a fatal error stops at once.
        let (again, waits) = run(&policy, |_| Err::<(), _>(AttemptError::Again("bad".into())));
        assert_eq!(
            again.unwrap_err().to_string(),
            "gave up after 3 attempt(s); last: bad"
        );
        assert!(waits.is_empty());
        let mut calls = 0;
        let (fatal, _) = run(&policy, |_| {
            calls += 1;
            Err::<(), _>(AttemptError::Fatal("401".into()))
        });
        assert_eq!((fatal.unwrap_err().to_string(), calls), ("401".into(), 1));
    }

    #[test]
    fn a_wait_longer_than_the_longest_is_refused_and_another_server_preferred() {
        let policy = RetryPolicy::default();
        let busy = |secs| {
            move |_| {
                Err::<(), _>(AttemptError::Retry {
                    cause: "HTTP 429".into(),
                    after: Some(Duration::from_secs(secs)),
                })
            }
        };
        let (too_long, waits) = run(&policy, busy(999_999));
        assert!(
            matches!(too_long, Err(GaveUp::WaitTooLong { asked, .. }) if asked.as_secs() == 999_999),
            "{too_long:?}"
        );
        assert!(waits.is_empty(), "not waited for");
        let handed = futures::executor::block_on(with_retries(
            &policy,
            "test call",
            |n| std::future::ready(busy(2)(n)),
            |_| std::future::ready(()),
            &|| true,
        ));
        assert!(
            matches!(handed, Err(GaveUp::HandedOff { rest, .. }) if rest == Duration::from_secs(2)),
            "{handed:?}"
        );
    }

    #[test]
    fn backoff_grows_is_jittered_and_bounded() {
        let p = RetryPolicy::default();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let d1 = p.delay(1, None, &mut rng);
        let d4 = p.delay(4, None, &mut rng);
        assert!(
            d1 >= Duration::from_millis(250) && d1 <= Duration::from_millis(500),
            "{d1:?}"
        );
        assert!(
            d4 >= Duration::from_secs(2) && d4 <= Duration::from_secs(4),
            "{d4:?}"
        );
        assert!(p.delay(30, None, &mut rng) <= p.max_delay);
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(7)), &mut rng),
            Duration::from_secs(7)
        );
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("0.5", now),
            Some(Duration::from_millis(500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert!(
            retryable_status(429)
                && retryable_status(503)
                && !retryable_status(401)
                && !retryable_status(404)
        );
    }
}
