//! Completing lazy migrations: the sweep (`tern sweep`), the hybrid of
//! \[KV\] and \[SE\]. While clients keep working, the entities still stale are
//! migrated in checkpointed, rate-limited batches. When the census finds no
//! entity below a lazy migration, it is recorded complete.
//!
//! The first pass runs inside the store where the store and the steps allow:
//! entities under a former kind name are re-keyed in place
//! ([`KindRename::rename_kind`](crate::store::KindRename::rename_kind), each entity atomically, an id the new name holds
//! already left alone), then the kind's pending steps run server-side
//! ([`Pushdown::update_in_place`](crate::store::Pushdown::update_in_place), each entity advanced atomically from the
//! version it has, so an entity a client migrated or wrote meanwhile is not
//! touched). Everything else, and whatever a census still finds, takes the
//! client path: read, migrate as the lazy client does, compare-and-set on what
//! was read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::client::LazyClient;
use super::error::Result;
use super::spec::{KindChain, Spec, pending_lazy};

mod parts;
use crate::migration::lease::{Lease, LeaseOptions};
use crate::migration::pace::RateLimiter;
use crate::migration::progress::CancelFlag;
use crate::migration::source::Migration;
use crate::migration::state::SweepState;
use crate::model::{Entity, Key};
use crate::store::{
    ErrorKind, Filter, Guard, PushdownRequest, RenameKindRequest, ScanRequest, Store, StoreExt,
    VersionFilter, Write, WriteOutcome,
};
pub use parts::{JoinReport, join};

/// The most entities one call of the in-store path takes. A server-side call
/// may hold the server for its whole length (Redis runs a script alone), while
/// the applications keep working: at 1,000 entities a call the application's
/// throughput fell to ~1,000 operations/s during the sweep on the timeline
/// bench (docs/benchmarks.md); at 100 a call lasts a millisecond or two.
pub const IN_STORE_LIMIT: usize = 100;

/// How to sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Only these kinds (all kinds with a pending lazy migration when empty).
    pub kinds: Vec<String>,
    /// Entities per batch (and per checkpoint); the in-store path takes a batch
    /// in calls of at most `call_size`.
    pub batch_size: usize,
    /// The most entities one call of the in-store path takes (default
    /// [`IN_STORE_LIMIT`]): a server-side call runs alone on Redis, so
    /// applications wait for it. Larger calls sweep faster while they slow
    /// the applications more.
    pub call_size: usize,
    /// At most this many entities per second, if set (a token bucket with a
    /// burst of one second's worth: [`RateLimiter`]).
    pub max_rate: Option<f64>,
    /// Set by Ctrl-C or SIGTERM: the sweep stops after the current batch's
    /// checkpoint with [`LazyError::Interrupted`](super::LazyError::Interrupted).
    pub cancel: CancelFlag,
    /// How many census passes before giving up on entities that keep appearing.
    pub passes: u32,
    /// Whether the first pass may run inside the store: entities under a former
    /// name re-keyed in place ([`KindRename::rename_kind`](crate::store::KindRename::rename_kind)) and the pending steps
    /// run server-side ([`Pushdown::update_in_place`](crate::store::Pushdown::update_in_place)) where the store and the
    /// steps allow. Off: every entity goes through the client path (read,
    /// migrate, compare-and-set).
    pub pushdown: bool,
    /// Workers sweeping one name's partitions at once in this process
    /// (`tern sweep --workers N`; 1 with no `partitions`: one unpartitioned
    /// scan, as before). See [`parts`].
    pub workers: usize,
    /// How many partitions a name is split into (default 4 per worker; the
    /// store may make fewer).
    pub partitions: Option<usize>,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            kinds: Vec::new(),
            batch_size: 1000,
            call_size: IN_STORE_LIMIT,
            max_rate: None,
            cancel: CancelFlag::new(),
            passes: 3,
            pushdown: true,
            workers: 1,
            partitions: None,
        }
    }
}

impl SweepOptions {
    /// Entities per call of the in-store path: the batch size, at most
    /// [`SweepOptions::call_size`] (a batch then takes several calls and one
    /// checkpoint).
    fn in_store_limit(&self) -> usize {
        self.batch_size.min(self.call_size).max(1)
    }
}

