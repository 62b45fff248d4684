//! Fenced changes of the state document: the compare-and-set loops that the
//! runner's lease ([`super::lease`]) and a worker's claim on a partition
//! ([`crate::migrate::partition`]) share.
//!
//! The fence, not the document's revision, decides who may write: when
//! someone else wrote the document meanwhile, it is read again and, while it
//! still carries the fence (same owner, same fencing token), the change is
//! applied to it again, as in a KCL lease table.

use std::sync::Arc;

use super::error::{MigrateError, Result};
use super::state::{self, StateDoc, Versioned};
use crate::store::{
    BatchMetaOutcome, MetaUpdate, MetaValueFn, Store, StoreExt, Write, WriteOutcome,
};

/// Who may change the state document: a lease's holder.
pub(crate) trait Fence: Sync {
    /// Whether a document that does not carry the fence (any more) is read
    /// from the store before giving up: the copy at hand may be older than
    /// the store's (a cache that several workers share).
    const RELOAD: bool;

    /// Does `doc` still carry the fence (same owner, same fencing token)?
    fn holds(&self, doc: &StateDoc) -> bool;

    /// Has the fence been lost already (taken over, renewal failed past expiry)?
    fn is_lost(&self) -> bool;

    /// Marks the fence lost and returns the error that says so.
    fn lose(&self) -> MigrateError;
}

/// A change of the state document that depends on the outcomes of the writes
/// it goes with.
pub(crate) type DocChange = Arc<dyn Fn(&mut StateDoc, &[WriteOutcome]) + Send + Sync>;

/// Makes sure `current` carries `fence`, reading the store again when the
/// fence asks for it.
async fn held<F: Fence>(store: &dyn Store, fence: &F, current: &mut Versioned) -> Result<()> {
    if fence.holds(&current.doc) {
        return Ok(());
    }
    if F::RELOAD {
        let fresh = state::load(store).await?;
        if fresh.revision != current.revision {
            *current = fresh;
            if fence.holds(&current.doc) {
                return Ok(());
            }
        }
    }
    Err(fence.lose())
}

/// Changes the document `current` holds with `change` under `fence` (a
/// compare-and-set, again on the document now there when someone else wrote
/// it meanwhile) and returns what `change` returned. `current` is left as
/// written.
///
/// # Errors
/// [`MigrateError::LeaseLost`] when the document no longer carries the fence,
/// or a store error.
pub(crate) async fn update<T>(
    store: &dyn Store,
    fence: &impl Fence,
    current: &mut Versioned,
    mut change: impl FnMut(&mut StateDoc) -> T,
) -> Result<T> {
    if fence.is_lost() {
        return Err(fence.lose());
    }
    loop {
        held(store, fence, current).await?;
        let mut doc = current.doc.clone();
        let out = change(&mut doc);
        match state::store_or_current(store, current.revision, &doc).await? {
            Ok(rev) => {
                *current = Versioned {
                    doc,
                    revision: Some(rev),
                };
                return Ok(out);
            }
            Err(now) => *current = now,
        }
    }
}

/// Applies `writes` and changes the document `current` holds with `change`
/// (given the writes' outcomes) under `fence`, with one
/// [`StoreExt::write_checked_with_meta`] call: on a store whose call is
/// atomic, both commit or neither does. A document someone else wrote
/// meanwhile is read again, as in [`update`]: an atomic store then wrote
/// nothing and the call is made again; another store applied the writes and
/// only the document is written again. `current` is left as written.
///
/// # Errors
/// [`MigrateError::LeaseLost`] when the document no longer carries the fence
/// (an atomic store then applied none of the writes; another store applied
/// them, which version scoping makes harmless), or a store error.
pub(crate) async fn write_and_update(
    store: &dyn Store,
    fence: &impl Fence,
    current: &mut Versioned,
    writes: Vec<Write>,
    change: DocChange,
) -> Result<Vec<WriteOutcome>> {
    if fence.is_lost() {
        return Err(fence.lose());
    }
    loop {
        held(store, fence, current).await?;
        let value: MetaValueFn = {
            let (base, change) = (current.doc.clone(), Arc::clone(&change));
            Arc::new(move |outcomes: &[WriteOutcome]| {
                let mut doc = base.clone();
                change(&mut doc, outcomes);
                state::to_json(&doc)
            })
        };
        let outcome = store
            .write_checked_with_meta(
                writes.clone(),
                MetaUpdate {
                    name: state::STATE_DOC.to_owned(),
                    expected: current.revision,
                    value,
                },
            )
            .await
            .map_err(MigrateError::store("writing entities and their checkpoint"))?;
        match outcome {
            BatchMetaOutcome::Applied { writes, revision } => {
                let mut doc = current.doc.clone();
                change(&mut doc, &writes);
                *current = Versioned {
                    doc,
                    revision: Some(revision),
                };
                return Ok(writes);
            }
            BatchMetaOutcome::Conflict {
                current: now,
                writes: None,
            } => *current = state::current(now.as_ref())?,
            BatchMetaOutcome::Conflict {
                current: now,
                writes: Some(outcomes),
            } => {
                // Not atomic after all: the writes landed; record them.
                *current = state::current(now.as_ref())?;
                update(store, fence, current, |doc| change(doc, &outcomes)).await?;
                return Ok(outcomes);
            }
        }
    }
}
