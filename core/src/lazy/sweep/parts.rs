//! A partitioned sweep (`tern sweep --workers N --partitions P`): one name's
//! sweep split by the store's [`Partitions`](crate::store::Partitions) facet
//! into ranges that `--workers` workers of this process sweep at once.
//!
//! The split is taken when the name's sweep starts and recorded in the
//! sweep's checkpoint (`sweep.partitions` of the state document); each
//! partition has its own cursor, counts and fenced lease, exactly as a
//! partitioned stage of `tern up` ([`crate::migrate`]'s partition claims): a
//! worker checkpoints a partition only while its lease is its own, a killed
//! sweep's partitions are taken over from their last checkpoint by the next
//! `tern sweep` (whatever its `--workers`: the recorded split is kept), and
//! the census and "complete" happen once, after every partition is done.
//! Kind renames in the store (a former name re-keyed in place) run
//! unpartitioned, as in `tern up`.
//!
//! A `tern worker` on any host joins a split that a live sweep runs
//! ([`join`]): it claims the split's partitions with the same fenced leases
//! and sweeps them on the path the split records, while the sweep itself
//! keeps its lease and does the census and the recording.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{
    InStoreCall, Position, SweepOptions, Sweeper, after_batch, migrate_batch, stale_filter,
    sweep_client,
};
use crate::lazy::client::LazyClient;
use crate::lazy::error::{LazyError, Result};
use crate::lazy::spec::Spec;
use crate::migrate::partition::{self, Claim, Claimant, Next, Site, StateCache};
use crate::migration::error::MigrateError;
use crate::migration::lease::Lease;
use crate::migration::pace::RateLimiter;
use crate::migration::source::Migration;
use crate::migration::state::{self, RunCounts, StagePartitions, StateDoc, SweepState};
use crate::store::{ErrorKind, PushdownRequest, ScanRequest, StepsFrom, Store, StoreExt};

/// The split recorded for the sweep of `name` (of `kind`), if the checkpoint has one.
fn recorded_split<'d>(doc: &'d StateDoc, kind: &str, name: &str) -> Option<&'d StagePartitions> {
    doc.sweep
        .as_ref()
        .filter(|s| s.kind == kind && s.name == name)
        .and_then(|s| s.partitions.as_ref())
}

/// The sweep's checkpoint of `name` (of `kind`) between partitioned passes:
/// `migrated` so far, and the split while it runs (`None` once it is done),
/// written under the lease whose token is `lease_token`.
fn name_checkpoint(
    kind: &str,
    name: &str,
    migrated: u64,
    partitions: Option<StagePartitions>,
    stale_at_start: Option<u64>,
    lease_token: u64,
) -> SweepState {
    SweepState {
        kind: kind.to_owned(),
        name: name.to_owned(),
        cursor: None,
        migrated,
        partitions,
        stale_at_start,
        lease_token: Some(lease_token),
        in_store: false,
    }
}

impl Sweeper<'_> {
    /// Does this name's pass run partitioned? Asked for (`workers` > 1 or a
    /// partition count), on a store with the facet, and not a re-keying of a
    /// former name inside the store.
    pub(super) fn partitioned(&self, call: Option<&InStoreCall<'_>>) -> bool {
        (self.options.workers > 1 || self.options.partitions.is_some())
            && self.store.features().partitions.is_some()
            && !matches!(call, Some(InStoreCall::Rename))
    }

    /// Sweeps `at.name` partitioned: records its split (unless recorded),
    /// runs `--workers` workers until every partition is done, then adds
    /// their counts to `migrated` and clears the split from the checkpoint.
    pub(super) async fn partitioned_name(
        &self,
        at: &Position<'_>,
        call: Option<&InStoreCall<'_>>,
        migrated: &mut u64,
    ) -> Result<()> {
        let (kind, name) = (at.chain.kind.clone(), at.name.to_owned());
        let Some(facet) = self.store.features().partitions else {
            return Err(MigrateError::Dirty(format!(
                "the sweep of {name} was split into partitions, but the {} store has no partitions facet",
                self.store.info().scheme
            ))
            .into());
        };
        let site = Site::Sweep {
            kind: kind.clone(),
            name: name.clone(),
        };
        let steps = match call {
            Some(InStoreCall::Steps(steps)) => Some(*steps),
            _ => None,
        };
        let doc = state::load(self.store).await?.doc;
        let mut start = match recorded_split(&doc, &kind, &name) {
            Some(_) => doc.sweep.clone(),
            None => None,
        };
        if start.is_none() {
            let count = self
                .options
                .partitions
                .unwrap_or(self.options.workers.max(1) * 4)
                .max(1);
            let parts = facet.split(&name, count).await?;
            tracing::info!(%name, partitions = parts.len(), "sweep: split into partitions");
            let split = partition::fresh_split(0, &name, &parts);
            start = Some(name_checkpoint(
                &kind,
                &name,
                *migrated,
                Some(split),
                self.stale_at_start,
                self.lease.token(),
            ));
        }
        // Whose split it is now, and its path: what a joining worker checks
        // and follows (a resumed split gets this sweep's token).
        let token = self.lease.token();
        self.lease
            .update(|doc| {
                doc.sweep = start.clone().map(|mut s| {
                    s.lease_token = Some(token);
                    s.in_store = steps.is_some();
                    s
                });
            })
            .await?;
        let parts = PartSweep {
            store: self.shared,
            client: &self.client,
            options: self.options,
            pace: self.pace.as_ref(),
            lease: Some(self.lease),
            ttl: self.lease.ttl(),
        };
        parts
            .run_workers(at, &site, steps, self.options.workers)
            .await?;
        let doc = state::load(self.store).await?.doc;
        let Some(done) = recorded_split(&doc, &kind, &name).filter(|p| p.all_done()) else {
            return Err(MigrateError::LeaseLost {
                token: self.lease.token(),
            }
            .into());
        };
        *migrated += done.counts().changed;
        let end = name_checkpoint(
            &kind,
            &name,
            *migrated,
            None,
            self.stale_at_start,
            self.lease.token(),
        );
        self.lease
            .update(|doc| doc.sweep = Some(end.clone()))
            .await?;
        Ok(())
    }
}

