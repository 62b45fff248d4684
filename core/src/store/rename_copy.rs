//! Kind renames by copy: [`Store::rename_kind`] on stores that cannot re-key an
//! entity in place (MongoDB cannot rename a document's collection, CQL cannot
//! rename a table, a Redis Cluster cannot `RENAME` across slots). The protocol is
//! written once, here ([`rename_by_copy`]); each such store implements
//! [`CopyRename`], whose rows stay in the store's own format (a BSON document, a
//! CQL row, a key's `DUMP` with its TTL and version tag), so that values, types
//! and TTLs carry over exactly as stored.
//!
//! These stores have no multi-key transaction, so a move is not one atomic step;
//! it is made safe by being idempotent and by never deleting or overwriting
//! anything but exactly the rows it copied. One batch:
//!
//! 1. [`CopyRename::plan`] checks the two names and layouts before anything is
//!    written (`ConfigInvalid`); `limit: 0` stops there;
//! 2. [`CopyRename::read_page`] reads one page of the old kind, as a scan reads it,
//!    every row as stored, and the cursor of the next page;
//! 3. [`CopyRename::copy`] copies each row to the new kind unless the new kind
//!    holds its id. A held id whose row is identical to the source is a move
//!    interrupted after its copy (the move goes on); any other row there is a
//!    **collision**: reported in [`RenameKindPage::collisions`], both rows left as
//!    they are (nothing is ever overwritten);
//! 4. [`CopyRename::delete_if_same`] deletes each copied source only if it still
//!    is exactly the copied row (never by range, which would also delete rows
//!    written meanwhile);
//! 5. where the source changed (or vanished) since it was read, its copy is
//!    deleted again, only if it is still exactly the copy (the **undo**: a stale
//!    copy would hide an update or resurrect a deleted entity; a copy that a
//!    writer of the new kind changed stays, and is met again as a collision), the
//!    source is read again ([`CopyRename::reread`]) and its move tried again, up to
//!    [`ATTEMPTS`] times; after that the call fails with a temporary `Busy` error
//!    (nothing lost: the entity stays under the old kind).
//!
//! A crash at any point leaves each entity under exactly one of the two names,
//! or under both with identical rows (between steps 3 and 4, or 5), which the
//! next run takes as its own copy and completes: re-running the pass (as the
//! engine's census passes do) finishes every move.
//!
//! [`Store::rename_kind`]: crate::store::Store::rename_kind

use async_trait::async_trait;

use crate::model::Key;
use crate::store::{Cursor, Error, ErrorKind, RenameKindPage, RenameKindRequest, Result};

/// How many times one call tries to move a row that changes under it.
pub const ATTEMPTS: usize = 5;

/// What the copy of one row found under the new kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    /// The new kind now holds exactly the source row: copied now, or before by a
    /// run interrupted after its copy.
    Yes,
    /// The new kind holds another row with this id: a collision, left alone.
    Collision,
}

/// One of the two kinds of a rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The kind renamed (`from`).
    Old,
    /// Its new name (`to`).
    New,
}

/// A hook run after a batch is copied to the new kind and before the sources
/// are deleted, with the keys (of the old kind) just copied. For the tests of
/// what a crash or a writer in between does to a rename (feature
/// `fault-injection`); never part of a production build.
#[cfg(feature = "fault-injection")]
pub type AfterCopyHook =
    std::sync::Arc<dyn Fn(Vec<Key>) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// What a store's `with_after_copy_hook` takes (tests): a function of the keys
/// just copied, run between the copy and the delete of a batch.
pub trait AfterCopyFn:
    Fn(Vec<Key>) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static
{
}

impl<F> AfterCopyFn for F where
    F: Fn(Vec<Key>) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static
{
}

/// The primitives of a store that renames kinds by copy; [`rename_by_copy`]
/// owns the protocol (see the module documentation).
///
/// Rows stay in the store's own format, and each method answers for its rows in
/// the order given.
#[async_trait]
pub trait CopyRename: Send + Sync {
    /// A row of a kind as the store holds it, with its id.
    type Row: Send + Sync;
    /// What a rename of `from` to `to` needs to address both kinds (table names,
    /// layouts...), made by [`CopyRename::plan`].
    type Plan: Send + Sync;

    /// The store's scheme (`"mongodb"`), for messages.
    fn scheme(&self) -> &'static str;

    /// Where the store is, without a password, for the context of errors.
    fn location(&self) -> String;

    /// Checks that `from` can be renamed to `to` (names, layouts) and writes
    /// nothing; `None` when `from` holds nothing to move (it has no table).
    ///
    /// # Errors
    /// `ConfigInvalid` naming the kinds and the fix.
    async fn plan(&self, from: &str, to: &str) -> Result<Option<Self::Plan>>;

    /// One page of at most `limit` rows of the old kind from `cursor` (as a scan
    /// reads it), and where the next page starts (`None`: the pass is done).
    async fn read_page(
        &self,
        plan: &Self::Plan,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<Self::Row>, Option<Cursor>)>;

    /// Makes the new kind ready to receive rows (creates its table); called
    /// before the first copy of each non-empty page, so it must be idempotent.
    async fn prepare_target(&self, plan: &Self::Plan) -> Result<()> {
        let _ = plan;
        Ok(())
    }

    /// Copies each row to the new kind unless it holds the row's id: see
    /// [`Copied`]. Never overwrites a row of the new kind.
    async fn copy(&self, plan: &Self::Plan, rows: &[&Self::Row]) -> Result<Vec<Copied>>;

