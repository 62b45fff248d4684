//! `RedisLazy`: container commands through the lazy client on the server at
//! `TERN_IT_REDIS_URL`, with a lazy kind rename pending (KVolve's Amico update,
//! lazily) and a lazy Rust transform of sets pending: every command runs on the
//! migrated entity, so no key splits into an old and a new copy, and TTLs stay.

use std::sync::Arc;
use tern_testkit::intercept::Forward as _;

use redis::aio::ConnectionLike;
use tern_core::lazy::LazyClient;
use tern_core::migrate::{EntityMigration, Migration, MigrationSet, Migrator};
use tern_core::model::{Key, Map, Value};
use tern_core::store::StoreExt;
use tern_core::store::WriteOutcome::{self, Applied, Conflict};
use tern_integration_tests::redis::backend;
use tern_redis::{RedisConfig, RedisLazy, RedisStore};
use tern_testkit::battery::or_skip;

/// Adds the member `migrated` to a set.
struct MarkSet;

impl EntityMigration for MarkSet {
    fn kind(&self) -> &str {
        "tags"
    }
    fn transform(&self, _key: &Key, value: &mut Map) -> Result<bool, String> {
        let Some(Value::Array(items)) = value.get_mut("members") else {
            return Err(format!("not a set: {value:?}"));
        };
        items.push(Value::from("migrated"));
        Ok(true)
    }
}

fn key(kind: &str, id: &str) -> Key {
    Key {
        kind: kind.to_owned(),
        id: Value::from(id),
    }
}

