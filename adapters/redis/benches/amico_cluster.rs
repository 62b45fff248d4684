//! KVolve's Amico update ([KV] 2.3 (c)) on a Redis Cluster, which KVolve left
//! as future work: the sorted sets `amico:<scope>:<id>` get a scope,
//! `amico:<scope>:default:<id>`, eagerly and lazily, side by side in one run:
//!
//! - **rename loop** (ids as hash tags, `amico:<scope>:{<id>}`): per master,
//!   `SCAN MATCH` and a pipelined `RENAME` of each key not yet scoped, on that
//!   master's connection (the old and the new key share a slot);
//! - **tern up, ids as hash tags** (`id_tag=1`): one `RENAMENX` script per key
//!   in its slot;
//! - **tern up, plain ids** (`amico:<scope>:<id>`): the old and the new key lie
//!   in different slots, so each key is copied (`DUMP`/`RESTORE`), then deleted
//!   if unchanged: three scripts per key;
//! - **lazy** (ids as hash tags): the install's pause, first reads through the
//!   lazy client (each moves a sorted set in its slot), and a `tern sweep`.
//!
//! Every side ends checked: each sorted set under its new name with its
//! members and scores, nothing under the old names.
//!
//! ```sh
//! scripts/servers.sh start cluster
//! cargo bench -p tern-redis --bench amico_cluster -- --n 100000
//! ```
//!
//! Talks to the cluster at `TERN_BENCH_REDIS_CLUSTER_URL` (default
//! `redis://127.0.0.1:7001`), each side under a key prefix of its own, which
//! it **deletes** before and after.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use tern_core::lazy::LazyClient;
use tern_core::migrate::{Migrator, RunOptions};
use tern_core::model::{Key, Value};
use tern_testkit::bench::BenchArgs;

mod common;
use common::amico::{SCOPES, members, migrations, scoped};
use common::{scan_apply, unlink_matching};

/// The cluster's seed URL (no tern options). Benchmarks talk to 127.0.0.1 only.
fn seed_url() -> String {
    let url = std::env::var("TERN_BENCH_REDIS_CLUSTER_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:7001".to_owned());
    assert!(
        url.contains("127.0.0.1"),
        "benchmarks talk to 127.0.0.1 only"
    );
    url.split('?')
        .next()
        .unwrap_or_default()
        .trim_end_matches('/')
        .to_owned()
}

/// One side: its key prefix and whether ids are hash tags.
#[derive(Clone, Copy)]
struct Side {
    prefix: &'static str,
    tagged: bool,
}

impl Side {
    const fn new(prefix: &'static str, tagged: bool) -> Side {
        Side { prefix, tagged }
    }

    /// The key of sorted set `i`, under its old or its scoped name.
    fn key(self, i: usize, scoped: bool) -> String {
        let scope = SCOPES[i % SCOPES.len()];
        let id = if self.tagged {
            format!("{{{i}}}")
        } else {
            i.to_string()
        };
        let default = if scoped { "default:" } else { "" };
        format!("{}:amico:{scope}:{default}{id}", self.prefix)
    }

    /// tern's store URL for this side: every kind a sorted set.
    fn store_url(self) -> String {
        let kinds: Vec<String> = SCOPES
            .iter()
            .flat_map(|s| [format!("amico:{s}"), format!("amico:{s}:default")])
            .collect();
        format!(
            "{}/?cluster=1&prefix={}&zset={}{}",
            seed_url(),
            self.prefix,
            kinds.join(","),
            if self.tagged { "&id_tag=1" } else { "" }
        )
    }
}

async fn cluster() -> ClusterConnection {
    redis::cluster::ClusterClient::new(vec![seed_url()])
        .expect("cluster url")
        .get_async_connection()
        .await
        .expect("cluster connect")
}

/// A connection to each master (from `CLUSTER NODES`).
async fn masters(conn: &mut ClusterConnection) -> Vec<MultiplexedConnection> {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(conn)
        .await
        .expect("cluster nodes");
    let mut out = Vec::new();
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() > 2 && fields[2].contains("master") {
            let addr = fields[1].split('@').next().unwrap_or_default();
            let client = redis::Client::open(format!("redis://{addr}")).expect("node url");
            out.push(
                client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("node connect"),
            );
        }
    }
    out
}

/// Every key of `prefix:` on every master, `UNLINK`ed.
async fn delete_prefix(masters: &mut [MultiplexedConnection], prefix: &str) {
    for m in masters {
        unlink_matching(m, &format!("{prefix}:*")).await;
    }
}

/// Loads `n` sorted sets of 3 members, 1000 commands in flight at a time.
async fn load(conn: &ClusterConnection, side: Side, n: usize) {
    for start in (0..n).step_by(1000) {
        let calls = (start..(start + 1000).min(n)).map(|i| {
            let mut conn = conn.clone();
            async move {
                let mut cmd = redis::cmd("ZADD");
                cmd.arg(side.key(i, false));
                for (score, member) in members(i) {
                    cmd.arg(score).arg(member);
                }
                let _: () = cmd.query_async(&mut conn).await.expect("zadd");
            }
        });
        futures::future::join_all(calls).await;
    }
}

