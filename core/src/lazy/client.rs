//! The client library: reads and writes that migrate stale entities on access.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::error::{LazyError, Result};
use super::spec::{KindChain, Spec};
use crate::migration::source::Migration;
use crate::migration::state;
use crate::model::{Entity, Key, Map, Version};
use crate::store::{
    AtomicScope, Condition, Filter, Guard, ScanRequest, Store, StoreExt, Write, WriteOutcome,
};

/// How often a client re-reads tern's state by default, to notice an install
/// (the bound on how long a fenced client may keep working).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(1);

/// How many times an operation re-reads an entity that others keep changing.
const MAX_ATTEMPTS: u32 = 64;

/// Puts (each with its deletes) per atomic write of [`LazyClient::put_many`].
const PUTS_PER_ATOMIC_WRITE: usize = 100;

/// Builds a [`LazyClient`]: the kinds and versions the application code was
/// written for, Rust transforms, the refresh interval.
#[derive(Debug)]
pub struct LazyClientBuilder {
    settings: Settings,
}

/// What a [`LazyClientBuilder`] collects and its [`LazyClient`] keeps.
#[derive(Debug)]
struct Settings {
    store: Arc<dyn Store>,
    declared: BTreeMap<String, Version>,
    code: BTreeMap<u32, Migration>,
    refresh: Duration,
    /// See [`LazyClientBuilder::migrate_in_store`].
    in_store: bool,
}

impl LazyClientBuilder {
    /// Declares that the code reads and writes `kind` in the format of `version`.
    #[must_use]
    pub fn declare(mut self, kind: &str, version: Version) -> LazyClientBuilder {
        self.settings.declared.insert(kind.to_owned(), version);
        self
    }

    /// Registers a migration written in Rust, so entities below it can be migrated.
    #[must_use]
    pub fn code(mut self, migration: Migration) -> LazyClientBuilder {
        self.settings.code.insert(migration.id, migration);
        self
    }

    /// How often the client re-reads tern's state to notice an install
    /// (default [`DEFAULT_REFRESH`]; `Duration::ZERO`: before every operation).
    #[must_use]
    pub fn refresh_every(mut self, every: Duration) -> LazyClientBuilder {
        self.settings.refresh = every;
        self
    }

    /// Whether a stale entity may be migrated inside the store in the read's
    /// own call ([`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced): moved from a former kind name, and
    /// stepped, where the store and the steps allow; default `true`).
    /// `false`: every stale entity is read, migrated on the client and
    /// written back with a compare-and-set (for comparisons and tests).
    #[must_use]
    pub fn migrate_in_store(mut self, yes: bool) -> LazyClientBuilder {
        self.settings.in_store = yes;
        self
    }

    /// Loads the installed spec from the store and checks the declaration.
    ///
    /// # Errors
    /// [`LazyError::ClientOutdated`] (an older declaration than the store's),
    /// [`LazyError::ClientAhead`], [`LazyError::KindRenamedAway`], store errors.
    pub async fn connect(self) -> Result<LazyClient> {
        let loaded = state::load(self.settings.store.as_ref()).await?;
        let spec = Spec::from_state(&loaded.doc, &self.settings.code)?;
        for (kind, declared) in &self.settings.declared {
            if let Some(to) = spec.renamed_to(kind) {
                return Err(LazyError::KindRenamedAway {
                    kind: kind.clone(),
                    to: to.to_owned(),
                });
            }
            let current = spec.version(kind);
            if *declared < current {
                return Err(LazyError::ClientOutdated {
                    kind: kind.clone(),
                    declared: *declared,
                    current,
                });
            }
            if *declared > current {
                return Err(LazyError::ClientAhead {
                    kind: kind.clone(),
                    declared: *declared,
                    current,
                });
            }
        }
        let view = View::new(loaded.revision, spec, &self.settings.declared);
        Ok(LazyClient {
            settings: self.settings,
            view: RwLock::new(Arc::new(view)),
            checked: Mutex::new(Instant::now()),
            declined: Mutex::new(BTreeMap::new()),
            counters: Counters::default(),
        })
    }
}

