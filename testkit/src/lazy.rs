//! The lazy battery: every guarantee of lazy migration (LAZY.md), written once
//! and run against every store (memory and embedded in tern-core's tests;
//! Redis, MongoDB and Cassandra in `tern-integration-tests`).
//!
//! Functions return `Err(reason)` when the store lacks a capability a test
//! needs (atomic writes of several keys, for lazy kind renames); they first
//! check that the store refuses the lazy install cleanly. [`lazy_battery_tests!`]
//! turns them into `#[tokio::test]`s for one backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use crate::battery::Backend;
use tern_core::lang::{self, eval};
use tern_core::lazy::{self, LazyClient, LazyError, SweepOptions};
use tern_core::migrate::{LeaseOptions, MigrateError, Migration, Migrator, state};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Condition, Store, Write};

pub use crate::battery::set;

fn map(pairs: &[(&str, Value)]) -> Map {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn key(kind: &str, id: i64) -> Key {
    Key::new(kind, id).unwrap()
}

fn raw(kind: &str, id: i64, version: u64, props: &[(&str, Value)]) -> Entity {
    Entity {
        key: key(kind, id),
        version,
        value: map(props),
    }
}

async fn put_raw(store: &dyn Store, entities: Vec<Entity>) {
    let writes = entities.into_iter().map(Write::Put).collect();
    store.write_batch(writes).await.unwrap();
}

/// Every entity of `kind` as stored (no lazy layer), sorted by key.
pub async fn raw_kind(store: &dyn Store, kind: &str) -> Vec<Entity> {
    let mut out = crate::battery::kind_entities(store, kind, 500).await;
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    out
}

/// `tern up` of migration scripts `(id, text)` (named `<id>_m.tern`) on `store`.
///
/// # Errors
/// The engine's.
pub async fn up(store: &Arc<dyn Store>, scripts: &[(u32, &str)]) -> Result<(), MigrateError> {
    Migrator::new(Arc::clone(store), set(scripts))
        .up(None)
        .await
        .map(|_| ())
}

async fn client(store: &Arc<dyn Store>, kinds: &[(&str, u64)]) -> LazyClient {
    let mut b = LazyClient::builder(Arc::clone(store)).refresh_every(Duration::ZERO);
    for (k, v) in kinds {
        b = b.declare(k, *v);
    }
    b.connect().await.unwrap()
}

async fn sweep(store: &Arc<dyn Store>) -> lazy::SweepReport {
    sweep_by(store, true).await
}

/// A sweep in batches of 7; `pushdown: false` forces the client path.
async fn sweep_by(store: &Arc<dyn Store>, pushdown: bool) -> lazy::SweepReport {
    lazy::sweep::sweep(
        Arc::clone(store),
        &LeaseOptions::default(),
        &BTreeMap::new(),
        &SweepOptions {
            batch_size: 7,
            pushdown,
            ..SweepOptions::default()
        },
    )
    .await
    .unwrap()
}

/// Whether the store can run lazy kind renames; if not, checks that the
/// install is refused with the reason and nothing changes.
async fn renames_or_skip(store: &Arc<dyn Store>) -> Result<(), String> {
    if store.features().atomic_writes.is_some() {
        return Ok(());
    }
    let before = state::load(store.as_ref()).await.unwrap().doc;
    let err = up(store, &[(1, "lazy\nrename kind a to b\n")])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot be lazy"), "{err}");
    if let Some(hint) = store.features().atomic_writes_hint {
        // The setting that would allow it (a Redis Cluster's `id_tag=1`).
        assert!(err.to_string().contains(hint), "{err}");
    }
    assert_eq!(
        state::load(store.as_ref()).await.unwrap().doc.kinds,
        before.kinds
    );
    Err(format!(
        "the {} store has no atomic write of several keys, so a lazy kind rename is refused at install (checked)",
        store.info().scheme
    ))
}

/// Install touches no entity; the first read migrates and writes back.
pub async fn install_touches_nothing_and_a_read_migrates(backend: &impl Backend) {
    let store = backend.fresh().await;
    put_raw(
        store.as_ref(),
        (0..20)
            .map(|i| {
                raw(
                    "post",
                    i,
                    0,
                    &[("text", Value::from("hi")), ("n", Value::Int(i))],
                )
            })
            .collect(),
    )
    .await;
    let before = raw_kind(store.as_ref(), "post").await;
    up(
        &store,
        &[(1, "lazy\nadd post.likes = 0\nrename post.text to content\n")],
    )
    .await
    .unwrap();
    assert_eq!(
        raw_kind(store.as_ref(), "post").await,
        before,
        "install touched entities"
    );
    let doc = state::load(store.as_ref()).await.unwrap().doc;
    assert_eq!(doc.kinds.get("post"), Some(&2));
    assert!(doc.applied[0].script.starts_with("lazy\n"));
    let c = client(&store, &[("post", 2)]).await;
    let got = c.get(&key("post", 3)).await.unwrap().unwrap();
    let want = map(&[
        ("content", Value::from("hi")),
        ("n", Value::Int(3)),
        ("likes", Value::Int(0)),
    ]);
    assert_eq!((got.version, &got.value), (2, &want));
    let stored = store.get(&key("post", 3)).await.unwrap().unwrap();
    assert_eq!(
        (stored.version, &stored.value),
        (2, &want),
        "not written back"
    );
    // Others stay untouched until read.
    assert_eq!(
        store.get(&key("post", 4)).await.unwrap().unwrap().version,
        0
    );
    assert!(c.get(&key("post", 99)).await.unwrap().is_none());

    // get_many: up to date (3), stale (5, 6), absent (99), in order, each
    // stale one migrated and written back as a get would.
    let keys = [
        key("post", 3),
        key("post", 5),
        key("post", 99),
        key("post", 6),
    ];
    let many = c.get_many(&keys).await.unwrap();
    let want_at = |i: i64| {
        map(&[
            ("content", Value::from("hi")),
            ("n", Value::Int(i)),
            ("likes", Value::Int(0)),
        ])
    };
    let shape: Vec<Option<(u64, Map)>> = many
        .iter()
        .map(|e| e.as_ref().map(|e| (e.version, e.value.clone())))
        .collect();
    assert_eq!(
        shape,
        vec![
            Some((2, want_at(3))),
            Some((2, want_at(5))),
            None,
            Some((2, want_at(6)))
        ]
    );
    assert_eq!(
        store.get(&key("post", 5)).await.unwrap().unwrap().version,
        2
    );
    // put_many stamps the declared version.
    c.put_many(vec![
        (key("post", 7), map(&[("content", Value::from("new"))])),
        (key("post", 50), map(&[("content", Value::from("fresh"))])),
    ])
    .await
    .unwrap();
    for id in [7, 50] {
        assert_eq!(
            store.get(&key("post", id)).await.unwrap().unwrap().version,
            2
        );
    }
}

/// Three pending migrations are composed in one read (one write, v0 -> v3).
pub async fn three_pending_migrations_apply_in_one_read(backend: &impl Backend) {
    let store = backend.fresh().await;
    put_raw(
        store.as_ref(),
        vec![raw("u", 1, 0, &[("a", Value::Int(1))])],
    )
    .await;
    up(
        &store,
        &[
            (1, "lazy\nadd u.b = 2\n"),
            (2, "lazy\nrename u.a to c\n"),
            (3, "lazy\ndelete u.b\nadd u.d = \"x\" where u.c = 1\n"),
        ],
    )
    .await
    .unwrap();
    let c = client(&store, &[("u", 4)]).await;
    let got = c.get(&key("u", 1)).await.unwrap().unwrap();
    assert_eq!(got.version, 4);
    assert_eq!(
        got.value,
        map(&[("c", Value::Int(1)), ("d", Value::from("x"))])
    );
    assert_eq!(store.get(&key("u", 1)).await.unwrap().unwrap(), got);
}

/// \[KV\]'s lost update: a writer and lazy readers on the same stale entity,
/// many times, several tasks: the writer's value always survives.
pub async fn a_raced_write_is_never_lost(backend: &impl Backend) {
    let store = backend.fresh().await;
    let n = 60;
    put_raw(
        store.as_ref(),
        (0..n)
            .map(|i| raw("r", i, 0, &[("v", Value::Int(-1))]))
            .collect(),
    )
    .await;
    up(&store, &[(1, "lazy\nadd r.tag = 1\n")]).await.unwrap();
    let c = Arc::new(client(&store, &[("r", 1)]).await);
    let mut tasks = Vec::new();
    for t in 0..4i64 {
        let c = Arc::clone(&c);
        tasks.push(tokio::spawn(async move {
            for i in (t..n).step_by(4) {
                let k = key("r", i);
                let (c1, c2, k1) = (Arc::clone(&c), Arc::clone(&c), k.clone());
                let reader = tokio::spawn(async move { c1.get(&k1).await.unwrap() });
                c2.put(&k, map(&[("v", Value::Int(i))])).await.unwrap();
                let read = reader.await.unwrap().unwrap();
                // The reader saw the migrated old value or the write, nothing else.
                assert!(
                    read.value == map(&[("v", Value::Int(-1)), ("tag", Value::Int(1))])
                        || read.value == map(&[("v", Value::Int(i))]),
                    "{read:?}"
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..n {
        let e = store.get(&key("r", i)).await.unwrap().unwrap();
        assert_eq!(
            (e.version, &e.value),
            (1, &map(&[("v", Value::Int(i))])),
            "write lost"
        );
    }
    // Read-modify-write counters on stale entities: no increment lost.
    put_raw(
        store.as_ref(),
        (0..5)
            .map(|i| raw("r", 100 + i, 0, &[("v", Value::Int(0))]))
            .collect(),
    )
    .await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = Arc::clone(&c);
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                for i in 0..5 {
                    c.modify(&key("r", 100 + i), |m| {
                        let v = match m.get("v") {
                            Some(Value::Int(v)) => *v,
                            _ => 0,
                        };
                        m.insert("v".to_owned(), Value::Int(v + 1));
                    })
                    .await
                    .unwrap()
                    .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..5 {
        let e = store.get(&key("r", 100 + i)).await.unwrap().unwrap();
        assert_eq!(
            e.value.get("v"),
            Some(&Value::Int(40)),
            "an increment was lost"
        );
        assert_eq!(e.value.get("tag"), Some(&Value::Int(1)));
    }
}

/// Old clients are fenced, declarations checked, newer entities refused,
/// clients of untouched kinds unaffected.
pub async fn old_clients_are_fenced_and_newer_entities_refused(backend: &impl Backend) {
    let store = backend.fresh().await;
    put_raw(
        store.as_ref(),
        vec![raw("f", 1, 0, &[("a", Value::Int(1))]), raw("g", 1, 0, &[])],
    )
    .await;
    let old = client(&store, &[("f", 0), ("g", 0)]).await;
    assert!(old.get(&key("f", 1)).await.unwrap().is_some());
    up(&store, &[(1, "lazy\nadd f.b = 1\n")]).await.unwrap();
    let e = old.get(&key("f", 1)).await.unwrap_err();
    assert!(
        matches!(
            e,
            LazyError::KindMigratedSinceConnect {
                declared: 0,
                current: 1,
                ..
            }
        ),
        "{e}"
    );
    let e = old.put(&key("f", 2), Map::new()).await.unwrap_err();
    assert!(
        matches!(e, LazyError::KindMigratedSinceConnect { .. }),
        "{e}"
    );
    assert!(
        store.get(&key("f", 2)).await.unwrap().is_none(),
        "a fenced client wrote"
    );
    // Its other kind is untouched.
    assert!(old.get(&key("g", 1)).await.unwrap().is_some());
    let refuse = |kinds: &'static [(&'static str, u64)]| {
        let store = Arc::clone(&store);
        async move {
            let mut b = LazyClient::builder(store);
            for (k, v) in kinds {
                b = b.declare(k, *v);
            }
            b.connect().await.unwrap_err()
        }
    };
    assert!(matches!(
        refuse(&[("f", 0)]).await,
        LazyError::ClientOutdated { .. }
    ));
    assert!(matches!(
        refuse(&[("f", 2)]).await,
        LazyError::ClientAhead { .. }
    ));
    // A kind migrated but not declared is refused; a kind never migrated passes through.
    let c = client(&store, &[("g", 0)]).await;
    assert!(matches!(
        c.get(&key("f", 1)).await.unwrap_err(),
        LazyError::UndeclaredKind { .. }
    ));
    assert!(c.get(&key("h", 1)).await.unwrap().is_none());
    c.put(&key("h", 1), map(&[("x", Value::Int(1))]))
        .await
        .unwrap();
    assert_eq!(store.get(&key("h", 1)).await.unwrap().unwrap().version, 0);
    // An entity newer than the declaration is an error, never data.
    put_raw(
        store.as_ref(),
        vec![raw("f", 9, 5, &[("z", Value::Int(1))])],
    )
    .await;
    let c = client(&store, &[("f", 1)]).await;
    let e = c.get(&key("f", 9)).await.unwrap_err();
    assert!(
        matches!(
            e,
            LazyError::EntityNewer {
                version: 5,
                declared: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(c.scan("f", &[]).await.is_err());
    assert_eq!(store.get(&key("f", 9)).await.unwrap().unwrap().version, 5);
    // Writes are stamped with the writer's declared version.
    c.put(&key("f", 3), Map::new()).await.unwrap();
    assert_eq!(store.get(&key("f", 3)).await.unwrap().unwrap().version, 1);
}

/// Two kind renames with no access between; insert-if-absent, update-if-present,
/// delete, put, get_many and scans across them (LAZY.md requirement 8, 11).
pub async fn two_kind_renames_with_no_access_between(backend: &impl Backend) -> Result<(), String> {
    let store = backend.fresh().await;
    renames_or_skip(&store).await?;
    put_raw(
        store.as_ref(),
        (1..=6)
            .map(|i| raw("a", i, 0, &[("x", Value::Int(i))]))
            .chain([raw("other", 1, 0, &[])])
            .collect(),
    )
    .await;
    up(
        &store,
        &[
            (1, "lazy\nrename kind a to b\nadd b.y = 1\n"),
            (2, "lazy\nrename b.x to z\nrename kind b to c\n"),
        ],
    )
    .await
    .unwrap();
    let c = client(&store, &[("c", 2)]).await;
    let want = |i: i64| map(&[("z", Value::Int(i)), ("y", Value::Int(1))]);
    // A scan unions former names, migrates values, writes nothing.
    let listed = c.scan("c", &[]).await.unwrap();
    assert_eq!(listed.len(), 6);
    assert!(listed.iter().all(|e| e.key.kind == "c" && e.version == 2));
    assert_eq!(listed[0].value, want(1));
    assert_eq!(
        raw_kind(store.as_ref(), "a").await.len(),
        6,
        "a scan renamed"
    );
    let filtered = c
        .scan(
            "c",
            &[Condition {
                path: vec!["z".into()],
                values: vec![Value::Int(4)],
            }],
        )
        .await
        .unwrap();
    assert_eq!(
        filtered.iter().map(|e| e.key.clone()).collect::<Vec<_>>(),
        vec![key("c", 4)]
    );
    // Two hops in one read; the old copy is gone.
    assert_eq!(c.get(&key("c", 1)).await.unwrap().unwrap().value, want(1));
    assert!(store.get(&key("a", 1)).await.unwrap().is_none());
    assert_eq!(store.get(&key("c", 1)).await.unwrap().unwrap().version, 2);
    // Insert-if-absent sees the entity under a former name.
    assert!(!c.insert(&key("c", 2), Map::new()).await.unwrap());
    assert!(c.insert(&key("c", 50), Map::new()).await.unwrap());
    // Update-if-present finds it there.
    assert!(
        c.update(&key("c", 3), map(&[("w", Value::Int(3))]))
            .await
            .unwrap()
    );
    assert!(store.get(&key("a", 3)).await.unwrap().is_none());
    assert_eq!(
        store.get(&key("c", 3)).await.unwrap().unwrap().value,
        map(&[("w", Value::Int(3))])
    );
    assert!(!c.update(&key("c", 77), Map::new()).await.unwrap());
    // Delete removes it under every name.
    c.delete(&key("c", 4)).await.unwrap();
    assert!(store.get(&key("a", 4)).await.unwrap().is_none());
    assert!(c.get(&key("c", 4)).await.unwrap().is_none());
    // A write under the new name removes the stale copy.
    c.put(&key("c", 5), map(&[("n", Value::Int(5))]))
        .await
        .unwrap();
    assert!(store.get(&key("a", 5)).await.unwrap().is_none());
    // A multi-get resolves each key by its own kind.
    let c2 = client(&store, &[("c", 2), ("other", 0)]).await;
    let got = c2
        .get_many(&[key("c", 6), key("other", 1), key("c", 99)])
        .await
        .unwrap();
    assert_eq!(got[0].as_ref().unwrap().value, want(6));
    assert!(got[1].is_some() && got[2].is_none());
    // put_many too, each put with the removal of its own stale copy (2 still
    // lies under `a`; 6 was just migrated).
    c.put_many(vec![
        (key("c", 2), map(&[("n", Value::Int(2))])),
        (key("c", 6), map(&[("n", Value::Int(6))])),
    ])
    .await
    .unwrap();
    assert!(store.get(&key("a", 2)).await.unwrap().is_none());
    assert_eq!(
        c.get(&key("c", 2)).await.unwrap().unwrap().value,
        map(&[("n", Value::Int(2))])
    );
    // The old names are refused to clients while the rename is pending.
    let e = LazyClient::builder(Arc::clone(&store))
        .declare("a", 0)
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(e, LazyError::KindRenamedAway { .. }), "{e}");
    // The sweep finishes: nothing under a, everything under c at v2.
    let report = sweep(&store).await;
    assert_eq!(report.completed, vec![1, 2]);
    assert!(raw_kind(store.as_ref(), "a").await.is_empty());
    assert!(raw_kind(store.as_ref(), "b").await.is_empty());
    let all = raw_kind(store.as_ref(), "c").await;
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|e| e.version == 2));
    Ok(())
}

/// The sweep completes the migration while a client writes; status and
/// retirement follow the census. The sweep runs inside the store where it can.
pub async fn sweep_completes_while_clients_write(backend: &impl Backend) {
    sweep_while_clients_write(backend, true).await;
}

/// As [`sweep_completes_while_clients_write`], every entity through the
/// sweep's client path (read, migrate, compare-and-set).
pub async fn client_path_sweep_completes_while_clients_write(backend: &impl Backend) {
    sweep_while_clients_write(backend, false).await;
}

async fn sweep_while_clients_write(backend: &impl Backend, pushdown: bool) {
    let store = backend.fresh().await;
    put_raw(
        store.as_ref(),
        (0..80)
            .map(|i| raw("s", i, 0, &[("v", Value::Int(i))]))
            .collect(),
    )
    .await;
    up(&store, &[(1, "lazy\nadd s.w = 1\n")]).await.unwrap();
    let st = lazy::status(store.as_ref(), true).await.unwrap();
    assert_eq!(st[0].stale, Some(80));
    assert_eq!(st[0].pending, vec![1]);
    assert!(!st[0].complete);
    {
        let lease =
            tern_core::migrate::Lease::acquire(Arc::clone(&store), &LeaseOptions::default())
                .await
                .unwrap();
        let e = lazy::retire(store.as_ref(), &lease, 1).await.unwrap_err();
        assert!(e.to_string().contains("not complete"), "{e}");
        lease.release().await.unwrap();
    }
    let c = Arc::new(client(&store, &[("s", 1)]).await);
    let writer = {
        let c = Arc::clone(&c);
        tokio::spawn(async move {
            for i in 0..80 {
                c.put(&key("s", i), map(&[("mine", Value::Int(i))]))
                    .await
                    .unwrap();
            }
        })
    };
    let report = sweep_by(&store, pushdown).await;
    writer.await.unwrap();
    assert_eq!(report.completed, vec![1]);
    for e in raw_kind(store.as_ref(), "s").await {
        assert_eq!(e.version, 1);
        let i = match e.key.id {
            Value::Int(i) => i,
            _ => panic!(),
        };
        assert_eq!(
            e.value,
            map(&[("mine", Value::Int(i))]),
            "the client's write was lost"
        );
    }
    let st = lazy::status(store.as_ref(), false).await.unwrap();
    assert!(st[0].complete && st[0].stale == Some(0));
    let lease = tern_core::migrate::Lease::acquire(Arc::clone(&store), &LeaseOptions::default())
        .await
        .unwrap();
    assert!(lazy::retire(store.as_ref(), &lease, 1).await.unwrap());
    lease.release().await.unwrap();
}

/// A sweep that re-keys a renamed kind in place and advances versions inside
/// the store, while a client writes some entities and reads others, with
/// entities at three versions under two names: none lost, none left behind,
/// no client write overwritten.
pub async fn a_sweep_in_place_races_clients_across_a_rename(
    backend: &impl Backend,
) -> Result<(), String> {
    let store = backend.fresh().await;
    renames_or_skip(&store).await?;
    let n = 120;
    put_raw(
        store.as_ref(),
        (0..n)
            .map(|i| raw("a", i, 0, &[("x", Value::Int(i))]))
            .collect(),
    )
    .await;
    up(&store, &[(1, "lazy\nrename kind a to b\nadd b.y = 1\n")])
        .await
        .unwrap();
    // A few entities reach v1 under the new name before the second install.
    let c1 = client(&store, &[("b", 1)]).await;
    for i in (0..n).step_by(10) {
        c1.get(&key("b", i)).await.unwrap();
    }
    // A writer that bypasses tern leaves a stale copy of entity 10 under the
    // old name, which the new name holds already: the sweep drops it.
    put_raw(
        store.as_ref(),
        vec![raw("a", 10, 0, &[("x", Value::Int(-1))])],
    )
    .await;
    up(
        &store,
        &[
            (1, "lazy\nrename kind a to b\nadd b.y = 1\n"),
            (2, "lazy\nrename b.x to z\n"),
        ],
    )
    .await
    .unwrap();
    let c = Arc::new(client(&store, &[("b", 2)]).await);
    let racer = {
        let c = Arc::clone(&c);
        tokio::spawn(async move {
            for i in (0..n).rev() {
                if i % 3 == 0 {
                    c.put(&key("b", i), map(&[("mine", Value::Int(i))]))
                        .await
                        .unwrap();
                } else {
                    let e = c.get(&key("b", i)).await.unwrap().unwrap();
                    assert_eq!(e.version, 2);
                    assert_eq!(e.value.get("z"), Some(&Value::Int(i)), "{e:?}");
                }
            }
        })
    };
    let report = sweep(&store).await;
    racer.await.unwrap();
    assert_eq!(report.completed, vec![1, 2]);
    assert!(raw_kind(store.as_ref(), "a").await.is_empty());
    let all = raw_kind(store.as_ref(), "b").await;
    assert_eq!(all.len(), n as usize, "an entity was lost or duplicated");
    for e in all {
        let Value::Int(i) = e.key.id else {
            panic!("{e:?}")
        };
        assert_eq!(e.version, 2, "{e:?}");
        let want = if i % 3 == 0 {
            map(&[("mine", Value::Int(i))])
        } else {
            map(&[("z", Value::Int(i)), ("y", Value::Int(1))])
        };
        assert_eq!(e.value, want, "entity {i}");
    }
    Ok(())
}

/// An eager migration after a pending lazy one brings every entity through the
/// pending steps first: none skipped, none half-migrated.
pub async fn an_eager_migration_after_a_lazy_one_applies_the_pending_steps(backend: &impl Backend) {
    let store = backend.fresh().await;
    put_raw(
        store.as_ref(),
        (0..30)
            .map(|i| raw("e", i, 0, &[("a", Value::Int(i))]))
            .collect(),
    )
    .await;
    let scripts = [
        (1, "lazy\nrename e.a to b\n"),
        (2, "add e.c = 2 where e.b = 3\n"),
    ];
    up(&store, &scripts[..1]).await.unwrap();
    let c = client(&store, &[("e", 1)]).await;
    c.get(&key("e", 0)).await.unwrap();
    up(&store, &scripts).await.unwrap();
    for e in raw_kind(store.as_ref(), "e").await {
        assert_eq!(e.version, 2, "{e:?}");
        let i = match e.key.id {
            Value::Int(i) => i,
            _ => panic!(),
        };
        let mut want = map(&[("b", Value::Int(i))]);
        if i == 3 {
            want.insert("c".into(), Value::Int(2));
        }
        assert_eq!(e.value, want);
    }
    let doc = state::load(store.as_ref()).await.unwrap().doc;
    assert!(doc.lazy[0].completed_at.is_some());
}

/// `move` and `copy` cannot be lazy: refused with the reason and the place.
pub async fn move_and_copy_cannot_be_lazy(backend: &impl Backend) {
    let store = backend.fresh().await;
    let e = Migration::from_script(
        1,
        "m",
        "0001_m.tern",
        "lazy\nadd a.x = 1\nmove a.x to b where a.k = b.k\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("0001_m.tern:3:1") && e.contains("cannot be lazy"),
        "{e}"
    );
    assert!(
        state::load(store.as_ref())
            .await
            .unwrap()
            .revision
            .is_none()
    );
}

// ---------------------------------------------------------------------------
// The logical-consistency property (LAZY.md "The contract")
// ---------------------------------------------------------------------------

/// One lazy migration of the generated scenarios, on the kind's current name.
#[derive(Debug, Clone)]
enum Stmt {
    Add(usize, i64, Option<(usize, i64)>),
    Delete(usize),
    Rename(usize, usize),
    RenameKind,
}

/// A client operation of the generated scenarios.
#[derive(Debug, Clone)]
enum Op {
    Get(i64),
    Put(i64, Vec<(usize, i64)>),
    Insert(i64, Vec<(usize, i64)>),
    Update(i64, Vec<(usize, i64)>),
    Delete(i64),
    Scan,
    Modify(i64),
}

const PROPS: [&str; 3] = ["x", "y", "z"];

fn arb_props() -> impl Strategy<Value = Vec<(usize, i64)>> {
    prop::collection::vec((0..3usize, 0..3i64), 0..3)
}

fn arb_stmt(renames: bool) -> impl Strategy<Value = Stmt> {
    let kinds = if renames { 4 } else { 3 };
    (
        0..kinds,
        0..3usize,
        0..3usize,
        0..3i64,
        prop::option::of((0..3usize, 0..3i64)),
    )
        .prop_map(|(op, p, q, v, cond)| match op {
            0 => Stmt::Add(p, v, cond),
            1 => Stmt::Delete(p),
            2 => Stmt::Rename(p, (p + 1 + q % 2) % 3),
            _ => Stmt::RenameKind,
        })
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6i64).prop_map(Op::Get),
        (0..6i64, arb_props()).prop_map(|(i, p)| Op::Put(i, p)),
        (0..6i64, arb_props()).prop_map(|(i, p)| Op::Insert(i, p)),
        (0..6i64, arb_props()).prop_map(|(i, p)| Op::Update(i, p)),
        (0..6i64).prop_map(Op::Delete),
        Just(Op::Scan),
        (0..6i64).prop_map(Op::Modify),
    ]
}

/// A scenario: initial entities, then rounds of (lazy migration, client ops).
#[derive(Debug, Clone)]
pub struct Scenario {
    initial: Vec<(i64, Vec<(usize, i64)>)>,
    rounds: Vec<(Vec<Stmt>, Vec<Op>)>,
}

fn arb_scenario(renames: bool) -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec((0..6i64, arb_props()), 0..6),
        prop::collection::vec(
            (
                prop::collection::vec(arb_stmt(renames), 1..3),
                prop::collection::vec(arb_op(), 0..6),
            ),
            1..4,
        ),
    )
        .prop_map(|(initial, rounds)| Scenario { initial, rounds })
}

fn props(p: &[(usize, i64)]) -> Map {
    p.iter()
        .map(|(k, v)| (PROPS[*k].to_owned(), Value::Int(*v)))
        .collect()
}

/// Runs one scenario lazily on `store` and eagerly on a reference map; panics on any difference.
async fn check_scenario(store: Arc<dyn Store>, s: &Scenario) {
    let mut kind = "k0".to_owned();
    let mut reference: BTreeMap<i64, Map> = BTreeMap::new();
    for (id, p) in &s.initial {
        reference.insert(*id, props(p));
    }
    put_raw(
        store.as_ref(),
        reference
            .iter()
            .map(|(id, m)| Entity {
                key: key(&kind, *id),
                version: 0,
                value: m.clone(),
            })
            .collect(),
    )
    .await;
    let mut scripts: Vec<(u32, String)> = Vec::new();
    let mut version = 0u64;
    let mut kinds_made = 0;
    for (round, (stmts, ops)) in s.rounds.iter().enumerate() {
        let mut text = "lazy\n".to_owned();
        for st in stmts {
            let line = match st {
                Stmt::Add(p, v, cond) => {
                    let w = cond.map_or(String::new(), |(q, c)| {
                        format!(" where {kind}.{} = {c}", PROPS[q])
                    });
                    format!("add {kind}.{} = {v}{w}", PROPS[*p])
                }
                Stmt::Delete(p) => format!("delete {kind}.{}", PROPS[*p]),
                Stmt::Rename(p, q) => format!("rename {kind}.{} to {}", PROPS[*p], PROPS[*q]),
                Stmt::RenameKind => {
                    kinds_made += 1;
                    let to = format!("k{kinds_made}");
                    let line = format!("rename kind {kind} to {to}");
                    kind = to;
                    line
                }
            };
            // The eager reference: every entity passes the statement now.
            let parsed = lang::parse(&line).unwrap();
            let stmt = &parsed.statements[0].statement;
            if !matches!(stmt, lang::Statement::RenameKind { .. }) {
                for m in reference.values_mut() {
                    eval::apply_local(stmt, m);
                }
                version += 1;
            }
            text.push_str(&line);
            text.push('\n');
        }
        scripts.push((round as u32 + 1, text));
        let refs: Vec<(u32, &str)> = scripts.iter().map(|(i, t)| (*i, t.as_str())).collect();
        up(&store, &refs).await.unwrap();
        let c = client(&store, &[(kind.as_str(), version)]).await;
        for op in ops {
            match op {
                Op::Get(id) => {
                    let got = c.get(&key(&kind, *id)).await.unwrap();
                    assert_eq!(
                        got.map(|e| e.value),
                        reference.get(id).cloned(),
                        "get {id} in {s:?}"
                    );
                }
                Op::Put(id, p) => {
                    c.put(&key(&kind, *id), props(p)).await.unwrap();
                    reference.insert(*id, props(p));
                }
                Op::Insert(id, p) => {
                    let done = c.insert(&key(&kind, *id), props(p)).await.unwrap();
                    assert_eq!(done, !reference.contains_key(id), "insert {id} in {s:?}");
                    reference.entry(*id).or_insert_with(|| props(p));
                }
                Op::Update(id, p) => {
                    let done = c.update(&key(&kind, *id), props(p)).await.unwrap();
                    assert_eq!(done, reference.contains_key(id), "update {id} in {s:?}");
                    if done {
                        reference.insert(*id, props(p));
                    }
                }
                Op::Delete(id) => {
                    c.delete(&key(&kind, *id)).await.unwrap();
                    reference.remove(id);
                }
                Op::Modify(id) => {
                    let got = c
                        .modify(&key(&kind, *id), |m| {
                            m.insert("n".into(), Value::Int(1));
                        })
                        .await
                        .unwrap();
                    if let Some(m) = reference.get_mut(id) {
                        m.insert("n".into(), Value::Int(1));
                    }
                    assert_eq!(
                        got.map(|e| e.value),
                        reference.get(id).cloned(),
                        "modify {id} in {s:?}"
                    );
                }
                Op::Scan => {
                    let got: BTreeMap<i64, Map> = c
                        .scan(&kind, &[])
                        .await
                        .unwrap()
                        .into_iter()
                        .map(|e| match e.key.id {
                            Value::Int(i) => (i, e.value),
                            _ => panic!(),
                        })
                        .collect();
                    assert_eq!(got, reference, "scan in {s:?}");
                }
            }
        }
    }
    // The final export after a sweep equals the eager reference.
    let report = sweep(&store).await;
    assert_eq!(report.remaining(), 0);
    let got: BTreeMap<i64, Map> = raw_kind(store.as_ref(), &kind)
        .await
        .into_iter()
        .map(|e| {
            assert_eq!(e.version, version, "{e:?} in {s:?}");
            match e.key.id {
                Value::Int(i) => (i, e.value),
                _ => panic!(),
            }
        })
        .collect();
    assert_eq!(got, reference, "final export in {s:?}");
    for k in 0..kinds_made {
        assert!(
            raw_kind(store.as_ref(), &format!("k{k}")).await.is_empty(),
            "left under k{k}"
        );
    }
}

/// The contract as a property: random entities, random lazy add/delete/rename
/// (and rename kind where the store can), random client operations between
/// installs; every read and the final export equal the eager reference.
pub async fn lazy_equals_eager_on_every_read_and_the_final_export(backend: &impl Backend) {
    let cases: u32 = std::env::var("TERN_LAZY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let renames = backend.fresh().await.features().atomic_writes.is_some();
    crate::prop::check(cases, &arb_scenario(renames), |s| async move {
        let store = backend.fresh().await;
        check_scenario(store, &s).await;
    });
}

/// One lazy read of an entity N steps behind equals N eager steps
/// (the composition property, requirement 7).
pub async fn one_read_equals_n_eager_steps(backend: &impl Backend) {
    let strategy = (arb_props(), prop::collection::vec(arb_stmt(false), 1..8));
    crate::prop::check(32, &strategy, |(p, stmts)| async move {
        let store = backend.fresh().await;
        put_raw(
            store.as_ref(),
            vec![Entity {
                key: key("n", 1),
                version: 0,
                value: props(&p),
            }],
        )
        .await;
        let mut eager = props(&p);
        let mut scripts = Vec::new();
        for (i, st) in stmts.iter().enumerate() {
            let line = match st {
                Stmt::Add(q, v, _) => format!("add n.{} = {v}", PROPS[*q]),
                Stmt::Delete(q) => format!("delete n.{}", PROPS[*q]),
                Stmt::Rename(q, r) => format!("rename n.{} to {}", PROPS[*q], PROPS[*r]),
                Stmt::RenameKind => unreachable!(),
            };
            let parsed = lang::parse(&line).unwrap();
            eval::apply_local(&parsed.statements[0].statement, &mut eager);
            scripts.push((i as u32 + 1, format!("lazy\n{line}\n")));
        }
        let refs: Vec<(u32, &str)> = scripts.iter().map(|(i, t)| (*i, t.as_str())).collect();
        up(&store, &refs).await.unwrap();
        let c = client(&store, &[("n", stmts.len() as u64)]).await;
        let got = c.get(&key("n", 1)).await.unwrap().unwrap();
        assert_eq!(got.value, eager);
    });
}

/// Generates one `#[tokio::test]` per lazy battery function for a backend
/// (same arguments as `battery_tests!`).
#[macro_export]
macro_rules! lazy_battery_tests {
    ($label:expr, $backend:expr) => {
        $crate::battery_test!(
            lazy,
            $label,
            $backend,
            [
                install_touches_nothing_and_a_read_migrates,
                three_pending_migrations_apply_in_one_read,
                a_raced_write_is_never_lost,
                old_clients_are_fenced_and_newer_entities_refused,
                two_kind_renames_with_no_access_between,
                sweep_completes_while_clients_write,
                client_path_sweep_completes_while_clients_write,
                a_sweep_in_place_races_clients_across_a_rename,
                an_eager_migration_after_a_lazy_one_applies_the_pending_steps,
                move_and_copy_cannot_be_lazy,
                lazy_equals_eager_on_every_read_and_the_final_export,
                one_read_equals_n_eager_steps,
            ]
        );
    };
}
