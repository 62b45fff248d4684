//! Stopping early: a cancellation check from the caller (Ctrl-C, SIGTERM)
//! and a deadline. The library has no runtime of its own: the caller passes
//! a cheap `is_cancelled` function, which the long loops poll.

use std::time::Instant;

use serde::Serialize;

/// Why an analysis stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// The caller's cancellation check said so.
    #[error("interrupted")]
    Cancelled,
    /// The deadline passed.
    #[error("time limit reached")]
    TimeLimit,
}

/// When to stop: a cancellation check and an optional deadline.
#[derive(Clone, Copy, Default)]
pub struct Limits<'a> {
    cancelled: Option<&'a dyn Fn() -> bool>,
    deadline: Option<Instant>,
}

impl std::fmt::Debug for Limits<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("cancellable", &self.cancelled.is_some())
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl<'a> Limits<'a> {
    /// No limit: run to the end.
    pub fn none() -> Limits<'a> {
        Limits::default()
    }

    /// Stops when `is_cancelled` returns true (polled often; keep it cheap,
    /// e.g. an atomic load).
    pub fn with_cancel(mut self, is_cancelled: &'a dyn Fn() -> bool) -> Limits<'a> {
        self.cancelled = Some(is_cancelled);
        self
    }

    /// Stops at `deadline`.
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Limits<'a> {
        self.deadline = deadline;
        self
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether to stop now, and why.
    ///
    /// # Errors
    /// [`Stop`] when cancelled or past the deadline.
    pub fn check(&self) -> Result<(), Stop> {
        if self.cancelled.is_some_and(|f| f()) {
            return Err(Stop::Cancelled);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Stop::TimeLimit);
        }
        Ok(())
    }
}

/// Polls [`Limits`] every few hundred steps of a loop.
pub(crate) struct Poll<'a> {
    limits: &'a Limits<'a>,
    n: u32,
}

impl<'a> Poll<'a> {
    pub(crate) fn new(limits: &'a Limits<'a>) -> Poll<'a> {
        Poll { limits, n: 0 }
    }

    /// One step; checks the limits every 256 steps.
    pub(crate) fn tick(&mut self) -> Result<(), Stop> {
        self.n = self.n.wrapping_add(1);
        if self.n & 255 == 0 {
            self.limits.check()
        } else {
            Ok(())
        }
    }
}
