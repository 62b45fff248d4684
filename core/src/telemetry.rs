//! What a long run tells whoever watches it, beyond its logs.
//!
//! **Spans.** The engine runs each migration in a `migration` span (`id`,
//! `name`), each stage in a `stage` span (`stage`, `stages`, `description`) and
//! writes each batch in a `batch` span (`batch`, and `worker`, left empty until
//! runs are partitioned among workers, when it names the partition); `tern
//! sweep` runs in a `sweep` span. A subscriber that prints spans (the `tern`
//! binary's JSON log format) so places every log line in its migration, stage
//! and batch.
//!
//! **Metric events.** At every checkpoint and lease renewal the engine, the
//! sweep and the lease emit an event on the target [`METRIC_TARGET`] at DEBUG
//! level, whose `metric` field says what happened (the constants of
//! [`metric`]) and whose other fields carry the numbers. tern-core depends on no
//! metrics library: a subscriber layer turns these events into counters and
//! gauges (the `tern` binary's `--metrics-addr` serves them to Prometheus). Counts
//! in [`metric::CHECKPOINT`] events are cumulative over the migration, as in
//! its checkpoint; [`metric::RUN_STARTED`] gives their value when this run
//! started (non-zero when it resumes), so that a consumer counts only this
//! run's work.

use crate::migrate::RunCounts;

/// The target of every metric event.
pub const METRIC_TARGET: &str = "tern::metric";

/// The values of the `metric` field of a metric event.
pub mod metric {
    /// A migration's run starts (or resumes): `migration`, and the counts
    /// already recorded by its checkpoint (`processed`, `changed`, `conflicts`).
    pub const RUN_STARTED: &str = "run_started";
    /// A stage starts: `migration`, `stage` (from 1), and `estimate`, the
    /// store's estimate of its entities, when it has one.
    pub const STAGE: &str = "stage";
    /// A batch was checkpointed: `migration`, `done` (entities of the stage in
    /// this run), and the migration's cumulative `processed`, `changed`, `conflicts`.
    pub const CHECKPOINT: &str = "checkpoint";
    /// A batch of `tern sweep` was checkpointed: `kind`, `read` (stale
    /// entities read) and `migrated` (those it migrated).
    pub const SWEEP_BATCH: &str = "sweep_batch";
    /// The lease was renewed.
    pub const LEASE_RENEWAL: &str = "lease_renewal";
    /// Something is tried again: `what` (`write` for entities whose write met
    /// a concurrent change, re-read and written again, `count` of them;
    /// `lease_renewal` for a failed renewal).
    pub const RETRY: &str = "retry";
}

/// A migration's run starts from `counts` (its checkpoint's, when it resumes).
pub fn run_started(migration: u32, counts: &RunCounts) {
    tracing::debug!(
        target: METRIC_TARGET,
        metric = metric::RUN_STARTED,
        migration,
        processed = counts.processed,
        changed = counts.changed,
        conflicts = counts.conflicts,
    );
}

/// Stage `stage` (from 0) of `migration` starts, with the store's estimate.
pub fn stage_started(migration: u32, stage: usize, estimate: Option<u64>) {
    let stage = stage + 1;
    match estimate {
        Some(estimate) => tracing::debug!(
            target: METRIC_TARGET,
            metric = metric::STAGE,
            migration,
            stage,
            estimate
        ),
        None => tracing::debug!(target: METRIC_TARGET, metric = metric::STAGE, migration, stage),
    }
}

/// A batch of `migration` was checkpointed.
pub fn checkpoint(migration: u32, done: u64, counts: &RunCounts) {
    tracing::debug!(
        target: METRIC_TARGET,
        metric = metric::CHECKPOINT,
        migration,
        done,
        processed = counts.processed,
        changed = counts.changed,
        conflicts = counts.conflicts,
    );
}

/// A batch of the sweep of `kind` was checkpointed.
pub fn sweep_batch(kind: &str, read: u64, migrated: u64) {
    tracing::debug!(
        target: METRIC_TARGET,
        metric = metric::SWEEP_BATCH,
        kind,
        read,
        migrated
    );
}

/// The lease was renewed.
pub fn lease_renewed() {
    tracing::debug!(target: METRIC_TARGET, metric = metric::LEASE_RENEWAL);
}

/// `count` things of kind `what` are tried again (see [`metric::RETRY`]).
pub fn retry(what: &'static str, count: u64) {
    tracing::debug!(target: METRIC_TARGET, metric = metric::RETRY, what, count);
}
