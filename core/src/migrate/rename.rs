//! The kind rename stage (`rename kind a to b`, KVolve's prefix change).
//!
//! Three phases, each checkpointed, so a crash anywhere resumes exactly:
//!
//! 0. **check**: the store can rename (support, layouts), the new name is a
//!    valid kind and holds no entity (the reference semantics refuse a rename
//!    onto a kind in use). Then one compare-and-set of the state document
//!    records the prefix history entry (`b` was `a` since migration N) together
//!    with the checkpoint that starts phase 1, before any entity moves.
//! 1. **batches**: [`KindRename::rename_kind`](crate::store::KindRename::rename_kind) re-keys one batch per call from the
//!    checkpointed cursor. An entity already moved is no longer under `a` and
//!    is not seen again; one whose id `b` already holds stays where it is
//!    (nothing is overwritten) and is dealt with in phase 2.
//! 2. **census**: full passes over `a` from the start, re-keying what old
//!    application code wrote under `a` meanwhile, until a full pass finds
//!    nothing: that proves no `a` entity remains. If the only entities left
//!    are namesakes of `b` entities, the stage stops with
//!    [`MigrateError::RenameKindRefused`] listing them; both copies are kept
//!    and `tern up` resumes once each pair is resolved.
//!
//! [`KindRename::rename_kind`]: crate::store::KindRename::rename_kind

use super::run::{Position, Runner};
use crate::migration::error::{MigrateError, Result, rename_refused};
use crate::migration::progress::fault_point;
use crate::migration::state::KindRename;
use crate::model::Key;
use crate::store::{Error, ErrorKind, Filter, RenameKindPage, RenameKindRequest, Store, StoreExt};

/// One batch of the store's [`KindRename`](crate::store::KindRename) facet;
/// `Unsupported` without it (the refusal [`check_rename`] reports).
async fn rename_batch(
    store: &dyn Store,
    request: RenameKindRequest,
) -> crate::store::Result<RenameKindPage> {
    match store.features().kind_rename {
        Some(renames) => renames.rename_kind(request).await,
        None => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the {} store cannot re-key entities from one kind to another",
                store.info().scheme
            ),
        )),
    }
}

/// The phases of a kind rename stage (the `phase` of its checkpoint).
pub(crate) const CHECK: u32 = 0;
/// Re-keying in batches.
pub(crate) const BATCHES: u32 = 1;
/// Full passes until none finds an entity of the old kind.
pub(crate) const CENSUS: u32 = 2;

/// How many colliding keys an error lists.
const SHOWN: usize = 10;

/// What one pass over the old kind found.
#[derive(Debug, Default)]
pub(crate) struct Pass {
    /// Entities re-keyed.
    pub(crate) renamed: u64,
    /// Entities left in place because the new kind holds their id.
    pub(crate) collisions: Vec<Key>,
    /// The pass started at the beginning of the kind (not at a resumed cursor).
    pub(crate) full: bool,
}

