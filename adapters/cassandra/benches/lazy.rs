//! Lazy migration on a Cassandra node (`TERN_IT_CASSANDRA_URL`), side by side in one run:
//!
//! - the pause of installing a lazy `add` + `rename` (release 2 of the blog example) over N
//!   entities against the eager `tern up` of the same change on a second copy of the same data;
//! - up-to-date reads through the lazy client ([`LazyClient::get`]) against a raw prepared
//!   `SELECT doc FROM ks.blogpost WHERE id = ?` of the same driver on the same rows (the
//!   floor: the statement `Store::get` runs, without decoding the row), and against the
//!   adapter's `Store::get` (the same statement, the row decoded into an entity), in chunks of 500 keys whose order
//!   of sides turns each chunk (so a change in the machine's load falls on every side alike);
//! - puts of existing entities one at a time: a plain put (`Store::write_batch`, an `INSERT`)
//!   against a serial put (`SerialWrites::write_serial`, an `UPDATE ... IF EXISTS`: what the
//!   lazy client writes to a kind with a pending migration), chunks of 500 alternating.
//!
//! ```sh
//! scripts/servers.sh start cassandra; eval "$(scripts/servers.sh env)"
//! cargo bench -p tern-cassandra --bench lazy -- --entities 100000 --rounds 3 [--reads 20000] [--puts 5000]
//! ```
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use tern_core::lazy::LazyClient;
use tern_core::model::{Key, Value};
use tern_core::store::{Store, Write, WriteOutcome};
use tern_testkit::bench::{self, BenchArgs};
use tern_testkit::lazy_bench;

mod common;
use common::{server, session};

/// Keys read on one side before the next side's turn.
const CHUNK: usize = 500;

fn key(i: usize) -> Key {
    Key {
        kind: "blogpost".into(),
        id: Value::Int(i as i64),
    }
}

/// The three reading sides' total times over the same keys, and the per-chunk ratios of the
/// lazy client against the raw `SELECT` and against `Store::get`.
#[derive(Default)]
struct Reads {
    raw: Duration,
    store: Duration,
    client: Duration,
    client_over_raw: Vec<f64>,
    client_over_store: Vec<f64>,
}

async fn reads(
    session: &Session,
    ks: &str,
    store: &dyn Store,
    client: &LazyClient,
    n: usize,
    count: usize,
) -> Reads {
    let select = session
        .prepare(format!("SELECT doc FROM {ks}.blogpost WHERE id = ?"))
        .await
        .unwrap();
    let ids: Vec<usize> = (0..count).map(|i| i * 7919 % n).collect();
    let mut r = Reads::default();
    // The first chunk warms every side up (connections, the statements' first runs) and is
    // not counted.
    for (c, chunk) in ids.chunks(CHUNK).enumerate() {
        let mut times = [Duration::ZERO; 3];
        for turn in 0..3 {
            let side = (turn + c) % 3;
            let t = Instant::now();
            for &i in chunk {
                let found = match side {
                    0 => {
                        // The document layout's id column: the id's JSON text.
                        let rows = session
                            .execute_unpaged(&select, (i.to_string(),))
                            .await
                            .unwrap()
                            .into_rows_result()
                            .unwrap();
                        rows.maybe_first_row::<(Vec<u8>,)>().unwrap().is_some()
                    }
                    1 => store.get(&key(i)).await.unwrap().is_some(),
                    _ => client.get(&key(i)).await.unwrap().is_some(),
                };
                assert!(found, "entity {i} missing after the load");
            }
            times[side] = t.elapsed();
        }
        if c == 0 {
            continue;
        }
        r.raw += times[0];
        r.store += times[1];
        r.client += times[2];
        let secs = |d: Duration| d.as_secs_f64().max(1e-9);
        r.client_over_raw.push(secs(times[2]) / secs(times[0]));
        r.client_over_store.push(secs(times[2]) / secs(times[1]));
    }
    r
}

/// The two putting sides' total times over the same entities (put back as read) and the
/// per-chunk ratios of serial over plain.
#[derive(Default)]
struct Puts {
    plain: Duration,
    serial: Duration,
    serial_over_plain: Vec<f64>,
}