/// A plain connection to the server, beside the store.
async fn raw(b: &tern_integration_tests::redis::RedisBackend) -> redis::aio::MultiplexedConnection {
    redis::Client::open(b.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn q<C: ConnectionLike + Send, T: redis::FromRedisValue>(
    conn: &mut C,
    cmd: &mut redis::Cmd,
) -> T {
    cmd.query_async(conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_commands_run_on_the_migrated_entity() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let b = b.with_options(super::redis_types::OPTIONS);
    let mut conn = raw(&b).await;
    container_commands(&b, &mut conn, false).await;
}

/// The same on the cluster, each id a hash tag (`id_tag=1`): the lazy kind
/// rename moves each sorted set within its slot, in one script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_commands_run_on_the_migrated_entity_on_the_cluster() {
    let options = format!("{}&id_tag=1", super::redis_types::OPTIONS);
    let cluster = tern_integration_tests::redis::cluster_backend_with(&options);
    let Some(b) = or_skip(cluster, None).await else {
        return;
    };
    let mut conn = super::redis_keys::cluster_conn(&b).await;
    container_commands(&b, &mut conn, true).await;
}

/// Old data under `amico:followers` and `tags`, a lazy transform of sets and a
/// lazy rename of the sorted sets installed, then commands through
/// [`RedisLazy`]; `conn` talks to the same server, `tagged` says whether ids
/// are hash tags.
async fn container_commands<C: ConnectionLike + Send>(
    b: &tern_integration_tests::redis::RedisBackend,
    conn: &mut C,
    tagged: bool,
) {
    let url = b.fresh_url();
    let ns = tern_integration_tests::redis::prefix_of(&url);
    let k = |kind: &str, id: &str| super::redis_keys::redis_key(&ns, tagged, kind, id);
    // Data as the old application left it: no version tags, a TTL on one key.
    let old1 = k("amico:followers", "1");
    q::<_, ()>(
        conn,
        redis::cmd("ZADD")
            .arg(&old1)
            .arg(1)
            .arg("ann")
            .arg(2)
            .arg("bob"),
    )
    .await;
    q::<_, ()>(conn, redis::cmd("PEXPIRE").arg(&old1).arg(100_000)).await;
    q::<_, ()>(
        conn,
        redis::cmd("ZADD")
            .arg(k("amico:followers", "2"))
            .arg(1)
            .arg("x"),
    )
    .await;
    q::<_, ()>(conn, redis::cmd("SADD").arg(k("tags", "1")).arg("a")).await;

    let store = Arc::new(
        RedisStore::connect(RedisConfig::from_url(&url).unwrap())
            .await
            .unwrap(),
    );
    let mark = Migration::from_code(1, "mark", "r1", Arc::new(MarkSet)).into_lazy();
    let mut set = MigrationSet::new();
    set.add(mark.clone()).unwrap();
    set.add(
        Migration::from_script(
            2,
            "scope",
            "0002_scope.tern",
            "lazy\nrename kind `amico:followers` to `amico:followers:default`\n",
        )
        .unwrap(),
    )
    .unwrap();
    Migrator::new(store.clone(), set).up(None).await.unwrap();
    let client = LazyClient::builder(store.clone())
        .declare("amico:followers:default", 0)
        .declare("tags", 1)
        .code(mark)
        .connect()
        .await
        .unwrap();
    let lazy = RedisLazy::new(Arc::clone(&store), client);
    let scoped = |id: &str| key("amico:followers:default", id);

    // A ZADD on an entity still under its old name moves it first: one key,
    // the old members, the new one, the TTL kept.
    assert!(lazy.zadd(&scoped("1"), b"cat", 3.0).await.unwrap());
    let new1 = k("amico:followers:default", "1");
    let members: Vec<(String, f64)> = q(
        conn,
        redis::cmd("ZRANGE")
            .arg(&new1)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES"),
    )
    .await;
    assert_eq!(
        members,
        vec![
            ("ann".into(), 1.0),
            ("bob".into(), 2.0),
            ("cat".into(), 3.0)
        ]
    );
    assert_eq!(q::<_, i64>(conn, redis::cmd("EXISTS").arg(&old1)).await, 0);
    let ttl = lazy.pttl(&scoped("1")).await.unwrap();
    assert!(ttl > 0 && ttl <= 100_000, "TTL kept: {ttl}");
    // EXISTS of an entity under its old name: true, and moved by the check.
    assert!(lazy.exists(&scoped("2")).await.unwrap());
    assert_eq!(
        q::<_, i64>(conn, redis::cmd("EXISTS").arg(k("amico:followers", "2"))).await,
        0
    );
    assert!(!lazy.exists(&scoped("9")).await.unwrap());
    assert_eq!(lazy.zincr_by(&scoped("2"), b"x", 1.5).await.unwrap(), 2.5);

    // A stale set is migrated (the transform adds `migrated`) before SADD runs;
    // its tag says version 1 and follows the TTL set afterwards.
    assert!(lazy.sadd(&key("tags", "1"), b"b").await.unwrap());
    let mut tags: Vec<String> = q(conn, redis::cmd("SMEMBERS").arg(k("tags", "1"))).await;
    tags.sort();
    assert_eq!(tags, vec!["a", "b", "migrated"]);
    assert!(lazy.pexpire(&key("tags", "1"), 50_000).await.unwrap());
    let got = lazy.client().get(&key("tags", "1")).await.unwrap().unwrap();
    assert_eq!(got.version, 1);
    // A set created by a command carries the declared version: a read does not
    // migrate it again.
    assert!(lazy.sadd(&key("tags", "2"), b"fresh").await.unwrap());
    let fresh = lazy.client().get(&key("tags", "2")).await.unwrap().unwrap();
    assert_eq!(fresh.version, 1);
    assert_eq!(
        fresh.value.get("members"),
        Some(&Value::Array(vec![Value::from("fresh")]))
    );
    // Emptying a set removes its tag with it.
    assert!(lazy.srem(&key("tags", "2"), b"fresh").await.unwrap());
    assert!(
        lazy.client()
            .get(&key("tags", "2"))
            .await
            .unwrap()
            .is_none()
    );
    // A command of the wrong type is Redis's error, named.
    let err = lazy.rpush(&key("tags", "1"), b"x").await.unwrap_err();
    assert!(err.to_string().contains("RPUSH"), "{err}");
}

/// A stale hash read through the lazy client is migrated inside Redis (one
/// script call: [`tern_core::lazy::LazyStats::reads_in_store`]), on one server
/// and on the cluster; with `migrate_in_store(false)` the same read migrates
/// on the client. Either way the entity is stored migrated.
async fn stale_hash_reads_migrate_inside_redis(
    b: Result<tern_integration_tests::redis::RedisBackend, String>,
) {
    let Some(b) = or_skip(async { b }, None).await else {
        return;
    };
    let store = b.try_fresh().await.unwrap();
    for id in ["1", "2"] {
        let value = Map::from([("title".to_owned(), Value::from("t"))]);
        store
            .put(tern_core::model::Entity::new(key("post", id), value))
            .await
            .unwrap();
    }
    tern_testkit::lazy::up(&store, &[(1, "lazy\nadd post.likes = 0\n")])
        .await
        .unwrap();
    let want = Map::from([
        ("title".to_owned(), Value::from("t")),
        ("likes".to_owned(), Value::Int(0)),
    ]);
    for (id, in_store) in [("1", true), ("2", false)] {
        let lazy = LazyClient::builder(Arc::clone(&store))
            .declare("post", 1)
            .migrate_in_store(in_store)
            .connect()
            .await
            .unwrap();
        let got = lazy.get(&key("post", id)).await.unwrap().unwrap();
        assert_eq!((got.version, &got.value), (1, &want), "post {id}");
        let stats = lazy.stats();
        let (inside, outside) = (stats.reads_in_store, stats.reads_migrated_on_client);
        assert_eq!(
            (inside, outside),
            if in_store { (1, 0) } else { (0, 1) },
            "post {id}: reads migrated in the store / on the client"
        );
        let stored = store.get(&key("post", id)).await.unwrap().unwrap();
        assert_eq!(
            (stored.version, stored.value),
            (1, want.clone()),
            "post {id} stored"
        );
    }
}

#[tokio::test]
async fn stale_hash_reads_migrate_inside_redis_on_one_server() {
    stale_hash_reads_migrate_inside_redis(backend().await).await;
}

#[tokio::test]
async fn stale_hash_reads_migrate_inside_redis_on_the_cluster() {
    stale_hash_reads_migrate_inside_redis(tern_integration_tests::redis::cluster_backend().await)
        .await;
}

/// While a lazy migration is pending, the read a client tries first follows
/// what reads find: 40 stale posts are each migrated by one script call
/// (no plain read first); read again, up to date, most of them are one plain
/// `HGETALL` (no script); a stale post among them then costs the plain read
/// and the script, and is migrated.
#[tokio::test]
async fn up_to_date_reads_are_plain_while_a_migration_is_pending() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let s = reads_follow_what_they_find(&b, "post", "lazy\nadd post.likes = 0\n", "post").await;
    assert_eq!(s.renamed_reads_in_store, 0, "{s:?}");
}

/// The same while a lazy kind rename is pending: 40 posts under the former
/// name are each moved by one script call (no plain read of the new name
/// first); read again, most are one plain `HGETALL`; one never read, still
/// under the former name, costs the plain read that misses and the script.
#[tokio::test]
async fn up_to_date_reads_are_plain_while_a_kind_rename_is_pending() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let s = reads_follow_what_they_find(
        &b,
        "draft",
        "lazy\nrename kind draft to post\nadd post.likes = 0\n",
        "post",
    )
    .await;
    assert_eq!(s.renamed_reads_in_store, s.reads_in_store, "{s:?}");
}

