//! KVolve's Table I on Redis ([KV] section 4.1): a redis-benchmark-style load
//! of 50 concurrent clients on random keys of a million prefixed entities,
//! gets and sets, unpipelined and 10 to a round trip, through the raw driver
//! and through tern's lazy client, side by side in one run.
//!
//! Three sides (four for sets), on up-to-date entities (hashes with one 3-byte field `val`;
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
//! - **one-command script** (sets only): the raw side's write run inside a
//!   script that does nothing else (`EVALSHA` of `return redis.call(...)`),
//!   through the same connection: the least a write checked in the server
//!   costs on a Redis without a module, so the lazy put's overhead can be read
//!   against it.
//!
//! Besides the throughputs, the CPU each side cost per operation: on the
//! server (Redis's `INFO cpu` around each chunk) and in this process (all its
//! threads), which tells the server's cost from the client's.
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
    /// The least any script-based write costs: the raw side's write inside a
    /// one-command script ([`FLOOR_SCRIPT`]), through the same driver.
    Floor,
}

const SIDES: [Side; 4] = [Side::Raw, Side::Lazy, Side::LazyPrev, Side::Floor];

/// The raw side's write (`HSET key field value`, `SET key text`) as a script:
/// what a Redis without a module charges for any write checked in the server.
const FLOOR_SCRIPT: &str = "return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))";

#[derive(Clone, Copy, Debug)]
enum Op {
    Get,
    Set,
}

/// What every client task needs.
struct Ctx {
    raw: MultiplexedConnection,
    /// The SHA1 of [`FLOOR_SCRIPT`], loaded.
    floor: String,
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
        Side::Raw | Side::Lazy | Side::Floor => "kv",
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
            (Side::Floor, _) => {
                let mut p = redis::pipe();
                for (i, x) in &picks {
                    let call = p
                        .cmd("EVALSHA")
                        .arg(&ctx.floor)
                        .arg(1)
                        .arg(format!("{kind}:{}", id(*i)));
                    if ctx.json {
                        call.arg("SET").arg(format!("{{\"val\":\"{}\"}}", text(*x)));
                    } else {
                        call.arg("HSET").arg("val").arg(text(*x));
                    }
                    call.ignore();
                }
                let () = p.query_async(&mut raw).await.expect("floor set");
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

/// What a chunk took: its wall time, the CPU the server spent on it (Redis's
/// `INFO cpu`) and the CPU this process spent on it (every client's work and
/// the driver's).
#[derive(Clone, Copy, Default)]
struct Spent {
    wall: Duration,
    server: Duration,
    client: Duration,
}

impl std::ops::AddAssign for Spent {
    fn add_assign(&mut self, o: Spent) {
        self.wall += o.wall;
        self.server += o.server;
        self.client += o.client;
    }
}

/// The CPU time the server has used (`used_cpu_sys` + `used_cpu_user`).
async fn server_cpu(conn: &mut MultiplexedConnection) -> Duration {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(conn)
        .await
        .expect("INFO cpu");
    let seconds: f64 = info
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| *k == "used_cpu_sys" || *k == "used_cpu_user")
        .map(|(_, v)| v.trim().parse::<f64>().expect("a CPU time"))
        .sum();
    Duration::from_secs_f64(seconds)
}

/// One side's chunk: 50 tasks, joined.
async fn chunk(
    ctx: &Arc<Ctx>,
    side: Side,
    op: Op,
    pipeline: usize,
    ops: usize,
    seed: u64,
) -> Spent {
    let mut conn = ctx.raw.clone();
    let server = server_cpu(&mut conn).await;
    let client = tern_testkit::bench::process_cpu().unwrap_or_default();
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
    let wall = t.elapsed();
    Spent {
        wall,
        client: tern_testkit::bench::process_cpu()
            .unwrap_or_default()
            .saturating_sub(client),
        server: server_cpu(&mut conn).await - server,
    }
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
    let mut raw = connect(&url).await;
    let floor = redis::Script::new(FLOOR_SCRIPT)
        .load_async(&mut raw)
        .await
        .expect("load the floor script");
    let ctx = Arc::new(Ctx {
        raw,
        floor,
        client,
        n: args.entities,
        json,
    });
    println!(
        "| test | raw ops/s | lazy ops/s | lazy overhead | lazy &prev ops/s | &prev overhead | one-command script ops/s | its overhead |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut cpu = Vec::new();
    for (op, pipeline) in [(Op::Get, 1), (Op::Set, 1), (Op::Get, 10), (Op::Set, 10)] {
        // The floor of a script-based write is measured for writes only.
        let sides = match op {
            Op::Get => 3,
            Op::Set => 4,
        };
        let mut total = [Spent::default(); 4];
        let mut ratios = [Vec::new(), Vec::new(), Vec::new()];
        for c in 0..chunks {
            let mut times = [Spent::default(); 4];
            for k in 0..sides {
                let s = (c + k) % sides;
                let seed = 0x5EED_u64.wrapping_mul(c as u64 + 1);
                times[s] = chunk(&ctx, SIDES[s], op, pipeline, ops, seed).await;
            }
            for s in 0..sides {
                total[s] += times[s];
            }
            for s in 1..sides {
                ratios[s - 1].push(times[s].wall.as_secs_f64() / times[0].wall.as_secs_f64());
            }
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
        let [lazy, prev, floor] =
            ratios.map(|r| (tern_testkit::bench::median(&r).unwrap_or(f64::NAN) - 1.0) * 100.0);
        let floor = if sides == 4 {
            format!("{:.0} | {floor:+.1} %", rate(total[3].wall))
        } else {
            "- | -".to_owned()
        };
        println!(
            "| {name} | {:.0} | {:.0} | {lazy:+.1} % | {:.0} | {prev:+.1} % | {floor} |",
            rate(total[0].wall),
            rate(total[1].wall),
            rate(total[2].wall),
        );
        // µs per operation of each side, `-` for a side not run.
        let cells = |of: fn(&Spent) -> Duration| {
            total[..sides]
                .iter()
                .map(|t| format!("{:.2}", of(t).as_secs_f64() * 1e6 / done))
                .collect::<Vec<_>>()
                .join(" | ")
                + &" | -".repeat(4 - sides)
        };
        cpu.push(format!(
            "| {name} | {} | {} |",
            cells(|t| t.server),
            cells(|t| t.client)
        ));
    }
    println!(
        "\nCPU per operation, µs (server: Redis's `INFO cpu`; client: this process, all threads):\n"
    );
    println!(
        "| test | server: raw | lazy | &prev | script | client: raw | lazy | &prev | script |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for line in cpu {
        println!("{line}");
    }
    flush(&url).await;
}
