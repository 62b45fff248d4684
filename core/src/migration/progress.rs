//! Progress reporting and cancellation hooks of the engine.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::state::RunCounts;

/// A stage that starts, as [`Progress::stage_started`] receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageStart<'a> {
    /// The migration's id.
    pub migration: u32,
    /// The migration's name.
    pub name: &'a str,
    /// The stage's index in the migration's plan, from 0.
    pub stage: usize,
    /// The number of stages in the migration's plan.
    pub stages: usize,
    /// What the stage does.
    pub description: &'a str,
    /// The store's estimate of the entities the stage will process
    /// ([`CountEstimate::estimate_count`](crate::store::CountEstimate::estimate_count)), when it has one.
    pub total: Option<u64>,
}

/// Receives the engine's progress. The CLI draws a progress bar on a terminal
/// and writes one structured line per checkpoint elsewhere.
pub trait Progress: Send + Sync {
    /// A stage starts.
    fn stage_started(&self, start: &StageStart<'_>);
    /// A batch was written and checkpointed. `done` counts the stage's entities so far.
    fn checkpoint(&self, done: u64, counts: &RunCounts);
    /// The stage finished.
    fn stage_finished(&self, counts: &RunCounts);
    /// A line of information (census results, sweeps, resumption).
    fn note(&self, text: &str);
    /// A pass that reads a whole kind without writing starts: the index build
    /// of a move or copy, its safety check. `total` is the store's estimate of
    /// the entities it reads, when asked for and known.
    fn pass_started(&self, description: &str, total: Option<u64>) {
        let _ = (description, total);
    }
    /// The pass has read `done` entities so far.
    fn pass_progress(&self, done: u64) {
        let _ = done;
    }
    /// The pass finished after reading `done` entities.
    fn pass_finished(&self, done: u64) {
        let _ = done;
    }
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage_started(&self, _: &StageStart<'_>) {}
    fn checkpoint(&self, _: u64, _: &RunCounts) {}
    fn stage_finished(&self, _: &RunCounts) {}
    fn note(&self, _: &str) {}
}

/// The one cancellation of every long command (`tern up`, `tern sweep`): set
/// by Ctrl-C or SIGTERM, it asks the run to stop after its current batch and
/// checkpoint. Runs check [`CancelFlag::is_cancelled`] at each batch boundary;
/// a wait (the rate limiter's sleep) ends early on [`CancelFlag::cancelled`].
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<CancelInner>);

#[derive(Debug, Default)]
struct CancelInner {
    set: AtomicBool,
    notify: tokio::sync::Notify,
}

impl CancelFlag {
    /// A flag that is not set.
    pub fn new() -> CancelFlag {
        CancelFlag::default()
    }
    /// Asks the run to stop after the current batch, and wakes every wait.
    pub fn cancel(&self) {
        self.0.set.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }
    /// Was it set?
    pub fn is_cancelled(&self) -> bool {
        self.0.set.load(Ordering::SeqCst)
    }
    /// Completes once the flag is set (at once if it is).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the check, so a cancel in between still wakes it.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// When, within a batch, a test may inject a crash.
///
/// On a store that commits a batch's checkpoint with its writes
/// ([`AtomicBatchWithMeta`](crate::store::AtomicBatchWithMeta)),
/// the client-side path has no moment between the writes and their checkpoint:
/// [`FaultAt::BeforeCheckpoint`] comes just before the transaction of the
/// batch's writes, which a crash there never commits. A crash in the middle of
/// a batch's writes is the store's to simulate, not the engine's: the test kit's
/// `TornWrite` wrapper, so the engine writes every batch as production does.
///
/// Tests only: feature `fault-injection`, without which a build has no fault
/// point at all.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAt {
    /// Before the batch's writes.
    BeforeWrite,
    /// After the batch's writes, before its checkpoint.
    BeforeCheckpoint,
    /// After the checkpoint.
    AfterCheckpoint,
}

#[cfg(feature = "fault-injection")]
impl FaultAt {
    /// Every point of a batch, in the order a batch reaches them.
    pub const ALL: [FaultAt; 3] = [
        FaultAt::BeforeWrite,
        FaultAt::BeforeCheckpoint,
        FaultAt::AfterCheckpoint,
    ];
}

/// Where a test may inject a crash: a point of a batch of a stage of a migration
/// (feature `fault-injection`).
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPoint {
    /// The migration number.
    pub migration: u32,
    /// The stage index within the migration's plan.
    pub stage: usize,
    /// The phase of the stage (a move has a target phase 0 and a source phase 1).
    pub phase: u32,
    /// The batch number within the stage's phase (from 0).
    pub batch: u64,
    /// The point within the batch.
    pub at: FaultAt,
}

/// Offers the fault point `$at` of batch `$batch` of phase `$phase` of stage
/// `$stage` to the test's hook of `$runner` (a `Runner`), returning
/// `MigrateError::InjectedCrash` from the enclosing function when the hook asks for a crash there.
///
/// Without feature `fault-injection` it expands to nothing that runs (the
/// arguments are only borrowed), so a production build has no fault point.
#[cfg(feature = "fault-injection")]
macro_rules! fault_point {
    ($runner:expr, $stage:expr, $phase:expr, $batch:expr, $at:ident) => {
        $runner.fault($runner.point(
            $stage,
            $phase,
            $batch,
            $crate::migrate::progress::FaultAt::$at,
        ))?
    };
}

/// Without feature `fault-injection`: nothing (see the feature's version).
#[cfg(not(feature = "fault-injection"))]
macro_rules! fault_point {
    ($runner:expr, $stage:expr, $phase:expr, $batch:expr, $at:ident) => {{
        let _ = (&$stage, &$phase, &$batch);
    }};
}

pub(crate) use fault_point;

/// Decides whether to crash at a fault point (tests only). Returning `true`
/// makes the run stop at once, as if the process died: nothing more is
/// written and the lease is not released.
#[cfg(feature = "fault-injection")]
pub type FaultHook = Arc<dyn Fn(FaultPoint) -> bool + Send + Sync>;
