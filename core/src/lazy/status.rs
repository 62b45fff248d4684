//! Where lazy migration stands, per kind (`tern status`), and retiring specs (`tern gc`).

use serde::Serialize;

use super::error::{LazyError, Result};
use super::spec::{Spec, forward, pending_lazy};
use super::sweep::census;
use crate::migration::error::MigrateError;
use crate::migration::lease::Lease;
use crate::migration::state;
use crate::model::Version;
use crate::store::{Store, StoreExt};

/// The lazy state of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindLazyStatus {
    /// The kind.
    pub kind: String,
    /// Its logical version.
    pub version: Version,
    /// The lazy migrations installed on it and not complete.
    pub pending: Vec<u32>,
    /// Former names still holding stale entities (pending kind renames).
    pub former_names: Vec<String>,
    /// Entities below the logical version: exact when counted, else the
    /// store's estimate where it has one (entities left under former names),
    /// `None` when unknown.
    pub stale: Option<u64>,
    /// Whether `stale` was counted exactly.
    pub exact: bool,
    /// No lazy migration of the kind is pending.
    pub complete: bool,
}

/// The lazy state of every kind with a version. `exact` counts stale
/// entities (a scan of each kind); otherwise only the store's cheap figures.
///
/// # Errors
/// Store errors, an unreadable state.
pub async fn status(store: &dyn Store, exact: bool) -> Result<Vec<KindLazyStatus>> {
    let doc = state::load(store).await?.doc;
    let spec = Spec::from_state(&doc, &Default::default())?;
    let mut out = Vec::new();
    for (kind, version) in &doc.kinds {
        let chain = spec.chain(kind);
        let pending: Vec<u32> = pending_lazy(&doc)
            .filter(|(_, kinds)| kinds.contains(kind))
            .map(|(migration, _)| migration)
            .collect();
        let complete = !chain.pending;
        let stale = if complete {
            Some(0)
        } else if exact {
            Some(census(store, &chain).await?)
        } else {
            None
        };
        out.push(KindLazyStatus {
            kind: kind.clone(),
            version: *version,
            pending,
            former_names: chain.formers.clone(),
            stale,
            exact: exact || complete,
            complete,
        });
    }
    Ok(out)
}

/// Retires the spec of lazy migration `migration` (`tern gc`): refused while
/// it is not complete or any entity of its kinds is still below it.
/// Returns whether it was retired now (false: it already was).
///
/// # Errors
/// [`MigrateError::Dirty`] with the reason when refused; lease and store errors.
pub async fn retire(store: &dyn Store, lease: &Lease, migration: u32) -> Result<bool> {
    let doc = lease.snapshot().await;
    let Some(record) = doc.lazy.iter().find(|r| r.migration == migration) else {
        return Err(LazyError::Migrate(MigrateError::Dirty(format!(
            "migration {migration} is not an installed lazy migration"
        ))));
    };
    if record.retired_at.is_some() {
        return Ok(false);
    }
    if record.completed_at.is_none() {
        return Err(LazyError::Migrate(MigrateError::Dirty(format!(
            "lazy migration {migration} is not complete; run `tern sweep` first"
        ))));
    }
    for (kind, v) in &record.kinds {
        let name = forward(&doc, migration, kind);
        let below = store
            .count(
                &name,
                crate::store::Filter {
                    version: crate::store::VersionFilter::Below(*v),
                    conditions: Vec::new(),
                },
            )
            .await?;
        if below > 0 {
            return Err(LazyError::Migrate(MigrateError::Dirty(format!(
                "{below} entities of {name} are still below v{v} (written since the sweep by old code?); \
                 run `tern sweep {name}` first"
            ))));
        }
    }
    let now = store.now().await?;
    lease
        .update(move |doc| {
            for r in doc.lazy.iter_mut().filter(|r| r.migration == migration) {
                r.retired_at = Some(now);
            }
        })
        .await?;
    Ok(true)
}

/// A kind name that a kind rename moved away from and no kind uses now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RenamedAway {
    /// The former name.
    pub former: String,
    /// The kind's name now (after every later rename).
    pub now: String,
    /// The migration that renamed it away.
    pub migration: u32,
    /// Whether that migration is lazy and not complete (entities under the
    /// former name are then still to be swept, not stranded).
    pub pending: bool,
}

/// Every former kind name no kind uses now, with the kind's name now: an
/// entity under one (an import, a raw write by old code) is never migrated
/// unless a pending lazy rename still sweeps that name.
pub fn renamed_away(doc: &crate::migration::state::StateDoc) -> Vec<RenamedAway> {
    let mut out: Vec<RenamedAway> = Vec::new();
    for r in &doc.renames {
        let now = forward(doc, r.migration.saturating_sub(1), &r.from);
        let live = doc.kinds.contains_key(&r.from)
            || doc
                .renames
                .iter()
                .any(|later| later.migration > r.migration && later.to == r.from);
        if live || now == r.from || out.iter().any(|o| o.former == r.from) {
            continue;
        }
        let pending = doc
            .lazy
            .iter()
            .any(|l| l.migration == r.migration && l.completed_at.is_none());
        out.push(RenamedAway {
            former: r.from.clone(),
            now,
            migration: r.migration,
            pending,
        });
    }
    out
}
