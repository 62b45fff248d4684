//! tern's own lazy client on a server with the module: detected at connect, it
//! reads with plain commands (no script), and the entities it gets are the ones
//! the module migrated.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;

use common::{Valkey, up};
use redis::Commands;
use tern_core::lazy::LazyClient;
use tern_core::model::{Key, Value};
use tern_core::store::StoreExt as _;

const URL: &str = "redis://127.0.0.1/0?prefix=app&string=oldc,c";

/// A server with the module holding `n` users (`app:user:{i}`, a hash with
/// `visits`) and `n` strings of the kind `oldc`, with a lazy migration
/// installed that renames `visits` to `hits` and the kind `oldc` to `c`; and a
/// plain connection to it. `None` (the test `name` reported skipped) where the
/// server cannot run here.
async fn renaming(name: &str, n: i64) -> Option<(Valkey, redis::Connection)> {
    let v = match Valkey::start(URL, &[]) {
        Ok(v) => v,
        Err(reason) => {
            common::skip("valkey-module", name, &reason);
            return None;
        }
    };
    let mut c = v.conn();
    for i in 0..n {
        let _: () = c.hset(format!("app:user:{i}"), "visits", i).unwrap();
        let _: () = c.set(format!("app:oldc:{i}"), format!("v{i}")).unwrap();
    }
    up(
        &v,
        &[(
            1,
            "lazy\nrename user.visits to hits\nrename kind oldc to c\n",
        )],
    )
    .await;
    Some((v, c))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_client_reads_plainly_where_the_module_migrates() {
    let name = "lazy_client_reads_plainly_where_the_module_migrates";
    let Some((v, mut c)) = renaming(name, 20).await else {
        return;
    };
    let store =
        tern_redis::RedisStore::connect(tern_redis::RedisConfig::from_url(&v.store_url()).unwrap())
            .await
            .unwrap();
    assert!(store.has_module(), "the module was not detected");
    let store: Arc<dyn tern_core::store::Store> = Arc::new(store);
    let client = LazyClient::builder(Arc::clone(&store))
        .declare("user", 1)
        .declare("c", 0)
        .connect()
        .await
        .unwrap();
    for i in 0..20 {
        let e = client
            .get(&Key::new("user", i.to_string()).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.version, 1);
        assert_eq!(e.value.get("hits"), Some(&Value::Int(i)));
        assert!(!e.value.contains_key("visits"));
        let e = client
            .get(&Key::new("c", i.to_string()).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.value.get("value"), Some(&Value::from(format!("v{i}"))));
    }
    let stats = client.stats();
    assert_eq!(stats.reads_in_store, 0, "{stats:?}");
    assert_eq!(stats.renamed_reads_in_store, 0, "{stats:?}");
    assert_eq!(stats.reads_migrated_on_client, 0, "{stats:?}");
    // Writes through the client land migrated too, and a plain client reads them.
    let mut m = tern_core::model::Map::new();
    m.insert("hits".into(), Value::Int(99));
    client
        .put(&Key::new("user", "100").unwrap(), m)
        .await
        .unwrap();
    assert_eq!(
        c.hget::<_, _, String>("app:user:100", "hits").unwrap(),
        "99"
    );
    assert_eq!(c.hget::<_, _, String>("app:user:100", "_v").unwrap(), "1");
    tern_testkit::battery::report("valkey-module", name, "passed");
}

/// `tern sweep` completes a lazy migration on a server with the module (its
/// scripts' commands pass the filter), and once complete the kind's commands
/// no longer go through the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_completes_and_the_module_steps_aside() {
    let name = "sweep_completes_and_the_module_steps_aside";
    let Some((v, mut c)) = renaming(name, 50).await else {
        return;
    };
    // Some entities migrated by plain clients first.
    for i in 0..10 {
        let _: Option<String> = c.hget(format!("app:user:{i}"), "hits").unwrap();
        let _: Option<String> = c.get(format!("app:c:{i}")).unwrap();
    }
    let store = v.store().await;
    let report = tern_core::lazy::sweep::sweep(
        Arc::clone(&store),
        &tern_core::migrate::lease::LeaseOptions::default(),
        &std::collections::BTreeMap::new(),
        &tern_core::lazy::SweepOptions {
            batch_size: 7,
            ..tern_core::lazy::SweepOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.completed, vec![1], "{report:?}");
    for i in 0..50 {
        assert_eq!(
            c.hget::<_, _, String>(format!("app:user:{i}"), "hits")
                .unwrap(),
            i.to_string()
        );
        assert_eq!(
            c.get::<_, String>(format!("app:c:{i}")).unwrap(),
            format!("v{i}")
        );
        assert!(!c.exists::<_, bool>(format!("app:oldc:{i}")).unwrap());
    }
    // Complete: the module reloaded the state and its filter lets the kinds pass.
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let _: Option<String> = c.hget("app:user:3", "hits").unwrap();
    let _: Option<String> = c.get("app:c:3").unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    assert!(
        !stats.contains("tern.r") && !stats.contains("tern.w"),
        "{stats}"
    );
    tern_testkit::battery::report("valkey-module", name, "passed");
}

/// `RedisLazy`'s commands on a server with the module are the plain commands
/// (no script), on migrated entities.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lazy_commands_are_plain_where_the_module_migrates() {
    let name = "redis_lazy_commands_are_plain_where_the_module_migrates";
    let v = match Valkey::start("redis://127.0.0.1/0?prefix=app&set=oldtags,tags", &[]) {
        Ok(v) => v,
        Err(reason) => return common::skip("valkey-module", name, &reason),
    };
    let mut c = v.conn();
    for i in 0..10 {
        let _: () = c.sadd(format!("app:oldtags:{i}"), &["a", "b"]).unwrap();
        let _: () = c.hset(format!("app:user:{i}"), "visits", i).unwrap();
    }
    up(
        &v,
        &[(
            1,
            "lazy\nrename kind oldtags to tags\nrename user.visits to hits\n",
        )],
    )
    .await;
    let store = Arc::new(
        tern_redis::RedisStore::connect(tern_redis::RedisConfig::from_url(&v.store_url()).unwrap())
            .await
            .unwrap(),
    );
    let dyn_store: Arc<dyn tern_core::store::Store> = store.clone();
    let client = LazyClient::builder(dyn_store)
        .declare("tags", 0)
        .declare("user", 1)
        .connect()
        .await
        .unwrap();
    let lazy = tern_redis::RedisLazy::new(store, client);
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    for i in 0..10 {
        let id = i.to_string();
        assert!(
            lazy.sadd(&Key::new("tags", id.as_str()).unwrap(), b"c")
                .await
                .unwrap()
        );
        assert_eq!(
            lazy.hincr_by(&Key::new("user", id.as_str()).unwrap(), "hits", 1)
                .await
                .unwrap(),
            i + 1
        );
    }
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    assert!(
        !stats.contains("cmdstat_evalsha") && !stats.contains("cmdstat_eval:"),
        "{stats}"
    );
    assert!(stats.contains("cmdstat_tern.w"), "{stats}");
    let m: std::collections::BTreeSet<String> = c.smembers("app:tags:3").unwrap();
    assert_eq!(m.into_iter().collect::<Vec<_>>(), vec!["a", "b", "c"]);
    assert!(!c.exists::<_, bool>("app:oldtags:3").unwrap());
    tern_testkit::battery::report("valkey-module", name, "passed");
}

