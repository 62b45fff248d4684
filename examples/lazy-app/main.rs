//! An application that reads and writes through tern's lazy client while a
//! lazy migration is installed and then completed by a sweep, on an embedded
//! store (`scripts/lazy-demo.sh` runs it).
//!
//! 1. Loads N users at v0 (`{name, visits: 0}`) into a fresh store.
//! 2. Runs the old code (declared `user` v0) until the install, which fences it.
//! 3. Installs `migrations/0001_plans.tern` (lazy): one metadata write.
//! 4. Runs the new code (declared `user` v2): tasks add random hits through
//!    `LazyClient::modify` while the sweep migrates the rest.
//! 5. Checks that every user is at v2 and that no hit was lost, prints the census.
//!
//! The embedded store is a file one process opens at a time, so the install and
//! the sweep run in this process, through the same library calls `tern up` and
//! `tern sweep` make.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tern_core::lazy::{self, LazyClient, LazyError, SweepOptions};
use tern_core::migrate::{LeaseOptions, MigrationSet, Migrator};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::embedded::EmbeddedStore;
use tern_core::store::{Store, Write};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn hits(m: &Map, name: &str) -> i64 {
    match m.get(name) {
        Some(Value::Int(n)) => *n,
        _ => 0,
    }
}

/// The per-user counts of writes made: user number to count.
type Counts = BTreeMap<i64, i64>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let path = arg("--store", "lazy-demo.redb");
    let migrations = arg("--migrations", "examples/lazy-app/migrations");
    let n: i64 = arg("--users", "20000").parse()?;
    let tasks: usize = arg("--tasks", "4").parse()?;
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path)?);

    load_users(&store, n).await?;
    let (old, mut expected) = old_code(&store).await?;
    install(&store, &migrations, &old).await?;
    let (report, done) = new_code_during_sweep(&store, n, tasks).await?;
    let mut writes = 0;
    for (i, k) in done {
        *expected.entry(i).or_default() += k;
        writes += k;
    }
    println!("{writes} writes through the lazy client during the sweep");
    check(&store, n, &expected, &report).await
}

/// Step 1: the data, at v0.
async fn load_users(store: &Arc<dyn Store>, n: i64) -> Result<(), Error> {
    let users: Vec<Write> = (0..n)
        .map(|i| {
            let mut value = Map::new();
            value.insert("name".into(), Value::from(format!("user{i}")));
            value.insert("visits".into(), Value::Int(0));
            Ok(Write::Put(Entity {
                key: Key::new("user", i)?,
                version: 0,
                value,
            }))
        })
        .collect::<Result<_, Error>>()?;
    for chunk in users.chunks(5000) {
        store.write_batch(chunk.to_vec()).await?;
    }
    println!("loaded {n} users at v0");
    Ok(())
}

/// Step 2: the old code counts visits until it is fenced. Returns its client and
/// the visits it counted.
async fn old_code(store: &Arc<dyn Store>) -> Result<(LazyClient, Counts), Error> {
    let old = LazyClient::builder(Arc::clone(store))
        .declare("user", 0)
        .refresh_every(Duration::ZERO)
        .connect()
        .await?;
    let mut expected = Counts::new();
    for i in 0..100 {
        old.modify(&Key::new("user", i)?, |m| {
            let v = hits(m, "visits");
            m.insert("visits".into(), Value::Int(v + 1));
        })
        .await?;
        *expected.entry(i).or_default() += 1;
    }
    Ok((old, expected))
}

/// Step 3: the install: one fenced metadata write, no user touched; the old code is fenced.
async fn install(store: &Arc<dyn Store>, migrations: &str, old: &LazyClient) -> Result<(), Error> {
    let set = MigrationSet::load_dir(std::path::Path::new(migrations))?;
    let started = Instant::now();
    Migrator::new(Arc::clone(store), set).up(None).await?;
    println!(
        "installed the lazy migration in {:?} (no entity touched)",
        started.elapsed()
    );
    match old.get(&Key::new("user", 0)?).await {
        Err(e @ LazyError::KindMigratedSinceConnect { .. }) => println!("old code fenced: {e}"),
        other => return Err(format!("the old client was not fenced: {other:?}").into()),
    }
    Ok(())
}

/// Step 4: the new code adds hits while the sweep completes the migration. Returns
/// the sweep's report and the hits written.
async fn new_code_during_sweep(
    store: &Arc<dyn Store>,
    n: i64,
    tasks: usize,
) -> Result<(lazy::sweep::SweepReport, Counts), Error> {
    let client = Arc::new(
        LazyClient::builder(Arc::clone(store))
            .declare("user", 2)
            .connect()
            .await?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..tasks)
        .map(|t| tokio::spawn(add_hits(Arc::clone(&client), Arc::clone(&stop), t, n)))
        .collect();
    let started = Instant::now();
    let report = lazy::sweep::sweep(
        Arc::clone(store),
        &LeaseOptions::default(),
        &BTreeMap::new(),
        &SweepOptions {
            batch_size: 500,
            ..SweepOptions::default()
        },
    )
    .await?;
    println!(
        "sweep: {:?} migrated, complete: {:?}, in {:?} while {tasks} tasks wrote",
        report.migrated,
        report.completed,
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let mut done = Counts::new();
    for w in workers {
        for (i, k) in w.await?? {
            *done.entry(i).or_default() += k;
        }
    }
    Ok((report, done))
}

/// One task of the new code: adds hits to random users until `stop`.
async fn add_hits(
    client: Arc<LazyClient>,
    stop: Arc<AtomicBool>,
    t: usize,
    n: i64,
) -> Result<Counts, Error> {
    let mut done = Counts::new();
    let mut seed = 0x9e37_79b9_u64.wrapping_mul(t as u64 + 1);
    while !stop.load(Ordering::Relaxed) {
        seed = seed.rotate_left(13) ^ 0x5851_f42d_4c95_7f2d;
        let i = (seed % n as u64) as i64;
        client
            .modify(&Key::new("user", i)?, |m| {
                let v = hits(m, "hits");
                m.insert("hits".into(), Value::Int(v + 1));
            })
            .await?;
        *done.entry(i).or_default() += 1;
    }
    Ok(done)
}

/// Step 5: no write lost: every user at v2 holds exactly the hits written.
async fn check(
    store: &Arc<dyn Store>,
    n: i64,
    expected: &Counts,
    report: &lazy::sweep::SweepReport,
) -> Result<(), Error> {
    let mut lost = 0;
    for i in 0..n {
        let e = store
            .get(&Key::new("user", i)?)
            .await?
            .ok_or("a user vanished")?;
        let want = expected.get(&i).copied().unwrap_or(0);
        if e.version != 2 || hits(&e.value, "hits") != want || !e.value.contains_key("plan") {
            lost += 1;
            println!("WRONG: {e:?}, expected {want} hits");
        }
    }
    let census = store.version_census("user").await?;
    println!("census of user: {census:?} (version: entities)");
    if lost > 0 || report.completed.is_empty() {
        return Err(format!("{lost} users are wrong").into());
    }
    println!("no write lost: all {n} users at v2 with every hit");
    Ok(())
}
