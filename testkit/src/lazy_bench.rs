//! The lazy-migration benchmark every store runs (`core/benches/lazy.rs` on the
//! embedded store, `adapters/redis/benches/lazy.rs` on Redis), side by side in
//! one run:
//!
//! - the pause of installing a lazy `add` + `rename` over N entities against
//!   the eager `tern up` of the same change on a second copy of the same data;
//! - up-to-date reads through [`LazyClient::get`] against raw [`Store::get`]
//!   calls of the same store and keys, in alternating chunks (so a change in
//!   the machine's load falls on both sides alike);
//! - first reads of stale entities through the lazy client (each migrated and
//!   written back with a compare-and-set), for scale; the entities they
//!   migrated read again while the migration is pending;
//! - `tern sweep` of the rest through the client path (`pushdown` off: read a
//!   page, migrate, compare-and-set), for scale.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::lazy::{LazyClient, LazyError};
use tern_core::migrate::{MigrateError, Migration, MigrationSet, Migrator};
use tern_core::model::{Key, Value};
use tern_core::store::{Error as StoreError, Store};

use crate::bench::{self, SCRIPT};

/// Why a lazy benchmark round failed.
#[derive(Debug, thiserror::Error)]
pub enum LazyBenchError {
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `tern up` (eager or the install) failed.
    #[error(transparent)]
    Migrate(#[from] MigrateError),
    /// The lazy client failed.
    #[error(transparent)]
    Lazy(#[from] LazyError),
    /// A read found no entity where one was loaded.
    #[error("entity {0} missing after the load")]
    Missing(String),
}

/// What one round measured.
#[derive(Debug, Clone)]
pub struct LazyRound {
    /// Entities in each of the two stores.
    pub entities: usize,
    /// Eager `tern up` of [`SCRIPT`] (lease, batches, census).
    pub eager_up: Duration,
    /// `tern up` of the same script declared `lazy` (the install).
    pub install: Duration,
    /// Up-to-date reads measured on each side.
    pub reads: usize,
    /// Raw `Store::get` time over `reads` keys.
    pub raw: Duration,
    /// `LazyClient::get` time over the same keys.
    pub client: Duration,
    /// Median over the chunks of (client chunk time / raw chunk time).
    pub median_chunk_ratio: f64,
    /// First reads of stale entities through the lazy client (`stale_reads` of them).
    pub stale: Duration,
    /// The same number of first reads of other stale entities through a
    /// client that migrates on the client (`migrate_in_store(false)`).
    pub stale_on_client: Duration,
    /// How many stale entities were read (and migrated) through the client.
    pub stale_reads: usize,
    /// Raw `Store::get` time over the entities the stale reads migrated,
    /// read again while the migration is still pending (up to date now).
    pub pending_raw: Duration,
    /// `LazyClient::get` time over the same keys, by the client that migrated them.
    pub pending_client: Duration,
    /// `tern sweep` of the rest through the client path.
    pub sweep: Duration,
    /// How many entities that sweep migrated.
    pub swept: u64,
}

impl LazyRound {
    /// The lazy client's read overhead on up-to-date entities, in percent
    /// (from the chunk median).
    pub fn overhead_percent(&self) -> f64 {
        (self.median_chunk_ratio - 1.0) * 100.0
    }

    /// Prints the round's lines.
    pub fn print(&self, round: usize) {
        let s = |d: Duration| d.as_secs_f64();
        println!(
            "round {round}: pause: eager tern up {:.3} s, lazy install {:.1} ms ({:.0}x shorter)",
            s(self.eager_up),
            s(self.install) * 1e3,
            s(self.eager_up) / s(self.install)
        );
        println!(
            "round {round}: {} up-to-date reads: raw {:.0}/s, lazy client {:.0}/s, overhead {:+.1}% (total {:+.1}%)",
            self.reads,
            self.reads as f64 / s(self.raw),
            self.reads as f64 / s(self.client),
            self.overhead_percent(),
            (s(self.client) / s(self.raw) - 1.0) * 100.0
        );
        println!(
            "round {round}: {} first reads of stale entities through the lazy client: {:.0}/s (each migrated and written back); migrated on the client: {:.0}/s ({:.2}x the time)",
            self.stale_reads,
            self.stale_reads as f64 / s(self.stale),
            self.stale_reads as f64 / s(self.stale_on_client),
            s(self.stale_on_client) / s(self.stale)
        );
        println!(
            "round {round}: the {} entities those reads migrated, read again while the migration is pending: raw {:.0}/s, lazy client {:.0}/s, overhead {:+.1}%",
            self.stale_reads,
            self.stale_reads as f64 / s(self.pending_raw),
            self.stale_reads as f64 / s(self.pending_client),
            (s(self.pending_client) / s(self.pending_raw) - 1.0) * 100.0
        );
        println!(
            "round {round}: tern sweep of the rest through the client path: {} entities in {:.2} s ({:.0}/s)",
            self.swept,
            s(self.sweep),
            self.swept as f64 / s(self.sweep)
        );
    }
}

/// Chunk of keys read on one side before the other side's turn.
const CHUNK: usize = 500;

fn key(i: usize) -> Key {
    Key {
        kind: "blogpost".into(),
        id: Value::Int(i as i64),
    }
}

/// Installs [`SCRIPT`] as a lazy migration and times `tern up`.
pub async fn install(store: Arc<dyn Store>) -> Result<Duration, LazyBenchError> {
    let mut set = MigrationSet::new();
    set.add(Migration::from_script(
        1,
        "release2",
        "0001_release2.tern",
        &format!("lazy\n{SCRIPT}"),
    )?)?;
    let (r, t) = bench::timed(Migrator::new(store, set).up(None)).await;
    r?;
    Ok(t)
}

/// One round: `fresh(name)` gives an empty store (a new file, a new key
/// prefix); two are loaded with `n` blog posts. `reads` keys are read on each
/// side, spread over the whole key range.
pub async fn round<F, Fut>(
    fresh: &mut F,
    n: usize,
    reads: usize,
    batch: usize,
) -> Result<LazyRound, LazyBenchError>
where
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let eager = fresh("eager").await;
    bench::load(eager.as_ref(), n).await?;
    let lazy = fresh("lazy").await;
    bench::load(lazy.as_ref(), n).await?;
    let (e, eager_up) = bench::timed(bench::tern_up(Arc::clone(&eager), batch, true)).await;
    e?;
    let install = install(Arc::clone(&lazy)).await?;

    // Up-to-date reads: the eager store is all at version 2.
    let client = LazyClient::builder(Arc::clone(&eager))
        .declare("blogpost", 2)
        .connect()
        .await?;
    let keys: Vec<Key> = (0..reads).map(|i| key(i * 7919 % n)).collect();
    let (raw, through, ratios) = raw_against_client(eager.as_ref(), &client, &keys).await?;
    let median_chunk_ratio = bench::median(&ratios).unwrap_or(f64::NAN);

    // First reads of stale entities (the lazy store is all at version 0), in
    // chunks alternating between a client that migrates them inside the store
    // where it can and one that migrates them on the client, on other keys.
    let in_store = LazyClient::builder(Arc::clone(&lazy))
        .declare("blogpost", 2)
        .connect()
        .await?;
    let on_client = LazyClient::builder(Arc::clone(&lazy))
        .declare("blogpost", 2)
        .migrate_in_store(false)
        .connect()
        .await?;
    let stale_reads = reads.min(20_000).min(n / 2);
    let (mut stale, mut stale_on_client) = (Duration::ZERO, Duration::ZERO);
    for chunk in (0..stale_reads).collect::<Vec<_>>().chunks(CHUNK) {
        for (side, client) in [(0, &in_store), (1, &on_client)] {
            let t = Instant::now();
            for i in chunk {
                let k = key((2 * i + side) * 7919 % n);
                if client.get(&k).await?.is_none() {
                    return Err(LazyBenchError::Missing(k.to_string()));
                }
            }
            if side == 0 {
                stale += t.elapsed();
            } else {
                stale_on_client += t.elapsed();
            }
        }
    }
    // The entities the in-store client migrated, up to date now while the
    // migration is still pending: raw reads against that client's, in chunks
    // alternating which side goes first.
    let migrated: Vec<Key> = (0..stale_reads).map(|i| key(2 * i * 7919 % n)).collect();
    let (pending_raw, pending_client, _) =
        raw_against_client(lazy.as_ref(), &in_store, &migrated).await?;
    let (report, sweep) = bench::timed(tern_core::lazy::sweep::sweep(
        Arc::clone(&lazy),
        &tern_core::migrate::LeaseOptions::default(),
        &std::collections::BTreeMap::new(),
        &tern_core::lazy::SweepOptions {
            batch_size: batch,
            pushdown: false,
            ..tern_core::lazy::SweepOptions::default()
        },
    ))
    .await;
    let swept = report?.migrated.values().sum();
    Ok(LazyRound {
        entities: n,
        eager_up,
        install,
        reads,
        raw,
        client: through,
        median_chunk_ratio,
        stale,
        stale_on_client,
        stale_reads,
        pending_raw,
        pending_client,
        sweep,
        swept,
    })
}

/// Reads `keys` raw from `store` and through `client`, in chunks of
/// [`CHUNK`] alternating which side goes first: each side's total time and,
/// per chunk, the client's time over the raw time.
async fn raw_against_client(
    store: &dyn Store,
    client: &LazyClient,
    keys: &[Key],
) -> Result<(Duration, Duration, Vec<f64>), LazyBenchError> {
    let (mut raw, mut through) = (Duration::ZERO, Duration::ZERO);
    let mut ratios = Vec::new();
    for (c, chunk) in keys.chunks(CHUNK).enumerate() {
        let mut times = [Duration::ZERO; 2];
        for side in [c % 2, 1 - c % 2] {
            let t = Instant::now();
            for k in chunk {
                let found = if side == 0 {
                    store.get(k).await?.is_some()
                } else {
                    client.get(k).await?.is_some()
                };
                if !found {
                    return Err(LazyBenchError::Missing(k.to_string()));
                }
            }
            times[side] = t.elapsed();
        }
        raw += times[0];
        through += times[1];
        ratios.push(times[1].as_secs_f64() / times[0].as_secs_f64().max(1e-9));
    }
    Ok((raw, through, ratios))
}

/// Runs `rounds` rounds, prints each and a summary of medians.
pub async fn run<F, Fut>(
    mut fresh: F,
    n: usize,
    rounds: usize,
    batch: usize,
) -> Result<Vec<LazyRound>, LazyBenchError>
where
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let reads = n.min(100_000);
    let mut all = Vec::new();
    for r in 0..rounds {
        let one = round(&mut fresh, n, reads, batch).await?;
        one.print(r);
        all.push(one);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    println!(
        "median over {rounds} rounds: install {:.1} ms, eager tern up {:.3} s, read overhead {:+.1}%",
        median(all.iter().map(|r| r.install.as_secs_f64() * 1e3).collect()),
        median(all.iter().map(|r| r.eager_up.as_secs_f64()).collect()),
        median(all.iter().map(LazyRound::overhead_percent).collect()),
    );
    Ok(all)
}