/// Doubles `visits` (a Rust transform).
struct DoubleVisits;

impl tern_core::migrate::EntityMigration for DoubleVisits {
    fn kind(&self) -> &str {
        "user"
    }

    fn transform(&self, _key: &Key, value: &mut tern_core::model::Map) -> Result<bool, String> {
        let Some(Value::Int(n)) = value.get("visits").cloned() else {
            return Ok(false);
        };
        value.insert("visits".into(), Value::Int(2 * n));
        Ok(true)
    }
}

/// On a server with the module, which migrates for every client and cannot run
/// Rust, `tern up` refuses a lazy migration with a Rust transform, naming the
/// kind and the reason, and installs nothing; the same transform run eagerly
/// migrates every entity (the module is not involved).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_rust_transform_is_refused_at_install_where_the_module_runs() {
    use tern_core::migrate::{MigrateError, Migration, MigrationSet, Migrator};
    let name = "a_lazy_rust_transform_is_refused_at_install_where_the_module_runs";
    let v = match Valkey::start(URL, &[]) {
        Ok(v) => v,
        Err(reason) => return common::skip("valkey-module", name, &reason),
    };
    let mut c = v.conn();
    for i in 0..5 {
        let _: () = c.hset(format!("app:user:{i}"), "visits", i).unwrap();
    }
    let store = v.store().await;
    let code = || Migration::from_code(1, "double", "1", Arc::new(DoubleVisits));
    let mut set = MigrationSet::new();
    set.add(code().into_lazy()).unwrap();
    let err = Migrator::new(Arc::clone(&store), set)
        .up(None)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, MigrateError::Invalid { id: 1, .. }), "{text}");
    for says in [
        "kind user",
        "Rust transform",
        "tern-redis-module",
        "eagerly",
    ] {
        assert!(text.contains(says), "no {says:?} in: {text}");
    }
    let doc = tern_testkit::battery::state_doc(store.as_ref()).await;
    assert!(doc.lazy.is_empty() && doc.applied.is_empty(), "{doc:?}");
    assert_eq!(c.hget::<_, _, String>("app:user:3", "visits").unwrap(), "3");

    let mut set = MigrationSet::new();
    set.add(code()).unwrap();
    Migrator::new(Arc::clone(&store), set)
        .up(None)
        .await
        .unwrap();
    for i in 0..5 {
        let visits: String = c.hget(format!("app:user:{i}"), "visits").unwrap();
        assert_eq!(visits, (2 * i).to_string());
    }
    tern_testkit::battery::report("valkey-module", name, "passed");
}

