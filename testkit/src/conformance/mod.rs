//! The store conformance battery: one set of checks of the [`Store`] contract
//! (see the [store module docs](tern_core::store)), run against every store.
//!
//! Each check is an async function that takes the store under test, chooses
//! what to assert from [`Store::features`] (the checks of a facet run where the
//! store has it; one without [`Features::scan_ordered`] may repeat entities,
//! ...), and returns a
//! [`Failure`] describing the first broken promise. The checks share one store:
//! each works in kinds and metadata names of its own, made unique per run by a
//! [`Namespace`], tolerates other data in the store, and deletes what it wrote
//! when it passes. [`run_all`] runs every check and prints one line per check.
//!
//! It lives in `tern-testkit`, so that tern-core's tests and every adapter's
//! tests run the very same battery:
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn tern_core::store::Store>) {
//! // In an adapter's test, inside a multi-threaded tokio runtime:
//! tern_testkit::conformance::run_all(store).await.unwrap();
//! # }
//! ```
//!
//! [`Features::scan_ordered`]: tern_core::store::Features::scan_ordered

mod batch_meta;
mod entities;
mod meta;
mod partitions;
mod pushdown;
mod rename;
mod scan;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tern_core::model::{Entity, Key, Map, Value, Version};
use tern_core::store::{Filter, Store, Write};

pub use batch_meta::batch_with_meta;
pub use entities::{clock, concurrent_replace, round_trip, write_batch_outcomes};
pub use meta::{metadata_cas, metadata_list, metadata_not_kinds};
pub use partitions::partitions;
pub use pushdown::{get_advanced, get_advanced_moving, release2_steps, update_in_place};
pub use rename::rename_kind;
pub use scan::{
    count_and_census, kinds_isolated, scan_filter, scan_pagination, scan_projected_pages,
    scan_resume, scan_skips_deleted,
};

/// A broken promise of the contract, found by a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    message: String,
}

impl Failure {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl From<tern_core::store::Error> for Failure {
    /// A store error where the check expected success: the error and its causes.
    fn from(e: tern_core::store::Error) -> Failure {
        let mut message = format!("unexpected store error: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(&format!(": {s}"));
            source = s.source();
        }
        Failure::new(message)
    }
}

/// What a check returns.
pub type CheckResult = Result<(), Failure>;

/// The checks of [`run_all`] that failed, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failures {
    /// The store, as [`Store::info`] names it.
    pub store: String,
    /// The failed checks and their failures, in the order they ran.
    pub failures: Vec<(&'static str, Failure)>,
}

impl fmt::Display for Failures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} conformance check(s) failed for {}:",
            self.failures.len(),
            self.store
        )?;
        for (name, failure) in &self.failures {
            write!(f, "\n  {name}: {failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failures {}

/// Fails the check with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::conformance::Failure::new(format!($($fmt)+)));
        }
    };
}

/// Fails the check unless `left == right`, showing both.
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($fmt:tt)+) => {
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    return Err($crate::conformance::Failure::new(format!(
                        "{}\n    got:      {:?}\n    expected: {:?}",
                        format!($($fmt)+),
                        left,
                        right
                    )));
                }
            }
        }
    };
}

pub(crate) use {ensure, ensure_eq};

/// Names of kinds and metadata documents unique to one run of one check, so
/// that checks can share a store with each other and with other data.
#[derive(Debug, Clone)]
pub struct Namespace {
    token: String,
}

impl Namespace {
    /// A fresh, random namespace.
    pub fn new() -> Namespace {
        let mut token = uuid::Uuid::new_v4().simple().to_string();
        token.truncate(10);
        Namespace { token }
    }

    /// A kind name: a letter, then letters, digits and `_` (valid as a
    /// MongoDB collection, a Redis prefix and a Cassandra table).
    pub fn kind(&self, name: &str) -> String {
        format!("t{}_{name}", self.token)
    }

