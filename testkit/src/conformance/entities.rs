//! Checks of single entities and write batches: round trips, outcomes, races, the clock.

use std::sync::Arc;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use super::{
    CheckResult, Failure, Namespace, clear_kinds, ensure, ensure_eq, entity, map, put_all,
};
use tern_core::model::arb::arb_map;
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, StoreExt, Write, WriteOutcome, local_now_millis};

/// Values of every type, with the edge cases a codec gets wrong.
fn edge_values() -> Vec<(&'static str, Value)> {
    vec![
        ("null", Value::Null),
        ("true", Value::Bool(true)),
        ("false", Value::Bool(false)),
        ("int_min", Value::Int(i64::MIN)),
        ("int_max", Value::Int(i64::MAX)),
        ("int_zero", Value::Int(0)),
        ("float", Value::Float(1.5)),
        ("float_one", Value::Float(1.0)),
        ("neg_zero", Value::Float(-0.0)),
        ("nan", Value::Float(f64::NAN)),
        (
            "nan_payload",
            Value::Float(f64::from_bits(0x7ff8_0000_dead_beef)),
        ),
        ("inf", Value::Float(f64::INFINITY)),
        ("neg_inf", Value::Float(f64::NEG_INFINITY)),
        ("tiny", Value::Float(f64::from_bits(1))),
        ("string", Value::String("héllo \"wörld\"\n\u{1F600}".into())),
        ("empty_string", Value::String(String::new())),
        ("nul_string", Value::String("a\0b".into())),
        ("bytes", Value::Bytes(vec![0, 1, 2, 255, 0])),
        ("empty_bytes", Value::Bytes(vec![])),
        ("timestamp", Value::Timestamp(1_700_000_000_123)),
        ("old_timestamp", Value::Timestamp(-62_135_596_800_000)),
        (
            "array",
            Value::Array(vec![
                Value::Int(1),
                Value::Float(1.0),
                Value::Null,
                "x".into(),
            ]),
        ),
        ("empty_array", Value::Array(vec![])),
        (
            "nested",
            map(&[(
                "a",
                map(&[("b", Value::Array(vec![map(&[("c", Value::Null)])]))]),
            )]),
        ),
        ("empty_map", Value::Map(Map::new())),
        ("dollar_map", map(&[("$oid", "abc".into())])),
        ("tag_map", map(&[("$date", Value::Int(5))])),
    ]
}

