//! The battery on mongodb, the store contract, and MongoDB-specific tests.

tern_core::battery_tests!("mongodb", tern_integration_tests::mongodb::backend());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_missing_database_and_unreachable_server_are_clear_errors() {
    let e = tern_mongodb::open("mongodb://127.0.0.1:27017")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), tern_core::store::ErrorKind::ConfigInvalid);
    let e = tern_mongodb::open(
        "mongodb://app:s3cretpw@127.0.0.1:1/db?serverSelectionTimeoutMS=500&connectTimeoutMS=500",
    )
    .await
    .unwrap_err();
    let text = format!("{e}");
    assert_eq!(e.kind(), tern_core::store::ErrorKind::Unavailable, "{text}");
    assert!(e.is_temporary());
    assert!(!text.contains("s3cretpw"), "{text}");
    assert!(text.contains("mongodb://app:***@127.0.0.1:1/db"), "{text}");
}

mod specific {
    use std::sync::Arc;

    use mongodb::bson::{self, Bson, Document, doc, oid::ObjectId, spec::BinarySubtype};
    use tern_core::model::json::entity_to_json_line;
    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::memory::MemoryStore;
    use tern_core::store::{
        Condition, Filter, PushOp, PushStep, PushdownRequest, ScanRequest, Store, VersionFilter,
    };
    use tern_integration_tests::mongodb::backend;

    async fn raw(url: &str, db: &str) -> mongodb::Collection<Document> {
        let client = mongodb::Client::with_uri_str(url).await.unwrap();
        client.database(db).collection("things")
    }

