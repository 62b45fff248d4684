//! Leaving an interrupted migration that wrote nothing: edit it, or abandon it.
//!
//! A migration stopped before its first entity was written (Ctrl-C before the
//! first batch; a failure on its first batch) leaves only its checkpoint. The
//! store proves that nothing was written when no entity of any kind is above
//! the kind's recorded version (a migration advances versions only as it
//! writes) and no kind rename of it has started. Then its file may change
//! (the next `tern up` starts it afresh), and `tern abandon` drops the record.
//! Once anything was written, both are refused: the entities would be left
//! half-migrated; `tern up` finishes the migration.

use std::sync::Arc;

use super::Migrator;
use crate::migration::error::{MigrateError, Result};
use crate::migration::lease::Lease;
use crate::migration::state::{self, RunState, StateDoc};
use crate::store::Store;

/// What [`Migrator::abandon`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    /// The migration whose interrupted run was dropped (`None`: there was none).
    pub migration: Option<u32>,
}

impl Migrator {
    /// The kinds with entities above the kind's recorded version, and how
    /// many: what an unfinished migration has written.
    pub(super) async fn written_ahead(
        &self,
        store: &dyn Store,
        doc: &StateDoc,
    ) -> Result<Vec<(String, u64)>> {
        let mut kinds = store
            .kinds()
            .await
            .map_err(MigrateError::store("listing kinds"))?;
        kinds.sort();
        let mut out = Vec::new();
        for kind in kinds {
            let expected = doc.kinds.get(&kind).copied().unwrap_or(0);
            let census = store
                .version_census(&kind)
                .await
                .map_err(MigrateError::store("counting entities by version"))?;
            let above: u64 = census
                .range(expected.saturating_add(1)..)
                .map(|(_, n)| n)
                .sum();
            if above > 0 {
                out.push((kind, above));
            }
        }
        Ok(out)
    }

    /// Why `run` cannot be dropped (its migration wrote something), or `None`.
    async fn why_not_droppable(&self, store: &dyn Store, doc: &StateDoc) -> Result<Option<String>> {
        let Some(run) = &doc.running else {
            return Ok(None);
        };
        if doc.renames.iter().any(|r| r.migration == run.migration) {
            return Ok(Some(format!(
                "migration {} has started renaming a kind",
                run.migration
            )));
        }
        let ahead = self.written_ahead(store, doc).await?;
        if ahead.is_empty() {
            return Ok(None);
        }
        let list: Vec<String> = ahead.iter().map(|(k, n)| format!("{n} of {k}")).collect();
        Ok(Some(format!(
            "migration {} has already written entities ({} are above their kind's version)",
            run.migration,
            list.join(", ")
        )))
    }

    /// Called by `up` when the file of the interrupted migration changed since
    /// its run started: starts it afresh if it wrote nothing, else refuses.
    pub(super) async fn restart_edited(
        &self,
        store: &dyn Store,
        lease: &Lease,
        run: &RunState,
    ) -> Result<()> {
        let doc = lease.snapshot().await;
        if let Some(why) = self.why_not_droppable(store, &doc).await? {
            return Err(MigrateError::Dirty(format!(
                "migration {} is in progress (interrupted) and its file changed since it started; {why}, \
                 so it must finish as it began: restore the file and run `tern up`, then write the change as a new migration",
                run.migration
            )));
        }
        let id = run.migration;
        lease
            .update(move |doc| {
                if doc.running.as_ref().is_some_and(|r| r.migration == id) {
                    doc.running = None;
                }
            })
            .await?;
        self.progress.note(&format!(
            "migration {id} was interrupted before writing anything and its file changed: starting it afresh"
        ));
        Ok(())
    }

    /// Drops the record of an interrupted migration that wrote nothing, so
    /// that its file may change or go. Takes the lease.
    ///
    /// # Errors
    /// [`MigrateError::Dirty`] when the migration already wrote entities or
    /// started a kind rename (they would be left half-migrated: run `tern up`),
    /// the lease errors, and store errors.
    pub async fn abandon(&self) -> Result<Abandoned> {
        let store: Arc<dyn Store> = Arc::clone(&self.store);
        let doc = state::load(store.as_ref()).await?.doc;
        if doc.running.is_none() {
            return Ok(Abandoned { migration: None });
        }
        let lease = Lease::acquire(Arc::clone(&store), &self.lease).await?;
        let result = async {
            let doc = lease.snapshot().await;
            let Some(run) = doc.running.clone() else {
                return Ok(Abandoned { migration: None });
            };
            if let Some(why) = self.why_not_droppable(store.as_ref(), &doc).await? {
                return Err(MigrateError::Dirty(format!(
                    "cannot abandon: {why}; abandoning would leave them half-migrated. Run `tern up` to finish it"
                )));
            }
            lease.update(|doc| doc.running = None).await?;
            Ok(Abandoned {
                migration: Some(run.migration),
            })
        }
        .await;
        if let Err(e) = lease.release().await {
            tracing::warn!(error = %e, "could not release the lease; it expires by itself");
        }
        result
    }
}