impl Runner<'_> {
    /// Runs a kind rename stage from `pos`.
    pub(crate) async fn run_rename_kind(
        &self,
        index: usize,
        from: &str,
        to: &str,
        pos: &mut Position,
    ) -> Result<()> {
        if from == to {
            return Ok(());
        }
        if pos.phase == CHECK {
            self.check_continue()?;
            // The prechecks of this run counted `to` just before the first
            // stage: counting it again (a full scan on Redis) proves nothing
            // more. Later stages count again: earlier ones may have taken long.
            let count_target = !(index == 0 && self.renames_prechecked);
            check_rename(
                self.store,
                self.migration,
                self.migration_name,
                from,
                to,
                count_target,
            )
            .await?;
            fault_point!(self, index, CHECK, 0, BeforeCheckpoint);
            let now = self
                .store
                .now()
                .await
                .map_err(MigrateError::store("reading the clock"))?;
            let record = KindRename {
                migration: self.migration,
                from: from.to_owned(),
                to: to.to_owned(),
                started_at: now,
            };
            pos.phase = BATCHES;
            pos.cursor = None;
            self.checkpoint_and(index, pos, move |doc| {
                let known = doc.renames.iter().any(|r| {
                    r.migration == record.migration && r.from == record.from && r.to == record.to
                });
                if !known {
                    doc.renames.push(record.clone());
                }
            })
            .await?;
            fault_point!(self, index, CHECK, 0, AfterCheckpoint);
        }
        if pos.phase == BATCHES {
            // Collisions are found again, and reported, by the census.
            self.rename_pass(Some(index), from, to, pos).await?;
            pos.phase = CENSUS;
            pos.cursor = None;
            self.checkpoint(index, pos).await?;
        }
        self.rename_census(Some(index), from, to, pos).await?;
        *self
            .rename_proven
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((from.to_owned(), to.to_owned()));
        Ok(())
    }

    /// One pass of re-keying batches from `pos.cursor` to the end of `from`.
    /// With `stage`, each batch is checkpointed and offers fault points.
    pub(crate) async fn rename_pass(
        &self,
        stage: Option<usize>,
        from: &str,
        to: &str,
        pos: &mut Position,
    ) -> Result<Pass> {
        let mut pass = Pass {
            full: pos.cursor.is_none(),
            ..Pass::default()
        };
        let mut batch_no = 0u64;
        loop {
            self.check_continue()?;
            if let Some(index) = stage {
                fault_point!(self, index, pos.phase, batch_no, BeforeWrite);
            }
            let page = rename_batch(
                self.store,
                RenameKindRequest {
                    from: from.to_owned(),
                    to: to.to_owned(),
                    cursor: pos.cursor.clone(),
                    limit: self.options.batch_size.max(1),
                },
            )
            .await;
            let page = match page {
                Ok(p) => p,
                Err(e) if e.kind() == ErrorKind::InvalidCursor && pos.cursor.is_some() => {
                    tracing::warn!(kind = from, error = %e, "the store cannot continue the kind rename from the checkpoint's cursor; starting the pass again");
                    pos.cursor = None;
                    pass.full = true;
                    continue;
                }
                Err(e) => return Err(MigrateError::store("renaming a kind")(e)),
            };
            if let Some(index) = stage {
                fault_point!(self, index, pos.phase, batch_no, BeforeCheckpoint);
            }
            pass.renamed += page.renamed;
            pass.collisions.extend(page.collisions);
            pos.counts.processed += page.renamed;
            pos.counts.changed += page.renamed;
            if pos.phase == CENSUS || stage.is_none() {
                pos.counts.swept += page.renamed;
            }
            pos.cursor = page.cursor.clone();
            if let Some(index) = stage {
                self.checkpoint(index, pos).await?;
                fault_point!(self, index, pos.phase, batch_no, AfterCheckpoint);
                self.report_checkpoint(pos);
            }
            tracing::info!(
                from,
                to,
                batch = batch_no,
                renamed = page.renamed,
                processed = pos.counts.processed,
                "checkpoint (kind rename)"
            );
            self.throttle(page.renamed).await;
            batch_no += 1;
            if page.cursor.is_none() {
                pass.collisions.sort();
                pass.collisions.dedup();
                return Ok(pass);
            }
        }
    }

    /// Full passes over `from` until one finds nothing: proves that no entity
    /// of `from` remains. Entities written under `from` meanwhile are moved
    /// (and counted as swept); namesakes of `to` entities stop the run.
    pub(crate) async fn rename_census(
        &self,
        stage: Option<usize>,
        from: &str,
        to: &str,
        pos: &mut Position,
    ) -> Result<()> {
        let mut passes = 0u32;
        loop {
            let pass = self.rename_pass(stage, from, to, pos).await?;
            if pass.full && pass.renamed == 0 {
                if pass.collisions.is_empty() {
                    return Ok(());
                }
                return Err(self.collisions(from, to, &pass.collisions));
            }
            if pass.renamed > 0 {
                self.progress.note(&format!(
                    "census: {} entities of {from} were written during the rename and were moved to {to}",
                    pass.renamed
                ));
            }
            if passes >= self.options.census_passes {
                let left = self
                    .store
                    .count(from, Filter::all())
                    .await
                    .map_err(MigrateError::store("counting the entities of the old kind"))?;
                return Err(rename_refused(
                    from,
                    to,
                    format!(
                        "{left} entities are still under {from} after {passes} sweeps: an \
                         application keeps writing kind {from}; stop it or run `tern up` again"
                    ),
                ));
            }
            passes += 1;
            pos.cursor = None;
            if let Some(index) = stage {
                self.checkpoint(index, pos).await?;
            }
        }
    }

    fn collisions(&self, from: &str, to: &str, keys: &[Key]) -> MigrateError {
        let shown: Vec<String> = keys.iter().take(SHOWN).map(ToString::to_string).collect();
        let more = keys.len().saturating_sub(shown.len());
        let mut list = shown.join(", ");
        if more > 0 {
            list.push_str(&format!(" and {more} more"));
        }
        rename_refused(
            from,
            to,
            format!(
                "{} entities of {from} cannot move because {to} already holds their id (written \
                 since the rename started, or a key that is not an entity): {list}; both are kept, \
                 nothing was overwritten. Keep one of each pair (delete the other) and run \
                 `tern up` again to finish the rename",
                keys.len()
            ),
        )
    }
}

/// Checks, before anything is written, that the store can rename `from` to
/// `to` (support, layouts, a valid name) and, with `target_empty`, that `to`
/// holds no entity.
pub(crate) async fn check_rename(
    store: &dyn Store,
    migration: u32,
    migration_name: &str,
    from: &str,
    to: &str,
    target_empty: bool,
) -> Result<()> {
    let refused = |reason: String| rename_refused(from, to, reason);
    if Key::new(to, 0).is_err() {
        return Err(refused(format!("{to:?} is not a valid kind name")));
    }
    let check = rename_batch(
        store,
        RenameKindRequest {
            from: from.to_owned(),
            to: to.to_owned(),
            cursor: None,
            limit: 0,
        },
    )
    .await;
    match check {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            return Err(MigrateError::Invalid {
                id: migration,
                name: migration_name.to_owned(),
                message: format!(
                    "rename kind is not supported on {}: {}; the Redis, MongoDB, Cassandra, \
                     embedded and memory stores rename kinds",
                    store.info().scheme,
                    e.message()
                ),
            });
        }
        Err(e) if e.kind() == ErrorKind::ConfigInvalid => {
            return Err(refused(e.to_string()));
        }
        Err(e) => return Err(MigrateError::store("checking a kind rename")(e)),
    }
    if !target_empty {
        return Ok(());
    }
    let existing = store
        .count(to, Filter::all())
        .await
        .map_err(MigrateError::store("counting the entities of the new kind"))?;
    if existing > 0 {
        return Err(refused(format!(
            "{to} already holds {existing} entities, and a kind rename never merges into a \
             kind in use (no entity may be overwritten); rename or empty kind {to} first"
        )));
    }
    Ok(())
}