/// 41 entities of `kind`, `migration` installed lazily, then the reads of
/// [`up_to_date_reads_are_plain_while_a_migration_is_pending`] under `read`
/// (the kind's name after the migration); the client's stats at the end.
async fn reads_follow_what_they_find(
    b: &tern_integration_tests::redis::RedisBackend,
    kind: &str,
    migration: &str,
    read: &str,
) -> tern_core::lazy::LazyStats {
    let store = b.try_fresh().await.unwrap();
    let title = || Map::from([("title".to_owned(), Value::from("t"))]);
    let writes = (0..41)
        .map(|i| {
            let e = tern_core::model::Entity::new(key(kind, &i.to_string()), title());
            tern_core::store::Write::Put(e)
        })
        .collect();
    store.write_batch(writes).await.unwrap();
    tern_testkit::lazy::up(&store, &[(1, migration)])
        .await
        .unwrap();
    let post = |i: usize| key(read, &i.to_string());
    let lazy = LazyClient::builder(Arc::clone(&store))
        .declare(read, 1)
        .connect()
        .await
        .unwrap();
    for i in 0..40 {
        assert_eq!(lazy.get(&post(i)).await.unwrap().unwrap().version, 1);
    }
    let s = lazy.stats();
    assert_eq!((s.reads_in_store, s.plain_reads_stale), (40, 0), "{s:?}");
    for i in 0..40 {
        assert_eq!(lazy.get(&post(i)).await.unwrap().unwrap().version, 1);
    }
    let s = lazy.stats();
    assert!(s.plain_reads_up_to_date >= 20, "{s:?}");
    assert_eq!(s.reads_in_store + s.plain_reads_up_to_date, 80, "{s:?}");
    // Entity 40 was never read: stale.
    let got = lazy.get(&post(40)).await.unwrap().unwrap();
    assert_eq!(got.value.get("likes"), Some(&Value::Int(0)));
    let after = lazy.stats();
    assert_eq!(after.plain_reads_stale, 1, "{after:?}");
    assert_eq!(after.reads_in_store, s.reads_in_store + 1, "{after:?}");
    assert_eq!(store.get(&post(40)).await.unwrap().unwrap().version, 1);
    assert_eq!(after.reads_migrated_on_client, 0, "{after:?}");
    after
}

/// A lazy put of a kind with a former name, hashes and JSON strings (one run
/// of the small put script): the entity replaced whole under the new name,
/// the stale copy under the old name gone in the same run, and the TTL of the
/// copy it replaces taken by a key it creates; a key that exists keeps its own.
#[tokio::test]
async fn a_put_of_a_renamed_kind_moves_the_ttl_and_drops_the_stale_copy() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    for json in [false, true] {
        let mut url = b.fresh_url();
        if json {
            url.push_str("&json=prev,next");
        }
        put_of_a_renamed_kind(&b, &url).await;
    }
}

async fn put_of_a_renamed_kind(b: &tern_integration_tests::redis::RedisBackend, url: &str) {
    let ns = tern_integration_tests::redis::prefix_of(url);
    let k = |rest: &str| format!("{ns}:{rest}");
    let mut conn = raw(b).await;
    let store = store_at(url).await;
    for id in ["1", "2"] {
        let value = Map::from([
            ("a".to_owned(), Value::Int(1)),
            ("gone".to_owned(), Value::Bool(true)),
        ]);
        store
            .put(tern_core::model::Entity::new(key("prev", id), value))
            .await
            .unwrap();
    }
    let layout: String = q(&mut conn, redis::cmd("TYPE").arg(k("prev:1"))).await;
    q::<_, ()>(
        &mut conn,
        redis::cmd("PEXPIRE").arg(k("prev:1")).arg(100_000),
    )
    .await;
    tern_testkit::lazy::up(&store, &[(1, "lazy\nrename kind prev to next\n")])
        .await
        .unwrap();
    let lazy = LazyClient::builder(Arc::clone(&store))
        .declare("next", 0)
        .connect()
        .await
        .unwrap();
    let one = |n: i64| Map::from([("a".to_owned(), Value::Int(n))]);
    lazy.put(&key("next", "1"), one(2)).await.unwrap();
    lazy.put_many(vec![(key("next", "2"), one(3)), (key("next", "1"), one(4))])
        .await
        .unwrap();
    for (id, want) in [("1", 4), ("2", 3)] {
        let got = lazy.get(&key("next", id)).await.unwrap().unwrap();
        assert_eq!(
            (got.version, got.value),
            (0, one(want)),
            "{layout} next:{id} whole"
        );
        let stale = q::<_, i64>(
            &mut conn,
            redis::cmd("EXISTS").arg(k(&format!("prev:{id}"))),
        )
        .await;
        assert_eq!(stale, 0, "{layout} prev:{id} deleted with the put");
    }
    let now: String = q(&mut conn, redis::cmd("TYPE").arg(k("next:1"))).await;
    assert_eq!(now, layout, "the layout is kept");
    let ttl1 = q::<_, i64>(&mut conn, redis::cmd("PTTL").arg(k("next:1"))).await;
    assert!(
        ttl1 > 90_000 && ttl1 <= 100_000,
        "{layout} next:1 took prev:1's TTL: {ttl1}"
    );
    let ttl2 = q::<_, i64>(&mut conn, redis::cmd("PTTL").arg(k("next:2"))).await;
    assert_eq!(ttl2, -1, "{layout} next:2 had no TTL to take");
}

