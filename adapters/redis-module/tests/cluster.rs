//! The conformance scenarios on a Valkey cluster with the module on every master
//! (`scripts/servers.sh start valkey-cluster`, ids as hash tags: `vm:kind:{id}`),
//! through the `redis` crate's plain cluster client. The cluster is dedicated to
//! this test: it is flushed first.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use redis::Commands;
use redis::cluster::{ClusterClient, ClusterConnection};

const TEST: &str = "conformance_on_a_valkey_cluster";

fn flush(url: &str) -> Result<(), String> {
    let first = url.split('?').next().unwrap_or(url);
    let mut c = redis::Client::open(first)
        .and_then(|c| c.get_connection())
        .map_err(|e| e.to_string())?;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut c)
        .map_err(|e| e.to_string())?;
    for line in nodes.lines().filter(|l| l.contains("master")) {
        let addr = line.split_whitespace().nth(1).unwrap_or_default();
        let addr = addr.split('@').next().unwrap_or_default();
        let mut n = redis::Client::open(format!("redis://{addr}/"))
            .and_then(|c| c.get_connection())
            .map_err(|e| e.to_string())?;
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut n)
            .map_err(|e| e.to_string())?;
        let _: () = redis::cmd("TERN.LOADSPEC")
            .arg("")
            .arg("")
            .query(&mut n)
            .map_err(|e| format!("{addr}: the module is not loaded: {e}"))?;
    }
    Ok(())
}

fn cluster(url: &str) -> ClusterConnection {
    let first = url.split('?').next().unwrap_or(url).trim_end_matches("/0");
    ClusterClient::new(vec![first.to_owned()])
        .unwrap()
        .get_connection()
        .unwrap()
}

async fn up(url: &str, scripts: &[(u32, &str)]) {
    let store = tern_redis::open(url).await.unwrap();
    tern_testkit::lazy::up(&store, scripts).await.unwrap();
    // Masters without the state key take the spec from the installer.
    assert_eq!(tern_redis::module::push_spec(url).await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_a_valkey_cluster() {
    let Ok(url) = std::env::var("TERN_IT_VALKEY_CLUSTER_URL") else {
        return common::skip(
            "valkey-module-cluster",
            TEST,
            "TERN_IT_VALKEY_CLUSTER_URL is not set (scripts/servers.sh start valkey-cluster; eval \"$(scripts/servers.sh env valkey-cluster)\")",
        );
    };
    if let Err(reason) = flush(&url) {
        return common::skip(
            "valkey-module-cluster",
            TEST,
            &format!("the Valkey cluster cannot be used: {reason}"),
        );
    }
    let mut c = cluster(&url);
    for i in 0..30 {
        let _: () = c
            .hset_multiple(
                format!("vm:user:{{{i}}}"),
                &[("name", "Ann"), ("visits", "3")],
            )
            .unwrap();
        let _: () = c.set(format!("vm:oldc:{{{i}}}"), format!("v{i}")).unwrap();
        let _: () = c.sadd(format!("vm:oldtags:{{{i}}}"), &["a", "b"]).unwrap();
        let _: () = c.rpush(format!("vm:oldlog:{{{i}}}"), &["z", "a"]).unwrap();
    }
    up(&url, &[(1, "lazy\nrename user.visits to hits\n"), (2, "lazy\nrename kind oldc to c\nrename kind oldtags to tags\nrename kind oldlog to log\n")]).await;
    for i in 0..30 {
        // Hash value steps, on whichever master holds the key.
        let got: BTreeMap<String, String> = c.hgetall(format!("vm:user:{{{i}}}")).unwrap();
        let want: BTreeMap<String, String> = [("name", "Ann"), ("hits", "3"), ("_v", "1")]
            .iter()
            .map(|(a, b)| ((*a).into(), (*b).into()))
            .collect();
        assert_eq!(got, want, "vm:user:{{{i}}}");
        // Renamed kinds: read, insert-if-absent, container member operations.
        let v: Option<String> = c.get(format!("vm:c:{{{i}}}")).unwrap();
        assert_eq!(v, Some(format!("v{i}")));
        let nx: Option<String> = redis::cmd("SET")
            .arg(format!("vm:c:{{{i}}}"))
            .arg("x")
            .arg("NX")
            .query(&mut c)
            .unwrap();
        assert_eq!(nx, None);
        let added: i64 = c.sadd(format!("vm:tags:{{{i}}}"), "c").unwrap();
        assert_eq!(added, 1);
        let m: BTreeSet<String> = c.smembers(format!("vm:tags:{{{i}}}")).unwrap();
        assert_eq!(m.len(), 3);
        let items: Vec<String> = c.lrange(format!("vm:log:{{{i}}}"), 0, -1).unwrap();
        assert_eq!(items, vec!["z", "a"]);
        assert!(!c.exists::<_, bool>(format!("vm:oldc:{{{i}}}")).unwrap());
        assert!(!c.exists::<_, bool>(format!("vm:oldtags:{{{i}}}")).unwrap());
    }
    // A master restarted without the spec refuses the namespace until it is pushed again.
    let mut n = redis::Client::open("redis://127.0.0.1:7102/")
        .unwrap()
        .get_connection()
        .unwrap();
    let state_here: Result<Option<String>, _> = redis::cmd("HGET")
        .arg("vm:__tern:meta:state")
        .arg("rev")
        .query(&mut n);
    if state_here.is_err() {
        let _: () = redis::cmd("TERN.RELOAD").query(&mut n).unwrap();
        let key = (0..30).map(|i| format!("vm:user:{{{i}}}")).find(|k| {
            let slot: i64 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(k)
                .query(&mut n)
                .unwrap();
            (5461..=10922).contains(&slot)
        });
        if let Some(key) = key {
            let err = c.hget::<_, _, String>(&key, "hits").unwrap_err();
            assert!(err.to_string().contains("TERNNOSPEC"), "{err}");
            tern_redis::module::push_spec(&url).await.unwrap();
            assert_eq!(c.hget::<_, _, String>(&key, "hits").unwrap(), "3");
        }
    }
    // Multi-key commands: the cluster client sends each slot's part to its master,
    // whose module migrates each key by its own kind.
    let got: Vec<Option<String>> = redis::cmd("MGET")
        .arg("vm:c:{1}")
        .arg("vm:c:{2}")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, vec![Some("v1".to_owned()), Some("v2".to_owned())]);
    tern_testkit::battery::report("valkey-module-cluster", TEST, "passed");
}
