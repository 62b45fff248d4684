//! What tern-core builds on every [`Store`]: the checked writes the engine
//! calls, single-entity shorthands, the calls of facets that have a fallback
//! (taken where the store lacks the facet), and the pages of a scan as a stream.

use async_trait::async_trait;
use futures::{Stream, TryStreamExt};

use super::{
    BatchMetaOutcome, Cursor, Error, Filter, MetaUpdate, Result, ScanPage, ScanRequest,
    SchemaChange, Store, Write, WriteOutcome, check_writes, local_now_millis, write_then_meta_cas,
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
    let ordered = store.features().scan_ordered;
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

    /// [`SerialWrites::write_serial`](super::SerialWrites::write_serial)
    /// after [`check_writes`] on a store with that facet (puts and deletes
    /// that no concurrent compare-and-set can overwrite), else
    /// [`Store::write_batch`] (whose plain writes are ordered already).
    ///
    /// # Errors
    /// A replace that changes its key (nothing is written), or the store's errors.
    async fn write_serial_checked(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        check_writes(&writes)?;
        match self.features().serial_writes {
            Some(serial) => serial.write_serial(writes).await,
            None => self.write_batch(writes).await,
        }
    }

    /// [`AtomicWrites::write_atomic`](super::AtomicWrites::write_atomic) after
    /// [`check_writes`]. Callers ask for the facet first (and its scope); a
    /// store without it answers `Unsupported`, writing nothing.
    ///
    /// # Errors
    /// A replace that changes its key (nothing is written), `Unsupported`
    /// without the [`AtomicWrites`](super::AtomicWrites) facet, or the store's errors.
    async fn write_atomic_checked(
        &self,
        guards: Vec<super::Guard>,
        writes: Vec<Write>,
    ) -> Result<WriteOutcome> {
        check_writes(&writes)?;
        match self.features().atomic_writes {
            Some(atomic) => atomic.write_atomic(guards, writes).await,
            None => Err(Error::unsupported(self.info().scheme, "write_atomic")),
        }
    }

    /// A batch and its checkpoint, after [`check_writes`]: in one transaction
    /// with the [`AtomicBatchWithMeta`](super::AtomicBatchWithMeta) facet,
    /// else two calls ([`write_then_meta_cas`]): the writes as
    /// [`Store::write_batch`] applies them, then the metadata document
    /// `meta.name` with the text `meta.value` computes from their outcomes, if
    /// its revision is still `meta.expected`; a conflicting or failing
    /// metadata write then leaves the entity writes applied.
    ///
    /// # Errors
    /// A replace that changes its key (nothing is written), or the store's errors.
    async fn write_checked_with_meta(
        &self,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        check_writes(&writes)?;
        match self.features().atomic_batch_with_meta {
            Some(atomic) => atomic.write_batch_with_meta(writes, meta).await,
            None => write_then_meta_cas(self, writes, meta).await,
        }
    }

    /// The current time in milliseconds since the Unix epoch: the server's
    /// clock with the [`ServerClock`](super::ServerClock) facet, else this
    /// machine's. Lease expiry is judged by it.
    ///
    /// # Errors
    /// The store's errors reading its clock.
    async fn now(&self) -> Result<i64> {
        match self.features().server_clock {
            Some(clock) => clock.now().await,
            None => Ok(local_now_millis()),
        }
    }

    /// A page of a scan that needs only `properties` of each entity:
    /// [`ProjectedScan::scan_projected`](super::ProjectedScan::scan_projected)
    /// with that facet (read its contract: such entities are never written
    /// back), else [`Store::scan`] (whole entities).
    ///
    /// # Errors
    /// As [`Store::scan`].
    async fn scan_projected(
        &self,
        kind: &str,
        request: ScanRequest,
        properties: &[String],
    ) -> Result<ScanPage> {
        match self.features().projected_scan {
            Some(projected) => projected.scan_projected(kind, request, properties).await,
            None => self.scan(kind, request).await,
        }
    }

    /// The store's cheap estimate of how many entities `kind` holds
    /// ([`CountEstimate`](super::CountEstimate)), `None` without that facet.
    ///
    /// # Errors
    /// The store's errors.
    async fn estimate_count(&self, kind: &str) -> Result<Option<u64>> {
        match self.features().count_estimate {
            Some(estimate) => estimate.estimate_count(kind).await.map(Some),
            None => Ok(None),
        }
    }

    /// [`SchemaHooks::prepare_schema`](super::SchemaHooks::prepare_schema)
    /// with that facet; nothing on a schema-less store.
    ///
    /// # Errors
    /// The store's errors.
    async fn prepare_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        match self.features().schema_hooks {
            Some(hooks) => hooks.prepare_schema(changes).await,
            None => Ok(()),
        }
    }

    /// [`SchemaHooks::finish_schema`](super::SchemaHooks::finish_schema)
    /// with that facet; nothing on a schema-less store.
    ///
    /// # Errors
    /// The store's errors.
    async fn finish_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        match self.features().schema_hooks {
            Some(hooks) => hooks.finish_schema(changes).await,
            None => Ok(()),
        }
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