/// After a batch of `processed` entities and its checkpoint: stops if the
/// run was cancelled (the checkpoint holds), else waits for the rate limit.
async fn after_batch(
    options: &SweepOptions,
    pace: Option<&RateLimiter>,
    processed: u64,
) -> Result<()> {
    if options.cancel.is_cancelled() {
        return Err(super::LazyError::Interrupted);
    }
    crate::migration::pace::pace(pace, processed, &options.cancel).await;
    if options.cancel.is_cancelled() {
        return Err(super::LazyError::Interrupted);
    }
    Ok(())
}

/// What a sweep did, per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Per kind: entities brought up to date while the sweep ran, over all
    /// its runs when it resumed an interrupted one: the census of stale
    /// entities when the kind's sweep started less the census at its end, so
    /// each entity counts once (one re-keyed from a former name and then
    /// advanced too). It includes an entity a lazy client migrated on its own
    /// meanwhile, and leaves out one that old code wrote stale meanwhile and
    /// the sweep migrated.
    pub migrated: BTreeMap<String, u64>,
    /// Per kind: entities still stale after the last census (0 when clean).
    pub stale: BTreeMap<String, u64>,
    /// The lazy migrations recorded complete by this sweep.
    pub completed: Vec<u32>,
    /// Whether it resumed an interrupted sweep.
    pub resumed: bool,
}

impl SweepReport {
    /// Entities still stale in the kinds swept.
    pub fn remaining(&self) -> u64 {
        self.stale.values().sum()
    }
}

/// Takes the lease and sweeps (see [`sweep_under`]).
///
/// # Errors
/// The lease is held by another runner; store and migration errors.
pub async fn sweep(
    store: Arc<dyn Store>,
    lease: &LeaseOptions,
    code: &BTreeMap<u32, Migration>,
    options: &SweepOptions,
) -> Result<SweepReport> {
    let lease = Lease::acquire(Arc::clone(&store), lease).await?;
    let result = sweep_under(&store, &lease, code, options)
        .instrument(tracing::info_span!("sweep"))
        .await;
    if let Err(e) = lease.release().await {
        tracing::warn!(error = %e, "could not release the lease; it expires by itself");
    }
    result
}

/// Sweeps the kinds with a pending lazy migration under a lease already held,
/// resuming from the checkpoint of an interrupted sweep.
///
/// # Errors
/// Lease lost, store and migration errors.
pub async fn sweep_under(
    shared: &Arc<dyn Store>,
    lease: &Lease,
    code: &BTreeMap<u32, Migration>,
    options: &SweepOptions,
) -> Result<SweepReport> {
    let store = shared.as_ref();
    let doc = lease.snapshot().await;
    let spec = Spec::from_state(&doc, code)?;
    let mut report = SweepReport::default();
    let chains = chains_to_sweep(&spec, options);
    let mut resume = doc.sweep.clone();
    report.resumed = resume.is_some();
    if let Some(r) = &resume
        && !chains.iter().any(|c| c.kind == r.kind)
    {
        resume = None;
    }
    let mut sweeper = Sweeper {
        store,
        shared,
        client: sweep_client(shared, &spec, code).await?,
        lease,
        options,
        pace: RateLimiter::new(options.max_rate),
        stale_at_start: None,
    };
    let mut clean = BTreeSet::new();
    for chain in &chains {
        if let Some(r) = &resume
            && r.kind != chain.kind
        {
            continue;
        }
        let (migrated, stale) = sweeper.kind(chain, &mut resume).await?;
        report.migrated.insert(chain.kind.clone(), migrated);
        report.stale.insert(chain.kind.clone(), stale);
        if stale == 0 {
            clean.insert(chain.kind.clone());
        }
    }
    clean.extend(clean_elsewhere(store, &doc, &spec, &chains, &clean).await?);
    report.completed = record_completed(store, lease, &doc, &clean).await?;
    Ok(report)
}

