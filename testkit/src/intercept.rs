//! A store that forwards every call to another store, except the calls a test
//! intercepts: count scans, record schema hooks, delay a write, inject a bug.
//!
//! Implement [`Intercept`] with only the methods to change (each receives the
//! inner store and forwards to it by default) and wrap the store with
//! [`Intercepted::new`]. Every [`Store`] method passes through the hooks, so a
//! new store method needs one new default here and nowhere else.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use tern_core::model::{Entity, Key, Version};
use tern_core::store::{
    BatchMetaOutcome, Capability, Filter, MetaCas, MetaChange, MetaEntry, MetaUpdate, PushdownPage,
    PushdownRequest, RenameKindPage, RenameKindRequest, Result, ScanPage, ScanRequest,
    SchemaChange, Store, StoreInfo, Write, WriteOutcome,
};

/// What a test changes about a store: every method forwards to `inner` unless overridden.
#[async_trait]
pub trait Intercept: Send + Sync + Debug + 'static {
    /// [`Store::info`].
    fn info(&self, inner: &dyn Store) -> StoreInfo {
        inner.info()
    }
    /// [`Store::capability`].
    fn capability(&self, inner: &dyn Store) -> Capability {
        inner.capability()
    }
    /// [`Store::kinds`].
    async fn kinds(&self, inner: &dyn Store) -> Result<Vec<String>> {
        inner.kinds().await
    }
    /// [`Store::scan`].
    async fn scan(&self, inner: &dyn Store, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        inner.scan(kind, request).await
    }
    /// [`Store::get`].
    async fn get(&self, inner: &dyn Store, key: &Key) -> Result<Option<Entity>> {
        inner.get(key).await
    }
    /// [`Store::get_many`].
    async fn get_many(&self, inner: &dyn Store, keys: &[Key]) -> Result<Vec<Option<Entity>>> {
        inner.get_many(keys).await
    }
    /// [`Store::write_batch`].
    async fn write_batch(
        &self,
        inner: &dyn Store,
        writes: Vec<Write>,
    ) -> Result<Vec<WriteOutcome>> {
        inner.write_batch(writes).await
    }
    /// [`Store::write_batch_with_meta`]. Forwards to the inner store's (atomic
    /// there, where it is), so a hook on [`Intercept::write_batch`] does not see
    /// these writes: override this too, or route it through the hooks with
    /// [`write_then_meta_cas`](tern_core::store::write_then_meta_cas) and report
    /// [`Capability::atomic_batch_with_meta`] `false` from [`Intercept::capability`].
    async fn write_batch_with_meta(
        &self,
        inner: &dyn Store,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        inner.write_batch_with_meta(writes, meta).await
    }
    /// [`Store::meta_get`].
    async fn meta_get(&self, inner: &dyn Store, name: &str) -> Result<Option<MetaEntry>> {
        inner.meta_get(name).await
    }
    /// [`Store::meta_cas`].
    async fn meta_cas(
        &self,
        inner: &dyn Store,
        name: &str,
        change: MetaChange<'_>,
    ) -> Result<MetaCas> {
        inner.meta_cas(name, change).await
    }
    /// [`Store::meta_list`].
    async fn meta_list(&self, inner: &dyn Store, prefix: &str) -> Result<Vec<String>> {
        inner.meta_list(prefix).await
    }
    /// [`Store::update_in_place`].
    async fn update_in_place(
        &self,
        inner: &dyn Store,
        request: PushdownRequest,
    ) -> Result<PushdownPage> {
        inner.update_in_place(request).await
    }
    /// [`Store::prepare_schema`].
    async fn prepare_schema(&self, inner: &dyn Store, changes: &[SchemaChange]) -> Result<()> {
        inner.prepare_schema(changes).await
    }
    /// [`Store::finish_schema`].
    async fn finish_schema(&self, inner: &dyn Store, changes: &[SchemaChange]) -> Result<()> {
        inner.finish_schema(changes).await
    }
    /// [`Store::rename_kind`].
    async fn rename_kind(
        &self,
        inner: &dyn Store,
        request: RenameKindRequest,
    ) -> Result<RenameKindPage> {
        inner.rename_kind(request).await
    }
    /// [`Store::now`].
    async fn now(&self, inner: &dyn Store) -> Result<i64> {
        inner.now().await
    }
    /// [`Store::count`].
    async fn count(&self, inner: &dyn Store, kind: &str, filter: Filter) -> Result<u64> {
        inner.count(kind, filter).await
    }
    /// [`Store::estimate_count`].
    async fn estimate_count(&self, inner: &dyn Store, kind: &str) -> Result<Option<u64>> {
        inner.estimate_count(kind).await
    }
    /// [`Store::version_census`].
    async fn version_census(
        &self,
        inner: &dyn Store,
        kind: &str,
    ) -> Result<BTreeMap<Version, u64>> {
        inner.version_census(kind).await
    }
}

/// `inner`, seen through the hooks of `hooks`.
#[derive(Debug)]
pub struct Intercepted<I> {
    inner: Arc<dyn Store>,
    hooks: I,
}

impl<I: Intercept> Intercepted<I> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Store>, hooks: I) -> Intercepted<I> {
        Intercepted { inner, hooks }
    }

    /// The hooks (to read what they recorded).
    pub fn hooks(&self) -> &I {
        &self.hooks
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }
}