/// A read of a renamed kind whose entity still lies under the old name: one
/// script moves it (TTL kept) and answers it
/// ([`tern_core::store::Store::get_advanced`] with the former name, counted in
/// `renamed_reads_in_store`), running the pending step there too on a hash
/// (counted in `reads_in_store`), the client running it with a
/// compare-and-set on a JSON string; an absent id costs one call too; a key of another
/// type under the new name is an error naming it, with nothing moved. On the
/// server, for hashes and JSON strings, and on the cluster with `id_tag=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_moves_an_entity_from_its_former_name_in_one_call() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    for options in ["", "json=prev,next"] {
        let b = b.clone().with_options(options);
        let mut conn = raw(&b).await;
        read_moves(&b, &mut conn, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_moves_an_entity_from_its_former_name_in_one_call_on_the_cluster() {
    let cluster = tern_integration_tests::redis::cluster_backend_with("id_tag=1");
    let Some(b) = or_skip(cluster, None).await else {
        return;
    };
    let mut conn = super::redis_keys::cluster_conn(&b).await;
    read_moves(&b, &mut conn, true).await;
}

async fn read_moves<C: ConnectionLike + Send>(
    b: &tern_integration_tests::redis::RedisBackend,
    conn: &mut C,
    tagged: bool,
) {
    let url = b.fresh_url();
    let ns = tern_integration_tests::redis::prefix_of(&url);
    let k = |kind: &str, id: &str| super::redis_keys::redis_key(&ns, tagged, kind, id);
    let store = store_at(&url).await;
    let x = |n: i64| Map::from([("x".to_owned(), Value::Int(n))]);
    for (id, n) in [("1", 1), ("2", 2)] {
        store
            .put(tern_core::model::Entity::new(key("prev", id), x(n)))
            .await
            .unwrap();
    }
    let layout: String = q(conn, redis::cmd("TYPE").arg(k("prev", "1"))).await;
    q::<_, ()>(conn, redis::cmd("PEXPIRE").arg(k("prev", "1")).arg(100_000)).await;
    tern_testkit::lazy::up(
        &store,
        &[(1, "lazy\nrename kind prev to next\nadd next.y = 1\n")],
    )
    .await
    .unwrap();
    let lazy = LazyClient::builder(Arc::clone(&store))
        .declare("next", 1)
        .connect()
        .await
        .unwrap();
    let got = lazy.get(&key("next", "1")).await.unwrap().unwrap();
    let mut want = x(1);
    want.insert("y".to_owned(), Value::Int(1));
    assert_eq!((got.version, &got.value), (1, &want), "{layout}");
    let stats = lazy.stats();
    let (in_store, on_client) = if layout == "hash" { (1, 0) } else { (0, 1) };
    assert_eq!(
        (
            stats.renamed_reads_in_store,
            stats.reads_in_store,
            stats.reads_migrated_on_client
        ),
        (1, in_store, on_client),
        "{layout}: moved in one call, the step run there (a hash) or then on the client"
    );
    let old1 = k("prev", "1");
    assert_eq!(q::<_, i64>(conn, redis::cmd("EXISTS").arg(&old1)).await, 0);
    let new1 = k("next", "1");
    let ttl = q::<_, i64>(conn, redis::cmd("PTTL").arg(&new1)).await;
    assert!(ttl > 90_000 && ttl <= 100_000, "{layout}: TTL kept: {ttl}");
    let stored = store.get(&key("next", "1")).await.unwrap().unwrap();
    assert_eq!((stored.version, stored.value), (1, want), "{layout} stored");
    // An id absent under every name: one call, nothing written.
    assert!(lazy.get(&key("next", "9")).await.unwrap().is_none());
    assert_eq!(lazy.stats().renamed_reads_in_store, 2, "{layout}");
    // A key of another type under the new name while prev:2 is an entity.
    let other = if layout == "hash" { "SADD" } else { "RPUSH" };
    q::<_, ()>(conn, redis::cmd(other).arg(k("next", "2")).arg("m")).await;
    let err = lazy.get(&key("next", "2")).await.unwrap_err();
    assert!(err.to_string().contains("invalid data"), "{err}");
    assert!(err.to_string().contains("next:2"), "{err}");
    // The store's move itself refuses it too (a key of another type that
    // appeared under the new name after the client's plain read).
    let err = store
        .get_advanced(&key("next", "2"), &[key("prev", "2")], None)
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        tern_core::store::ErrorKind::InvalidData,
        "{err}"
    );
    assert!(err.to_string().contains("another Redis type"), "{err}");
    assert_eq!(
        q::<_, String>(conn, redis::cmd("TYPE").arg(k("prev", "2"))).await,
        layout,
        "nothing moved"
    );
    // With in-store migration off, the same read takes the client's path.
    q::<_, ()>(conn, redis::cmd("DEL").arg(k("next", "2"))).await;
    let client_path = LazyClient::builder(Arc::clone(&store))
        .declare("next", 1)
        .migrate_in_store(false)
        .connect()
        .await
        .unwrap();
    let got = client_path.get(&key("next", "2")).await.unwrap().unwrap();
    assert_eq!(got.version, 1);
    assert_eq!(client_path.stats().renamed_reads_in_store, 0);
    assert_eq!(
        q::<_, i64>(conn, redis::cmd("EXISTS").arg(k("prev", "2"))).await,
        0
    );
}

