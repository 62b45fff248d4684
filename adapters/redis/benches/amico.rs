//! KVolve's Amico update ([KV] 2.3 (c)): the sorted sets `amico:followers:<id>`,
//! `amico:following:<id>`, `amico:blocked:<id>`, `amico:reciprocated:<id>` and
//! `amico:pending:<id>` get a scope, `...:default:<id>`. `tern up` of five
//! `rename kind` migrations (lease, checkpoint per batch, census passes)
//! against a plain pipelined SCAN + RENAME loop with the same driver, side by
//! side in one run; then checks that every sorted set kept its members and
//! scores. Then the same update installed `lazy` on a third copy (database
//! 11): the install's pause, first reads of stale sorted sets through the
//! lazy client (moved in the store against on the client), and a `tern
//! sweep` that renames every sorted set
//! (`--no-lazy` skips it; `--call-sizes 100,1000` runs it once per in-store
//! call size, default 100). Also measures the memory of tern's version tag per container
//! (`MEMORY USAGE` of a tagged vs an untagged sorted set and its tag key).
//!
//! ```sh
//! redis-server --port 6390 --save '' --appendonly no --daemonize yes
//! TERN_BENCH_REDIS_URL=redis://127.0.0.1:6390 \
//!   cargo bench -p tern-redis --bench amico -- --n 500000 --rounds 3
//! ```
//!
//! `--n` is the number of sorted sets in all (spread over the five prefixes),
//! each with 3 members. Uses databases 12 (tern) and 13 (loop) of the server
//! at `TERN_BENCH_REDIS_URL` (default `redis://127.0.0.1:6379`) and **flushes
//! them** before each round.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;
use std::time::Instant;

use redis::aio::MultiplexedConnection;
use tern_core::migrate::{Migrator, RunOptions};
use tern_testkit::bench::{BenchArgs, Ratios};

mod common;
use common::amico::{SCOPES, members, migrations, scoped};
use common::{base_url, connect, flush_conn as flush, scan_apply};

/// The key of sorted set `i` (its scope cycles through [`SCOPES`]).
fn key(i: usize, scoped: bool) -> String {
    let scope = SCOPES[i % SCOPES.len()];
    if scoped {
        format!("amico:{scope}:default:{i}")
    } else {
        format!("amico:{scope}:{i}")
    }
}

/// Loads `n` sorted sets of 3 members, pipelined by 1000.
async fn load(conn: &mut MultiplexedConnection, n: usize) {
    for start in (0..n).step_by(1000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 1000).min(n) {
            let cmd = pipe.cmd("ZADD").arg(key(i, false));
            for (score, member) in members(i) {
                cmd.arg(score).arg(member);
            }
            pipe.ignore();
        }
        let _: () = pipe.query_async(conn).await.expect("load");
    }
}

/// The baseline: SCAN MATCH `amico:*` COUNT 1000, pipelined RENAME of each key
/// not yet scoped (SCAN may return a renamed key again).
async fn rename_loop(conn: &mut MultiplexedConnection) -> u64 {
    let mut renamed = 0u64;
    scan_apply(conn, "amico:*", 1000, |keys, pipe| {
        for k in keys {
            if let Some(new) = scoped(k) {
                pipe.cmd("RENAME").arg(k).arg(new).ignore();
                renamed += 1;
            }
        }
    })
    .await;
    renamed
}

/// The store URL options: every kind a sorted set, old and new names declared.
fn options() -> String {
    let kinds: Vec<String> = SCOPES
        .iter()
        .flat_map(|s| [format!("amico:{s}"), format!("amico:{s}:default")])
        .collect();
    format!("?zset={}", kinds.join(","))
}