    /// Deletes each row from the kind `side` (the row under its id there) if it
    /// still is exactly that row; whether each was deleted.
    async fn delete_if_same(
        &self,
        plan: &Self::Plan,
        side: Side,
        rows: &[&Self::Row],
    ) -> Result<Vec<bool>>;

    /// The rows of the old kind with the ids of `rows`, as they are now; vanished
    /// ones are left out.
    async fn reread(&self, plan: &Self::Plan, rows: &[&Self::Row]) -> Result<Vec<Self::Row>>;

    /// The key (of the old kind) of a row, for reports.
    fn key_of(&self, plan: &Self::Plan, row: &Self::Row) -> Result<Key>;

    /// The hook run between the copy and the delete, if the store was given one.
    #[cfg(feature = "fault-injection")]
    fn after_copy_hook(&self) -> Option<AfterCopyHook> {
        None
    }
}

/// What one round of moves did.
struct Round {
    moved: u64,
    collisions: Vec<Key>,
    /// The rows whose source changed or vanished between the read and the delete.
    changed: Vec<usize>,
}

/// One batch of [`Store::rename_kind`] on a store that renames by copy: the
/// protocol of the module documentation over `store`'s primitives.
///
/// # Errors
/// `ConfigInvalid` from [`CopyRename::plan`]; a temporary `Busy` when rows kept
/// changing during each of [`ATTEMPTS`] attempts (they stay under the old kind);
/// the store's errors.
///
/// [`Store::rename_kind`]: crate::store::Store::rename_kind
pub async fn rename_by_copy<S: CopyRename + ?Sized>(
    store: &S,
    request: RenameKindRequest,
) -> Result<RenameKindPage> {
    let (from, to) = (request.from.as_str(), request.to.as_str());
    let Some(plan) = store.plan(from, to).await? else {
        return Ok(RenameKindPage::default());
    };
    if request.limit == 0 || from == to {
        return Ok(RenameKindPage::default());
    }
    let (mut rows, cursor) = store
        .read_page(&plan, request.cursor.as_ref(), request.limit)
        .await?;
    let mut page = RenameKindPage {
        cursor,
        ..RenameKindPage::default()
    };
    if rows.is_empty() {
        return Ok(page);
    }
    store.prepare_target(&plan).await?;
    for attempt in 1..=ATTEMPTS {
        if rows.is_empty() {
            break;
        }
        let round = move_round(store, &plan, &rows).await?;
        page.renamed += round.moved;
        page.collisions.extend(round.collisions);
        if round.changed.is_empty() {
            break;
        }
        let changed: Vec<&S::Row> = round.changed.iter().map(|&i| &rows[i]).collect();
        if attempt == ATTEMPTS {
            let first = changed
                .first()
                .and_then(|r| store.key_of(&plan, r).ok())
                .map(|k| k.to_string())
                .unwrap_or_default();
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{}: renaming kind {from} to {to}: {} entities changed during each of \
                     {ATTEMPTS} attempts to move them (another writer keeps updating them); \
                     they stay under {from}, nothing was lost; run again",
                    store.scheme(),
                    changed.len()
                ),
            )
            .with_context("key", first)
            .with_context("store", store.location())
            .set_temporary());
        }
        // The changed sources as they are now; vanished ones are skipped.
        rows = store.reread(&plan, &changed).await?;
    }
    Ok(page)
}

/// Copies `rows` to the new kind, then deletes each source that is still exactly
/// its copy, and takes back the copies of the sources that changed.
async fn move_round<S: CopyRename + ?Sized>(
    store: &S,
    plan: &S::Plan,
    rows: &[S::Row],
) -> Result<Round> {
    let all: Vec<&S::Row> = rows.iter().collect();
    let copies = store.copy(plan, &all).await?;
    answers(store, "copied", copies.len(), rows.len())?;
    let mut round = Round {
        moved: 0,
        collisions: Vec::new(),
        changed: Vec::new(),
    };
    let mut copied: Vec<usize> = Vec::with_capacity(rows.len());
    for (i, outcome) in copies.into_iter().enumerate() {
        match outcome {
            Copied::Yes => copied.push(i),
            Copied::Collision => round.collisions.push(store.key_of(plan, &rows[i])?),
        }
    }
    #[cfg(feature = "fault-injection")]
    if let Some(hook) = store.after_copy_hook() {
        let keys = copied
            .iter()
            .map(|&i| store.key_of(plan, &rows[i]))
            .collect::<Result<Vec<_>>>()?;
        hook(keys).await;
    }
    let sources: Vec<&S::Row> = copied.iter().map(|&i| &rows[i]).collect();
    let deleted = store.delete_if_same(plan, Side::Old, &sources).await?;
    answers(store, "deleted", deleted.len(), sources.len())?;
    let mut undo: Vec<&S::Row> = Vec::new();
    for (&i, deleted) in copied.iter().zip(deleted) {
        if deleted {
            round.moved += 1;
        } else {
            undo.push(&rows[i]);
            round.changed.push(i);
        }
    }
    if !undo.is_empty() {
        // The source changed or vanished since it was read: its copy must not
        // stay (it would resurrect a deleted entity or hide an update). A copy
        // that changed too (a writer of the new kind) stays and is met again as
        // a collision.
        let undone = store.delete_if_same(plan, Side::New, &undo).await?;
        answers(store, "undone", undone.len(), undo.len())?;
    }
    Ok(round)
}

/// Refuses a primitive's answer that does not have one outcome per row.
fn answers<S: CopyRename + ?Sized>(store: &S, what: &str, got: usize, want: usize) -> Result<()> {
    if got == want {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Unexpected,
        format!(
            "{}: a kind rename step answered {got} `{what}` outcomes for {want} rows",
            store.scheme()
        ),
    )
    .with_context("store", store.location()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
