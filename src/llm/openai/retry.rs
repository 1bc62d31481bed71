//! When to try a request again, and how long to wait: exponential backoff with full
//! jitter, bounded attempts, and the server's `Retry-After` when it sends one.

use std::time::{Duration, SystemTime};

use rand::Rng;

/// Retry settings for one endpoint.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    pub base: Duration,
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
