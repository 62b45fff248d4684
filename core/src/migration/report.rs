//! What one migration's run did: the report `tern up` returns and the ledger entry
//! it records (the same for an eager run and a lazy install).

use super::conflict::Conflict;
use super::plan::Plan;
use super::source::Migration;
use super::state::{LedgerEntry, RunCounts};

/// What one migration's run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The number.
    pub id: u32,
    /// The name.
    pub name: String,
    /// The counts, including any earlier interrupted runs.
    pub counts: RunCounts,
    /// Whether this run resumed an interrupted one.
    pub resumed: bool,
    /// Milliseconds of this run.
    pub duration_ms: u64,
    /// Unsafe targets this run wrote under `--force-unsafe` (the greatest
    /// source key won), with their statements.
    pub forced_conflicts: Vec<Conflict>,
}

/// The ledger's entry for `m` (planned as `plan`), applied at `applied_at`
/// after a run of `duration_ms` that did `counts`.
pub(crate) fn ledger_entry(
    m: &Migration,
    plan: &Plan,
    applied_at: i64,
    duration_ms: u64,
    counts: RunCounts,
) -> LedgerEntry {
    LedgerEntry {
        id: m.id,
        name: m.name.clone(),
        checksum: m.checksum.clone(),
        applied_at,
        duration_ms,
        counts,
        script: m.canonical_text(),
        steps: plan
            .steps
            .iter()
            .map(|s| (s.kind.clone(), s.version))
            .collect(),
    }
}