#[async_trait]
impl<I: Intercept> Store for Intercepted<I> {
    fn info(&self) -> StoreInfo {
        self.hooks.info(self.inner.as_ref())
    }
    fn capability(&self) -> Capability {
        self.hooks.capability(self.inner.as_ref())
    }
    async fn kinds(&self) -> Result<Vec<String>> {
        self.hooks.kinds(self.inner.as_ref()).await
    }
    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        self.hooks.scan(self.inner.as_ref(), kind, request).await
    }
    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        self.hooks.get(self.inner.as_ref(), key).await
    }
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Entity>>> {
        self.hooks.get_many(self.inner.as_ref(), keys).await
    }
    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        self.hooks.write_batch(self.inner.as_ref(), writes).await
    }
    async fn write_batch_with_meta(
        &self,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        self.hooks
            .write_batch_with_meta(self.inner.as_ref(), writes, meta)
            .await
    }
    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        self.hooks.meta_get(self.inner.as_ref(), name).await
    }
    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        self.hooks.meta_cas(self.inner.as_ref(), name, change).await
    }
    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        self.hooks.meta_list(self.inner.as_ref(), prefix).await
    }
    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage> {
        self.hooks
            .update_in_place(self.inner.as_ref(), request)
            .await
    }
    async fn prepare_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        self.hooks
            .prepare_schema(self.inner.as_ref(), changes)
            .await
    }
    async fn finish_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        self.hooks.finish_schema(self.inner.as_ref(), changes).await
    }
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        self.hooks.rename_kind(self.inner.as_ref(), request).await
    }
    async fn now(&self) -> Result<i64> {
        self.hooks.now(self.inner.as_ref()).await
    }
    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        self.hooks.count(self.inner.as_ref(), kind, filter).await
    }
    async fn estimate_count(&self, kind: &str) -> Result<Option<u64>> {
        self.hooks.estimate_count(self.inner.as_ref(), kind).await
    }
    async fn version_census(&self, kind: &str) -> Result<BTreeMap<Version, u64>> {
        self.hooks.version_census(self.inner.as_ref(), kind).await
    }
}

/// Hooks that make a store write a batch and its checkpoint in two calls
/// ([`write_then_meta_cas`](tern_core::store::write_then_meta_cas)), as every store
/// without an atomic [`Store::write_batch_with_meta`] does: to keep the engine's
/// path for such stores under test on a store that has the atomic call.
#[derive(Debug, Clone, Copy, Default)]
pub struct TwoCalls;

#[async_trait]
impl Intercept for TwoCalls {
    async fn write_batch_with_meta(
        &self,
        inner: &dyn Store,
        writes: Vec<tern_core::store::Write>,
        meta: tern_core::store::MetaUpdate,
    ) -> Result<tern_core::store::BatchMetaOutcome> {
        tern_core::store::write_then_meta_cas(inner, writes, meta).await
    }
    fn capability(&self, inner: &dyn Store) -> Capability {
        Capability {
            atomic_batch_with_meta: false,
            ..inner.capability()
        }
    }
}

/// Hooks that kill the process in the middle of one batch write: the `n`-th
/// call (from 0) of [`Store::write_batch`] or [`Store::write_batch_with_meta`].
///
/// On a store that commits a batch with its checkpoint
/// ([`Capability::atomic_batch_with_meta`]) a batch written with its checkpoint
/// is one transaction, which a crash leaves uncommitted: nothing is written.
/// Otherwise the first half of the writes is applied, and neither the rest nor
/// the checkpoint. From then on the "process" is dead: every write and
/// metadata call fails, so the engine cannot clean up (release its lease) as a
/// killed process could not. The engine writes each batch exactly as in
/// production; only the store tears.
#[derive(Debug)]
pub struct TornWrite {
    n: usize,
    calls: std::sync::atomic::AtomicUsize,
    fired: Arc<std::sync::atomic::AtomicBool>,
}

impl TornWrite {
    /// Tears the `n`-th batch write (from 0); `fired` tells whether it was reached.
    pub fn at(n: usize) -> (TornWrite, Arc<std::sync::atomic::AtomicBool>) {
        let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hooks = TornWrite {
            n,
            calls: Default::default(),
            fired: Arc::clone(&fired),
        };
        (hooks, fired)
    }

    fn dead(&self) -> bool {
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether this call is the one to tear (and the process dies with it).
    fn tears_now(&self) -> bool {
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if call == self.n {
            self.fired.store(true, std::sync::atomic::Ordering::SeqCst);
            return true;
        }
        false
    }

    fn killed() -> tern_core::store::Error {
        tern_core::store::Error::new(
            tern_core::store::ErrorKind::Unavailable,
            "the process was killed in the middle of a batch write (test)",
        )
    }

    /// Applies the first half of `writes` (each one alone: no atomicity assumed).
    async fn half(inner: &dyn Store, mut writes: Vec<Write>) -> Result<()> {
        writes.truncate(writes.len() / 2);
        if !writes.is_empty() {
            inner.write_batch(writes).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Intercept for TornWrite {
    async fn write_batch(
        &self,
        inner: &dyn Store,
        writes: Vec<Write>,
    ) -> Result<Vec<WriteOutcome>> {
        if self.dead() {
            return Err(Self::killed());
        }
        if self.tears_now() {
            Self::half(inner, writes).await?;
            return Err(Self::killed());
        }
        inner.write_batch(writes).await
    }

    async fn write_batch_with_meta(
        &self,
        inner: &dyn Store,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        if self.dead() {
            return Err(Self::killed());
        }
        if self.tears_now() {
            if !inner.capability().atomic_batch_with_meta {
                Self::half(inner, writes).await?;
            }
            return Err(Self::killed());
        }
        inner.write_batch_with_meta(writes, meta).await
    }

    async fn meta_cas(
        &self,
        inner: &dyn Store,
        name: &str,
        change: MetaChange<'_>,
    ) -> Result<MetaCas> {
        if self.dead() {
            return Err(Self::killed());
        }
        inner.meta_cas(name, change).await
    }
}