/// #34 item 2 with the module: a plain string's version tag names its value's
/// digest, written the same way by tern's client and by the module. The module
/// reads a tag the client wrote (it refused `1:<digest>` as no version before),
/// and a `SET` through the module while the kind is pending leaves a tag that
/// names the new value (the entity stays current, not version 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_module_and_the_client_tie_a_string_tag_to_its_value() {
    let name = "the_module_and_the_client_tie_a_string_tag_to_its_value";
    let v = match Valkey::start(URL, &[]) {
        Ok(v) => v,
        Err(reason) => {
            common::skip("valkey-module", name, &reason);
            return;
        }
    };
    let mut c = v.conn();
    for i in 0..3 {
        let _: () = c.set(format!("app:c:{i}"), format!("v{i}")).unwrap();
    }
    up(&v, &[(1, "lazy\nadd c.value = \"none\"\n")]).await;
    let store =
        tern_redis::RedisStore::connect(tern_redis::RedisConfig::from_url(&v.store_url()).unwrap())
            .await
            .unwrap();
    let store: Arc<dyn tern_core::store::Store> = Arc::new(store);
    let key = |i: i64| Key::new("c", i.to_string()).unwrap();
    // The client writes c:0 at version 1 (its tag with the digest).
    let mut value = tern_core::model::Map::new();
    value.insert("value".into(), Value::from("mine"));
    let mut e = tern_core::model::Entity::new(key(0), value);
    e.version = 1;
    store
        .write_checked(vec![tern_core::store::Write::Put(e)])
        .await
        .unwrap();
    // The module reads that tag: c:0 is current, its value as written (not
    // migrated again: `add` would set "none").
    let got: String = c.get("app:c:0").unwrap();
    assert_eq!(got, "mine");
    // The module migrates c:1 on a GET, then a SET through it keeps c:1
    // current: its tag follows the new value.
    let got: String = c.get("app:c:1").unwrap();
    assert_eq!(got, "none");
    let _: () = c.set("app:c:1", "w1").unwrap();
    let stored = store.get(&key(1)).await.unwrap().unwrap();
    assert_eq!(
        (stored.version, stored.value.get("value")),
        (1, Some(&Value::from("w1")))
    );
}
