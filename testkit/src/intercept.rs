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
    Advanced, BatchMetaOutcome, Capability, Filter, MetaCas, MetaChange, MetaEntry, MetaUpdate,
    PushdownPage, PushdownRequest, RenameKindPage, RenameKindRequest, Result, ScanPage,
    ScanRequest, SchemaChange, StepsFrom, Store, StoreInfo, Write, WriteOutcome,
};

/// Declares [`Intercept`], one hook a [`Store`] method (the method's
/// arguments after `inner`, forwarding to it by default), and the [`Store`]
/// impl of [`Intercepted`] that passes every call through its hook.
macro_rules! intercept_every_method {
    (
        sync { $(fn $sname:ident() -> $sret:ty;)* }
        async { $($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)* }
    ) => {
        /// What a test changes about a store: every method forwards to `inner` unless overridden.
        #[async_trait]
        pub trait Intercept: Send + Sync + Debug + 'static {
            $(
                #[doc = concat!("[`Store::", stringify!($sname), "`].")]
                fn $sname(&self, inner: &dyn Store) -> $sret {
                    inner.$sname()
                }
            )*
            $(
                #[doc = concat!("[`Store::", stringify!($name), "`].")]
                $(#[$doc])*
                async fn $name(&self, inner: &dyn Store $(, $arg: $ty)*) -> $ret {
                    inner.$name($($arg),*).await
                }
            )*
        }

        #[async_trait]
        impl<I: Intercept> Store for Intercepted<I> {
            $(
                fn $sname(&self) -> $sret {
                    self.hooks.$sname(self.inner.as_ref())
                }
            )*
            /// The inner store's partitions: their scans and updates bypass
            /// the hooks (the writes of a partitioned stage go through them).
            fn partitions(&self) -> Option<&dyn tern_core::store::Partitions> {
                self.inner.partitions()
            }
            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    self.hooks.$name(self.inner.as_ref() $(, $arg)*).await
                }
            )*
        }
    };
}

intercept_every_method! {
    sync {
        fn info() -> StoreInfo;
        fn capability() -> Capability;
    }
    async {
        fn kinds() -> Result<Vec<String>>;
        fn scan(kind: &str, request: ScanRequest) -> Result<ScanPage>;
        fn get(key: &Key) -> Result<Option<Entity>>;
        fn get_many(keys: &[Key]) -> Result<Vec<Option<Entity>>>;
        fn get_advanced(key: &Key, formers: &[Key], steps: Option<&StepsFrom>) -> Result<Option<Advanced>>;
        fn write_batch(writes: Vec<Write>) -> Result<Vec<WriteOutcome>>;
        /// Forwards to the inner store's (atomic there, where it is), so a
        /// hook on [`Intercept::write_batch`] does not see these writes:
        /// override this too, or route it through the hooks with
        /// [`write_then_meta_cas`](tern_core::store::write_then_meta_cas) and
        /// report [`Capability::atomic_batch_with_meta`] `false` from
        /// [`Intercept::capability`].
        fn write_batch_with_meta(writes: Vec<Write>, meta: MetaUpdate) -> Result<BatchMetaOutcome>;
        fn meta_get(name: &str) -> Result<Option<MetaEntry>>;
        fn meta_cas(name: &str, change: MetaChange<'_>) -> Result<MetaCas>;
        fn meta_list(prefix: &str) -> Result<Vec<String>>;
        fn update_in_place(request: PushdownRequest) -> Result<PushdownPage>;
        fn prepare_schema(changes: &[SchemaChange]) -> Result<()>;
        fn finish_schema(changes: &[SchemaChange]) -> Result<()>;
        fn rename_kind(request: RenameKindRequest) -> Result<RenameKindPage>;
        fn now() -> Result<i64>;
        fn count(kind: &str, filter: Filter) -> Result<u64>;
        fn estimate_count(kind: &str) -> Result<Option<u64>>;
        fn version_census(kind: &str) -> Result<BTreeMap<Version, u64>>;
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

/// Records, in order, the store calls that pass over a kind: each `count`
/// (`"count KIND"`), each `scan` page (`"scan KIND"`) and each `rename_kind`
/// call that starts a pass over the old kind (`"rename FROM"`). On Redis each
/// pass is a SCAN of the whole database: tests count them with this.
#[derive(Debug, Default)]
pub struct PassLog(std::sync::Mutex<Vec<String>>);

impl PassLog {
    /// The calls recorded so far.
    pub fn calls(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// How many recorded calls are `call`.
    pub fn times(&self, call: &str) -> usize {
        self.lock().iter().filter(|c| *c == call).count()
    }

    /// Forgets the calls recorded so far.
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl Intercept for PassLog {
    async fn count(&self, inner: &dyn Store, kind: &str, filter: Filter) -> Result<u64> {
        self.lock().push(format!("count {kind}"));
        inner.count(kind, filter).await
    }

    async fn scan(&self, inner: &dyn Store, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        self.lock().push(format!("scan {kind}"));
        inner.scan(kind, request).await
    }

    async fn rename_kind(
        &self,
        inner: &dyn Store,
        request: RenameKindRequest,
    ) -> Result<RenameKindPage> {
        if request.cursor.is_none() && request.limit > 0 {
            self.lock().push(format!("rename {}", request.from));
        }
        inner.rename_kind(request).await
    }
}
