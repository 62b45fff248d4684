//! The one rate limiter of every long command (`tern up`, `tern sweep`):
//! `--max-rate` as a token bucket with a bounded burst.
//!
//! The bucket fills at `rate` entities per second and holds at most one
//! second's worth ([`RateLimiter::burst`]); each batch takes as many tokens
//! as entities it processed, and when the bucket runs dry the run sleeps
//! until it is paid back. So after a stall (a slow server, a lock wait) the run
//! may go ahead by at most one second's worth of entities, never "catch up"
//! unthrottled as an average over the whole run did. The sleep ends early when
//! the run is cancelled ([`CancelFlag`]), so Ctrl-C never waits for it.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::progress::CancelFlag;

/// A token bucket: `rate` entities per second, at most [`RateLimiter::burst`] ahead.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens in the bucket; negative while a batch is being paid back.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

impl RateLimiter {
    /// A limiter of `rate` entities per second (`None`, 0, negative or not
    /// finite: no limit), starting with an empty bucket: a run starts at the
    /// rate, and only a stall banks a burst.
    pub fn new(rate: Option<f64>) -> Option<RateLimiter> {
        let rate = rate.filter(|r| r.is_finite() && *r > 0.0)?;
        let burst = rate.max(1.0);
        Some(RateLimiter {
            rate,
            burst,
            bucket: Mutex::new(Bucket {
                tokens: 0.0,
                at: Instant::now(),
            }),
        })
    }

    /// The most entities the run may go ahead of the rate: one second's worth
    /// (at least 1).
    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// How long the run must wait after processing `n` more entities (takes
    /// their tokens now).
    pub fn take(&self, n: u64) -> Duration {
        let Ok(mut b) = self.bucket.lock() else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let refill = now.saturating_duration_since(b.at).as_secs_f64() * self.rate;
        b.tokens = (b.tokens + refill).min(self.burst) - n as f64;
        b.at = now;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / self.rate)
        }
    }

    /// Takes `n` tokens and sleeps until they are paid back, or until `cancel`
    /// is set.
    pub async fn wait(&self, n: u64, cancel: &CancelFlag) {
        let delay = self.take(n);
        if delay.is_zero() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = cancel.cancelled() => {}
        }
    }
}

/// Waits for `n` entities' tokens of `limiter`, if there is one.
pub async fn pace(limiter: Option<&RateLimiter>, n: u64, cancel: &CancelFlag) {
    if let Some(l) = limiter {
        l.wait(n, cancel).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37 item 5: after a stall, the run goes ahead by at most one
    /// second's worth of entities (the averaging limiter ran unthrottled until
    /// its average caught up: 10 s stalled at 100/s let 1,000 entities through
    /// at once).
    #[tokio::test(start_paused = true)]
    async fn a_token_bucket_bounds_the_burst_after_a_stall() {
        let limiter = RateLimiter::new(Some(100.0)).unwrap();
        let cancel = CancelFlag::new();
        // An empty bucket: the run starts at the rate, 100 cost one second.
        let start = Instant::now();
        limiter.wait(100, &cancel).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        // A 10 s stall banks one second's worth, not ten.
        tokio::time::advance(Duration::from_secs(10)).await;
        let start = Instant::now();
        for _ in 0..10 {
            limiter.wait(100, &cancel).await;
        }
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_secs(9) && waited <= Duration::from_millis(9_010),
            "1,000 entities after a stall took {waited:?}"
        );
    }

    /// The sleep ends when the run is cancelled (Ctrl-C never waits for it).
    #[tokio::test(start_paused = true)]
    async fn a_cancel_ends_the_wait() {
        let limiter = RateLimiter::new(Some(1.0)).unwrap();
        let cancel = CancelFlag::new();
        let start = Instant::now();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            c.cancel();
        });
        limiter.wait(3_600, &cancel).await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[test]
    fn no_rate_is_no_limiter() {
        for r in [
            None,
            Some(0.0),
            Some(-1.0),
            Some(f64::NAN),
            Some(f64::INFINITY),
        ] {
            assert!(RateLimiter::new(r).is_none(), "{r:?}");
        }
        assert_eq!(RateLimiter::new(Some(0.5)).unwrap().burst(), 1.0);
    }
}
