//! A transaction the store aborted, run again: for the stores whose
//! [`AtomicWrites::write_atomic`](super::AtomicWrites::write_atomic) is a
//! transaction that the server may abort because another writer touched the
//! same documents meanwhile (MongoDB's `WriteConflict`, labelled
//! `TransientTransactionError`).
//!
//! Such an abort says nothing about the caller's guards: it is not a
//! [`WriteOutcome::Conflict`](super::WriteOutcome::Conflict). The store runs
//! the whole transaction again (reading the guards afresh) a bounded number of
//! times, with a short, jittered, growing pause in between so that two
//! writers that keep aborting each other drift apart, and gives up with a
//! temporary [`ErrorKind::Busy`] error, never with `Conflict`. Where the
//! writes are retried is written in docs/design.md ("Where tern retries").

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use super::{Error, ErrorKind, Result};

/// How many times a transaction runs in all before the store gives up.
pub const TRANSACTION_ATTEMPTS: u32 = 12;

/// The pause before the second run; each later one is 1.5 times longer.
const FIRST_PAUSE: Duration = Duration::from_millis(5);

/// The longest pause between two runs.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The runs of one transaction: call [`TransactionRetry::after_abort`] each
/// time the store aborted it, and run it again when that answers `Ok`.
///
/// The pauses add up to about 0.4 s on average (0.82 s at most) before the
/// last run.
#[derive(Debug, Default)]
pub struct TransactionRetry {
    runs: u32,
}

impl TransactionRetry {
    /// The runs of a transaction not yet aborted.
    pub fn new() -> TransactionRetry {
        TransactionRetry::default()
    }

    /// How many runs were aborted so far.
    pub fn aborted(&self) -> u32 {
        self.runs
    }

    /// Records that a run was aborted (nothing written) with `cause`, then
    /// waits the pause before the next run. `what` names the transaction as
    /// the error message would ("mongodb: a transaction of 3 writes"): called
    /// only when giving up, so a transaction that commits builds no text.
    ///
    /// # Errors
    /// After [`TRANSACTION_ATTEMPTS`] aborted runs: a temporary
    /// [`ErrorKind::Busy`] error saying that nothing was written, with
    /// `cause` (the last abort) as its source.
    pub async fn after_abort(&mut self, cause: Error, what: impl FnOnce() -> String) -> Result<()> {
        self.runs += 1;
        if self.runs >= TRANSACTION_ATTEMPTS {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{}: other writers made the store abort it on each of {} runs; nothing \
                     was written; try again",
                    what(),
                    self.runs
                ),
            )
            .with_source(cause)
            .set_temporary());
        }
        tokio::time::sleep(pause(self.runs, jitter())).await;
        Ok(())
    }
}

/// The pause after `aborted` aborted runs (1 or more), scaled by `jitter`
/// (in 0..1): full jitter over an exponential bound.
fn pause(aborted: u32, jitter: f64) -> Duration {
    // Past 20 the bound is the cap anyway (5 ms × 1.5²⁰ > 15 s).
    let exp = i32::try_from(aborted.saturating_sub(1).min(20)).unwrap_or(20);
    let bound = FIRST_PAUSE.mul_f64(1.5_f64.powi(exp)).min(MAX_PAUSE);
    bound.mul_f64(jitter.clamp(0.0, 1.0))
}

/// A number in 0..1, different at each call (from the standard library's
/// randomly keyed hasher: no random-number crate for one pause).
fn jitter() -> f64 {
    let bits = RandomState::new().hash_one(0_u8) >> 11;
    // 53 bits: exact in an f64.
    bits as f64 / (1_u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_grows_to_its_bound_and_stays_under_it() {
        assert_eq!(pause(1, 1.0), FIRST_PAUSE);
        assert!(pause(2, 1.0) > pause(1, 1.0));
        assert_eq!(pause(40, 1.0), MAX_PAUSE);
        assert_eq!(pause(u32::MAX, 1.0), MAX_PAUSE);
        assert_eq!(pause(3, 0.0), Duration::ZERO);
        let all: Duration = (1..TRANSACTION_ATTEMPTS).map(|n| pause(n, 1.0)).sum();
        assert!(all < Duration::from_millis(850), "{all:?}");
    }

    #[test]
    fn the_jitter_is_in_range_and_varies() {
        let draws: Vec<f64> = (0..64).map(|_| jitter()).collect();
        assert!(draws.iter().all(|j| (0.0..1.0).contains(j)));
        assert!(draws.windows(2).any(|w| w[0] != w[1]));
    }

    #[tokio::test(start_paused = true)]
    async fn it_gives_up_after_its_attempts_with_a_temporary_busy_error() {
        let mut retry = TransactionRetry::new();
        let what = || "a transaction of 2 writes".to_owned();
        for _ in 1..TRANSACTION_ATTEMPTS {
            retry
                .after_abort(Error::new(ErrorKind::Rejected, "WriteConflict"), what)
                .await
                .unwrap();
        }
        let err = retry
            .after_abort(Error::new(ErrorKind::Rejected, "WriteConflict"), what)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert!(err.is_temporary());
        assert!(err.message().contains("nothing was written"), "{err}");
        assert_eq!(retry.aborted(), TRANSACTION_ATTEMPTS);
    }
}
