//! Every Redis type as an entity, and prefix hierarchies, on the server at
//! `TERN_IT_REDIS_URL` (and on the cluster at `TERN_IT_REDIS_CLUSTER_URL`):
//! plain strings, sets, lists and sorted sets migrated as whole containers by
//! Rust transforms, their version tag in a companion key, TTLs kept; KVolve's
//! `amico:followers` -> `amico:followers:default` rename of sorted sets.

use std::collections::BTreeMap;
use std::sync::Arc;

use redis::aio::ConnectionLike;
use tern_core::migrate::{EntityMigration, Migration, MigrationSet, Migrator};
use tern_core::model::{Key, Map, Value};
use tern_core::store::Store;

/// A Rust transform of one kind.
struct Transform {
    kind: &'static str,
    f: Edit,
}

impl EntityMigration for Transform {
    fn kind(&self) -> &str {
        self.kind
    }
    fn transform(&self, _key: &Key, value: &mut Map) -> Result<bool, String> {
        (self.f)(value);
        Ok(true)
    }
}

fn array(value: &mut Map, name: &str) -> Vec<Value> {
    match value.remove(name) {
        Some(Value::Array(items)) => items,
        other => panic!("{name}: {other:?}"),
    }
}

/// An edit of an entity's value.
type Edit = fn(&mut Map);

/// The URL options of the test's kinds.
pub(crate) const OPTIONS: &str =
    "string=blob&set=tags&list=queue&zset=amico:followers,amico:followers:default";

/// The migrations: one transform per container type, then the Amico rename.
fn migrations() -> MigrationSet {
    let mut set = MigrationSet::new();
    let code: [(&str, Edit); 4] = [
        ("blob", |v| {
            let Some(Value::String(s)) = v.get("value") else {
                panic!("blob {v:?}")
            };
            let up = s.to_uppercase();
            v.insert("value".into(), Value::String(up));
        }),
        ("tags", |v| {
            let mut items = array(v, "members");
            items.push(Value::from("migrated"));
            v.insert("members".into(), Value::Array(items));
        }),
        ("queue", |v| {
            let mut items = array(v, "items");
            items.push(Value::from("tail"));
            v.insert("items".into(), Value::Array(items));
        }),
        ("amico:followers", |v| {
            let items = array(v, "members")
                .into_iter()
                .map(|pair| match pair {
                    Value::Array(mut p) => {
                        if let Value::Float(s) = p[1] {
                            p[1] = Value::Float(s * 2.0);
                        }
                        Value::Array(p)
                    }
                    other => other,
                })
                .collect();
            v.insert("members".into(), Value::Array(items));
        }),
    ];
    for (i, (kind, f)) in code.into_iter().enumerate() {
        let id = u32::try_from(i).unwrap() + 1;
        set.add(Migration::from_code(
            id,
            &format!("t{id}"),
            "r1",
            Arc::new(Transform { kind, f }),
        ))
        .unwrap();
    }
    set.add(
        Migration::from_script(
            5,
            "scope",
            "0005_scope.tern",
            "rename kind `amico:followers` to `amico:followers:default`",
        )
        .unwrap(),
    )
    .unwrap();
    set
}

async fn q<C: ConnectionLike + Send, T: redis::FromRedisValue>(
    conn: &mut C,
    cmd: &mut redis::Cmd,
) -> T {
    cmd.query_async(conn).await.unwrap()
}