/// The kinds not swept now (`tern sweep post` after `tern sweep user`) whose
/// census finds nothing stale, among those sharing a pending lazy migration
/// with a kind found `clean`: a migration is complete once every one of its
/// kinds is, however many sweeps that took.
async fn clean_elsewhere(
    store: &dyn Store,
    doc: &crate::migration::state::StateDoc,
    spec: &Spec,
    swept: &[KindChain],
    clean: &BTreeSet<String>,
) -> Result<BTreeSet<String>> {
    let mut wanted = BTreeSet::new();
    for (_, kinds) in pending_lazy(doc) {
        if kinds.iter().any(|k| clean.contains(k)) {
            wanted.extend(
                kinds
                    .into_iter()
                    .filter(|k| !clean.contains(k) && !swept.iter().any(|c| &c.kind == k)),
            );
        }
    }
    let mut found = BTreeSet::new();
    for kind in wanted {
        let chain = spec.chain(&kind);
        if !chain.pending || census(store, &chain).await? == 0 {
            found.insert(kind);
        }
    }
    Ok(found)
}

/// A client that declares every kind at its logical version, for the
/// per-entity path (kind renames, conflicts): the same code applications run.
async fn sweep_client(
    shared: &Arc<dyn Store>,
    spec: &Spec,
    code: &BTreeMap<u32, Migration>,
) -> Result<LazyClient> {
    let mut builder =
        LazyClient::builder(Arc::clone(shared)).refresh_every(Duration::from_secs(3600));
    for (k, v) in &spec.kinds {
        builder = builder.declare(k, *v);
    }
    for m in code.values() {
        builder = builder.code(m.clone());
    }
    builder.connect().await
}

/// The kinds with a pending lazy migration that `options` selects, by name.
fn chains_to_sweep(spec: &Spec, options: &SweepOptions) -> Vec<KindChain> {
    let mut chains: Vec<KindChain> = spec
        .pending_kinds()
        .into_iter()
        .filter(|c| options.kinds.is_empty() || options.kinds.contains(&c.kind))
        .cloned()
        .collect();
    chains.sort_by(|a, b| a.kind.cmp(&b.kind));
    chains
}

/// Records complete the pending lazy migrations whose every kind is now `clean`,
/// and clears the sweep's checkpoint. Returns the migrations recorded complete.
async fn record_completed(
    store: &dyn Store,
    lease: &Lease,
    doc: &crate::migration::state::StateDoc,
    clean: &BTreeSet<String>,
) -> Result<Vec<u32>> {
    let now = store.now().await?;
    let done: Vec<u32> = pending_lazy(doc)
        .filter(|(_, kinds)| kinds.iter().all(|k| clean.contains(k)))
        .map(|(migration, _)| migration)
        .collect();
    let completed = done.clone();
    lease
        .update(move |doc| {
            doc.sweep = None;
            for r in doc.lazy.iter_mut() {
                if done.contains(&r.migration) {
                    r.completed_at = Some(now);
                }
            }
        })
        .await?;
    Ok(completed)
}

/// A sweep in progress: what it works with, and how many entities it has read.
struct Sweeper<'a> {
    store: &'a dyn Store,
    /// The same store, for the workers of a partitioned sweep.
    shared: &'a Arc<dyn Store>,
    client: LazyClient,
    lease: &'a Lease,
    options: &'a SweepOptions,
    /// `--max-rate`, if set.
    pace: Option<RateLimiter>,
    /// The census of the kind being swept when its sweep started (see
    /// [`SweepState::stale_at_start`]).
    stale_at_start: Option<u64>,
}