async fn puts(store: &dyn Store, n: usize, count: usize) -> Puts {
    let serial = store
        .features()
        .serial_writes
        .expect("the Cassandra store has serial writes");
    let ids: Vec<usize> = (0..count).map(|i| i * 7907 % n).collect();
    let mut p = Puts::default();
    // The first chunk warms both sides up and is not counted.
    for (c, chunk) in ids.chunks(CHUNK).enumerate() {
        let mut entities = Vec::with_capacity(chunk.len());
        for &i in chunk {
            entities.push(store.get(&key(i)).await.unwrap().expect("loaded"));
        }
        let mut times = [Duration::ZERO; 2];
        for turn in 0..2 {
            let side = (turn + c) % 2;
            let t = Instant::now();
            for e in &entities {
                let w = vec![Write::Put(e.clone())];
                let done = if side == 0 {
                    store.write_batch(w).await.unwrap()
                } else {
                    serial.write_serial(w).await.unwrap()
                };
                assert_eq!(done, [WriteOutcome::Applied]);
            }
            times[side] = t.elapsed();
        }
        if c == 0 {
            continue;
        }
        p.plain += times[0];
        p.serial += times[1];
        p.serial_over_plain
            .push(times[1].as_secs_f64() / times[0].as_secs_f64().max(1e-9));
    }
    p
}

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(100_000, 3);
    let count = a
        .value("--reads")
        .map_or(20_000, |v| v.parse().expect("--reads N"))
        .min(a.entities)
        .max(2 * CHUNK);
    let put_count = a
        .value("--puts")
        .map_or(5_000, |v| v.parse().expect("--puts N"))
        .min(a.entities)
        .max(2 * CHUNK);
    let addr = server();
    println!(
        "lazy add+rename, cassandra at {addr}, {} entities, {count} up-to-date reads a side, \
         batch {}, {} round(s)",
        a.entities, a.batch, a.rounds
    );
    let session = session(&addr).await;
    let run = std::process::id();
    let (mut installs, mut eagers, mut over_raw, mut over_store, mut serial_over_plain) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=a.rounds {
        let eager_ks = format!("bench_eager_{run}_{round}");
        let lazy_ks = format!("bench_lazy_{run}_{round}");
        let eager = tern_cassandra::open(&format!("cassandra://{addr}/{eager_ks}"))
            .await
            .expect("open");
        bench::load(eager.as_ref(), a.entities).await.expect("load");
        let lazy = tern_cassandra::open(&format!("cassandra://{addr}/{lazy_ks}"))
            .await
            .expect("open");
        bench::load(lazy.as_ref(), a.entities).await.expect("load");
        let (up, eager_up) =
            bench::timed(bench::tern_up(Arc::clone(&eager), a.batch, a.pushdown)).await;
        up.expect("eager tern up");
        let install = lazy_bench::install(Arc::clone(&lazy))
            .await
            .expect("lazy install");
        println!(
            "round {round}: pause: eager tern up {:.2} s, lazy install {:.1} ms ({:.0}x shorter)",
            eager_up.as_secs_f64(),
            install.as_secs_f64() * 1e3,
            eager_up.as_secs_f64() / install.as_secs_f64()
        );
        // Up-to-date reads: the eager keyspace is all at version 2.
        let client = LazyClient::builder(Arc::clone(&eager))
            .declare("blogpost", 2)
            .connect()
            .await
            .expect("lazy client");
        let r = reads(
            &session,
            &eager_ks,
            eager.as_ref(),
            &client,
            a.entities,
            count,
        )
        .await;
        let counted = count.saturating_sub(CHUNK) as f64;
        let rate = |d: Duration| counted / d.as_secs_f64();
        let (m_raw, m_store) = (
            bench::median(&r.client_over_raw).unwrap_or(f64::NAN),
            bench::median(&r.client_over_store).unwrap_or(f64::NAN),
        );
        println!(
            "round {round}: up-to-date reads: raw prepared SELECT {:.0}/s, Store::get {:.0}/s, \
             lazy client {:.0}/s; lazy/raw {m_raw:.3}, lazy/Store::get {m_store:.3} (chunk medians)",
            rate(r.raw),
            rate(r.store),
            rate(r.client),
        );
        let p = puts(eager.as_ref(), a.entities, put_count).await;
        let counted = put_count.saturating_sub(CHUNK) as f64;
        let m_puts = bench::median(&p.serial_over_plain).unwrap_or(f64::NAN);
        println!(
            "round {round}: puts of existing entities, one at a time: plain (INSERT) {:.0}/s, \
             serial (UPDATE ... IF EXISTS) {:.0}/s; serial/plain time {m_puts:.2} (chunk median)",
            counted / p.plain.as_secs_f64(),
            counted / p.serial.as_secs_f64(),
        );
        serial_over_plain.push(m_puts);
        installs.push(install.as_secs_f64() * 1e3);
        eagers.push(eager_up.as_secs_f64());
        over_raw.push(m_raw);
        over_store.push(m_store);
        for ks in [&eager_ks, &lazy_ks] {
            session
                .query_unpaged(format!("DROP KEYSPACE IF EXISTS {ks}"), &[])
                .await
                .unwrap();
        }
    }
    let m = |v: &[f64]| bench::median(v).unwrap_or(f64::NAN);
    println!(
        "median over {} round(s): lazy install {:.1} ms, eager tern up {:.2} s; \
         lazy client read / raw SELECT {:.3}, / Store::get {:.3}; serial put / plain put {:.2}",
        a.rounds,
        m(&installs),
        m(&eagers),
        m(&over_raw),
        m(&over_store),
        m(&serial_over_plain)
    );
}