    async fn scan_all(store: &dyn Store, kind: &str, filter: Filter) -> Vec<Entity> {
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let page = store
                .scan(
                    kind,
                    ScanRequest {
                        filter: filter.clone(),
                        cursor,
                        limit: 3,
                    },
                )
                .await
                .unwrap();
            out.extend(page.entities);
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    fn m(json: &str) -> Map {
        tern_core::model::json::json_to_map(&serde_json::from_str(json).unwrap()).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_bson_types_round_trip_through_tern() {
        let Ok(b) = backend().await else { return };
        let (store, db) = b.fresh_named().await;
        let coll = raw(&b.url_for(&db), &db).await;
        let oid = ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").unwrap();
        let original = doc! {
            "_id": oid,
            "_v": 2_i32,
            "i32": 7_i32,
            "i64": 1_i64 << 40,
            "dbl": 2.5,
            "dec": "12.3400".parse::<bson::Decimal128>().unwrap(),
            "when": bson::DateTime::from_millis(1_700_000_000_123),
            "bin": bson::Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "uuid": bson::Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] },
            "ts": bson::Timestamp { time: 5, increment: 9 },
            "re": bson::Regex { pattern: "^a".into(), options: "i".into() },
            "ref": ObjectId::parse_str("000000000000000000000001").unwrap(),
            "nested": { "a": [1_i32, "x", Bson::Null], "b": {} },
        };
        coll.insert_one(original.clone()).await.unwrap();

        let key = Key::new(
            "things",
            Value::Map(m(r#"{"$oid": "65a1b2c3d4e5f60718293a4b"}"#)),
        )
        .unwrap();
        let e = store
            .get(&key)
            .await
            .unwrap()
            .expect("the document through tern");
        assert_eq!(e.version, 2);
        assert_eq!(e.get("i32"), Some(&Value::Int(7)));
        assert_eq!(e.get("i64"), Some(&Value::Int(1 << 40)));
        assert_eq!(e.get("dbl"), Some(&Value::Float(2.5)));
        assert_eq!(e.get("when"), Some(&Value::Timestamp(1_700_000_000_123)));
        assert_eq!(e.get("bin"), Some(&Value::Bytes(vec![1, 2, 3])));
        let line = entity_to_json_line(&e);
        for part in [
            r#""$oid":"65a1b2c3d4e5f60718293a4b""#,
            r#""$numberDecimal":"12.3400""#,
            r#""$regularExpression""#,
            r#""$timestamp""#,
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }

        // Written back through tern, every field keeps its BSON type (Int32 becomes Int64).
        store.put(e.clone()).await.unwrap();
        let back = coll.find_one(doc! { "_id": oid }).await.unwrap().unwrap();
        for (k, v) in &original {
            let got = back.get(k).unwrap();
            match (v, got) {
                (Bson::Int32(a), Bson::Int64(b)) => assert_eq!(i64::from(*a), *b, "{k}"),
                (Bson::Document(_), _) => {}
                _ => assert_eq!(v, got, "{k}"),
            }
        }
        assert_eq!(store.get(&key).await.unwrap(), Some(e));
        let _ = Arc::clone(&store);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_null_matches_only_an_explicit_null() {
        let Ok(b) = backend().await else { return };
        let (store, _) = b.fresh_named().await;
        let ents: Vec<Entity> = [
            (1, r#"{"a": null}"#),
            (2, r#"{}"#),
            (3, r#"{"a": [null, 1]}"#),
            (4, r#"{"a": 1}"#),
            (5, r#"{"b": [{"a": null}]}"#),
        ]
        .into_iter()
        .map(|(id, json)| Entity::new(Key::new("things", id).unwrap(), m(json)))
        .collect();
        for e in &ents {
            store.put(e.clone()).await.unwrap();
        }
        let filter = Filter {
            version: VersionFilter::Any,
            conditions: vec![Condition::eq("a", Value::Null)],
        };
        let ids: Vec<Value> = scan_all(store.as_ref(), "things", filter.clone())
            .await
            .into_iter()
            .map(|e| e.key.id)
            .collect();
        assert_eq!(ids, vec![Value::Int(1), Value::Int(3)]);
        assert_eq!(store.count("things", filter).await.unwrap(), 2);
        let nested = Filter {
            version: VersionFilter::Any,
            conditions: vec![Condition {
                path: vec!["b".into(), "a".into()],
                values: vec![Value::Null],
            }],
        };
        assert!(
            scan_all(store.as_ref(), "things", nested).await.is_empty(),
            "tern does not walk arrays"
        );
    }

    /// Runs `steps` on the same entities in MongoDB (inside the server) and in the
    /// memory store (the reference), and compares the counts and the results.
    pub(super) async fn same_as_reference(ents: &[Entity], steps: Vec<PushStep>) {
        let Ok(b) = backend().await else { return };
        let (store, _) = b.fresh_named().await;
        let reference: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for s in [&store, &reference] {
            for e in ents {
                s.put(e.clone()).await.unwrap();
            }
        }
        let mut totals = Vec::new();
        for s in [&store, &reference] {
            let mut cursor = None;
            let (mut advanced, mut changed, mut changed_entities) = (0, vec![0; steps.len()], 0);
            loop {
                let page = s
                    .update_in_place(PushdownRequest {
                        kind: "things".into(),
                        from: 0,
                        steps: steps.clone(),
                        cursor,
                        limit: 2,
                    })
                    .await
                    .unwrap();
                advanced += page.advanced;
                changed_entities += page.changed_entities;
                for (t, c) in changed.iter_mut().zip(&page.changed) {
                    *t += c;
                }
                match page.cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            totals.push((advanced, changed, changed_entities));
        }
        assert_eq!(totals[0], totals[1], "counts: mongodb vs reference");
        assert_eq!(
            scan_all(store.as_ref(), "things", Filter::all()).await,
            scan_all(reference.as_ref(), "things", Filter::all()).await
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_pushdown_equals_the_reference() {
        let ents: Vec<Entity> = [
            (1, 0, r#"{"a": null, "t": "x"}"#),
            (2, 0, r#"{"t": "x", "n": {"k": 1}}"#),
            (3, 0, r#"{"a": [null, 1], "n": 5}"#),
            (4, 1, r#"{"a": 1, "t": "y"}"#),
            (5, 0, r#"{"b": [{"a": null}], "a": 1.0}"#),
            (6, 7, r#"{"a": 2}"#),
            (7, 0, r#"{"$oid": "x", "a.b": 1, "n": {"k": 1.0}}"#),
        ]
        .into_iter()
        .map(|(id, v, json)| Entity {
            key: Key::new("things", id).unwrap(),
            version: v,
            value: m(json),
        })
        .collect();
        let path = |p: &str| p.split('.').map(str::to_owned).collect::<Vec<_>>();
        same_as_reference(
            &ents,
            vec![
                PushStep {
                    conditions: vec![Condition::eq("a", Value::Null)],
                    op: PushOp::Set {
                        path: path("flag"),
                        value: Value::Bool(true),
                    },
                },
                PushStep {
                    conditions: vec![Condition::eq("a", 1)],
                    op: PushOp::Set {
                        path: path("n.k"),
                        value: Value::Int(1),
                    },
                },
                PushStep {
                    conditions: vec![],
                    op: PushOp::Rename {
                        from: "t".into(),
                        to: "$oid".into(),
                    },
                },
                PushStep {
                    conditions: vec![Condition {
                        path: path("n.k"),
                        values: vec![Value::Int(1)],
                    }],
                    op: PushOp::Unset {
                        path: vec!["a.b".into()],
                    },
                },
            ],
        )
        .await;
    }
}

mod fast_path {
    use tern_core::model::{Entity, Key, Value};
    use tern_core::store::{PushOp, PushStep};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_pushdown_without_conditions_equals_the_reference() {
        let m = |json: &str| {
            tern_core::model::json::json_to_map(&serde_json::from_str(json).unwrap()).unwrap()
        };
        let ents: Vec<Entity> = [
            (1, 0, r#"{"text": "a"}"#),
            (2, 0, r#"{"likes": 0, "text": "b"}"#),
            (3, 0, r#"{"likes": 0.0}"#),
            (4, 0, r#"{"content": 1, "text": null}"#),
            (5, 0, r#"{}"#),
        ]
        .into_iter()
        .map(|(id, v, json)| Entity {
            key: Key::new("things", id).unwrap(),
            version: v,
            value: m(json),
        })
        .collect();
        let steps = vec![
            PushStep {
                conditions: vec![],
                op: PushOp::Set {
                    path: vec!["likes".into()],
                    value: Value::Int(0),
                },
            },
            PushStep {
                conditions: vec![],
                op: PushOp::Rename {
                    from: "text".into(),
                    to: "content".into(),
                },
            },
        ];
        super::specific::same_as_reference(&ents, steps.clone()).await;
        // Some entities part-way: the general path.
        let mut mixed = ents;
        mixed[1].version = 1;
        super::specific::same_as_reference(&mixed, steps).await;
    }
}