/// Put, get and delete of every [`Value`] type and every id type: values and
/// versions come back exactly (NaN payloads and `-0.0` included), a missing
/// key reads as `None`, a put replaces, deleting a missing key succeeds.
pub async fn round_trip(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("values");
    let mut entities = Vec::new();

    // One entity per edge value, and one holding them all.
    let edges = edge_values();
    for (i, (name, value)) in edges.iter().enumerate() {
        entities.push(entity(
            &kind,
            format!("edge_{i:02}"),
            i as u64,
            &[(name, value.clone())],
        ));
    }
    let all: Vec<(&str, Value)> = edges.iter().map(|(n, v)| (*n, v.clone())).collect();
    entities.push(entity(&kind, "all", 1 << 40, &all));
    entities.push(entity(&kind, "empty", 0, &[]));

    // Every id type.
    for id in [
        Value::Int(-7),
        Value::Int(i64::MAX),
        Value::String(String::new()),
        Value::Bytes(vec![0, 255]),
        Value::Timestamp(-1),
        Value::Array(vec!["a".into(), Value::Int(2)]),
        map(&[("k", "v".into())]),
    ] {
        entities.push(Entity {
            key: Key {
                kind: kind.clone(),
                id,
            },
            version: 3,
            value: Map::new(),
        });
    }

    // Generated maps.
    let mut runner = TestRunner::deterministic();
    for i in 0..48u64 {
        let tree = arb_map()
            .new_tree(&mut runner)
            .map_err(|e| Failure::new(format!("proptest: {e}")))?;
        entities.push(Entity {
            key: Key {
                kind: kind.clone(),
                id: Value::Int(1000 + i as i64),
            },
            version: i % 5,
            value: tree.current(),
        });
    }

    // Half through write_batch, half through put.
    let (batched, single) = entities.split_at(entities.len() / 2);
    put_all(store, batched).await?;
    for e in single {
        store.put(e.clone()).await?;
    }
    for e in &entities {
        let got = store.get(&e.key).await?;
        ensure_eq!(got.as_ref(), Some(e), "get of {} after put", e.key);
    }
    if let Some(Some(Value::Float(f))) = store
        .get(&entities[edges.len()].key)
        .await?
        .map(|e| e.value.get("nan_payload").cloned())
    {
        ensure_eq!(
            f.to_bits(),
            0x7ff8_0000_dead_beef_u64,
            "a NaN payload must survive bit for bit"
        );
    }

    // Missing keys.
    let missing = Key {
        kind: kind.clone(),
        id: "missing".into(),
    };
    ensure_eq!(store.get(&missing).await?, None, "get of a missing key");
    let other_kind = Key {
        kind: ns.kind("values_other"),
        id: "all".into(),
    };
    ensure_eq!(
        store.get(&other_kind).await?,
        None,
        "get of an id that exists only in another kind"
    );

    // get_many: in order, None where absent, a key twice, two kinds in one call.
    let asked = vec![
        entities[0].key.clone(),
        missing.clone(),
        entities[edges.len()].key.clone(),
        entities[0].key.clone(),
        other_kind.clone(),
    ];
    let want = vec![
        Some(entities[0].clone()),
        None,
        Some(entities[edges.len()].clone()),
        Some(entities[0].clone()),
        None,
    ];
    ensure_eq!(store.get_many(&asked).await?, want, "get_many of {asked:?}");
    let one_kind: Vec<Key> = entities.iter().map(|e| e.key.clone()).collect();
    let got = store.get_many(&one_kind).await?;
    ensure!(
        got.iter()
            .zip(&entities)
            .all(|(g, e)| g.as_ref() == Some(e)),
        "get_many of every key of one kind must return each entity in order"
    );
    ensure_eq!(
        store.get_many(&[]).await?,
        Vec::<Option<Entity>>::new(),
        "get_many of no key"
    );

    // A put replaces, version included.
    let mut replaced = entity(&kind, "all", 2, &[("only", Value::Int(1))]);
    store.put(replaced.clone()).await?;
    ensure_eq!(
        store.get(&replaced.key).await?,
        Some(replaced.clone()),
        "get after a put over an existing entity"
    );
    replaced.version = 0;
    store.put(replaced.clone()).await?;
    ensure_eq!(
        store.get(&replaced.key).await?,
        Some(replaced.clone()),
        "a put may lower the version"
    );

    // Delete, and delete again.
    store.delete(&replaced.key).await?;
    ensure_eq!(store.get(&replaced.key).await?, None, "get after delete");
    store.delete(&replaced.key).await?;
    store.delete(&missing).await?;

    clear_kinds(store, &[&kind]).await
}