/// A JSON-string entity the application wrote in its own format (its own key
/// order and spacing, no version member) is migrated through the client's
/// path (a step the store does not run on JSON strings): the compare-and-set
/// compares the JSON read, not tern's own writing of it, and still sees a
/// change made in between.
#[tokio::test]
async fn json_written_by_the_application_in_its_own_format_migrates() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let url = format!("{}&json=post", b.fresh_url());
    let ns = tern_integration_tests::redis::prefix_of(&url);
    let store = store_at(&url).await;
    let mut conn = raw(&b).await;
    let set = |id: &str, text: &'static str| {
        redis::cmd("SET")
            .arg(format!("{ns}:post:{id}"))
            .arg(text)
            .clone()
    };
    q::<_, ()>(&mut conn, &mut set("1", r#"{"title": "x", "body": "b"}"#)).await;
    q::<_, ()>(
        &mut conn,
        &mut set("2", r#"{"title":"y","_v":0,"body":"c"}"#),
    )
    .await;
    migrates_lazily(&store, &["1", "2"], true).await;
    let across = |before, after| cas_across(&store, &b, "3", set("3", before), set("3", after));
    // A change the application made in its own format between the read and
    // the write is seen; the same JSON in another key order and spacing is not.
    // An int that became a float is a change to tern (the same double to Redis).
    for (before, after, outcome) in [
        (
            r#"{"title": "x", "n": 1}"#,
            r#"{"n": 1, "title": "z"}"#,
            Conflict,
        ),
        (
            r#"{"title":"z",  "n":1}"#,
            r#"{"n":1,"title":"z"}"#,
            Applied,
        ),
        (
            r#"{"n": 1, "m": {"k": [2]}}"#,
            r#"{"n": 1, "m": {"k": [2.0]}}"#,
            Conflict,
        ),
        (
            r#"{"n": 1, "m": {"k": [2.50]}}"#,
            r#"{"m": {"k": [2.5]}, "n": 1}"#,
            Applied,
        ),
    ] {
        assert_eq!(
            across(before, after).await,
            outcome,
            "{before} then {after}"
        );
    }
}

/// A hash the application wrote with field texts tern would write otherwise
/// (`1.50`, JSON with spaces, `1e2`) is migrated through the client's path;
/// the compare-and-set still sees a changed field, and only that, including
/// texts Redis's `cjson` reads as the same number but tern reads as text
/// (not JSON to serde_json).
#[tokio::test]
async fn hash_fields_written_by_the_application_in_their_own_format_migrate() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let url = b.fresh_url();
    let ns = tern_integration_tests::redis::prefix_of(&url);
    let store = store_at(&url).await;
    let mut conn = raw(&b).await;
    let mut hset = redis::cmd("HSET");
    hset.arg(format!("{ns}:post:1"))
        .arg("price")
        .arg("1.50")
        .arg("tags")
        .arg(r#"["a", "b"]"#)
        .arg("big")
        .arg("1e2")
        .arg("pi")
        .arg("3.14159265358979323846");
    q::<_, ()>(&mut conn, &mut hset).await;
    migrates_lazily(&store, &["1"], false).await;
    // Migrated on the client's path, the whole hash written back: a number a
    // double cannot hold keeps every digit.
    let mut hget = redis::cmd("HGET");
    hget.arg(format!("{ns}:post:1")).arg("pi");
    let pi: String = q(&mut conn, &mut hget).await;
    assert_eq!(pi, "3.14159265358979323846");
    let price = |text: &'static str| {
        redis::cmd("HSET")
            .arg(format!("{ns}:post:2"))
            .arg("price")
            .arg(text)
            .clone()
    };
    let across = |before, after| cas_across(&store, &b, "2", price(before), price(after));
    assert_eq!(across("1.50", "1.75").await, Conflict);
    assert_eq!(across("1.50", "1.500").await, Applied);
    assert_eq!(across("1e2", "100.0").await, Applied);
    assert_eq!(across("[1, 2.5]", "[1,2.50]").await, Applied);
    // An int that became a float (or back) is a change to tern, though Redis's
    // `cjson` reads one number.
    assert_eq!(across("-0", "-0.0").await, Applied);
    for (before, after) in [
        ("1", "1.0"),
        ("1.0", "1"),
        ("[1, 2]", "[1, 2e0]"),
        ("1e2", "100"),
        ("-0", "0"),
    ] {
        assert_eq!(
            across(before, after).await,
            Conflict,
            "{before} then {after}"
        );
    }
    // Numbers a double cannot hold to the digit are compared as text: a
    // change a double would not see is still a change.
    assert_eq!(
        across("3.14159265358979323846", "3.14159265358979323846").await,
        Applied
    );
    for (before, after) in [
        ("7", "007"),
        ("16", "0x10"),
        ("5", "5."),
        ("[1]", "[01]"),
        ("3.14159265358979323846", "3.14159265358979323847"),
        ("[9.0000000000000001]", "[9.0000000000000002]"),
        ("1e-400", "0"),
        ("123456789012345678901234", "123456789012345678901235"),
    ] {
        assert_eq!(
            across(before, after).await,
            Conflict,
            "{before} then {after}"
        );
    }
}

/// A hash field's text as other programs write them: numbers in every form
/// (long ones included), JSON with and without spaces, words, any text.
fn arb_field_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        "-?[0-9]{1,22}",
        "-?[0-9]{1,4}\\.[0-9]{1,22}([eE][-+]?[0-9]{1,3})?",
        "-?[0-9]{1,3}[eE][-+]?[0-9]{1,3}",
        "\\[ ?(-?[0-9]{1,3}(\\.[0-9]{1,3})?, ?){0,2}\"[a-z]{0,2}\" ?\\]",
        "\\{ ?\"[a-z$]{1,3}\": ?(-?[0-9]{1,3}(\\.[0-9]{0,3})?|true|null|\"x\") ?\\}",
        "(true|false|null|nope|tru|-|0x1F|007|5\\.|inf)",
        "\\PC{0,10}",
    ]
}