    /// A metadata name.
    pub fn meta(&self, name: &str) -> String {
        format!("tern_conformance/{}/{name}", self.token)
    }
}

impl Default for Namespace {
    fn default() -> Namespace {
        Namespace::new()
    }
}

/// Runs each check `check(arg)` in turn with [`run`], under the check's name.
macro_rules! run_checks {
    ($store:expr, $failures:expr; $($check:ident($arg:expr)),+ $(,)?) => {
        $(run($store, stringify!($check), $check($arg), $failures).await;)+
    };
}

/// Runs every check against `store`, printing one line per check, and
/// returns the failures, if any.
///
/// Needs a tokio runtime ([`concurrent_replace`] spawns tasks); a
/// multi-threaded one makes the concurrency check meaningful.
///
/// # Errors
/// [`Failures`] listing each failed check.
pub async fn run_all(store: Arc<dyn Store>) -> Result<(), Failures> {
    let name = store.info().to_string();
    let mut failures = Vec::new();
    let s: &dyn Store = &*store;
    run_checks! { &name, &mut failures;
        round_trip(s),
        write_batch_outcomes(s),
        scan_pagination(s),
        scan_resume(s),
        scan_filter(s),
        scan_skips_deleted(s),
        scan_projected_pages(s),
        kinds_isolated(s),
        count_and_census(s),
        metadata_cas(s),
        metadata_list(s),
        batch_with_meta(s),
        metadata_not_kinds(s),
        update_in_place(s),
        get_advanced(s),
        get_advanced_moving(s),
        rename_kind(s),
        partitions(s),
        concurrent_replace(Arc::clone(&store)),
        clock(s),
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failures {
            store: name,
            failures,
        })
    }
}

async fn run(
    store: &str,
    check: &'static str,
    fut: impl Future<Output = CheckResult>,
    failures: &mut Vec<(&'static str, Failure)>,
) {
    let started = Instant::now();
    let result = fut.await;
    let ms = started.elapsed().as_millis();
    match result {
        Ok(()) => println!("conformance {store}: {check} ... ok ({ms} ms)"),
        Err(failure) => {
            println!("conformance {store}: {check} ... FAILED ({ms} ms)\n    {failure}");
            failures.push((check, failure));
        }
    }
}

// ---- helpers shared by the checks ----

/// An entity of `kind` with `id`, `version` and the given top-level properties.
pub(crate) fn entity(
    kind: &str,
    id: impl Into<Value>,
    version: Version,
    props: &[(&str, Value)],
) -> Entity {
    Entity {
        key: Key {
            kind: kind.to_owned(),
            id: id.into(),
        },
        version,
        value: props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    }
}

/// A map value from (name, value) pairs.
pub(crate) fn map(props: &[(&str, Value)]) -> Value {
    Value::Map(
        props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<Map>(),
    )
}

/// Writes `entities` with unconditional puts, in batches.
pub(crate) async fn put_all(store: &dyn Store, entities: &[Entity]) -> CheckResult {
    for chunk in entities.chunks(100) {
        let outcomes = store
            .write_batch(chunk.iter().cloned().map(Write::Put).collect())
            .await?;
        ensure_eq!(
            outcomes.len(),
            chunk.len(),
            "write_batch must give one outcome per write"
        );
        ensure!(
            outcomes
                .iter()
                .all(|o| *o == tern_core::store::WriteOutcome::Applied),
            "a put was not applied: {outcomes:?}"
        );
    }
    Ok(())
}

/// Scans a whole kind with `filter` in pages of `limit`, checking the page
/// promises on the way, and returns what it saw by key (the last copy wins).
///
/// # Errors
/// A [`Failure`] naming the first broken promise, or the store's error.
///
/// With [`Features::scan_ordered`](tern_core::store::Features::scan_ordered), also
/// checks that ids strictly increase across the whole scan.
pub async fn scan_all(
    store: &dyn Store,
    kind: &str,
    filter: &Filter,
    limit: usize,
) -> Result<BTreeMap<Key, Entity>, Failure> {
    let ordered = store.features().scan_ordered;
    let mut seen = BTreeMap::new();
    let mut last_id: Option<Value> = None;
    let mut cursor = None;
    for _ in 0..100_000 {
        let page = crate::pages::page_of(store, kind, filter, cursor, limit).await?;
        for e in page.entities {
            ensure_eq!(
                e.key.kind,
                kind,
                "scan of kind {kind:?} returned an entity of another kind"
            );
            ensure!(
                filter.matches(&e),
                "scan returned {} which does not pass the filter {filter:?}",
                e.key
            );
            if ordered {
                if let Some(prev) = &last_id {
                    ensure!(
                        *prev < e.key.id,
                        "an ordered scan returned id {} after id {prev} (limit {limit}, filter {filter:?})",
                        e.key.id
                    );
                }
                last_id = Some(e.key.id.clone());
            }
            seen.insert(e.key.clone(), e);
        }
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(seen),
        }
    }
    Err(Failure::new(format!(
        "a scan of {kind:?} with limit {limit} did not end after 100000 pages"
    )))
}