/// What a `tern worker` did for the sweeps it joined ([`join`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JoinReport {
    /// Partitions it swept to their end.
    pub partitions: u64,
    /// Partitions it started and lost to another worker (its lease expired).
    pub lost: u64,
}

impl JoinReport {
    fn add(&mut self, other: JoinReport) {
        self.partitions += other.partitions;
        self.lost += other.lost;
    }
}

/// `tern worker`'s part in a partitioned sweep that another process runs
/// (`tern sweep --workers N --partitions P`, on any host): while the sweep
/// holds the lease and has a split open, claims its partitions
/// (`options.workers` at a time, each with a fenced lease of `ttl`) and
/// sweeps them on the path the split records. The sweep keeps its lease and
/// does the census and "complete" itself. Returns when no sweep holding the
/// lease is in progress (none started, finished, or its runner gone: the
/// next `tern sweep` resumes a dead one's split).
///
/// # Errors
/// Store and migration errors; [`LazyError::Interrupted`] on cancel.
pub async fn join(
    shared: &Arc<dyn Store>,
    code: &BTreeMap<u32, Migration>,
    options: &SweepOptions,
    ttl: Duration,
) -> Result<JoinReport> {
    let store = shared.as_ref();
    let mut report = JoinReport::default();
    let poll = (ttl / 3).clamp(Duration::from_millis(20), Duration::from_secs(1));
    let pace = RateLimiter::new(options.max_rate);
    loop {
        if options.cancel.is_cancelled() {
            return Err(LazyError::Interrupted);
        }
        // The document and the clock in one round trip.
        let (loaded, now) = futures::join!(state::load(store), store.now());
        let (doc, now) = (loaded?.doc, now?);
        let live = |token: Option<u64>| {
            doc.lease
                .as_ref()
                .is_some_and(|l| Some(l.token) == token && l.expires_at > now)
        };
        let Some(sweep) = doc.sweep.clone().filter(|s| live(s.lease_token)) else {
            return Ok(report);
        };
        match sweep.partitions.as_ref().filter(|p| !p.all_done()) {
            Some(_) => {
                let spec = Spec::from_state(&doc, code)?;
                let chain = spec.chain(&sweep.kind);
                let steps = if sweep.in_store && sweep.name == chain.kind {
                    chain.pushdown()
                } else {
                    None
                };
                let client = sweep_client(shared, &spec, code).await?;
                let at = Position {
                    chain: &chain,
                    name: &sweep.name,
                    cursor: None,
                };
                let site = Site::Sweep {
                    kind: sweep.kind.clone(),
                    name: sweep.name.clone(),
                };
                tracing::info!(kind = %sweep.kind, name = %sweep.name, "worker: joining the sweep's partitions");
                let parts = PartSweep {
                    store: shared,
                    client: &client,
                    options,
                    pace: pace.as_ref(),
                    lease: None,
                    ttl,
                };
                report.add(
                    parts
                        .run_workers(&at, &site, steps, options.workers)
                        .await?,
                );
            }
            // Between names or passes, or counting: the next split may come.
            None => tokio::time::sleep(poll).await,
        }
    }
}

/// What sweeping claimed partitions needs: the sweep's own workers (under
/// its lease), or a worker joining the sweep (no lease of its own: each
/// partition's claim is fenced by itself).
struct PartSweep<'a> {
    store: &'a Arc<dyn Store>,
    client: &'a LazyClient,
    options: &'a SweepOptions,
    pace: Option<&'a RateLimiter>,
    /// The sweep's lease, when this process runs the sweep.
    lease: Option<&'a Lease>,
    /// The lease time of each partition's claim.
    ttl: Duration,
}