/// What a [`LazyClient`] did since it connected ([`LazyClient::stats`]):
/// where its stale reads were migrated, for operators and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LazyStats {
    /// Reads the store answered after running the pending steps itself
    /// ([`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced); the entity was up to date or migrated there).
    pub reads_in_store: u64,
    /// Stale entities that reads migrated on the client (read, migrate,
    /// compare-and-set).
    pub reads_migrated_on_client: u64,
    /// Reads of a kind with former names (a pending lazy kind rename) that
    /// the store answered in one call, moving the entity to the kind's name
    /// where it lay under a former one ([`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced) with the
    /// former names; with steps too, also counted in `reads_in_store`).
    pub renamed_reads_in_store: u64,
    /// Reads of a kind with a pending migration that tried a plain read
    /// first (recent reads had found up-to-date entities) and found the
    /// entity up to date: no script ran.
    pub plain_reads_up_to_date: u64,
    /// Reads that tried a plain read first and found the entity stale or, for
    /// a kind with former names, not under the kind's name: the store's
    /// migrating read followed (counted in `reads_in_store` or
    /// `renamed_reads_in_store` too).
    pub plain_reads_stale: u64,
}

/// The atomic counters behind [`LazyStats`].
#[derive(Debug, Default)]
struct Counters {
    reads_in_store: std::sync::atomic::AtomicU64,
    reads_migrated_on_client: std::sync::atomic::AtomicU64,
    renamed_reads_in_store: std::sync::atomic::AtomicU64,
    plain_reads_up_to_date: std::sync::atomic::AtomicU64,
    plain_reads_stale: std::sync::atomic::AtomicU64,
}

/// What a store declined to do inside itself for one kind (answered
/// `Unsupported`), so it is not asked again.
#[derive(Debug, Clone, Copy, Default)]
struct Declined {
    /// [`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced) with steps.
    advance: bool,
    /// [`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced) with former names.
    moving: bool,
}

/// The state as this client last read it.
#[derive(Debug)]
struct View {
    revision: Option<u64>,
    spec: Spec,
    /// The chains of the declared kinds that no migration touched, made once
    /// per view rather than per access.
    untouched: BTreeMap<String, Arc<KindChain>>,
}

impl View {
    fn new(revision: Option<u64>, spec: Spec, declared: &BTreeMap<String, Version>) -> View {
        let untouched = declared
            .keys()
            .filter(|kind| !spec.has_chain(kind))
            .map(|kind| (kind.clone(), Arc::new(KindChain::untouched(kind))))
            .collect();
        View {
            revision,
            spec,
            untouched,
        }
    }

    /// The chain of `kind` ([`Spec::chain`], without an allocation for a
    /// declared kind no migration touched).
    fn chain(&self, kind: &str) -> Arc<KindChain> {
        match self.untouched.get(kind) {
            Some(chain) => Arc::clone(chain),
            None => self.spec.chain(kind),
        }
    }
}

/// Where an entity was found.
enum Found {
    /// Under the kind's name.
    Here(Entity),
    /// Under a former name (a kind rename still pending).
    Former(Entity),
}

/// What the store's one-call read ([`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced)) gave the client.
enum InStore {
    /// Not asked, or declined: the client reads and migrates itself.
    Declined,
    /// The entity at the declared version (or `None`: absent under every name).
    Read(Option<Entity>),
    /// The entity under the kind's name, still behind the declared version
    /// (steps the store did not run): the client migrates it.
    Stale(Entity),
}

/// Reads and writes entities at the versions the application declared,
/// migrating stale ones on access, atomically with the access.
///
/// - A stale entity gets every pending step, oldest first, in one write: a
///   compare-and-set on what was read; a raced write is never lost (the loser
///   re-reads).
/// - Writes are stamped with the declared version.
/// - Kind renames: a miss falls back through every former name; a write
///   under the new name removes the stale copies under the old ones in the
///   same atomic write.
/// - An entity newer than declared, an unknown tag, a kind migrated since
///   connecting: typed errors, never data.
///
/// Installs are noticed within [`LazyClientBuilder::refresh_every`]; see the
/// "Lazy migration" chapter of the docs.
#[derive(Debug)]
pub struct LazyClient {
    settings: Settings,
    view: RwLock<Arc<View>>,
    checked: Mutex<Instant>,
    /// Kinds whose reads the store declined to migrate (or move) inside itself.
    declined: Mutex<BTreeMap<String, Declined>>,
    counters: Counters,
}