/// The baseline on tagged keys: per master, SCAN and a pipelined RENAME of
/// each key not yet scoped (SCAN may return a renamed key again).
async fn rename_loop(masters: &mut [MultiplexedConnection], side: Side) -> u64 {
    let mut renamed = 0;
    let pattern = format!("{}:amico:*", side.prefix);
    for m in masters {
        scan_apply(m, &pattern, 1000, |keys, pipe| {
            for k in keys {
                let new = k
                    .strip_prefix(side.prefix)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .and_then(scoped);
                if let Some(new) = new {
                    pipe.cmd("RENAME")
                        .arg(k)
                        .arg(format!("{}:{new}", side.prefix))
                        .ignore();
                    renamed += 1;
                }
            }
        })
        .await;
    }
    renamed
}

/// Every sorted set is under its scoped name with its members and scores,
/// nothing is left under the old names.
async fn check(conn: &ClusterConnection, side: Side, n: usize) {
    for start in (0..n).step_by(1000) {
        let calls = (start..(start + 1000).min(n)).map(|i| {
            let mut conn = conn.clone();
            async move {
                let got: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(side.key(i, true))
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn)
                    .await
                    .expect("zrange");
                let mut want: Vec<(String, f64)> =
                    members(i).into_iter().map(|(s, m)| (m, s)).collect();
                want.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                assert_eq!(got, want, "{}", side.key(i, true));
                let old: i64 = redis::cmd("EXISTS")
                    .arg(side.key(i, false))
                    .query_async(&mut conn)
                    .await
                    .expect("exists");
                assert_eq!(old, 0, "{} is still there", side.key(i, false));
            }
        });
        futures::future::join_all(calls).await;
    }
}

/// `tern up` of the five renames on `side`; its time.
async fn tern_up(side: Side, batch: usize) -> Duration {
    let store = tern_redis::open(&side.store_url()).await.expect("store");
    let t = Instant::now();
    let report = Migrator::new(store, migrations(false))
        .with_run_options(RunOptions {
            batch_size: batch,
            ..RunOptions::default()
        })
        .up(None)
        .await
        .expect("tern up");
    assert_eq!(report.applied.len(), SCOPES.len());
    t.elapsed()
}

/// The lazy side: install, first reads, sweep; prints each.
async fn lazy_side(side: Side, n: usize, batch: usize) {
    let store = tern_redis::open(&side.store_url()).await.expect("store");
    let t = Instant::now();
    Migrator::new(Arc::clone(&store), migrations(true))
        .up(None)
        .await
        .expect("lazy install");
    let install = t.elapsed();
    let mut builder = LazyClient::builder(Arc::clone(&store));
    for scope in SCOPES {
        builder = builder.declare(&format!("amico:{scope}:default"), 0);
    }
    let client = builder.connect().await.expect("lazy client");
    let reads = (n / 10).min(20_000);
    let t = Instant::now();
    for j in 0..reads {
        let i = j * 7919 % n;
        let key = Key {
            kind: format!("amico:{}:default", SCOPES[i % SCOPES.len()]),
            id: Value::String(i.to_string()),
        };
        assert!(client.get(&key).await.expect("read").is_some(), "{key}");
    }
    let read_time = t.elapsed();
    assert_eq!(client.stats().renamed_reads_in_store, reads as u64);
    let (moved, sweep) = common::amico::sweep(store, batch, None).await;
    println!(
        "lazy (ids as hash tags): install {:.1} ms (the pause); {reads} first reads, each moving a sorted set in its slot: {:.0}/s; then tern sweep renamed {moved} in {:.2} s ({:.0}/s)",
        install.as_secs_f64() * 1e3,
        reads as f64 / read_time.as_secs_f64(),
        sweep.as_secs_f64(),
        moved as f64 / sweep.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(100_000, 1);
    let n: usize = a
        .value("--n")
        .map(|v| v.parse().expect("--n needs a number"))
        .unwrap_or(a.entities);
    let mut conn = cluster().await;
    let mut nodes = masters(&mut conn).await;
    let looped = Side::new("ac_loop", true);
    let tagged = Side::new("ac_tagged", true);
    let plain = Side::new("ac_plain", false);
    let lazy = Side::new("ac_lazy", true);
    let sides = [looped, tagged, plain, lazy];
    println!(
        "Amico scope update on the Redis Cluster at {} ({} masters): {n} sorted sets of 3 members over 5 prefixes, batch {}",
        seed_url(),
        nodes.len(),
        a.batch
    );
    for side in sides {
        delete_prefix(&mut nodes, side.prefix).await;
        load(&conn, side, n).await;
    }
    let t = Instant::now();
    assert_eq!(rename_loop(&mut nodes, looped).await, n as u64);
    let loop_time = t.elapsed();
    let tagged_time = tern_up(tagged, a.batch).await;
    let plain_time = tern_up(plain, a.batch).await;
    for side in [looped, tagged, plain] {
        check(&conn, side, n).await;
    }
    let s = |d: Duration| d.as_secs_f64();
    println!("| side | time | sorted sets/s | / loop |");
    println!("|---|---|---|---|");
    for (name, d) in [
        ("rename loop (tagged ids, per master)", loop_time),
        ("tern up, ids as hash tags (id_tag=1)", tagged_time),
        ("tern up, plain ids (copy across slots)", plain_time),
    ] {
        println!(
            "| {name} | {:.2} s | {:.0} | {:.2} |",
            s(d),
            n as f64 / s(d),
            s(d) / s(loop_time)
        );
    }
    if !a.flag("--no-lazy") {
        lazy_side(lazy, n, a.batch).await;
        check(&conn, lazy, n).await;
        println!(
            "every side checked: members and scores under the new names, nothing under the old"
        );
    }
    for side in sides {
        delete_prefix(&mut nodes, side.prefix).await;
    }
}
