//! KVolve's Table I on Redis ([KV] section 4.1): a redis-benchmark-style load
//! of 50 concurrent clients on random keys of a million prefixed entities,
//! gets and sets, unpipelined and 10 to a round trip, through the raw driver
//! and through tern's lazy client, side by side in one run.
//!
//! Three sides, on up-to-date entities (hashes with one 3-byte field `val`;
//! with `--layout json`, JSON strings `{"val":"xxx"}`):
//!
//! - **raw**: the `redis` crate's multiplexed connection (the driver tern's
//!   store uses), `HGETALL` and `HSET key val xxx` (with `--layout json`:
//!   `GET` and `SET key {"val":"xxx"}`; pipelined: `redis::pipe`);
//! - **lazy**: [`LazyClient::get`] / [`LazyClient::put`] (pipelined:
//!   `get_many` / `put_many` of 10) on kind `kv`, which has no migration;
//! - **lazy &prev**: the same on kind `kvnew`, lazily renamed from `kvprev`
//!   (KVolve's "&Prev NS": one former prefix declared; a get finds the key
//!   under its new name and never looks at the old one, a put also deletes a
//!   stale copy under the old name in the same atomic script).
//!
//! Each test runs in chunks: in a chunk every side in turn (the order
//! rotating) runs 50 tasks of `--ops` operations each; the figure is the
//! median over the chunks of (side's chunk time / raw chunk time), so a
//! change in the machine's load falls on all sides alike.
//!
//! ```sh
//! scripts/servers.sh start redis
//! cargo bench -p tern-redis --bench load -- --entities 1000000 --chunks 20 --ops 200
//! cargo bench -p tern-redis --bench load -- --entities 1000000 --chunks 20 --ops 200 --layout json
//! ```
//!
//! Uses database 14 of the server at `TERN_BENCH_REDIS_URL` (default
//! `redis://127.0.0.1:6379`) and **flushes it** before and after.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tern_core::lazy::LazyClient;
use tern_core::migrate::{Migration, MigrationSet, Migrator};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write};
use tern_testkit::bench::BenchArgs;

mod common;
use common::{base_url, connect, flush};

/// Concurrent clients, as redis-benchmark's default.
const CLIENTS: usize = 50;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Raw,
    Lazy,
    LazyPrev,
}

const SIDES: [Side; 3] = [Side::Raw, Side::Lazy, Side::LazyPrev];

#[derive(Clone, Copy, Debug)]
enum Op {
    Get,
    Set,
}

/// What every client task needs.
struct Ctx {
    raw: MultiplexedConnection,
    client: LazyClient,
    n: usize,
    /// Entities are JSON strings (`--layout json`), not hashes.
    json: bool,
}

fn id(i: usize) -> String {
    format!("{i:07}")
}

fn kind_of(side: Side) -> &'static str {
    match side {
        Side::Raw | Side::Lazy => "kv",
        Side::LazyPrev => "kvnew",
    }
}

/// A small xorshift: random keys without a shared generator.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A 3-byte value drawn from `x`.
fn text(x: u64) -> String {
    (0..3)
        .map(|i| char::from(b'a' + ((x >> (i * 5)) % 26) as u8))
        .collect()
}

/// An entity's value: the one field `val`.
fn value(x: u64) -> Map {
    Map::from([("val".to_owned(), Value::String(text(x)))])
}

/// One client's `ops` operations, `pipeline` to a round trip.
async fn client_task(ctx: Arc<Ctx>, side: Side, op: Op, pipeline: usize, ops: usize, seed: u64) {
    let mut rng = seed | 1;
    let mut raw = ctx.raw.clone();
    let kind = kind_of(side);
    for _ in 0..ops / pipeline {
        let picks: Vec<(usize, u64)> = (0..pipeline)
            .map(|_| {
                let r = next(&mut rng);
                ((r % ctx.n as u64) as usize, r >> 20)
            })
            .collect();
        match (side, op) {
            (Side::Raw, Op::Get) if ctx.json => {
                let mut p = redis::pipe();
                for (i, _) in &picks {
                    p.cmd("GET").arg(format!("{kind}:{}", id(*i)));
                }
                let rows: Vec<Option<String>> = p.query_async(&mut raw).await.expect("raw get");
                assert!(rows.iter().all(Option::is_some), "raw get: a key missing");
            }
            (Side::Raw, Op::Set) if ctx.json => {
                let mut p = redis::pipe();
                for (i, x) in &picks {
                    p.cmd("SET")
                        .arg(format!("{kind}:{}", id(*i)))
                        .arg(format!("{{\"val\":\"{}\"}}", text(*x)))
                        .ignore();
                }
                let () = p.query_async(&mut raw).await.expect("raw set");
            }
            (Side::Raw, Op::Get) => {
                let mut p = redis::pipe();
                for (i, _) in &picks {
                    p.cmd("HGETALL").arg(format!("{kind}:{}", id(*i)));
                }
                let rows: Vec<Vec<(String, String)>> =
                    p.query_async(&mut raw).await.expect("raw get");
                assert!(rows.iter().all(|r| !r.is_empty()), "raw get: a key missing");
            }
            (Side::Raw, Op::Set) => {
                let mut p = redis::pipe();
                for (i, x) in &picks {
                    p.cmd("HSET")
                        .arg(format!("{kind}:{}", id(*i)))
                        .arg("val")
                        .arg(text(*x))
                        .ignore();
                }
                let () = p.query_async(&mut raw).await.expect("raw set");
            }
            (_, Op::Get) => {
                let keys: Vec<Key> = picks.iter().map(|(i, _)| key(kind, *i)).collect();
                if pipeline == 1 {
                    let got = ctx.client.get(&keys[0]).await.expect("lazy get");
                    assert!(got.is_some(), "lazy get: a key missing");
                } else {
                    let got = ctx.client.get_many(&keys).await.expect("lazy get_many");
                    assert!(got.iter().all(Option::is_some), "lazy get: a key missing");
                }
            }
            (_, Op::Set) => {
                if pipeline == 1 {
                    let (i, x) = picks[0];
                    ctx.client
                        .put(&key(kind, i), value(x))
                        .await
                        .expect("lazy put");
                } else {
                    let writes = picks
                        .iter()
                        .map(|(i, x)| (key(kind, *i), value(*x)))
                        .collect();
                    ctx.client.put_many(writes).await.expect("lazy put_many");
                }
            }
        }
    }
}

