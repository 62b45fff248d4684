//! How long a run may take and whether its caller wants it stopped.
//!
//! The advisor is a library without an async runtime: the caller hands it a cheap check
//! ([`Interrupt`], e.g. reading an atomic flag a signal handler sets) and a time limit. Every phase
//! (enumeration, planning, formulation) polls [`Budget`] between units of work: an interrupt stops
//! the run with [`AdvisorError::Cancelled`]; the time limit makes each phase stop widening its
//! search and hand on what it has (the best answer so far), with a note saying so.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{AdvisorError, Result};

/// A check the caller gives: `true` once the run should stop (Ctrl-C, SIGTERM, a closed client).
#[derive(Clone, Default)]
pub struct Interrupt(Option<Arc<dyn Fn() -> bool + Send + Sync>>);

impl Interrupt {
    /// Never interrupts.
    pub fn none() -> Self {
        Interrupt(None)
    }

    /// Interrupts once `check` returns `true`; it is called often, so it must be cheap.
    pub fn new(check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Interrupt(Some(Arc::new(check)))
    }

    /// Whether the caller asked to stop.
    pub fn is_set(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f())
    }
}

impl fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Interrupt(caller's check)"
        } else {
            "Interrupt(none)"
        })
    }
}

/// The share of the time limit enumeration may use (from the start of the run).
pub const ENUMERATION_SHARE: f64 = 0.25;
/// The share of the time limit enumeration and planning together may use.
pub const PLANNING_SHARE: f64 = 0.5;
/// The least time the solver gets, as a share of the limit, even when planning used its share.
pub const SOLVE_FLOOR_SHARE: f64 = 0.1;

/// A run's clock and its caller's interrupt.
#[derive(Debug, Clone)]
pub struct Budget {
    start: Instant,
    limit: Option<Duration>,
    interrupt: Interrupt,
}

impl Budget {
    /// Starts the clock now.
    pub fn new(limit_secs: Option<f64>, interrupt: Interrupt) -> Self {
        Budget {
            start: Instant::now(),
            limit: limit_secs
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64),
            interrupt,
        }
    }

    /// No limit, no interrupt.
    pub fn unlimited() -> Self {
        Budget::new(None, Interrupt::none())
    }

    /// `Err(Cancelled)` once the caller asked to stop.
    ///
    /// # Errors
    /// [`AdvisorError::Cancelled`].
    pub fn check(&self) -> Result<()> {
        if self.interrupt.is_set() {
            Err(AdvisorError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Whether `share` of the time limit has passed (never without a limit).
    pub fn past(&self, share: f64) -> bool {
        self.limit
            .is_some_and(|l| self.start.elapsed() >= l.mul_f64(share))
    }

    /// Seconds the solver may still use: what is left of the limit, at least
    /// [`SOLVE_FLOOR_SHARE`] of it; `None` without a limit.
    pub fn solve_seconds(&self) -> Option<f64> {
        self.limit.map(|l| {
            let left = l.saturating_sub(self.start.elapsed()).as_secs_f64();
            left.max(l.as_secs_f64() * SOLVE_FLOOR_SHARE).max(0.01)
        })
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}