impl Sweeper<'_> {
    /// Sweeps one kind, under its former names and then its name, until a
    /// census finds nothing stale (at most `passes` times), continuing from
    /// `resume` (taken once used). Returns the entities migrated and those
    /// still stale.
    ///
    /// The first pass runs inside the store where it can
    /// ([`SweepOptions::pushdown`]); later passes take the client path for
    /// whatever the census still finds (entities below the server-side steps,
    /// keys the store skipped).
    async fn kind(
        &mut self,
        chain: &KindChain,
        resume: &mut Option<SweepState>,
    ) -> Result<(u64, u64)> {
        let mut migrated = resume.as_ref().map_or(0, |r| r.migrated);
        // The count reported is the census before less the census after (one
        // count per entity, across a resume): taken at the start, kept in
        // every checkpoint. A checkpoint of an older tern has none: its own
        // count goes on.
        self.stale_at_start = match resume.as_ref() {
            Some(r) => r.stale_at_start,
            None => Some(census(self.store, chain).await?),
        };
        let names: Vec<String> = chain
            .formers
            .iter()
            .cloned()
            .chain(std::iter::once(chain.kind.clone()))
            .filter(|n| may_hold_stale(chain, n))
            .collect();
        // A checkpoint on a name that holds nothing stale (an earlier
        // version's sweep of a pure rename's new name): nothing left to resume.
        if resume.as_ref().is_some_and(|r| !names.contains(&r.name)) {
            *resume = None;
        }
        let mut stale = 0;
        for pass in 0..self.options.passes.max(1) {
            let in_store = pass == 0 && self.options.pushdown;
            for name in &names {
                let mut cursor = None;
                // A resumed sweep keeps the name's recorded split, whatever its options.
                let mut split = false;
                if let Some(r) = resume.take() {
                    if &r.name != name {
                        *resume = Some(r);
                        continue;
                    }
                    split = r.partitions.is_some();
                    cursor = r.cursor;
                }
                let at = Position {
                    chain,
                    name,
                    cursor,
                };
                let call = self.in_store_call(&at).filter(|_| in_store);
                if split || self.partitioned(call.as_ref()) {
                    self.partitioned_name(&at, call.as_ref(), &mut migrated)
                        .await?;
                    continue;
                }
                let done_in_store = match call {
                    Some(call) => self.in_store(&at, &call, &mut migrated).await?,
                    None => false,
                };
                if !done_in_store {
                    // A cursor of the other path is refused by the store (the name
                    // starts again) or lands elsewhere; the census catches either.
                    self.name(chain, name, at.cursor, &mut migrated).await?;
                }
            }
            stale = census(self.store, chain).await?;
            if stale == 0 {
                break;
            }
        }
        if let Some(before) = self.stale_at_start {
            migrated = before.saturating_sub(stale);
        }
        Ok((migrated, stale))
    }

    /// The server-side call that sweeps the name, where the store and the
    /// steps allow one: a former name is re-keyed to the kind, the kind's own
    /// name advanced by its pushable pending steps.
    fn in_store_call<'c>(&self, at: &Position<'c>) -> Option<InStoreCall<'c>> {
        let features = self.store.features();
        if at.name == at.chain.kind {
            let pending = at.chain.pushdown()?;
            features.pushdown.map(|_| InStoreCall::Steps(pending))
        } else {
            features.kind_rename.map(|_| InStoreCall::Rename)
        }
    }

    /// Runs the name's part of a pass inside the store with `call`.
    /// `Ok(false)` when the store declines before writing anything (the caller
    /// takes the client path).
    async fn in_store(
        &mut self,
        at: &Position<'_>,
        call: &InStoreCall<'_>,
        migrated: &mut u64,
    ) -> Result<bool> {
        let chain = at.chain;
        let mut cursor = at.cursor.clone();
        let mut first = true;
        let limit = self.options.in_store_limit();
        let calls_per_checkpoint = self.options.batch_size.max(1).div_ceil(limit);
        let mut calls = 0usize;
        loop {
            let page = match call.run(self.store, at, cursor.clone(), limit).await {
                Ok(page) => page,
                Err(e) => match self.declined(e, first, &mut cursor)? {
                    Some(done) => return Ok(done),
                    None => continue,
                },
            };
            first = false;
            let before = *migrated;
            *migrated += page.moved;
            let processed = page.moved + page.collisions.len() as u64;
            // The id is held under the kind's name already: the copy here is
            // settled as the client path settles it.
            let mut stale_copies = Vec::with_capacity(page.collisions.len());
            for key in &page.collisions {
                if let Some(e) = self.store.get(key).await? {
                    stale_copies.push(e);
                }
            }
            if !stale_copies.is_empty() {
                *migrated +=
                    migrate_batch(self.store, &self.client, chain, at.name, stale_copies).await?;
            }
            crate::telemetry::sweep_batch(
                &chain.kind,
                page.moved + page.collisions.len() as u64,
                *migrated - before,
            );
            // A checkpoint per batch (several calls): a killed sweep redoes at
            // most one batch, which the version scoping makes harmless.
            calls += 1;
            if calls.is_multiple_of(calls_per_checkpoint) || page.cursor.is_none() {
                self.checkpoint(chain, at.name, page.cursor.clone(), *migrated)
                    .await?;
            }
            after_batch(self.options, self.pace.as_ref(), processed).await?;
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(true),
            }
        }
    }

    /// What an error of the in-store path means: `Some(false)` (run the client
    /// path instead) for `Unsupported` before anything was written, `None`
    /// (start the name again, with `cursor` cleared) for a cursor the store
    /// does not take (a checkpoint of the client path); any other error stops.
    fn declined(
        &self,
        e: crate::store::Error,
        first: bool,
        cursor: &mut Option<crate::store::Cursor>,
    ) -> Result<Option<bool>> {
        match e.kind() {
            ErrorKind::Unsupported if first => {
                tracing::info!(reason = %e, "sweep: the store declines; the client path runs");
                Ok(Some(false))
            }
            ErrorKind::InvalidCursor if cursor.is_some() => {
                *cursor = None;
                Ok(None)
            }
            _ => Err(e.into()),
        }
    }

    /// Records where the sweep is, under the lease.
    async fn checkpoint(
        &self,
        chain: &KindChain,
        name: &str,
        cursor: Option<crate::store::Cursor>,
        migrated: u64,
    ) -> Result<()> {
        let (kind, name) = (chain.kind.clone(), name.to_owned());
        self.lease
            .update(move |doc| {
                doc.sweep = Some(SweepState {
                    kind: kind.clone(),
                    name: name.clone(),
                    cursor: cursor.clone(),
                    migrated,
                    partitions: None,
                    stale_at_start: self.stale_at_start,
                    lease_token: Some(self.lease.token()),
                    in_store: false,
                });
            })
            .await?;
        Ok(())
    }

    /// Migrates the stale entities under `name` from `cursor`, batch by batch,
    /// each batch checkpointed under the lease and throttled.
    async fn name(
        &mut self,
        chain: &KindChain,
        name: &str,
        mut cursor: Option<crate::store::Cursor>,
        migrated: &mut u64,
    ) -> Result<()> {
        loop {
            let page = self
                .store
                .scan(
                    name,
                    ScanRequest {
                        filter: stale_filter(chain, name),
                        cursor: cursor.clone(),
                        limit: self.options.batch_size.max(1),
                    },
                )
                .await;
            let page = match page {
                // A checkpoint of the in-store path: this name starts again.
                Err(e) if e.kind() == ErrorKind::InvalidCursor && cursor.is_some() => {
                    cursor = None;
                    continue;
                }
                other => other?,
            };
            let n = page.entities.len() as u64;
            let batch = migrate_batch(self.store, &self.client, chain, name, page.entities).await?;
            *migrated += batch;
            crate::telemetry::sweep_batch(&chain.kind, n, batch);
            self.checkpoint(chain, name, page.cursor.clone(), *migrated)
                .await?;
            after_batch(self.options, self.pace.as_ref(), n).await?;
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(()),
            }
        }
    }
}

