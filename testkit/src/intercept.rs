//! A store that forwards every call to another store, except the calls a test
//! intercepts: count scans, record schema hooks, delay a write, inject a bug.
//!
//! Implement [`Intercept`] with only the methods to change (each receives the
//! inner store and forwards to it by default) and wrap the store with
//! [`Intercepted::new`]. Every [`Store`] method and every facet method passes
//! through the hooks, so a new store or facet method needs one new default here
//! and nowhere else.
//!
//! [`Intercepted`] hands out a facet where the inner store has it
//! ([`Intercept::offers`] decides; a hook may add or remove one), so the hooks
//! of a facet see every call of it.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use tern_core::model::{Entity, Key, Version};
use tern_core::store::{
    Advanced, AtomicBatchWithMeta, AtomicScope, AtomicWrites, BatchMetaOutcome, CountEstimate,
    Error, Features, Filter, FormerNameReads, Guard, KindRename, MetaCas, MetaChange, MetaEntry,
    MetaUpdate, ProjectedScan, Pushdown, PushdownPage, PushdownRequest, RenameKindPage,
    RenameKindRequest, Result, ScanPage, ScanRequest, SchemaChange, SchemaHooks, SerialWrites,
    ServerClock, StepsFrom, Store, StoreExt, StoreInfo, Write, WriteOutcome,
};

