//! Installing a lazy migration (`tern up` on a file with the `lazy` line).
//!
//! No entity is touched: the migration's canonical text (its spec), the kinds'
//! new logical versions, its kind renames and its lazy record are written in
//! **one** fenced compare-and-set of the state document. A crash leaves the
//! store at the old version or at the new one, never between; the pause does
//! not depend on the amount of data. Clients load the spec from the store.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::migration::error::{MigrateError, Result, rename_refused};
use crate::migration::lease::Lease;
use crate::migration::plan::{self, Stage, StepOp};
use crate::migration::report::{MigrationReport, ledger_entry};
use crate::migration::source::{Body, Migration, MigrationSet};
use crate::migration::state::{KindRename, LazyRecord, RunCounts, StateDoc};
use crate::model::Key;
use crate::store::{Filter, ScanRequest, Store, StoreExt};

/// Installs the lazy migration `m` under `lease`.
///
/// # Errors
/// [`MigrateError::Invalid`] for a step that cannot be lazy (a move or copy;
/// a kind rename on a store without atomic multi-key writes; a Rust transform
/// on a store whose server migrates lazily itself,
/// [`Features::lazy_in_server`](crate::store::Features::lazy_in_server));
/// [`MigrateError::RenameKindRefused`] for a rename onto a kind in use; lease
/// and store errors.
pub async fn install(store: &dyn Store, lease: &Lease, m: &Migration) -> Result<MigrationReport> {
    let started = Instant::now();
    let doc = lease.snapshot().await;
    let plan = plan::plan(m, &doc.kinds);
    let invalid = |message: String| MigrateError::Invalid {
        id: m.id,
        name: m.name.clone(),
        message,
    };
    if plan
        .stages
        .iter()
        .any(|s| matches!(s, Stage::Transfer { .. } | Stage::Build { .. }))
    {
        return Err(invalid(
            "a lazy migration may not move, copy or build (they read other entities); remove the `lazy` line"
                .to_owned(),
        ));
    }
    if let Some(server) = store.features().lazy_in_server
        && let Some(step) = plan.steps.iter().find(|s| matches!(s.op, StepOp::Code(_)))
    {
        return Err(invalid(format!(
            "kind {}: its Rust transform cannot be lazy on {}: {server}, which migrates \
             the entities of a lazy migration inside the server for every client and runs the \
             evolution language only, never Rust code, so it would refuse every {} entity \
             below the transform; run the migration eagerly (without `into_lazy()`), or write \
             it as statements",
            step.kind,
            store.info(),
            step.kind
        )));
    }
    let mut kinds_after = plan.kinds_after.clone();
    let mut record_kinds: BTreeMap<String, u64> = plan.targets.clone();
    for (i, r) in plan.renames.iter().enumerate() {
        let features = store.features();
        if features.atomic_writes.is_none() {
            let hint = features
                .atomic_writes_hint
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            return Err(invalid(format!(
                "`rename kind {} to {}` cannot be lazy on the {} store: it has no atomic write of \
                 several keys (the entity under the new name and the stale copy under the old); \
                 remove the `lazy` line to rename eagerly{hint}",
                r.from,
                r.to,
                store.info().scheme
            )));
        }
        check_target(store, &doc, &r.from, &r.to).await?;
        // The final name of a renamed kind has a version (0 if it had none),
        // so clients can declare it; a name renamed again in this migration has none.
        if !plan.renames[i + 1..].iter().any(|later| later.from == r.to) {
            let v = *kinds_after.entry(r.to.clone()).or_insert(0);
            record_kinds.insert(r.to.clone(), v);
        }
    }
    // Only the kinds' names after the migration (a renamed-away name has none).
    record_kinds.retain(|k, _| kinds_after.contains_key(k));
    let now = store
        .now()
        .await
        .map_err(MigrateError::store("reading the clock"))?;
    let entry = ledger_entry(m, &plan, now, 0, RunCounts::default());
    let renames: Vec<KindRename> = plan
        .renames
        .iter()
        .map(|r| KindRename {
            migration: m.id,
            from: r.from.clone(),
            to: r.to.clone(),
            started_at: now,
        })
        .collect();
    let record = LazyRecord {
        migration: m.id,
        installed_at: now,
        kinds: record_kinds,
        completed_at: None,
        retired_at: None,
    };
    lease
        .update(move |doc| {
            doc.applied.push(entry.clone());
            doc.kinds = kinds_after.clone();
            doc.renames.extend(renames.iter().cloned());
            doc.lazy.push(record.clone());
        })
        .await?;
    Ok(MigrationReport {
        id: m.id,
        name: m.name.clone(),
        counts: RunCounts::default(),
        resumed: false,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        forced_conflicts: Vec::new(),
    })
}

/// A lazy rename's new name must be a valid, unused kind: no version, no
/// entity, not a former name still holding entities.
async fn check_target(store: &dyn Store, doc: &StateDoc, from: &str, to: &str) -> Result<()> {
    let refused = |reason: String| rename_refused(from, to, reason);
    if Key::new(to, 0).is_err() {
        return Err(refused(format!("{to:?} is not a valid kind name")));
    }
    if doc.kinds.contains_key(to) || doc.renames.iter().any(|r| r.from == to) {
        return Err(refused(format!(
            "{to} is or was a kind of this store; a lazy rename needs a name never used, so that \
             an entity found under it is certainly in the new format"
        )));
    }
    let page = store
        .scan(
            to,
            ScanRequest {
                filter: Filter::all(),
                cursor: None,
                limit: 1,
            },
        )
        .await
        .map_err(MigrateError::store("checking that the new kind is empty"))?;
    if !page.entities.is_empty() {
        return Err(refused(format!(
            "{to} already holds entities; a kind rename never merges into a kind in use"
        )));
    }
    Ok(())
}

/// Whether a lazy migration is installed and not complete.
pub fn has_pending(doc: &StateDoc) -> bool {
    doc.lazy.iter().any(|r| r.completed_at.is_none())
}

/// The Rust migrations of `set`, by number (what a sweep needs to run them).
pub fn code_migrations(set: &MigrationSet) -> BTreeMap<u32, Migration> {
    set.iter()
        .filter(|m| matches!(m.body, Body::Code(_)))
        .map(|m| (m.id, m.clone()))
        .collect()
}

/// Before an eager migration: completes every pending lazy migration with a
/// sweep under the same lease, so the eager run finds every entity at the
/// logical version, under its current kind name (no entity is skipped or
/// half-migrated).
///
/// # Errors
/// The sweep's errors; a sweep that leaves entities behind.
pub async fn complete_pending(
    store: &std::sync::Arc<dyn Store>,
    lease: &Lease,
    set: &MigrationSet,
) -> Result<()> {
    if !has_pending(&lease.snapshot().await) {
        return Ok(());
    }
    let options = super::SweepOptions::default();
    let report = super::sweep::sweep_under(store, lease, &code_migrations(set), &options)
        .await
        .map_err(|e| match e {
            super::LazyError::Migrate(e) => e,
            other => MigrateError::Dirty(format!(
                "completing the pending lazy migrations before an eager one: {other}"
            )),
        })?;
    if report.remaining() > 0 {
        return Err(MigrateError::Dirty(format!(
            "{} entities are still below a pending lazy migration after the sweep; run `tern sweep`, then `tern up` again",
            report.remaining()
        )));
    }
    Ok(())
}