/// Every sorted set is under its scoped name with its members and scores,
/// and nothing is left under the old names.
async fn check(conn: &mut MultiplexedConnection, n: usize) {
    for start in (0..n).step_by(1000) {
        let end = (start + 1000).min(n);
        let mut pipe = redis::pipe();
        for i in start..end {
            pipe.cmd("ZRANGE")
                .arg(key(i, true))
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES");
            pipe.cmd("EXISTS").arg(key(i, false));
        }
        let replies: Vec<redis::Value> = pipe.query_async(conn).await.expect("check");
        for (j, pair) in replies.chunks(2).enumerate() {
            let i = start + j;
            let got: Vec<(String, f64)> = redis::from_redis_value_ref(&pair[0]).expect("zset");
            let mut want: Vec<(String, f64)> =
                members(i).into_iter().map(|(s, m)| (m, s)).collect();
            want.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            assert_eq!(got, want, "{}", key(i, true));
            let old: i64 = redis::from_redis_value_ref(&pair[1]).expect("exists");
            assert_eq!(old, 0, "{} is still there", key(i, false));
        }
    }
}

/// The same update installed `lazy` on a fresh copy (database 11): the
/// install's pause, a `tern sweep` of every sorted set, the check.
async fn lazy_round(url: &str, n: usize, batch: usize, call_size: usize) {
    let mut conn = connect(url).await;
    flush(&mut conn).await;
    load(&mut conn, n).await;
    let config = tern_redis::RedisConfig::from_url(&format!("{url}{}", options())).expect("url");
    let store = Arc::new(
        tern_redis::RedisStore::connect(config)
            .await
            .expect("connect"),
    );
    let t = Instant::now();
    Migrator::new(store.clone(), migrations(true))
        .up(None)
        .await
        .expect("lazy install");
    let install = t.elapsed();
    if call_size == FIRST_CALL_SIZE {
        first_reads(&store, n).await;
    }
    let (moved, sweep) = common::amico::sweep(store, batch, Some(call_size)).await;
    check(&mut conn, n).await;
    println!(
        "lazy (calls of {call_size}): install {:.1} ms (the pause), then tern sweep renamed {moved} sorted sets in {:.2} s ({:.0}/s); members and scores checked",
        install.as_secs_f64() * 1e3,
        sweep.as_secs_f64(),
        moved as f64 / sweep.as_secs_f64()
    );
    flush(&mut conn).await;
}

/// The call size whose lazy round also times first reads ([`first_reads`]).
const FIRST_CALL_SIZE: usize = 100;

/// First reads through the lazy client of sorted sets still under their old
/// name, in chunks of 500 alternating between a client that moves each in the
/// store (`Store::get_advanced` with the former name: one script, or a plain
/// read that misses first once most reads find sets under the new name)
/// and one that does it on the client (`migrate_in_store(false)`: a read under
/// each name, then an atomic write carrying the value), on disjoint keys.
async fn first_reads(store: &Arc<tern_redis::RedisStore>, n: usize) {
    use tern_core::lazy::LazyClient;
    use tern_core::model::{Key, Value};
    let client = |in_store: bool| {
        let mut b = LazyClient::builder(store.clone()).migrate_in_store(in_store);
        for scope in SCOPES {
            b = b.declare(&format!("amico:{scope}:default"), 0);
        }
        b.connect()
    };
    let (moving, on_client) = (
        client(true).await.expect("client"),
        client(false).await.expect("client"),
    );
    let reads = (n / 4).min(20_000);
    let mut times = [std::time::Duration::ZERO; 2];
    for chunk in (0..reads).collect::<Vec<_>>().chunks(500) {
        for (side, c) in [&moving, &on_client].into_iter().enumerate() {
            let t = Instant::now();
            for i in chunk {
                let id = (2 * i + side) * 7919 % n;
                let key = Key {
                    kind: format!("amico:{}:default", SCOPES[id % SCOPES.len()]),
                    id: Value::String(id.to_string()),
                };
                assert!(c.get(&key).await.expect("read").is_some(), "{key}");
            }
            times[side] += t.elapsed();
        }
    }
    assert_eq!(moving.stats().renamed_reads_in_store, reads as u64);
    let rate = |d: std::time::Duration| reads as f64 / d.as_secs_f64();
    println!(
        "lazy first reads of {reads} sorted sets under their old names (each moved): in the store {:.0}/s, on the client {:.0}/s ({:.2}x the time)",
        rate(times[0]),
        rate(times[1]),
        times[1].as_secs_f64() / times[0].as_secs_f64()
    );
}