/// The server-side call of the in-store path for one name.
enum InStoreCall<'c> {
    /// The kind's own name: its pending steps, run where the entities lie.
    Steps(&'c crate::store::StepsFrom),
    /// A former name: its entities re-keyed to the kind.
    Rename,
}

impl InStoreCall<'_> {
    /// One call over at most `limit` entities of `at.name` after `cursor`.
    async fn run(
        &self,
        store: &dyn Store,
        at: &Position<'_>,
        cursor: Option<crate::store::Cursor>,
        limit: usize,
    ) -> crate::store::Result<InStorePage> {
        match self {
            InStoreCall::Steps(pending) => {
                let request = PushdownRequest {
                    kind: at.chain.kind.clone(),
                    from: pending.from,
                    steps: pending.steps.clone(),
                    cursor,
                    limit,
                };
                // `in_store_call` chose this call because the store has the facet.
                let Some(pushdown) = store.features().pushdown else {
                    return Err(crate::store::Error::unsupported(
                        store.info().scheme,
                        "update_in_place",
                    ));
                };
                let p = pushdown.update_in_place(request).await?;
                Ok(InStorePage {
                    moved: p.advanced,
                    collisions: Vec::new(),
                    cursor: p.cursor,
                })
            }
            InStoreCall::Rename => {
                let request = RenameKindRequest {
                    from: at.name.to_owned(),
                    to: at.chain.kind.clone(),
                    cursor,
                    limit,
                };
                let Some(renames) = store.features().kind_rename else {
                    return Err(crate::store::Error::unsupported(
                        store.info().scheme,
                        "rename_kind",
                    ));
                };
                let p = renames.rename_kind(request).await?;
                Ok(InStorePage {
                    moved: p.renamed,
                    collisions: p.collisions,
                    cursor: p.cursor,
                })
            }
        }
    }
}