fn key(kind: &str, i: usize) -> Key {
    Key {
        kind: kind.to_owned(),
        id: Value::String(id(i)),
    }
}

/// One side's chunk: 50 tasks, joined; its wall time.
async fn chunk(
    ctx: &Arc<Ctx>,
    side: Side,
    op: Op,
    pipeline: usize,
    ops: usize,
    seed: u64,
) -> Duration {
    let t = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let ctx = Arc::clone(ctx);
            tokio::spawn(client_task(
                ctx,
                side,
                op,
                pipeline,
                ops,
                seed ^ (c as u64 * 0x9E37_79B9),
            ))
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
    t.elapsed()
}

/// Loads `n` entities of `kind` at `version` through the store, in batches.
async fn load(store: &dyn Store, kind: &str, version: u64, n: usize) {
    for start in (0..n).step_by(1000) {
        let writes = (start..(start + 1000).min(n))
            .map(|i| {
                Write::Put(Entity {
                    key: key(kind, i),
                    version,
                    value: value(i as u64),
                })
            })
            .collect();
        store.write_batch(writes).await.expect("load");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = BenchArgs::parse(1_000_000, 1);
    let number = |name: &str, default: usize| {
        args.value(name).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} needs a number"))
        })
    };
    let chunks = number("--chunks", 20);
    let ops = number("--ops", 200);
    let json = match args.value("--layout") {
        None | Some("hash") => false,
        Some("json") => true,
        Some(other) => panic!("--layout takes hash or json, not {other}"),
    };
    let url = format!("{}/14", base_url());
    flush(&url).await;
    let store = common::open(&format!("{url}{}", if json { "?json=*" } else { "" })).await;
    let mut set = MigrationSet::new();
    set.add(
        Migration::from_script(
            1,
            "prev",
            "0001_prev.tern",
            "lazy\nrename kind kvprev to kvnew\n",
        )
        .expect("script"),
    )
    .expect("set");
    Migrator::new(Arc::clone(&store), set)
        .up(None)
        .await
        .expect("install");
    let t = Instant::now();
    load(store.as_ref(), "kv", 0, args.entities).await;
    load(store.as_ref(), "kvnew", 0, args.entities).await;
    println!(
        "Redis at {url}: {} entities ({}) under kv: and under kvnew: (renamed lazily from kvprev:), loaded in {:.1} s; {CLIENTS} clients, {chunks} chunks of {ops} operations per client and side",
        args.entities,
        if json { "JSON strings" } else { "hashes" },
        t.elapsed().as_secs_f64()
    );
    let client = LazyClient::builder(Arc::clone(&store))
        .declare("kv", 0)
        .declare("kvnew", 0)
        .connect()
        .await
        .expect("lazy client");
    let ctx = Arc::new(Ctx {
        raw: connect(&url).await,
        client,
        n: args.entities,
        json,
    });
    println!(
        "| test | raw ops/s | lazy ops/s | lazy overhead | lazy &prev ops/s | &prev overhead |"
    );
    println!("|---|---|---|---|---|---|");
    for (op, pipeline) in [(Op::Get, 1), (Op::Set, 1), (Op::Get, 10), (Op::Set, 10)] {
        let mut total = [Duration::ZERO; 3];
        let mut ratios = [Vec::new(), Vec::new()];
        for c in 0..chunks {
            let mut times = [Duration::ZERO; 3];
            for k in 0..3 {
                let s = (c + k) % 3;
                let seed = 0x5EED_u64.wrapping_mul(c as u64 + 1);
                times[s] = chunk(&ctx, SIDES[s], op, pipeline, ops, seed).await;
            }
            for s in 0..3 {
                total[s] += times[s];
            }
            ratios[0].push(times[1].as_secs_f64() / times[0].as_secs_f64());
            ratios[1].push(times[2].as_secs_f64() / times[0].as_secs_f64());
        }
        let done = (CLIENTS * (ops / pipeline * pipeline) * chunks) as f64;
        let rate = |d: Duration| done / d.as_secs_f64();
        let name = format!(
            "{} {}",
            match op {
                Op::Get => "GET",
                Op::Set => "SET",
            },
            if pipeline == 1 {
                "unpipelined".to_owned()
            } else {
                format!("-P {pipeline}")
            }
        );
        let [lazy, prev] =
            ratios.map(|r| (tern_testkit::bench::median(&r).unwrap_or(f64::NAN) - 1.0) * 100.0);
        println!(
            "| {name} | {:.0} | {:.0} | {lazy:+.1} % | {:.0} | {prev:+.1} % |",
            rate(total[0]),
            rate(total[1]),
            rate(total[2]),
        );
    }
    flush(&url).await;
}
