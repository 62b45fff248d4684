//! The faults a production Cassandra brings, on the three-node cluster of
//! `TERN_IT_CASSANDRA_CLUSTER_URL` (`scripts/servers.sh start cassandra-cluster`: 127.0.0.1-3,
//! keyspaces with replication factor 3, reads and writes at `quorum`): a node SIGKILLed and
//! restarted during a migration while an application writes, two runners racing, and a lazy
//! migration read while a node is down.
//!
//! One test runs them in turn (they kill and restart the cluster's nodes, which no other test
//! may see). Nodes are killed and restarted by `scripts/servers.sh kill-node N` / `start
//! cassandra-cluster`, in the environment of the test (the same `TERN_STATE_DIR` and ports).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tern_core::lazy::LazyClient;
use tern_core::migrate::{LeaseOptions, Migrator, RunOptions};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write, WriteOutcome};
use tern_integration_tests::cassandra::{CassBackend, cluster_backend};
use tern_testkit::battery::{self, Backend, report};

const BACKEND: &str = "cassandra-cluster";

/// Runs `scripts/servers.sh ARGS...`, failing with its output when it fails.
async fn servers(args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/servers.sh");
    let started = Instant::now();
    let out = tokio::process::Command::new(script)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    assert!(
        out.status.success(),
        "servers.sh {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "servers.sh {args:?}: {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

fn props(pairs: &[(&str, Value)]) -> Map {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn post(id: i64, hits: i64) -> Entity {
    Entity::new(
        Key::new("blogpost", id).unwrap(),
        props(&[
            ("title", Value::from(format!("post {id}"))),
            ("text", Value::from(format!("text {id}"))),
            ("hits", Value::Int(hits)),
        ]),
    )
}

/// What the application writer did to each id: increments acknowledged as applied, and
/// increments whose outcome it could not know (an error on the write: it may have applied).
#[derive(Default)]
struct Hits {
    applied: BTreeMap<i64, i64>,
    unknown: BTreeMap<i64, i64>,
    errors: u64,
}

/// Old application code incrementing `hits` by compare-and-set until `stop`, sequentially
/// over `n` ids. Never gives up on an error (a node is being killed under it).
fn writer(store: Arc<dyn Store>, n: i64, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Hits> {
    tokio::spawn(async move {
        let mut hits = Hits::default();
        let mut i: i64 = 0;
        while !stop.load(Ordering::SeqCst) {
            i += 1;
            let id = (i * 7919) % n;
            let key = Key::new("blogpost", id).unwrap();
            let Ok(Some(current)) = store.get(&key).await else {
                hits.errors += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Some(Value::Int(old)) = current.value.get("hits").cloned() else {
                panic!("hits lost on {key}: {current:?}");
            };
            let mut new = current.clone();
            new.value.insert("hits".into(), Value::Int(old + 1));
            match store
                .write_batch(vec![Write::Replace {
                    expected: current,
                    new,
                }])
                .await
            {
                Ok(out) if out[0] == WriteOutcome::Applied => {
                    *hits.applied.entry(id).or_default() += 1;
                }
                Ok(_) => {}
                Err(_) => {
                    hits.errors += 1;
                    *hits.unknown.entry(id).or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        hits
    })
}

/// `up` until it completes, resuming after each failure (as an operator reruns `tern up`).
async fn up_until_done(store: &Arc<dyn Store>, scripts: &[(u32, &str)]) -> usize {
    let mut failures = 0;
    loop {
        let run = Migrator::new(Arc::clone(store), battery::set(scripts))
            .with_run_options(RunOptions {
                batch_size: 20,
                pushdown_batch_size: 20,
                max_rate: Some(40.0),
                census_passes: 1000,
                ..RunOptions::default()
            })
            .with_lease_options(LeaseOptions {
                ttl: Duration::from_secs(5),
                wait: Some(Duration::from_secs(60)),
                renew: true,
            })
            .up(None)
            .await;
        match run {
            Ok(_) => return failures,
            Err(e) => {
                failures += 1;
                eprintln!("up failed ({failures}), resuming: {e:#}");
                assert!(failures < 30, "up keeps failing: {e:#}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// A node SIGKILLed and restarted during a migration at `quorum` while an application
/// writes: the run goes on or resumes, the export equals an uninterrupted run's over the same
/// writes, and no acknowledged write of the application is lost.
async fn a_node_killed_and_restarted_during_a_migration_loses_nothing(backend: &CassBackend) {
    const N: i64 = 1200;
    let store = backend.fresh().await;
    let entities: Vec<Entity> = (0..N).map(|i| post(i, 0)).collect();
    battery::load(store.as_ref(), &entities).await;
    let stop = Arc::new(AtomicBool::new(false));
    let app = writer(Arc::clone(&store), N, Arc::clone(&stop));
    let scripts = [(1, battery::RELEASE2)];
    let migration = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { up_until_done(&store, &scripts).await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!migration.is_finished(), "the migration outlasts the kill");
    servers(&["kill-node", "2"]).await;
    let killed = Instant::now();
    let restart = tokio::spawn(async { servers(&["start", "cassandra-cluster"]).await });
    let failures = migration.await.unwrap();
    let migrated_after = killed.elapsed();
    restart.await.unwrap();
    eprintln!(
        "migration done {:.1}s after the kill ({failures} resumed runs); node back {:.1}s after",
        migrated_after.as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    // The application keeps writing with every node back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let hits = app.await.unwrap();
    let acknowledged: i64 = hits.applied.values().sum();
    assert!(acknowledged >= 20, "the writer ran ({acknowledged} writes)");
    eprintln!(
        "application: {acknowledged} increments acknowledged, {} errors",
        hits.errors
    );
    // Every acknowledged increment is there (an unknown one may be too), and the store holds
    // what an uninterrupted run over the same data gives.
    let mut reference = Vec::new();
    for e in &entities {
        let Value::Int(id) = e.key.id else {
            unreachable!()
        };
        let stored = store.get(&e.key).await.unwrap().expect("entity kept");
        let Some(Value::Int(now)) = stored.value.get("hits").cloned() else {
            panic!("hits lost: {stored:?}");
        };
        let applied = hits.applied.get(&id).copied().unwrap_or(0);
        let unknown = hits.unknown.get(&id).copied().unwrap_or(0);
        assert!(
            (applied..=applied + unknown).contains(&now),
            "{}: {now} hits, {applied} acknowledged, {unknown} unknown",
            e.key
        );
        reference.push(post(id, now));
    }
    assert_eq!(
        battery::export(store.as_ref()).await,
        battery::memory_export(&reference, &scripts, 20).await,
        "the export equals an uninterrupted run's"
    );
    report(
        BACKEND,
        "a_node_killed_and_restarted_during_a_migration_loses_nothing",
        "passed",
    );
}

/// A lazy migration installed with every node up, then read (and written back) at `quorum`
/// while a node is down.
async fn a_lazy_migration_reads_while_a_node_is_down(backend: &CassBackend) {
    let store = backend.fresh().await;
    let posts: Vec<Entity> = (0..40)
        .map(|i| {
            Entity::new(
                Key::new("post", i).unwrap(),
                props(&[("text", Value::from("hi")), ("n", Value::Int(i))]),
            )
        })
        .collect();
    battery::load(store.as_ref(), &posts).await;
    tern_testkit::lazy::up(
        &store,
        &[(1, "lazy\nadd post.likes = 0\nrename post.text to content\n")],
    )
    .await
    .unwrap();
    servers(&["kill-node", "3"]).await;
    let client = LazyClient::builder(Arc::clone(&store))
        .declare("post", 2)
        .connect()
        .await
        .unwrap();
    for i in 0..40 {
        let key = Key::new("post", i).unwrap();
        let got = client.get(&key).await.unwrap().expect("post kept");
        let want = props(&[
            ("content", Value::from("hi")),
            ("n", Value::Int(i)),
            ("likes", Value::Int(0)),
        ]);
        assert_eq!((got.version, &got.value), (2, &want), "{key}");
        assert_eq!(store.get(&key).await.unwrap().unwrap().version, 2, "{key}");
    }
    servers(&["start", "cassandra-cluster"]).await;
    // The restarted node catches up: every post reads migrated at quorum.
    for i in 0..40 {
        let key = Key::new("post", i).unwrap();
        assert_eq!(store.get(&key).await.unwrap().unwrap().version, 2, "{key}");
    }
    report(
        BACKEND,
        "a_lazy_migration_reads_while_a_node_is_down",
        "passed",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_cluster_faults() {
    let backend = match cluster_backend() {
        Ok(backend) => backend,
        Err(reason) => {
            for test in [
                "two_runners_exactly_one_applies",
                "a_node_killed_and_restarted_during_a_migration_loses_nothing",
                "a_lazy_migration_reads_while_a_node_is_down",
            ] {
                report(BACKEND, test, &format!("skipped: {reason}"));
            }
            return;
        }
    };
    // Every node answers before the faults start (an earlier run may have left one down).
    servers(&["start", "cassandra-cluster"]).await;
    battery::two_runners_exactly_one_applies(&backend as &dyn Backend).await;
    report(BACKEND, "two_runners_exactly_one_applies", "passed");
    a_node_killed_and_restarted_during_a_migration_loses_nothing(&backend).await;
    a_lazy_migration_reads_while_a_node_is_down(&backend).await;
}
