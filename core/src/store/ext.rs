//! What tern-core builds on every [`Store`]: the checked writes the engine
//! calls, single-entity shorthands, and the pages of a scan as a stream.

use async_trait::async_trait;
use futures::{Stream, TryStreamExt};

use super::{
    BatchMetaOutcome, Cursor, Filter, MetaUpdate, Result, ScanPage, ScanRequest, Store, Write,
    WriteOutcome, check_writes,
};
use crate::model::{Entity, Key};

/// The pages of a scan of `kind` that pass `filter`, `limit` entities at most
/// each: one [`Store::scan`] call per page, from the start until a page has no
/// cursor. The stream ends after the first error.
pub fn scan_pages<'a, S: Store + ?Sized>(
    store: &'a S,
    kind: &'a str,
    filter: Filter,
    limit: usize,
) -> impl Stream<Item = Result<ScanPage>> + Send + 'a {
    // `None`: the scan is over; `Some(cursor)`: the next page starts there.
    futures::stream::try_unfold(Some(None::<Cursor>), move |next| {
        let filter = filter.clone();
        async move {
            let Some(cursor) = next else {
                return Ok(None);
            };
            let page = store
                .scan(
                    kind,
                    ScanRequest {
                        filter,
                        cursor,
                        limit,
                    },
                )
                .await?;
            let after = page.cursor.clone().map(Some);
            Ok(Some((page, after)))
        }
    })
}

/// Calls `each` once per entity of `kind` that passes `filter`, in pages of
/// 1000; keys that an unordered scan repeats are passed once.
pub(crate) async fn for_each_unique<S: Store + ?Sized>(
    store: &S,
    kind: &str,
    filter: Filter,
    mut each: impl FnMut(&Entity) + Send,
) -> Result<()> {
    let ordered = store.capability().scan_ordered;
    let mut seen = std::collections::HashSet::new();
    let mut pages = std::pin::pin!(scan_pages(store, kind, filter, 1000));
    while let Some(page) = pages.try_next().await? {
        for e in page.entities {
            if ordered || seen.insert(e.key.clone()) {
                each(&e);
            }
        }
    }
    Ok(())
}

/// Provided on every [`Store`]: the writes the engine makes, checked against
/// the contract once for all stores, and single-entity shorthands.
#[async_trait]
pub trait StoreExt: Store {
    /// [`Store::write_batch`] after [`check_writes`].
    ///
    /// # Errors
    /// A replace that changes its key (nothing is written), or the store's errors.
    async fn write_checked(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        check_writes(&writes)?;
        self.write_batch(writes).await
    }

    /// [`Store::write_atomic`] after [`check_writes`].
    ///
    /// # Errors
    /// A replace that changes its key (nothing is written), `Unsupported` where
    /// [`Capability::atomic_writes`](super::Capability::atomic_writes) does not
    /// cover the keys, or the store's errors.
    async fn write_atomic_checked(
        &self,
        guards: Vec<super::Guard>,
        writes: Vec<Write>,
    ) -> Result<WriteOutcome> {
        check_writes(&writes)?;
        self.write_atomic(guards, writes).await
    }

    /// [`Store::write_batch_with_meta`] after [`check_writes`].
    ///
    /// # Errors
    /// A replace that changes its key (nothing is written), or the store's errors.
    async fn write_checked_with_meta(
        &self,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        check_writes(&writes)?;
        self.write_batch_with_meta(writes, meta).await
    }

    /// Writes one entity unconditionally (create or replace).
    ///
    /// # Errors
    /// The store's errors.
    async fn put(&self, entity: Entity) -> Result<()> {
        self.write_batch(vec![Write::Put(entity)]).await.map(|_| ())
    }

    /// Deletes one entity; a missing key is not an error.
    ///
    /// # Errors
    /// The store's errors.
    async fn delete(&self, key: &Key) -> Result<()> {
        self.write_batch(vec![Write::Delete(key.clone())])
            .await
            .map(|_| ())
    }
}

impl<S: Store + ?Sized> StoreExt for S {}
