//! The lazy battery (`tern_testkit::lazy`) on every server store.
//!
//! Lazy kind renames need `Store::write_atomic` (the entity under the new
//! kind and the removal of the stale copy under the old one in one step):
//! Redis runs it as one Lua script (on a cluster only with `id_tag=1`, where
//! the keys of one id share a slot); MongoDB and Cassandra do not implement it
//! yet, so there a lazy kind rename is refused at install (which the battery
//! checks) and the rename tests report a skip with that reason.

mod redis {
    tern_integration_tests::redis_batteries!(tern_testkit::lazy_battery_tests);
}

mod mongodb {
    tern_testkit::lazy_battery_tests!("mongodb", tern_integration_tests::mongodb::backend());
}

mod cassandra {
    tern_testkit::lazy_battery_tests!("cassandra", tern_integration_tests::cassandra::backend());
}

/// A Redis server process of this test's own, with an append-only file
/// fsynced on every write, restarted between a lazy install and the first
/// access: the spec and the stale entities survive, and the first read
/// migrates (never stamped current untransformed: KVolve's failure).
mod redis_restart {
    use std::process::{Child, Command, Stdio};
    use std::sync::Arc;
    use std::time::Duration;

    use tern_core::lazy::LazyClient;
    use tern_core::migrate::{Migration, MigrationSet, Migrator};
    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::{Store, Write};
    use tern_testkit::battery::report;

    fn start(dir: &std::path::Path, port: u16) -> Child {
        tern_testkit::server::redis_server(port, dir)
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// A server of `test`'s own on a free port: its directory, port, URL and
    /// process; `None` (reported as a skip) where redis-server is not installed.
    fn own_server(test: &str) -> Option<(tempfile::TempDir, u16, String, Child)> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            report(
                "redis-own",
                test,
                "skipped: redis-server is not installed (scripts/servers.sh install)",
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = tern_integration_tests::common::free_port().unwrap();
        let server = start(dir.path(), port);
        Some((dir, port, format!("redis://127.0.0.1:{port}"), server))
    }

    async fn connect(url: &str) -> Arc<dyn Store> {
        for _ in 0..100 {
            if let Ok(store) = tern_integration_tests::redis::open(url).await {
                return store;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server at {url} does not answer");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_restart_between_install_and_first_access_keeps_the_spec() {
        let test = "a_redis_restart_between_install_and_first_access_keeps_the_spec";
        let Some((dir, port, url, mut server)) = own_server(test) else {
            return;
        };
        let store = connect(&url).await;
        let writes = (0..50)
            .map(|i| {
                let mut value = Map::new();
                value.insert("a".into(), Value::Int(i));
                Write::Put(Entity {
                    key: Key::new("p", i).unwrap(),
                    version: 0,
                    value,
                })
            })
            .collect();
        store.write_batch(writes).await.unwrap();
        let mut set = MigrationSet::new();
        set.add(Migration::from_script(1, "m", "0001_m.tern", "lazy\nrename p.a to b\n").unwrap())
            .unwrap();
        Migrator::new(Arc::clone(&store), set)
            .up(None)
            .await
            .unwrap();
        drop(store);
        // SIGKILL: only what the append-only file holds survives.
        server.kill().unwrap();
        server.wait().unwrap();
        let mut server = start(dir.path(), port);
        let store = connect(&url).await;
        let stale = store
            .get(&Key::new("p", 3).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            stale.version, 0,
            "stamped current without being transformed"
        );
        let client = LazyClient::builder(Arc::clone(&store))
            .declare("p", 1)
            .connect()
            .await
            .unwrap();
        let got = client
            .get(&Key::new("p", 3).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((got.version, got.value.get("b")), (1, Some(&Value::Int(3))));
        assert!(!got.value.contains_key("a"));
        assert_eq!(
            store
                .get(&Key::new("p", 3).unwrap())
                .await
                .unwrap()
                .unwrap(),
            got
        );
        server.kill().unwrap();
        server.wait().unwrap();
        report("redis-own", test, "passed");
    }

    /// A server that lost its scripts (a restart without persistence of the
    /// script cache, a failover, `SCRIPT FLUSH`) still answers every store
    /// call that runs one by its hash: the container read script (reads of
    /// sorted sets, one `EVALSHA` per key in a pipeline), the hash put
    /// script and the count script (a census by version) are loaded again
    /// and the calls sent again. Its own server: a
    /// flush would disturb the tests sharing the CI one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_by_script_hash_survive_a_server_that_lost_its_scripts() {
        let test = "calls_by_script_hash_survive_a_server_that_lost_its_scripts";
        let Some((_dir, _, url, mut server)) = own_server(test) else {
            return;
        };
        let store = connect(&format!("{url}/0?zset=z")).await;
        let zset = |i: i64| {
            let mut value = Map::new();
            let pairs = vec![Value::Array(vec![
                Value::from(format!("m{i}")),
                Value::Float(i as f64),
            ])];
            value.insert("members".into(), Value::Array(pairs));
            Entity::new(Key::new("z", i).unwrap(), value)
        };
        let hash = |i: i64| {
            let mut value = Map::new();
            value.insert("a".into(), Value::Int(i));
            Entity::new(Key::new("h", i).unwrap(), value)
        };
        let flush_scripts = || async {
            let client = redis::Client::open(url.as_str()).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut conn)
                .await
                .unwrap();
        };
        for round in 0..2i64 {
            let (z, h) = (zset(round), hash(round));
            store
                .write_batch(vec![Write::Put(z.clone())])
                .await
                .unwrap();
            store
                .write_batch(vec![Write::Put(h.clone())])
                .await
                .unwrap();
            let keys = [z.key.clone(), h.key.clone()];
            for k in &keys {
                let got = store.get(k).await.unwrap();
                assert_eq!(
                    got.as_ref().map(|e| &e.value),
                    Some(if k.kind == "z" { &z.value } else { &h.value }),
                    "round {round}: {k}"
                );
            }
            // Lost after the first round's calls loaded them.
            flush_scripts().await;
        }
        let many = store
            .get_many(&[Key::new("z", 0).unwrap(), Key::new("z", 1).unwrap()])
            .await
            .unwrap();
        assert_eq!(many.iter().flatten().count(), 2, "{many:?}");
        // The census's count script (by its hash, in the server), after a flush.
        flush_scripts().await;
        let below = tern_core::store::Filter {
            version: tern_core::store::VersionFilter::Below(1),
            conditions: Vec::new(),
        };
        assert_eq!(store.count("h", below).await.unwrap(), 2);
        server.kill().unwrap();
        server.wait().unwrap();
        report("redis-own", test, "passed");
    }
}