/// Where a pass is: the kind, the name swept, and the cursor it resumes at.
struct Position<'a> {
    chain: &'a KindChain,
    name: &'a str,
    cursor: Option<crate::store::Cursor>,
}

/// One page of the in-store path.
struct InStorePage {
    /// Entities re-keyed or advanced.
    moved: u64,
    /// Entities left under a former name because the kind's name holds the id.
    collisions: Vec<Key>,
    cursor: Option<crate::store::Cursor>,
}

/// What is stale under `name`: below the version under the kind's own name;
/// everything under a former name.
fn stale_filter(chain: &KindChain, name: &str) -> Filter {
    if name == chain.kind {
        Filter {
            version: VersionFilter::Below(chain.version),
            conditions: Vec::new(),
        }
    } else {
        Filter::all()
    }
}

/// Whether `name` may hold stale entities of the kind: every former name may;
/// the kind's own name unless the kind is at version 0, below which no entity
/// can be (a pure kind rename: sweeping or counting the new name would read
/// every entity there to find none).
fn may_hold_stale(chain: &KindChain, name: &str) -> bool {
    name != chain.kind || chain.version > 0
}

/// How many entities of the kind are still stale (under its name and former names).
pub async fn census(store: &dyn Store, chain: &KindChain) -> Result<u64> {
    let mut n = if may_hold_stale(chain, &chain.kind) {
        store
            .count(&chain.kind, stale_filter(chain, &chain.kind))
            .await?
    } else {
        0
    };
    for f in &chain.formers {
        n += store.count(f, Filter::all()).await?;
    }
    Ok(n)
}

/// Migrates one batch read under `name`; returns how many entities it migrated.
async fn migrate_batch(
    store: &dyn Store,
    client: &LazyClient,
    chain: &KindChain,
    name: &str,
    entities: Vec<Entity>,
) -> Result<u64> {
    let mut migrated = 0;
    if name == chain.kind {
        let mut writes = Vec::with_capacity(entities.len());
        for e in &entities {
            writes.push(Write::Replace {
                expected: e.clone(),
                new: chain.migrate(e)?,
            });
        }
        let outcomes = store.write_checked(writes).await?;
        for (e, o) in entities.iter().zip(outcomes) {
            if o == WriteOutcome::Applied {
                migrated += 1;
            } else {
                // Changed meanwhile: the client path re-reads and migrates it if still stale.
                client.get(&e.key).await?;
            }
        }
    } else {
        for e in entities {
            let key = Key {
                kind: chain.kind.clone(),
                id: e.key.id.clone(),
            };
            client.get(&key).await?;
            // The copy under the old name is dead once the new name holds the entity.
            if store
                .write_atomic_checked(
                    vec![Guard::Unchanged(e.clone())],
                    vec![Write::Delete(e.key.clone())],
                )
                .await?
                == WriteOutcome::Applied
            {
                tracing::debug!(key = %e.key, "removed a stale copy under a former kind name");
            } else {
                migrated += 1;
            }
        }
    }
    Ok(migrated)
}