/// Declares [`Intercept`], one hook a [`Store`] or facet method (the method's
/// arguments after `inner`, forwarding to it by default), the impls of
/// [`Intercepted`] that pass every call through its hook, and [`Forward`]
/// (the `forwarded` facets: those whose calls have no fallback on [`StoreExt`]).
macro_rules! intercept_every_method {
    (
        store { $($(#[$sdoc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)* }
        facets { $($facet:ident: $trait:ident {
            $($(#[$fdoc:meta])* fn $fname:ident($($farg:ident: $fty:ty),*) -> $fret:ty;)*
        })* }
        forwarded { $($ffacet:ident.$fwd:ident($($fwarg:ident: $fwty:ty),*) -> $fwret:ty;)* }
    ) => {
        /// What a test changes about a store: every method forwards to `inner` unless overridden.
        #[async_trait]
        pub trait Intercept: Send + Sync + Debug + 'static {
            /// [`Store::info`].
            fn info(&self, inner: &dyn Store) -> StoreInfo {
                inner.info()
            }
            /// Which facets [`Intercepted`] hands out. Default: those of `inner`.
            fn offers(&self, inner: &dyn Store) -> Offers {
                Offers::of(&inner.features())
            }
            $(
                #[doc = concat!("[`Store::", stringify!($name), "`].")]
                $(#[$sdoc])*
                async fn $name(&self, inner: &dyn Store $(, $arg: $ty)*) -> $ret {
                    inner.$name($($arg),*).await
                }
            )*
            $($(
                #[doc = concat!("[`", stringify!($trait), "::", stringify!($fname), "`]; `Unsupported` where `inner` lacks the facet.")]
                $(#[$fdoc])*
                async fn $fname(&self, inner: &dyn Store $(, $farg: $fty)*) -> $fret {
                    intercept_every_method!(@facet_call inner, $facet, $fname($($farg),*))
                }
            )*)*
        }

        /// The facet calls without a fallback, on any store, for a hook that
        /// forwards to its inner store after doing its part: the facet's method where
        /// the store has it, else `Unsupported` (what a store without the facet
        /// answered before facets; the calls with a fallback are on [`StoreExt`]).
        #[async_trait]
        pub trait Forward {
            $(
                #[doc = concat!("The `", stringify!($fwd), "` of [`Features::", stringify!($ffacet), "`].")]
                async fn $fwd(&self $(, $fwarg: $fwty)*) -> $fwret;
            )*
        }

        #[async_trait]
        impl Forward for dyn Store {
            $(
                async fn $fwd(&self $(, $fwarg: $fwty)*) -> $fwret {
                    intercept_every_method!(@facet_call self, $ffacet, $fwd($($fwarg),*))
                }
            )*
        }

        #[async_trait]
        impl<I: Intercept> Store for Intercepted<I> {
            fn info(&self) -> StoreInfo {
                self.hooks.info(self.inner.as_ref())
            }

            fn features(&self) -> Features<'_> {
                let inner = self.inner.features();
                let offers = self.hooks.offers(self.inner.as_ref());
                Features {
                    scan_ordered: inner.scan_ordered,
                    atomic_writes_hint: inner.atomic_writes_hint,
                    lazy_in_server: inner.lazy_in_server,
                    // Their scans and updates bypass the hooks (the writes of a
                    // partitioned stage go through them).
                    partitions: inner.partitions,
                    $($facet: offers.$facet.then_some(self as &dyn $trait),)*
                }
            }

            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    self.hooks.$name(self.inner.as_ref() $(, $arg)*).await
                }
            )*
        }

        $(
            #[async_trait]
            impl<I: Intercept> $trait for Intercepted<I> {
                $(
                    async fn $fname(&self $(, $farg: $fty)*) -> $fret {
                        self.hooks.$fname(self.inner.as_ref() $(, $farg)*).await
                    }
                )*
                intercept_every_method!(@scope $trait);
            }
        )*

        /// Which facets an [`Intercepted`] store hands out (one flag per facet
        /// of [`Features`], test-only: the hooks decide them).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Offers {
            $(
                #[doc = concat!("[`Features::", stringify!($facet), "`].")]
                pub $facet: bool,
            )*
        }

        impl Offers {
            /// The facets `features` has.
            pub fn of(features: &Features<'_>) -> Offers {
                Offers {
                    $($facet: features.$facet.is_some(),)*
                }
            }
        }
    };
    (@scope AtomicWrites) => {
        fn scope(&self) -> AtomicScope {
            self.inner.features().atomic_scope().unwrap_or(AtomicScope::AnyKeys)
        }
    };
    (@scope $other:ident) => {};
    (@facet_call $store:expr, $facet:ident, $method:ident($($arg:ident),*)) => {
        match $store.features().$facet {
            Some(facet) => facet.$method($($arg),*).await,
            None => Err(Error::unsupported($store.info().scheme, stringify!($method))),
        }
    };
}

intercept_every_method! {
    store {
        fn kinds() -> Result<Vec<String>>;
        fn scan(kind: &str, request: ScanRequest) -> Result<ScanPage>;
        fn get(key: &Key) -> Result<Option<Entity>>;
        fn get_many(keys: &[Key]) -> Result<Vec<Option<Entity>>>;
        fn write_batch(writes: Vec<Write>) -> Result<Vec<WriteOutcome>>;
        fn meta_get(name: &str) -> Result<Option<MetaEntry>>;
        fn meta_cas(name: &str, change: MetaChange<'_>) -> Result<MetaCas>;
        fn meta_list(prefix: &str) -> Result<Vec<String>>;
        fn count(kind: &str, filter: Filter) -> Result<u64>;
        fn version_census(kind: &str) -> Result<BTreeMap<Version, u64>>;
    }
    facets {
        pushdown: Pushdown {
            fn update_in_place(request: PushdownRequest) -> Result<PushdownPage>;
        }
        atomic_writes: AtomicWrites {
            fn write_atomic(guards: Vec<Guard>, writes: Vec<Write>) -> Result<WriteOutcome>;
        }
        atomic_batch_with_meta: AtomicBatchWithMeta {
            /// Only where the inner store has the facet (a batch and its
            /// checkpoint in one transaction); elsewhere the engine's two
            /// calls go through [`Intercept::write_batch`] and
            /// [`Intercept::meta_cas`].
            fn write_batch_with_meta(writes: Vec<Write>, meta: MetaUpdate) -> Result<BatchMetaOutcome>;
        }
        kind_rename: KindRename {
            fn rename_kind(request: RenameKindRequest) -> Result<RenameKindPage>;
        }
        schema_hooks: SchemaHooks {
            fn prepare_schema(changes: &[SchemaChange]) -> Result<()>;
            fn finish_schema(changes: &[SchemaChange]) -> Result<()>;
        }
        projected_scan: ProjectedScan {
            fn scan_projected(kind: &str, request: ScanRequest, properties: &[String]) -> Result<ScanPage>;
        }
        former_name_reads: FormerNameReads {
            fn get_advanced(key: &Key, formers: &[Key], steps: Option<&StepsFrom>) -> Result<Option<Advanced>>;
        }
        server_clock: ServerClock {
            fn now() -> Result<i64>;
        }
        count_estimate: CountEstimate {
            fn estimate_count(kind: &str) -> Result<u64>;
        }
        serial_writes: SerialWrites {
            fn write_serial(writes: Vec<Write>) -> Result<Vec<WriteOutcome>>;
        }
    }
    forwarded {
        pushdown.update_in_place(request: PushdownRequest) -> Result<PushdownPage>;
        kind_rename.rename_kind(request: RenameKindRequest) -> Result<RenameKindPage>;
        atomic_writes.write_atomic(guards: Vec<Guard>, writes: Vec<Write>) -> Result<WriteOutcome>;
        atomic_batch_with_meta.write_batch_with_meta(writes: Vec<Write>, meta: MetaUpdate) -> Result<BatchMetaOutcome>;
        former_name_reads.get_advanced(key: &Key, formers: &[Key], steps: Option<&StepsFrom>) -> Result<Option<Advanced>>;
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
/// without the [`AtomicBatchWithMeta`] facet does: to keep the engine's
/// path for such stores under test on a store that has the facet.
#[derive(Debug, Clone, Copy, Default)]
pub struct TwoCalls;

#[async_trait]
impl Intercept for TwoCalls {
    fn offers(&self, inner: &dyn Store) -> Offers {
        Offers {
            atomic_batch_with_meta: false,
            ..Offers::of(&inner.features())
        }
    }
}

/// Hooks that kill the process in the middle of one batch write: the `n`-th
/// call (from 0) of [`Store::write_batch`] or
/// [`AtomicBatchWithMeta::write_batch_with_meta`].
///
/// On a store that commits a batch with its checkpoint
/// ([`AtomicBatchWithMeta`]) a batch written with its checkpoint
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
            // One transaction, which the crash leaves uncommitted: nothing is written.
            drop((writes, meta));
            return Err(Self::killed());
        }
        inner.write_checked_with_meta(writes, meta).await
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