/// A JSON value's text as other programs write them: numbers in every form
/// (the 17 digits of JavaScript's `0.1 + 0.2` too), arrays and objects with
/// and without spaces, words, strings.
fn arb_json_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        "-?[1-9][0-9]{0,20}",
        "-?[0-9]\\.[0-9]{1,20}([eE][-+]?[0-9]{1,3})?",
        Just("0.30000000000000004".to_owned()),
        "\\[ ?(-?[0-9]{1,3}(\\.[0-9]{1,17})?, ?){0,2}\"[a-z]{0,2}\" ?\\]",
        "\\{ ?\"[a-z]{1,3}\": ?(-?[0-9]{1,3}(\\.[0-9]{0,3})?|true|null|\"x\") ?\\}",
        "(true|false|null|\"[a-z0-9 .]{0,6}\")",
    ]
}

/// As a property, for hashes (`json` false: any field texts) and JSON
/// strings (any member texts): an entity another program wrote is migrated
/// lazily on the client's path (read whole, written back whole) without a
/// conflict, and keeps every value it read as before; a hash field read as a
/// string keeps its text byte for byte. (A JSON string tern refuses to read,
/// with a number it cannot hold, is skipped: refused, not migrated.)
async fn application_entities_migrate_keeping_their_values(json: bool) {
    use proptest::strategy::Strategy;
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let url = if json {
        format!("{}&json=post", b.fresh_url())
    } else {
        b.fresh_url()
    };
    let ns = tern_integration_tests::redis::prefix_of(&url);
    let store = store_at(&url).await;
    tern_testkit::lazy::up(&store, &[(1, "lazy\nadd post.likes = 0\n")])
        .await
        .unwrap();
    let lazy = LazyClient::builder(Arc::clone(&store))
        .declare("post", 1)
        .migrate_in_store(false)
        .connect()
        .await
        .unwrap();
    let conn = raw(&b).await;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let texts = if json {
        arb_json_text().boxed()
    } else {
        arb_field_text().boxed()
    };
    let strategy = (
        proptest::collection::btree_map("[a-z]{1,3}", texts, 1..6),
        proptest::bool::ANY,
    );
    let (store, lazy, conn, next, ns) = (&store, &lazy, &conn, &next, &ns);
    tern_testkit::prop::check(64, &strategy, |(fields, spaced)| async move {
        let id = next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string();
        let mut conn = conn.clone();
        let redis_key = format!("{ns}:post:{id}");
        let mut write = if json {
            let sep = if spaced { ", " } else { "," };
            let members: Vec<String> = fields.iter().map(|(f, t)| format!("\"{f}\":{t}")).collect();
            redis::cmd("SET")
                .arg(&redis_key)
                .arg(format!("{{{}}}", members.join(sep)))
                .clone()
        } else {
            let mut hset = redis::cmd("HSET");
            hset.arg(&redis_key);
            for (f, text) in &fields {
                hset.arg(f).arg(text);
            }
            hset
        };
        q::<_, ()>(&mut conn, &mut write).await;
        let before = match store.get(&key("post", &id)).await {
            Ok(e) => e.unwrap(),
            Err(e) if json && e.kind() == tern_core::store::ErrorKind::InvalidData => {
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let mut got = lazy.get(&key("post", &id)).await.unwrap().unwrap();
        assert_eq!(got.value.remove("likes"), Some(Value::Int(0)));
        assert_eq!(got.value, before.value);
        let stored = store.get(&key("post", &id)).await.unwrap().unwrap();
        assert_eq!((stored.version, stored.value.len()), (1, fields.len() + 1));
        if json {
            return;
        }
        let mut hgetall = redis::cmd("HGETALL");
        hgetall.arg(&redis_key);
        let texts: std::collections::BTreeMap<String, String> = q(&mut conn, &mut hgetall).await;
        for (f, text) in &fields {
            if before.value.get(f) == Some(&Value::String(text.clone())) {
                assert_eq!(texts.get(f), Some(text), "field {f}");
            }
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_hash_an_application_wrote_migrates_keeping_its_values() {
    application_entities_migrate_keeping_their_values(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_json_string_an_application_wrote_migrates_keeping_its_values() {
    application_entities_migrate_keeping_their_values(true).await;
}

/// The store at `url`.
async fn store_at(url: &str) -> Arc<dyn tern_core::store::Store> {
    Arc::new(
        RedisStore::connect(RedisConfig::from_url(url).unwrap())
            .await
            .unwrap(),
    )
}

/// Installs `add post.likes = 0` lazily and reads each of `ids` through a
/// lazy client (`in_store`: migrating in the store where it can, else on the
/// client): each comes back, and is stored, at version 1 with `likes` 0.
async fn migrates_lazily(store: &Arc<dyn tern_core::store::Store>, ids: &[&str], in_store: bool) {
    tern_testkit::lazy::up(store, &[(1, "lazy\nadd post.likes = 0\n")])
        .await
        .unwrap();
    let lazy = LazyClient::builder(Arc::clone(store))
        .declare("post", 1)
        .migrate_in_store(in_store)
        .connect()
        .await
        .unwrap();
    for id in ids {
        let got = lazy.get(&key("post", id)).await.unwrap().unwrap();
        assert_eq!(got.version, 1, "post {id}");
        assert_eq!(got.value.get("likes"), Some(&Value::Int(0)), "post {id}");
        let stored = store.get(&key("post", id)).await.unwrap().unwrap();
        assert_eq!(stored.version, 1, "post {id} stored");
    }
}

/// Runs the raw command `before`, reads `post:<id>` through the store, runs
/// `after`, then writes what was read at version 1 with a compare-and-set:
/// its outcome.
async fn cas_across(
    store: &Arc<dyn tern_core::store::Store>,
    b: &tern_integration_tests::redis::RedisBackend,
    id: &str,
    mut before: redis::Cmd,
    mut after: redis::Cmd,
) -> WriteOutcome {
    let mut conn = raw(b).await;
    q::<_, ()>(&mut conn, &mut before).await;
    let read = store.get(&key("post", id)).await.unwrap().unwrap();
    q::<_, ()>(&mut conn, &mut after).await;
    let mut new = read.clone();
    new.version = 1;
    let replace = tern_core::store::Write::Replace {
        expected: read,
        new,
    };
    let mut outcome = store.write_checked(vec![replace]).await.unwrap();
    outcome.pop().unwrap()
}

/// Upper-cases a plain string (`blob`): what a migration of a string kind does.
struct Upper;

impl EntityMigration for Upper {
    fn kind(&self) -> &str {
        "blob"
    }
    fn transform(&self, _key: &Key, value: &mut Map) -> Result<bool, String> {
        let Some(Value::String(s)) = value.get_mut("value") else {
            return Err(format!("not a string: {value:?}"));
        };
        *s = s.to_uppercase();
        Ok(true)
    }
}

/// #34 item 2: the version tag of a plain-string entity outlived its value,
/// so old code's `SET blob:8 zzzz` over a migrated string read back as the
/// new version holding `zzzz`. The tag now names the value's digest: the raw
/// value reads as version 0 (docs/lazy.md, raw writes), through the store,
/// its count and the lazy client, which migrates it; a command through
/// `RedisLazy` keeps the tag with the value it changes; the eager engine's
/// tags are the same.
#[tokio::test]
async fn a_raw_set_over_a_migrated_string_reads_as_version_0() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let b = b.with_options(super::redis_types::OPTIONS);
    let url = b.fresh_url();
    let ns = tern_integration_tests::redis::prefix_of(&url);
    let mut conn = raw(&b).await;
    for id in ["7", "8", "9"] {
        q::<_, ()>(
            &mut conn,
            redis::cmd("SET").arg(format!("{ns}:blob:{id}")).arg("abc"),
        )
        .await;
    }
    let store = Arc::new(
        RedisStore::connect(RedisConfig::from_url(&url).unwrap())
            .await
            .unwrap(),
    );
    let dyn_store: Arc<dyn tern_core::store::Store> = store.clone();
    let upper = Migration::from_code(1, "upper", "u1", Arc::new(Upper)).into_lazy();
    let mut set = MigrationSet::new();
    set.add(upper.clone()).unwrap();
    Migrator::new(dyn_store.clone(), set)
        .up(None)
        .await
        .unwrap();
    let client = LazyClient::builder(dyn_store.clone())
        .declare("blob", 1)
        .code(upper)
        .connect()
        .await
        .unwrap();
    for id in ["7", "8", "9"] {
        let got = client.get(&key("blob", id)).await.unwrap().unwrap();
        assert_eq!(
            (got.version, got.value.get("value")),
            (1, Some(&Value::from("ABC")))
        );
    }
    // Old code writes over two migrated strings, one of them with the value
    // it had before the migration.
    for (id, text) in [("8", "zzzz"), ("9", "abc")] {
        q::<_, ()>(
            &mut conn,
            redis::cmd("SET").arg(format!("{ns}:blob:{id}")).arg(text),
        )
        .await;
    }
    let stored = dyn_store.get(&key("blob", "8")).await.unwrap().unwrap();
    assert_eq!(
        stored.version, 0,
        "a raw SET reads as version 0: {stored:?}"
    );
    assert_eq!(
        dyn_store
            .count("blob", tern_core::store::Filter::at_version(1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        dyn_store.version_census("blob").await.unwrap(),
        [(0, 2), (1, 1)].into_iter().collect()
    );
    // The lazy client migrates what old code wrote.
    for (id, want) in [("7", "ABC"), ("8", "ZZZZ"), ("9", "ABC")] {
        let got = client.get(&key("blob", id)).await.unwrap().unwrap();
        assert_eq!(
            (got.version, got.value.get("value")),
            (1, Some(&Value::from(want))),
            "{id}"
        );
    }
    // A command through the lazy client runs on the migrated string and its
    // tag follows the value it changed: still version 1.
    let lazy = RedisLazy::new(Arc::clone(&store), client);
    lazy.command(&key("blob", "7"), "APPEND", &[b"d".to_vec()])
        .await
        .unwrap();
    let got = dyn_store.get(&key("blob", "7")).await.unwrap().unwrap();
    assert_eq!(
        (got.version, got.value.get("value")),
        (1, Some(&Value::from("ABCd")))
    );
    // A raw APPEND by old code is a new value too.
    q::<_, ()>(
        &mut conn,
        redis::cmd("APPEND").arg(format!("{ns}:blob:7")).arg("e"),
    )
    .await;
    assert_eq!(
        dyn_store
            .get(&key("blob", "7"))
            .await
            .unwrap()
            .unwrap()
            .version,
        0
    );
}

/// #34 item 15: a hash field tern reads as text although Redis's `cjson`
/// reads it as JSON (a malformed typed-JSON tag, a number tern cannot hold)
/// was compared as `cjson` reads it: an application's reformatting between a
/// read and the write was taken for no change and the old text written back.
/// Compared as tern reads it: byte for byte.
#[tokio::test]
async fn a_reformatted_field_tern_reads_as_text_is_a_change() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let url = b.fresh_url();
    let ns = tern_integration_tests::redis::prefix_of(&url);
    let store = store_at(&url).await;
    let field = |text: &'static str| {
        redis::cmd("HSET")
            .arg(format!("{ns}:post:1"))
            .arg("f")
            .arg(text)
            .clone()
    };
    let across = |before, after| cas_across(&store, &b, "1", field(before), field(after));
    for (before, after) in [
        (r#"{"$bytes": 5}"#, r#"{"$bytes":5}"#),
        (r#"{"$date": "x"}"#, r#"{ "$date" : "x" }"#),
        ("1e400", "10e399"),
        ("3.14159265358979323846", "3.141592653589793238460"),
        ("[123456789012345678901234]", "[ 123456789012345678901234 ]"),
    ] {
        assert_eq!(
            across(before, after).await,
            Conflict,
            "{before} then {after}"
        );
    }
    // Text tern reads as JSON still compares by value.
    assert_eq!(
        across(r#"{"$bytes": "AQI="}"#, r#"{"$bytes":"AQI="}"#).await,
        Applied
    );
    assert_eq!(across("[1, 2.5]", "[1,2.50]").await, Applied);
    // Unchanged text is no change.
    assert_eq!(
        across(r#"{"$bytes": 5}"#, r#"{"$bytes": 5}"#).await,
        Applied
    );
}

/// #34 item 6: a write Redis applied but answered after the response timeout
/// was reported as `store unavailable ... connection failed`. Here another
/// client keeps the server busy for 100 ms (a script: every command waits, as
/// behind a big container's migration) while a compare-and-set is sent with a
/// 20 ms response timeout: the store reads the entity again once the server
/// answers and reports the write applied. The timeout is a URL option and a bad
/// one is refused naming the option.
#[tokio::test]
async fn a_write_answered_after_the_timeout_is_reported_applied() {
    let Some(b) = or_skip(backend(), None).await else {
        return;
    };
    let base = b.fresh_url();
    let store = store_at(&base).await;
    let hurried = store_at(&format!("{base}&response_timeout=20")).await;
    let mut value = Map::new();
    value.insert("n".into(), Value::Int(1));
    let old = tern_core::model::Entity::new(key("post", "t"), value);
    store
        .write_checked(vec![tern_core::store::Write::Put(old.clone())])
        .await
        .unwrap();
    let old = store.get(&key("post", "t")).await.unwrap().unwrap();
    let mut new = old.clone();
    new.version = 1;
    new.value.insert("likes".into(), Value::Int(0));
    let mut conn = raw(&b).await;
    let busy = tokio::spawn(async move {
        let mut busy = redis::cmd("EVAL");
        busy.arg(
            "local t = redis.call('TIME'); local from = t[1] * 1000000 + t[2]; \
             repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - from > 100000",
        )
        .arg(0);
        q::<_, ()>(&mut conn, &mut busy).await;
    });
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    let outcome = hurried
        .write_checked(vec![tern_core::store::Write::Replace {
            expected: old,
            new: new.clone(),
        }])
        .await
        .unwrap();
    busy.await.unwrap();
    assert_eq!(outcome, vec![Applied]);
    assert_eq!(store.get(&key("post", "t")).await.unwrap().unwrap(), new);
    let err = RedisConfig::from_url(&format!("{base}&response_timeout=soon"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("response_timeout"), "{err}");
}