async fn memory_usage(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query_async::<Option<i64>>(conn)
        .await
        .expect("memory usage")
        .unwrap_or(0)
}

/// Memory of the version tag: `m` sorted sets written by tern at version 0
/// (no tag key) and at version 1 (a tag key), `MEMORY USAGE` summed over the
/// sorted sets and their tag keys.
async fn tag_memory(url: &str, conn: &mut MultiplexedConnection, m: usize) {
    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::{Store, Write};
    flush(conn).await;
    let config = tern_redis::RedisConfig::from_url(&format!("{url}?zset=t")).expect("url");
    let store = tern_redis::RedisStore::connect(config)
        .await
        .expect("connect");
    for version in [0u64, 1] {
        let writes = (0..m)
            .map(|i| {
                let pairs = members(i)
                    .into_iter()
                    .map(|(s, mem)| Value::Array(vec![Value::from(mem), Value::Float(s)]))
                    .collect();
                let mut value = Map::new();
                value.insert("members".into(), Value::Array(pairs));
                let mut e = Entity::new(
                    Key::new("t", format!("v{version}:{i}")).expect("key"),
                    value,
                );
                e.version = version;
                Write::Put(e)
            })
            .collect();
        store.write_batch(writes).await.expect("write");
        let (mut container, mut tag) = (0i64, 0i64);
        for i in 0..m {
            let k = format!("t:v{version}:{i}");
            container += memory_usage(conn, &k).await;
            tag += memory_usage(conn, &format!("__tern:v:{{{k}}}")).await;
        }
        let per = |b: i64| b as f64 / m as f64;
        println!(
            "version {version}: sorted set {:.1} B, tag key {:.1} B per entity (MEMORY USAGE, {m} entities)",
            per(container),
            per(tag)
        );
    }
}

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(500_000, 1);
    let n: usize = a
        .value("--n")
        .map(|v| v.parse().expect("--n needs a number"))
        .unwrap_or(a.entities);
    let base = base_url();
    let (tern_url, loop_url) = (format!("{base}/12"), format!("{base}/13"));
    println!(
        "Amico scope update: {n} sorted sets of 3 members over 5 prefixes, {} round(s), batch {}",
        a.rounds, a.batch
    );
    let mut tern_conn = connect(&tern_url).await;
    let mut loop_conn = connect(&loop_url).await;
    let mut ratios = Ratios::new("rename loop");
    for round in 0..a.rounds {
        flush(&mut tern_conn).await;
        flush(&mut loop_conn).await;
        load(&mut tern_conn, n).await;
        load(&mut loop_conn, n).await;

        let t = Instant::now();
        let renamed = rename_loop(&mut loop_conn).await;
        let loop_time = t.elapsed();
        assert_eq!(renamed, n as u64);

        let config =
            tern_redis::RedisConfig::from_url(&format!("{tern_url}{}", options())).expect("url");
        let store = Arc::new(
            tern_redis::RedisStore::connect(config)
                .await
                .expect("connect"),
        );
        let t = Instant::now();
        let report = Migrator::new(store, migrations(false))
            .with_run_options(RunOptions {
                batch_size: a.batch,
                ..RunOptions::default()
            })
            .up(None)
            .await
            .expect("tern up");
        let tern_time = t.elapsed();
        assert_eq!(report.applied.len(), SCOPES.len());

        check(&mut tern_conn, n).await;
        check(&mut loop_conn, n).await;
        ratios.record(round, (n as u64, loop_time), (n as u64, tern_time));
    }
    ratios.finish();
    if !a.flag("--no-lazy") {
        let sizes = a.value("--call-sizes").unwrap_or("100");
        for size in sizes.split(',') {
            let size = size
                .parse()
                .expect("--call-sizes takes numbers, comma-separated");
            lazy_round(&format!("{base}/11"), n, a.batch, size).await;
        }
    }
    tag_memory(&tern_url, &mut tern_conn, 10_000.min(n.max(1))).await;
    flush(&mut tern_conn).await;
    flush(&mut loop_conn).await;
}