impl LazyClient {
    /// Starts a client of `store`; declare kinds, then [`LazyClientBuilder::connect`].
    pub fn builder(store: Arc<dyn Store>) -> LazyClientBuilder {
        LazyClientBuilder {
            settings: Settings {
                store,
                declared: BTreeMap::new(),
                code: BTreeMap::new(),
                refresh: DEFAULT_REFRESH,
                in_store: true,
            },
        }
    }

    /// Where this client's stale reads were migrated, since it connected.
    pub fn stats(&self) -> LazyStats {
        use std::sync::atomic::Ordering::Relaxed;
        LazyStats {
            reads_in_store: self.counters.reads_in_store.load(Relaxed),
            reads_migrated_on_client: self.counters.reads_migrated_on_client.load(Relaxed),
            renamed_reads_in_store: self.counters.renamed_reads_in_store.load(Relaxed),
            plain_reads_up_to_date: self.counters.plain_reads_up_to_date.load(Relaxed),
            plain_reads_stale: self.counters.plain_reads_stale.load(Relaxed),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.settings.store
    }

    /// Re-reads tern's state now (otherwise done at most every refresh interval).
    ///
    /// # Errors
    /// Store errors, an unreadable state.
    pub async fn refresh(&self) -> Result<()> {
        let loaded = state::load(self.settings.store.as_ref()).await?;
        let current = self.view().revision;
        if loaded.revision != current {
            let spec = Spec::from_state(&loaded.doc, &self.settings.code)?;
            let view = Arc::new(View::new(loaded.revision, spec, &self.settings.declared));
            if let Ok(mut v) = self.view.write() {
                *v = view;
            }
        }
        if let Ok(mut c) = self.checked.lock() {
            *c = Instant::now();
        }
        Ok(())
    }

    fn view(&self) -> Arc<View> {
        match self.view.read() {
            Ok(v) => Arc::clone(&v),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// The chain of `kind` as this client applies it (its version, its former
    /// names, its pending steps), after re-reading the state when it is due:
    /// for a store's own commands that must run on an up-to-date entity
    /// (`tern_redis::RedisLazy`).
    ///
    /// # Errors
    /// As [`LazyClient::get`] (an undeclared kind, a kind migrated since connecting...).
    pub async fn kind_chain(&self, kind: &str) -> Result<Arc<KindChain>> {
        self.chain(kind).await
    }

    /// The chain of `kind`, after re-reading the state when it is due.
    async fn chain(&self, kind: &str) -> Result<Arc<KindChain>> {
        let due = self
            .checked
            .lock()
            .map(|c| c.elapsed() >= self.settings.refresh)
            .unwrap_or(true);
        if due {
            self.refresh().await?;
        }
        self.chain_now(kind)
    }

    fn chain_now(&self, kind: &str) -> Result<Arc<KindChain>> {
        let view = self.view();
        let spec = &view.spec;
        let current = spec.version(kind);
        match self.settings.declared.get(kind) {
            Some(declared) if *declared != current => Err(LazyError::KindMigratedSinceConnect {
                kind: kind.to_owned(),
                declared: *declared,
                current,
            }),
            Some(_) => Ok(view.chain(kind)),
            None => {
                if let Some(to) = spec.renamed_to(kind) {
                    return Err(LazyError::KindRenamedAway {
                        kind: kind.to_owned(),
                        to: to.to_owned(),
                    });
                }
                if current == 0 {
                    Ok(Arc::new(KindChain::untouched(kind)))
                } else {
                    Err(LazyError::UndeclaredKind {
                        kind: kind.to_owned(),
                        current,
                    })
                }
            }
        }
    }

    /// On an entity newer than the chain: a kind migrated since connecting if
    /// the state says so, else the entity's own error.
    async fn newer(&self, chain: &KindChain, err: LazyError) -> LazyError {
        if let Err(e) = self.refresh().await {
            return e;
        }
        match self.chain_now(&chain.kind) {
            Err(e) => e,
            Ok(_) => err,
        }
    }

    fn key_under(name: &str, key: &Key) -> Key {
        Key {
            kind: name.to_owned(),
            id: key.id.clone(),
        }
    }

    /// Finds the entity under the kind's name, else under a former name.
    ///
    /// An entity only ever moves from a former name to the kind's name (a
    /// client's migration, the sweep's in-place rename), each move atomic. A
    /// move between the read of the kind's name and the read of the former
    /// one would show the entity under neither; so when every name is empty
    /// the kind's name is read once more: absent then, the entity was absent
    /// (or deleted) at that read. Where the store moves an entity in the
    /// read ([`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced) with the former names), a miss under the
    /// kind's name is followed by that one call instead: a moved entity comes
    /// back under the kind's name.
    async fn locate(&self, chain: &KindChain, key: &Key) -> Result<Option<Found>> {
        if let Some(e) = self.settings.store.get(key).await? {
            return Ok(Some(Found::Here(e)));
        }
        if chain.formers.is_empty() {
            return Ok(None);
        }
        // Not under the kind's name (one plain read, as for an up-to-date
        // entity): one call that moves it from a former name, where it can.
        if let Some(steps) = self.in_store_asks(chain, false) {
            match self.read_in_store(chain, key, steps).await? {
                InStore::Declined => {}
                InStore::Read(found) => return Ok(found.map(Found::Here)),
                InStore::Stale(e) => return Ok(Some(Found::Here(e))),
            }
        }
        for name in &chain.formers {
            if let Some(e) = self.settings.store.get(&Self::key_under(name, key)).await? {
                return Ok(Some(Found::Former(e)));
            }
        }
        Ok(self.settings.store.get(key).await?.map(Found::Here))
    }

    fn migrate(chain: &KindChain, e: &Entity) -> Result<Entity> {
        chain.migrate(e)
    }

    fn need_atomic(&self) -> Result<()> {
        if self.settings.store.features().atomic_writes.is_some() {
            Ok(())
        } else {
            Err(LazyError::NoAtomicWrites {
                store: self.settings.store.info().scheme.to_owned(),
            })
        }
    }

    /// Deletes of the copies under every former name but `except`.
    fn former_deletes(chain: &KindChain, key: &Key, except: Option<&str>) -> Vec<Write> {
        chain
            .formers
            .iter()
            .filter(|n| Some(n.as_str()) != except)
            .map(|n| Write::Delete(Self::key_under(n, key)))
            .collect()
    }

    /// Writes `new` in place of `found` (compare-and-set on what was read; a
    /// copy under a former name is removed in the same atomic write).
    async fn replace_found(&self, chain: &KindChain, found: &Found, new: Entity) -> Result<bool> {
        let outcome = match found {
            Found::Here(e) => {
                let w = Write::Replace {
                    expected: e.clone(),
                    new,
                };
                self.settings
                    .store
                    .write_checked(vec![w])
                    .await?
                    .first()
                    .copied()
                    .unwrap_or(WriteOutcome::Conflict)
            }
            Found::Former(old) => {
                self.need_atomic()?;
                let mut writes = vec![Write::Put(new.clone()), Write::Delete(old.key.clone())];
                writes.extend(Self::former_deletes(chain, &new.key, Some(&old.key.kind)));
                self.settings
                    .store
                    .write_atomic_checked(
                        vec![
                            Guard::Absent(new.key.clone()),
                            Guard::Unchanged(old.clone()),
                        ],
                        writes,
                    )
                    .await?
            }
        };
        Ok(outcome == WriteOutcome::Applied)
    }

    fn check_kind(key: &Key, chain: &KindChain) {
        debug_assert_eq!(key.kind, chain.kind);
    }

    /// The entity with this key at the declared version, migrating (and
    /// writing back) a stale one. `None` when absent under every name.
    ///
    /// # Errors
    /// See [`LazyError`].
    pub async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        let chain = self.chain(&key.kind).await?;
        Self::check_kind(key, &chain);
        self.get_with(&chain, key).await
    }

    async fn get_with(&self, chain: &KindChain, key: &Key) -> Result<Option<Entity>> {
        let mut first = match self.read_in_store_first(chain, key).await? {
            InStore::Read(found) => return Ok(found),
            InStore::Stale(e) => Some(Found::Here(e)),
            InStore::Declined => None,
        };
        for _ in 0..MAX_ATTEMPTS {
            let located = match first.take() {
                Some(found) => Some(found),
                None => self.locate(chain, key).await?,
            };
            let found = match located {
                None => return Ok(None),
                // Up to date: returned as read, no copy.
                Some(Found::Here(e)) if e.version == chain.version => return Ok(Some(e)),
                Some(found) => found,
            };
            let stored = match &found {
                Found::Here(e) | Found::Former(e) => e,
            };
            let new = match Self::migrate(chain, stored) {
                Ok(new) => new,
                Err(e @ LazyError::EntityNewer { .. }) => return Err(self.newer(chain, e).await),
                Err(e) => return Err(e),
            };
            if self.replace_found(chain, &found, new.clone()).await? {
                self.counters
                    .reads_migrated_on_client
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(Some(new));
            }
        }
        Err(LazyError::Contention {
            key: key.clone(),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// A read of a kind with a pending migration or former names, through
    /// the store's one-call read ([`LazyClient::read_in_store`]) where it
    /// applies. While recent reads of the kind found up-to-date entities
    /// under its name ([`KindChain::reads`]), a plain read comes first, and
    /// the store's call only when that one found the entity stale or, with
    /// former names, not there: an up-to-date read then costs what it costs
    /// with nothing pending.
    async fn read_in_store_first(&self, chain: &KindChain, key: &Key) -> Result<InStore> {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(steps) = self.in_store_asks(chain, true) else {
            return Ok(InStore::Declined);
        };
        if !chain.reads.stale_first() {
            match self.settings.store.get(key).await? {
                None if chain.formers.is_empty() => return Ok(InStore::Read(None)),
                Some(e) if e.version == chain.version => {
                    chain.reads.saw(false);
                    self.counters.plain_reads_up_to_date.fetch_add(1, Relaxed);
                    return Ok(InStore::Read(Some(e)));
                }
                // Stale under the kind's name, with no steps the store runs:
                // nothing for it to move or step.
                Some(e) if steps.is_none() => {
                    chain.reads.saw(true);
                    self.counters.plain_reads_stale.fetch_add(1, Relaxed);
                    return Ok(InStore::Stale(e));
                }
                _ => {
                    self.counters.plain_reads_stale.fetch_add(1, Relaxed);
                }
            }
        }
        self.read_in_store(chain, key, steps).await
    }

    /// One store call that reads the entity after moving it from a former
    /// name where it lies there and, with `steps`, running the kind's pending
    /// steps on it ([`FormerNameReads::get_advanced`](crate::store::FormerNameReads::get_advanced)): a stale entity read and migrated
    /// in one round trip; `steps` as [`LazyClient::in_store_asks`] gave them.
    /// [`InStore::Declined`] when the store declined (`Unsupported`,
    /// remembered per kind: asked with steps, the steps are not asked again
    /// and the move alone is asked at once; without, the move).
    async fn read_in_store(
        &self,
        chain: &KindChain,
        key: &Key,
        mut steps: Option<&crate::store::StepsFrom>,
    ) -> Result<InStore> {
        use std::sync::atomic::Ordering::Relaxed;
        let formers: Vec<Key> = chain
            .formers
            .iter()
            .map(|n| Self::key_under(n, key))
            .collect();
        let read = loop {
            if steps.is_none() && formers.is_empty() {
                return Ok(InStore::Declined);
            }
            let read = match self.settings.store.features().former_name_reads {
                Some(reads) => reads.get_advanced(key, &formers, steps).await,
                None => Err(crate::store::Error::unsupported(
                    self.settings.store.info().scheme,
                    "get_advanced",
                )),
            };
            match read {
                Ok(read) => break read,
                Err(e) if e.kind() == crate::store::ErrorKind::Unsupported => {
                    tracing::debug!(kind = %chain.kind, reason = %e, "the store declined a read that migrates");
                    if steps.is_some() {
                        // Without the steps: the move alone, if any.
                        self.decline(&chain.kind, |d| d.advance = true);
                        steps = None;
                    } else {
                        self.decline(&chain.kind, |d| d.moving = true);
                        return Ok(InStore::Declined);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        };
        if steps.is_some() {
            self.counters.reads_in_store.fetch_add(1, Relaxed);
        }
        if !formers.is_empty() {
            self.counters.renamed_reads_in_store.fetch_add(1, Relaxed);
        }
        Ok(match read {
            None => InStore::Read(None),
            Some(a) if a.entity.version == chain.version => {
                chain.reads.saw(a.migrated);
                InStore::Read(Some(a.entity))
            }
            Some(a) => {
                chain.reads.saw(true);
                InStore::Stale(a.entity)
            }
        })
    }

    /// What [`LazyClient::read_in_store`] is to ask the store for a read of
    /// `chain`: `Some(steps)`, the move from the kind's former names (if any)
    /// with `steps`, its pending steps (`None` when `steps` is false, none
    /// can run in a store, or the store declined them); `None` when there is
    /// nothing to ask (in-store migration off, neither steps nor former
    /// names, a move the store declined).
    fn in_store_asks<'c>(
        &self,
        chain: &'c KindChain,
        steps: bool,
    ) -> Option<Option<&'c crate::store::StepsFrom>> {
        let declined = self.declined(&chain.kind);
        if !self.settings.in_store || (!chain.formers.is_empty() && declined.moving) {
            return None;
        }
        let steps = if steps && chain.pending && !declined.advance {
            chain.pushdown()
        } else {
            None
        };
        (steps.is_some() || !chain.formers.is_empty()).then_some(steps)
    }

    /// What the store declined for this kind.
    fn declined(&self, kind: &str) -> Declined {
        self.declined
            .lock()
            .ok()
            .and_then(|m| m.get(kind).copied())
            .unwrap_or_default()
    }

    /// Remembers that the store declined something for this kind.
    fn decline(&self, kind: &str, what: impl FnOnce(&mut Declined)) {
        if let Ok(mut m) = self.declined.lock() {
            what(m.entry(kind.to_owned()).or_default());
        }
    }

    /// [`LazyClient::get`] for several keys, each resolved by its own kind.
    ///
    /// # Errors
    /// The first error.
    ///
    /// One [`Store::get_many`] call reads every key (one pipelined round trip
    /// on Redis); an entity found up to date is returned as read, the other
    /// keys (stale, absent, or under a former name) go through
    /// [`LazyClient::get`]'s path together (concurrent calls, which a
    /// multiplexed connection pipelines).
    pub async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Entity>>> {
        let mut chains: Vec<Arc<KindChain>> = Vec::with_capacity(keys.len());
        for key in keys {
            // Keys of one kind (the common case) share its chain.
            let chain = match chains.last() {
                Some(last) if last.kind == key.kind => Arc::clone(last),
                _ => self.chain(&key.kind).await?,
            };
            chains.push(chain);
        }
        let read = self.settings.store.get_many(keys).await?;
        let mut out = Vec::with_capacity(keys.len());
        let mut again = Vec::new();
        for (i, ((key, chain), found)) in keys.iter().zip(&chains).zip(read).enumerate() {
            match found {
                Some(e) if e.version == chain.version => out.push(Some(e)),
                _ => {
                    out.push(None);
                    again.push(async move { (i, self.get_with(chain, key).await) });
                }
            }
        }
        for (i, got) in futures::future::join_all(again).await {
            out[i] = got?;
        }
        Ok(out)
    }

    /// [`LazyClient::put`] for several entities in one store call: a batch of
    /// puts (one pipelined call on Redis; the puts to kinds with a pending
    /// migration in a call of their own, serial where the store has
    /// [`SerialWrites`](crate::store::SerialWrites)) or, where a kind has
    /// former names, one atomic write of every put and the deletes of the
    /// stale copies.
    ///
    /// # Errors
    /// See [`LazyError`]; on an error of a batch (not atomic), some puts may
    /// be written.
    pub async fn put_many(&self, entities: Vec<(Key, Map)>) -> Result<()> {
        // Each put with the deletes of its stale copies under former names.
        let mut groups = Vec::with_capacity(entities.len());
        // Whether each group's kind has a pending migration.
        let mut pending = Vec::with_capacity(entities.len());
        for (key, value) in entities {
            let chain = self.chain(&key.kind).await?;
            let mut group = vec![Write::Put(Self::stamped(&chain, &key, value))];
            group.extend(Self::former_deletes(&chain, &key, None));
            groups.push(group);
            pending.push(chain.pending);
        }
        if groups.iter().all(|g| g.len() == 1) {
            let (serial, plain): (Vec<_>, Vec<_>) = groups
                .into_iter()
                .flatten()
                .zip(pending)
                .partition(|(_, pending)| *pending);
            let store = &self.settings.store;
            for (writes, serial) in [(serial, true), (plain, false)] {
                let writes: Vec<Write> = writes.into_iter().map(|(w, _)| w).collect();
                if writes.is_empty() {
                    continue;
                }
                if serial {
                    store.write_serial_checked(writes).await?;
                } else {
                    store.write_checked(writes).await?;
                }
            }
            return Ok(());
        }
        self.need_atomic()?;
        // One atomic write spans several ids only where the store allows it.
        let per_write = match self.settings.store.features().atomic_scope() {
            Some(AtomicScope::AnyKeys) => PUTS_PER_ATOMIC_WRITE,
            _ => 1,
        };
        for chunk in groups.chunks(per_write) {
            self.write_unguarded(chunk.iter().flatten().cloned().collect())
                .await?;
        }
        Ok(())
    }

    /// An atomic write with no guard (puts and deletes that overwrite
    /// whatever is there): done only when the store answers `Applied`.
    ///
    /// Such a write has no condition that could fail, so a store never
    /// answers it `Conflict` ([`AtomicWrites::write_atomic`]): a store whose
    /// transactions abort on a concurrent write (MongoDB's `WriteConflict`,
    /// frequent while a sweep renames the kind by copy) runs the transaction
    /// again itself and answers an error when it gives up. A `Conflict` all
    /// the same (a store that does not keep that contract) means nothing was
    /// written: it is [`LazyError::Contention`], never reported as done.
    ///
    /// [`AtomicWrites::write_atomic`]: crate::store::AtomicWrites::write_atomic
    ///
    /// # Errors
    /// [`LazyError::Contention`] on a `Conflict`; the store's errors.
    async fn write_unguarded(&self, writes: Vec<Write>) -> Result<()> {
        let Some(key) = writes.first().map(|w| w.key().clone()) else {
            return Ok(());
        };
        match self
            .settings
            .store
            .write_atomic_checked(Vec::new(), writes)
            .await?
        {
            WriteOutcome::Applied => Ok(()),
            WriteOutcome::Conflict => Err(LazyError::Contention { key, attempts: 1 }),
        }
    }

    fn stamped(chain: &KindChain, key: &Key, value: Map) -> Entity {
        Entity {
            key: key.clone(),
            version: chain.version,
            value,
        }
    }

    /// Creates or replaces the entity, stamped with the declared version;
    /// stale copies under former names are removed in the same atomic write.
    ///
    /// # Errors
    /// See [`LazyError`].
    pub async fn put(&self, key: &Key, value: Map) -> Result<()> {
        let chain = self.chain(&key.kind).await?;
        let new = Self::stamped(&chain, key, value);
        self.write_dropping_formers(&chain, key, Write::Put(new))
            .await
    }

    /// `write` (to `key`), and the deletes of `key`'s copies under the
    /// kind's former names in the same atomic write (a single write where
    /// the kind has none: serial while a migration of the kind is pending,
    /// so that no read migrating the entity overwrites it, see
    /// [`SerialWrites`](crate::store::SerialWrites)).
    async fn write_dropping_formers(
        &self,
        chain: &KindChain,
        key: &Key,
        write: Write,
    ) -> Result<()> {
        let store = &self.settings.store;
        if chain.formers.is_empty() {
            if chain.pending {
                store.write_serial_checked(vec![write]).await?;
            } else {
                store.write_checked(vec![write]).await?;
            }
            return Ok(());
        }
        self.need_atomic()?;
        let mut writes = vec![write];
        writes.extend(Self::former_deletes(chain, key, None));
        self.write_unguarded(writes).await
    }

    /// Creates the entity only if none exists under its name or a former one.
    /// `true` when created.
    ///
    /// # Errors
    /// See [`LazyError`].
    pub async fn insert(&self, key: &Key, value: Map) -> Result<bool> {
        let chain = self.chain(&key.kind).await?;
        let new = Self::stamped(&chain, key, value);
        let outcome = if chain.formers.is_empty() {
            self.settings
                .store
                .write_checked(vec![Write::Insert(new)])
                .await?
                .first()
                .copied()
                .unwrap_or(WriteOutcome::Conflict)
        } else {
            self.need_atomic()?;
            let mut guards = vec![Guard::Absent(key.clone())];
            guards.extend(
                chain
                    .formers
                    .iter()
                    .map(|n| Guard::Absent(Self::key_under(n, key))),
            );
            self.settings
                .store
                .write_atomic_checked(guards, vec![Write::Put(new)])
                .await?
        };
        Ok(outcome == WriteOutcome::Applied)
    }

    /// Replaces the entity only if it exists (under its name or a former one).
    /// `true` when replaced.
    ///
    /// # Errors
    /// See [`LazyError`].
    pub async fn update(&self, key: &Key, value: Map) -> Result<bool> {
        Ok(self
            .modify(key, |v| {
                v.clone_from(&value);
            })
            .await?
            .is_some())
    }

    /// Read-modify-write: reads the entity (migrated), lets `change` edit its
    /// value, and writes it back with a compare-and-set on what was read,
    /// re-reading and re-applying `change` when another writer came first.
    /// `None` when the entity does not exist.
    ///
    /// # Errors
    /// See [`LazyError`].
    pub async fn modify(
        &self,
        key: &Key,
        mut change: impl FnMut(&mut Map),
    ) -> Result<Option<Entity>> {
        let chain = self.chain(&key.kind).await?;
        for _ in 0..MAX_ATTEMPTS {
            let Some(found) = self.locate(&chain, key).await? else {
                return Ok(None);
            };
            let stored = match &found {
                Found::Here(e) | Found::Former(e) => e,
            };
            let mut new = match Self::migrate(&chain, stored) {
                Ok(new) => new,
                Err(e @ LazyError::EntityNewer { .. }) => return Err(self.newer(&chain, e).await),
                Err(e) => return Err(e),
            };
            change(&mut new.value);
            if self.replace_found(&chain, &found, new.clone()).await? {
                return Ok(Some(new));
            }
        }
        Err(LazyError::Contention {
            key: key.clone(),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Deletes the entity under its name and every former one, atomically.
    ///
    /// # Errors
    /// See [`LazyError`].
    pub async fn delete(&self, key: &Key) -> Result<()> {
        let chain = self.chain(&key.kind).await?;
        self.write_dropping_formers(&chain, key, Write::Delete(key.clone()))
            .await
    }

    /// Every entity of `kind` whose migrated value meets all `conditions`,
    /// at the declared version, ordered by key. Entities under former names
    /// are included (mapped to the kind's name, an id under the new name
    /// winning); values come back migrated, but nothing is written: a listing
    /// never renames or rewrites as a side effect.
    ///
    /// # Errors
    /// See [`LazyError`].
    pub async fn scan(&self, kind: &str, conditions: &[Condition]) -> Result<Vec<Entity>> {
        let chain = self.chain(kind).await?;
        let filter = Filter {
            version: crate::store::VersionFilter::Any,
            conditions: conditions.to_vec(),
        };
        if !chain.pending {
            // Nothing stale: the store may filter.
            let mut out = Vec::new();
            for e in scan_all(self.settings.store.as_ref(), kind, filter.clone()).await? {
                let e = self.checked_entity(&chain, &e).await?;
                if filter.matches(&e) {
                    out.push(e);
                }
            }
            out.sort_by(|a, b| a.key.cmp(&b.key));
            out.dedup_by(|a, b| a.key == b.key);
            return Ok(out);
        }
        // Former names first, the kind's name last, its entities winning: an
        // entity only moves from a former name to the kind's name, so one that
        // moves while the scans run is seen under one name or the other.
        let mut by_id: BTreeMap<Key, Entity> = BTreeMap::new();
        for name in chain.formers.iter().chain(std::iter::once(&chain.kind)) {
            let here = *name == chain.kind;
            for e in scan_all(self.settings.store.as_ref(), name, Filter::all()).await? {
                let e = self.checked_entity(&chain, &e).await?;
                if here {
                    by_id.insert(e.key.clone(), e);
                } else {
                    by_id.entry(e.key.clone()).or_insert(e);
                }
            }
        }
        Ok(by_id.into_values().filter(|e| filter.matches(e)).collect())
    }

    async fn checked_entity(&self, chain: &KindChain, e: &Entity) -> Result<Entity> {
        match Self::migrate(chain, e) {
            Ok(e) => Ok(e),
            Err(err @ LazyError::EntityNewer { .. }) => Err(self.newer(chain, err).await),
            Err(err) => Err(err),
        }
    }
}

/// Every entity of `kind` that passes `filter` (a repeated key once).
pub(crate) async fn scan_all(store: &dyn Store, kind: &str, filter: Filter) -> Result<Vec<Entity>> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .scan(
                kind,
                ScanRequest {
                    filter: filter.clone(),
                    cursor,
                    limit: 1000,
                },
            )
            .await?;
        out.extend(page.entities);
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    if !store.features().scan_ordered {
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out.dedup_by(|a, b| a.key == b.key);
    }
    Ok(out)
}