/// One outcome per write, in order: insert conflicts when present, replace
/// conflicts when the version or the value changed, delete of a missing key
/// applies; and the stored state agrees.
pub async fn write_batch_outcomes(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("batch");
    let e = |id: &str, version, n: i64| entity(&kind, id, version, &[("n", Value::Int(n))]);

    ensure_eq!(
        store.write_batch(Vec::new()).await?,
        Vec::<WriteOutcome>::new(),
        "an empty batch"
    );

    put_all(
        store,
        &[
            e("a", 1, 1),
            e("b", 1, 1),
            e("c", 1, 1),
            e("d", 1, 1),
            e("x", 1, 1),
        ],
    )
    .await?;
    let writes = vec![
        Write::Insert(e("new", 0, 0)),
        Write::Insert(e("a", 9, 9)),
        Write::Put(e("p", 4, 4)),
        Write::Replace {
            expected: e("b", 1, 1),
            new: e("b", 2, 2),
        },
        Write::Replace {
            expected: e("c", 0, 1),
            new: e("c", 2, 2),
        },
        Write::Replace {
            expected: e("d", 1, 99),
            new: e("d", 2, 2),
        },
        Write::Delete(e("x", 0, 0).key),
        Write::Delete(e("never", 0, 0).key),
        Write::Replace {
            expected: e("gone", 1, 1),
            new: e("gone", 2, 2),
        },
    ];
    let outcomes = store.write_batch(writes).await?;
    use WriteOutcome::{Applied, Conflict};
    ensure_eq!(
        outcomes,
        vec![
            Applied, Conflict, Applied, Applied, Conflict, Conflict, Applied, Applied, Conflict
        ],
        "outcomes of [insert new, insert existing, put, replace current, replace stale version, \
         replace stale value, delete, delete missing, replace missing]"
    );

    let expect: Vec<(&str, Option<Entity>)> = vec![
        ("new", Some(e("new", 0, 0))),
        ("a", Some(e("a", 1, 1))),
        ("p", Some(e("p", 4, 4))),
        ("b", Some(e("b", 2, 2))),
        ("c", Some(e("c", 1, 1))),
        ("d", Some(e("d", 1, 1))),
        ("x", None),
        ("never", None),
        ("gone", None),
    ];
    for (id, want) in expect {
        ensure_eq!(
            store.get(&e(id, 0, 0).key).await?,
            want,
            "state of {id:?} after the batch"
        );
    }

    // A replace of what was just read applies once; the same replace again conflicts.
    let read = store
        .get(&e("b", 0, 0).key)
        .await?
        .ok_or_else(|| Failure::new("b vanished"))?;
    let next = Entity {
        version: read.version + 1,
        ..read.clone()
    };
    let replace = Write::Replace {
        expected: read,
        new: next,
    };
    ensure_eq!(
        store.write_batch(vec![replace.clone()]).await?,
        vec![Applied],
        "replace of the entity as read"
    );
    ensure_eq!(
        store.write_batch(vec![replace]).await?,
        vec![Conflict],
        "the same replace again"
    );

    clear_kinds(store, &[&kind]).await
}

/// Writers race to replace the same entity: in every round exactly one wins,
/// and the stored entity is the winner's. With
/// [`Capability::cas_compares_value`](tern_core::store::Capability::cas_compares_value),
/// also when the writers keep the version and change only the value.
pub async fn concurrent_replace(store: Arc<dyn Store>) -> CheckResult {
    const WRITERS: i64 = 8;
    let ns = Namespace::new();
    let kind = ns.kind("race");
    let key = Key {
        kind: kind.clone(),
        id: "counter".into(),
    };
    store
        .put(Entity {
            key: key.clone(),
            version: 0,
            value: Map::new(),
        })
        .await?;
    for round in 0..12 {
        let keep_version = round % 2 == 1;
        let read = store
            .get(&key)
            .await?
            .ok_or_else(|| Failure::new("the contended entity vanished"))?;
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let store = Arc::clone(&store);
            let expected = read.clone();
            let mut new = read.clone();
            new.version = if keep_version {
                read.version
            } else {
                read.version + 1
            };
            new.value.insert("writer".into(), Value::Int(writer));
            new.value.insert("round".into(), Value::Int(round));
            tasks.push(tokio::spawn(async move {
                let outcome = store
                    .write_batch(vec![Write::Replace {
                        expected,
                        new: new.clone(),
                    }])
                    .await;
                (outcome, new)
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            let (outcome, new) = task
                .await
                .map_err(|e| Failure::new(format!("a writer task failed: {e}")))?;
            let outcome = outcome?;
            ensure_eq!(outcome.len(), 1, "one outcome per write");
            if outcome[0] == WriteOutcome::Applied {
                winners.push(new);
            }
        }
        ensure_eq!(
            winners.len(),
            1,
            "round {round} (version {}): exactly one of {WRITERS} racing replaces must win",
            if keep_version { "kept" } else { "bumped" }
        );
        ensure_eq!(
            store.get(&key).await?.as_ref(),
            winners.first(),
            "round {round}: the stored entity is the winner's"
        );
    }
    clear_kinds(store.as_ref(), &[&kind]).await
}

/// [`Store::now`] is plausible: within a day of this machine's clock, or
/// within a minute when it claims to read this machine's clock.
pub async fn clock(store: &dyn Store) -> CheckResult {
    let before = local_now_millis();
    let now = store.now().await?;
    let after = local_now_millis();
    let slack = if store.features().server_clock.is_some() {
        86_400_000
    } else {
        60_000
    };
    ensure!(
        now >= before - slack && now <= after + slack,
        "now() = {now} is not within {slack} ms of this machine's clock ({before}..{after})"
    );
    Ok(())
}