/// Loads raw data as an application would (no version tags), with TTLs on the
/// odd ids, runs the migrations, and checks every container, its version tag,
/// the TTLs, and that nothing was renamed twice.
pub(crate) async fn every_type_migrates_whole_with_its_ttl<C>(
    store: Arc<dyn Store>,
    ns: &str,
    conn: &mut C,
    tagged: bool,
) where
    C: ConnectionLike + Send,
{
    // The Redis key of an id of a kind, and of its version tag.
    let k = |kind: &str, i: &dyn std::fmt::Display| {
        super::redis_keys::redis_key(ns, tagged, kind, &i.to_string())
    };
    let tag_of = |key: &str| {
        if tagged {
            format!("{ns}:__tern:v:{key}")
        } else {
            format!("{ns}:__tern:v:{{{key}}}")
        }
    };
    let n = 6;
    for i in 0..n {
        q::<_, ()>(
            conn,
            redis::cmd("SET").arg(k("blob", &i)).arg(format!("b{i}")),
        )
        .await;
        q::<_, ()>(
            conn,
            redis::cmd("SADD")
                .arg(k("tags", &i))
                .arg("a")
                .arg(format!("t{i}")),
        )
        .await;
        q::<_, ()>(
            conn,
            redis::cmd("RPUSH")
                .arg(k("queue", &i))
                .arg("x")
                .arg("a")
                .arg("x"),
        )
        .await;
        q::<_, ()>(
            conn,
            redis::cmd("ZADD")
                .arg(k("amico:followers", &i))
                .arg(1.5)
                .arg("ann")
                .arg(i)
                .arg("bob"),
        )
        .await;
        if i % 2 == 1 {
            for kind in ["blob", "tags", "queue", "amico:followers"] {
                q::<_, ()>(conn, redis::cmd("EXPIRE").arg(k(kind, &i)).arg(1000)).await;
            }
        }
    }
    let report = Migrator::new(Arc::clone(&store), migrations())
        .up(None)
        .await
        .unwrap();
    assert_eq!(report.applied.len(), 5);

    for i in 0..n {
        let blob: String = q(conn, redis::cmd("GET").arg(k("blob", &i))).await;
        assert_eq!(blob, format!("B{i}"));
        let mut tags: Vec<String> = q(conn, redis::cmd("SMEMBERS").arg(k("tags", &i))).await;
        tags.sort();
        assert_eq!(tags, ["a", "migrated", &format!("t{i}")]);
        let queue: Vec<String> = q(
            conn,
            redis::cmd("LRANGE").arg(k("queue", &i)).arg(0).arg(-1),
        )
        .await;
        assert_eq!(queue, ["x", "a", "x", "tail"]);
        let old: i64 = q(conn, redis::cmd("EXISTS").arg(k("amico:followers", &i))).await;
        assert_eq!(old, 0);
        let new_key = k("amico:followers:default", &i);
        let zset: Vec<(String, f64)> = q(
            conn,
            redis::cmd("ZRANGE")
                .arg(&new_key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES"),
        )
        .await;
        let want: BTreeMap<String, f64> = [
            ("ann".to_owned(), 3.0),
            ("bob".to_owned(), 2.0 * f64::from(i)),
        ]
        .into();
        assert_eq!(
            zset.into_iter().collect::<BTreeMap<_, _>>(),
            want,
            "{new_key}"
        );
        // The version tags: the transform's migration id for each kind, moved
        // with the renamed sorted sets.
        for (kind, version) in [
            ("blob", 1),
            ("tags", 1),
            ("queue", 1),
            ("amico:followers:default", 1),
        ] {
            let key = k(kind, &i);
            let tag: Option<String> = q(conn, redis::cmd("GET").arg(tag_of(&key))).await;
            // A plain string's tag also names its value's digest (#34 item 2).
            let number = tag.as_deref().map(|t| t.split(':').next().unwrap_or(t));
            assert_eq!(number, Some(version.to_string().as_str()), "{key}");
            let ttl: i64 = q(conn, redis::cmd("PTTL").arg(&key)).await;
            let tag_ttl: i64 = q(conn, redis::cmd("PTTL").arg(tag_of(&key))).await;
            if i % 2 == 1 {
                assert!(
                    ttl > 0 && tag_ttl > 0,
                    "{key}: TTL {ttl}, tag TTL {tag_ttl}"
                );
            } else {
                assert_eq!((ttl, tag_ttl), (-1, -1), "{key}");
            }
        }
    }
    // The census passes of the rename scan `amico:followers:*`, which matches the
    // renamed keys too: none was renamed a second time.
    for i in 0..n {
        let twice: i64 = q(
            conn,
            redis::cmd("EXISTS").arg(k("amico:followers:default:default", &i)),
        )
        .await;
        assert_eq!(twice, 0);
    }

    // Through tern: the entities read back with their versions.
    let e = store
        .get(&Key::new("amico:followers:default", "1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.version, 1);
    assert_eq!(
        e.get("members"),
        Some(&Value::Array(vec![
            Value::Array(vec!["bob".into(), Value::Float(2.0)]),
            Value::Array(vec!["ann".into(), Value::Float(3.0)]),
        ]))
    );
    assert_eq!(
        store
            .count("tags", tern_core::store::Filter::default())
            .await
            .unwrap(),
        n as u64
    );
}

mod server {
    use tern_integration_tests::redis::backend;
    use tern_testkit::battery::or_skip;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_type_migrates_whole_with_its_ttl() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        let b = b.with_options(super::OPTIONS);
        let url = b.fresh_url();
        let ns = tern_integration_tests::redis::prefix_of(&url);
        let store = tern_integration_tests::redis::open(&url).await.unwrap();
        let client = redis::Client::open(b.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        super::every_type_migrates_whole_with_its_ttl(store, &ns, &mut conn, false).await;
    }
}

mod cluster {
    use tern_integration_tests::redis::cluster_backend;
    use tern_testkit::battery::or_skip;

    /// The eager run on the cluster, ids plain (`ns:kind:id`: the rename copies
    /// across slots) or hash tags (`id_tag=1`, `ns:kind:{id}`: one script per key).
    async fn on_the_cluster(tagged: bool) {
        let Some(b) = or_skip(cluster_backend(), None).await else {
            return;
        };
        let options = if tagged {
            format!("{}&id_tag=1", super::OPTIONS)
        } else {
            super::OPTIONS.to_owned()
        };
        let b = b.with_options(&options);
        let url = b.fresh_url();
        let ns = tern_integration_tests::redis::prefix_of(&url);
        let store = tern_integration_tests::redis::open(&url).await.unwrap();
        let mut conn = super::super::redis_keys::cluster_conn(&b).await;
        super::every_type_migrates_whole_with_its_ttl(store, &ns, &mut conn, tagged).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_type_migrates_whole_with_its_ttl() {
        on_the_cluster(false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_type_migrates_whole_with_its_ttl_ids_as_hash_tags() {
        on_the_cluster(true).await;
    }
}