/// Deletes every entity of `kinds`.
pub(crate) async fn clear_kinds(store: &dyn Store, kinds: &[&str]) -> CheckResult {
    for kind in kinds {
        let all = scan_all(store, kind, &Filter::all(), 500).await?;
        let keys: Vec<Write> = all.into_keys().map(Write::Delete).collect();
        for chunk in keys.chunks(100) {
            store.write_batch(chunk.to_vec()).await?;
        }
    }
    Ok(())
}

/// The entities by key.
pub(crate) fn by_key(entities: &[Entity]) -> BTreeMap<Key, Entity> {
    entities
        .iter()
        .map(|e| (e.key.clone(), e.clone()))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! The battery itself: a correct store passes, and each deliberately broken
    //! store fails the check that guards the promise it breaks.

    use async_trait::async_trait;

    use super::*;
    use crate::intercept::Forward as _;
    use crate::intercept::{Intercept, Intercepted};
    use tern_core::store::memory::MemoryStore;
    use tern_core::store::{
        BatchMetaOutcome, MetaUpdate, PushdownPage, PushdownRequest, RenameKindPage,
        RenameKindRequest, Result, ScanPage, ScanRequest, StoreInfo, WriteOutcome,
    };

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Bug {
        /// Claims `cas_compares_value` but compares only the version.
        CasIgnoresValue,
        /// Returns entities that do not pass the conditions.
        ScanIgnoresConditions,
        /// Ends every scan after its first page.
        ScanStopsEarly,
        /// Turns every NaN into the canonical NaN.
        CanonicalNan,
        /// Claims `update_pushdown` but has none.
        NoPushdown,
        /// Lists metadata names unsorted.
        MetaListUnsorted,
        /// Renames onto an existing entity, overwriting it.
        RenameOverwrites,
        /// Says a batch and its metadata are written atomically, but makes two calls.
        BatchMetaNotAtomic,
    }

    #[derive(Debug)]
    struct Mutant {
        bug: Bug,
    }

    fn canonical_nan(v: &mut Value) {
        match v {
            Value::Float(f) if f.is_nan() => *f = f64::NAN,
            Value::Array(items) => items.iter_mut().for_each(canonical_nan),
            Value::Map(m) => m.values_mut().for_each(canonical_nan),
            _ => {}
        }
    }

    #[async_trait]
    impl Intercept for Mutant {
        fn info(&self, _inner: &dyn Store) -> StoreInfo {
            StoreInfo {
                scheme: "memory",
                location: format!("mutant:{:?}", self.bug),
            }
        }
        async fn scan(
            &self,
            inner: &dyn Store,
            kind: &str,
            mut request: ScanRequest,
        ) -> Result<ScanPage> {
            if self.bug == Bug::ScanIgnoresConditions {
                request.filter.conditions.clear();
            }
            let mut page = inner.scan(kind, request).await?;
            if self.bug == Bug::ScanStopsEarly {
                page.cursor = None;
            }
            Ok(page)
        }
        async fn write_batch(
            &self,
            inner: &dyn Store,
            writes: Vec<Write>,
        ) -> Result<Vec<WriteOutcome>> {
            let mut changed = Vec::with_capacity(writes.len());
            for w in writes {
                changed.push(match (self.bug, w) {
                    (Bug::CanonicalNan, Write::Put(mut e)) => {
                        e.value.values_mut().for_each(canonical_nan);
                        Write::Put(e)
                    }
                    (Bug::CasIgnoresValue, Write::Replace { expected, new }) => {
                        match inner.get(&expected.key).await? {
                            Some(s) if s.version == expected.version => {
                                Write::Replace { expected: s, new }
                            }
                            _ => Write::Replace { expected, new },
                        }
                    }
                    (_, w) => w,
                });
            }
            inner.write_batch(changed).await
        }
        async fn write_batch_with_meta(
            &self,
            inner: &dyn Store,
            writes: Vec<Write>,
            meta: MetaUpdate,
        ) -> Result<BatchMetaOutcome> {
            if self.bug == Bug::BatchMetaNotAtomic {
                return tern_core::store::write_then_meta_cas(inner, writes, meta).await;
            }
            inner.write_batch_with_meta(writes, meta).await
        }
        async fn meta_list(&self, inner: &dyn Store, prefix: &str) -> Result<Vec<String>> {
            let mut names = inner.meta_list(prefix).await?;
            if self.bug == Bug::MetaListUnsorted {
                names.reverse();
            }
            Ok(names)
        }
        async fn update_in_place(
            &self,
            inner: &dyn Store,
            request: PushdownRequest,
        ) -> Result<PushdownPage> {
            if self.bug == Bug::NoPushdown {
                return Err(tern_core::store::Error::unsupported(
                    "mutant",
                    "update_in_place",
                ));
            }
            inner.update_in_place(request).await
        }
        async fn rename_kind(
            &self,
            inner: &dyn Store,
            request: RenameKindRequest,
        ) -> Result<RenameKindPage> {
            if self.bug == Bug::RenameOverwrites && request.limit > 0 {
                // Delete the namesakes first, so every entity moves.
                let page = inner
                    .scan(
                        &request.from,
                        ScanRequest {
                            filter: Filter::all(),
                            cursor: request.cursor.clone(),
                            limit: request.limit,
                        },
                    )
                    .await?;
                let deletes = page
                    .entities
                    .into_iter()
                    .map(|e| {
                        Write::Delete(Key {
                            kind: request.to.clone(),
                            id: e.key.id,
                        })
                    })
                    .collect();
                inner.write_batch(deletes).await?;
            }
            inner.rename_kind(request).await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_broken_store_fails_its_check() {
        let cases = [
            (Bug::CasIgnoresValue, "write_batch_outcomes"),
            (Bug::ScanIgnoresConditions, "scan_filter"),
            (Bug::ScanStopsEarly, "scan_pagination"),
            (Bug::CanonicalNan, "round_trip"),
            (Bug::NoPushdown, "update_in_place"),
            (Bug::MetaListUnsorted, "metadata_list"),
            (Bug::RenameOverwrites, "rename_kind"),
            (Bug::BatchMetaNotAtomic, "batch_with_meta"),
        ];
        for (bug, check) in cases {
            let store = Arc::new(Intercepted::new(
                Arc::new(MemoryStore::new()),
                Mutant { bug },
            ));
            let failures = run_all(store).await.expect_err("a broken store passed");
            let failed: Vec<&str> = failures.failures.iter().map(|(name, _)| *name).collect();
            assert!(
                failed.contains(&check),
                "{bug:?} should fail {check}, failed {failed:?}"
            );
        }
    }
}