impl PartSweep<'_> {
    /// Runs `workers` workers on the split of `site` until none is left.
    async fn run_workers(
        &self,
        at: &Position<'_>,
        site: &Site,
        steps: Option<&StepsFrom>,
        workers: usize,
    ) -> Result<JoinReport> {
        let cache = partition::new_cache(self.store.as_ref()).await?;
        // Wakes idle workers when a partition is finished or dropped here.
        let wake = tokio::sync::Notify::new();
        let done = futures::future::try_join_all(
            (0..workers.max(1)).map(|w| self.part_worker(at, site, (&cache, &wake), steps, w)),
        )
        .await?;
        let mut report = JoinReport::default();
        for d in done {
            report.add(d);
        }
        Ok(report)
    }

    /// One worker: claims partitions of `site` and sweeps them until none is left.
    async fn part_worker(
        &self,
        at: &Position<'_>,
        site: &Site,
        (cache, wake): (&StateCache, &tokio::sync::Notify),
        steps: Option<&StepsFrom>,
        number: usize,
    ) -> Result<JoinReport> {
        let who = Claimant {
            owner: uuid::Uuid::new_v4().to_string(),
            holder: partition::holder(number),
            ttl: self.ttl,
            renew: true,
        };
        let poll = (who.ttl / 3).clamp(Duration::from_millis(20), Duration::from_secs(1));
        let mut report = JoinReport::default();
        loop {
            if self.options.cancel.is_cancelled() {
                return Err(LazyError::Interrupted);
            }
            if let Some(lease) = self.lease.filter(|l| l.is_lost()) {
                return Err(MigrateError::LeaseLost {
                    token: lease.token(),
                }
                .into());
            }
            let woken = wake.notified();
            match partition::claim_next(self.store, cache, site.clone(), &who).await? {
                Next::Claimed(claim) => {
                    let label = claim.partition.label.clone();
                    let outcome = match self.sweep_part(at, &claim, steps).await {
                        Ok(counts) => claim.finish(counts).await.map_err(LazyError::from),
                        Err(e) => Err(e),
                    };
                    wake.notify_waiters();
                    match outcome {
                        Ok(()) => report.partitions += 1,
                        Err(LazyError::Migrate(MigrateError::LeaseLost { token })) => {
                            report.lost += 1;
                            tracing::warn!(partition = %label, token, "sweep: partition taken over by another worker; dropping it");
                        }
                        Err(e) => return Err(e),
                    }
                }
                Next::Wait => {
                    tokio::select! {
                        () = tokio::time::sleep(poll) => {}
                        () = woken => {}
                    }
                }
                Next::AllDone | Next::Gone => return Ok(report),
            }
        }
    }

    /// Sweeps one claimed partition from its checkpoint to its end; returns
    /// its counts (`processed` read, `changed` migrated).
    async fn sweep_part(
        &self,
        at: &Position<'_>,
        claim: &Claim,
        steps: Option<&StepsFrom>,
    ) -> Result<RunCounts> {
        let facet = self.store.features().partitions.ok_or_else(|| {
            LazyError::from(MigrateError::Dirty(
                "the store lost its partitions facet".to_owned(),
            ))
        })?;
        let (chain, name) = (at.chain, at.name);
        let mut cursor = claim.cursor.clone();
        let mut counts = claim.counts;
        let mut in_store = steps;
        let mut first = true;
        loop {
            let (read, moved, next) = if let Some(pending) = in_store {
                let request = PushdownRequest {
                    kind: chain.kind.clone(),
                    from: pending.from,
                    steps: pending.steps.clone(),
                    cursor: cursor.clone(),
                    limit: self.options.in_store_limit(),
                };
                match facet.update_partition(&claim.partition, request).await {
                    Ok(p) => (p.advanced, p.advanced, p.cursor),
                    Err(e) if e.kind() == ErrorKind::Unsupported && first => {
                        in_store = None;
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::InvalidCursor && cursor.is_some() => {
                        cursor = None;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            } else {
                let request = ScanRequest {
                    filter: stale_filter(chain, name),
                    cursor: cursor.clone(),
                    limit: self.options.batch_size.max(1),
                };
                let page = match facet.scan_partition(name, &claim.partition, request).await {
                    Ok(page) => page,
                    // A checkpoint of the other path: the partition starts again.
                    Err(e) if e.kind() == ErrorKind::InvalidCursor && cursor.is_some() => {
                        cursor = None;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                let n = page.entities.len() as u64;
                let m = migrate_batch(self.store.as_ref(), self.client, chain, name, page.entities)
                    .await?;
                (n, m, page.cursor)
            };
            first = false;
            counts.processed += read;
            counts.changed += moved;
            crate::telemetry::sweep_batch(&chain.kind, read, moved);
            claim.checkpoint(next.clone(), counts).await?;
            after_batch(self.options, self.pace, read).await?;
            match next {
                Some(c) => cursor = Some(c),
                None => return Ok(counts),
            }
        }
    }
}
