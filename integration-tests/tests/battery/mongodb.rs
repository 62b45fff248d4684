//! The battery on mongodb, the store contract, and MongoDB-specific tests.

tern_testkit::battery_tests!("mongodb", tern_integration_tests::mongodb::backend());
tern_testkit::rename_copy_tests!("mongodb", tern_integration_tests::mongodb::backend());

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
    use tern_core::store::StoreExt;
    use tern_testkit::intercept::Forward as _;

    use mongodb::bson::{self, Bson, Document, doc, oid::ObjectId, spec::BinarySubtype};
    use tern_core::model::json::entity_to_json_line;
    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::memory::MemoryStore;
    use tern_core::store::{
        Condition, Filter, PushOp, PushStep, PushdownRequest, Store, VersionFilter,
    };
    use tern_integration_tests::mongodb::backend;
    use tern_testkit::battery::or_skip;
    use tern_testkit::conformance;

    async fn raw(url: &str, db: &str) -> mongodb::Collection<Document> {
        let client = mongodb::Client::with_uri_str(url).await.unwrap();
        client.database(db).collection("things")
    }

    /// The entities of `kind` that pass `filter`, by key, scanned in pages of 3.
    async fn scan_all(store: &dyn Store, kind: &str, filter: Filter) -> Vec<Entity> {
        conformance::scan_all(store, kind, &filter, 3)
            .await
            .unwrap()
            .into_values()
            .collect()
    }

    pub(super) fn m(json: &str) -> Map {
        tern_core::model::json::json_to_map(&serde_json::from_str(json).unwrap()).unwrap()
    }

    /// The entities `things:<id>` at `version` with the JSON values given.
    pub(super) fn things(rows: &[(i64, u64, &str)]) -> Vec<Entity> {
        rows.iter()
            .map(|&(id, version, json)| Entity {
                key: Key::new("things", id).unwrap(),
                version,
                value: m(json),
            })
            .collect()
    }

    /// The outcome of a compare-and-set by tern on what it read of the
    /// application's `before`, after the application replaced it with `after`.
    async fn cas_after(before: Document, after: Document) -> tern_core::store::WriteOutcome {
        let b = backend().await.unwrap();
        let (store, db) = b.fresh_named().await;
        let coll = raw(&b.url_for(&db), &db).await;
        coll.insert_one(before).await.unwrap();
        let key = Key::new("things", 1).unwrap();
        let read = store.get(&key).await.unwrap().unwrap();
        coll.replace_one(doc! { "_id": 1_i64 }, after)
            .await
            .unwrap();
        let mut new = read.clone();
        new.version = 1;
        let mut outcome = store
            .write_checked(vec![tern_core::store::Write::Replace {
                expected: read,
                new,
            }])
            .await
            .unwrap();
        outcome.pop().unwrap()
    }

    /// Documents nested in documents and arrays compare field by field: the
    /// application's field order never makes a compare-and-set fail (MongoDB
    /// compares embedded documents in order, tern writes its literals sorted),
    /// and any change of a nested value, type, field or length between the
    /// read and the write is a conflict, never an error of the server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_replace_compares_nested_documents_field_by_field() {
        use tern_core::store::WriteOutcome::{Applied, Conflict};
        if or_skip(backend(), None).await.is_none() {
            return;
        }
        let before = doc! {
            "_id": 1_i64,
            "addr": { "zip": 1_i64, "city": "x", "geo": { "lng": 2.5, "lat": 1.5 } },
            "tags": [ { "t": "a", "n": 1_i64 }, "plain", [ { "y": 1_i64, "x": 2_i64 } ] ],
        };
        let same = doc! {
            "_id": 1_i64,
            "tags": [ { "n": 1_i64, "t": "a" }, "plain", [ { "x": 2_i64, "y": 1_i64 } ] ],
            "addr": { "geo": { "lat": 1.5, "lng": 2.5 }, "city": "x", "zip": 1_i64 },
        };
        assert_eq!(cas_after(before.clone(), before.clone()).await, Applied);
        assert_eq!(cas_after(before.clone(), same).await, Applied);
        // Many drivers write small integers as Int32, which tern reads (and
        // compares) as it reads an Int64.
        let int32 = doc! { "_id": 1_i64, "n": 5_i32, "m": { "a": 1_i32, "b": [2_i32] } };
        assert_eq!(
            cas_after(int32.clone(), int32.clone()).await,
            Applied,
            "Int32 fields"
        );
        let mut changed = int32.clone();
        set_path(&mut changed, "m.a", Bson::Int32(2));
        assert_eq!(
            cas_after(int32.clone(), changed).await,
            Conflict,
            "an Int32 changed"
        );
        let mut double = int32.clone();
        set_path(&mut double, "n", Bson::Double(5.0));
        assert_eq!(
            cas_after(int32, double).await,
            Conflict,
            "an Int32 made a double"
        );
        let changes = [
            ("a nested value", doc! { "addr.geo.lat": 9.5 }),
            ("a nested type", doc! { "addr.zip": 1.0 }),
            ("an added nested field", doc! { "addr.geo.alt": 3_i64 }),
            ("a nested document's shape", doc! { "addr.geo": [1.5, 2.5] }),
            ("a document to a string", doc! { "addr": "x" }),
            ("a value in an array's document", doc! { "tags.0.n": 2_i64 }),
            ("an array's length", doc! { "tags.3": "more" }),
            ("an array to a document", doc! { "tags": { "0": "plain" } }),
            ("a document deep in arrays", doc! { "tags.2.0.x": 3_i64 }),
        ];
        for (what, set) in changes {
            let mut after = before.clone();
            for (path, value) in set {
                set_path(&mut after, &path, value);
            }
            assert_eq!(cas_after(before.clone(), after).await, Conflict, "{what}");
        }
        let mut fewer = before.clone();
        fewer
            .get_document_mut("addr")
            .unwrap()
            .remove("city")
            .unwrap();
        assert_eq!(
            cas_after(before.clone(), fewer).await,
            Conflict,
            "a removed nested field"
        );
    }

    /// Documents as applications write them (Int32 numbers, embedded
    /// documents in their own field order) migrate lazily on first read and
    /// eagerly through the client's path (a Rust transform), every other
    /// field kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_documents_written_by_an_application_migrate_lazily_and_eagerly() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        let (store, db) = b.fresh_named().await;
        let coll = raw(&b.url_for(&db), &db).await;
        for id in 1..=2_i64 {
            coll.insert_one(doc! {
                "_id": id, "n": 5_i32, "addr": { "zip": 1_i32, "city": "x" }, "tags": [1_i32, "a"],
            })
            .await
            .unwrap();
        }
        let lazy = add_likes_lazily(&store).await;
        let got = lazy
            .get(&Key::new("things", 1).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((got.version, got.get("likes")), (1, Some(&Value::Int(0))));
        let stored = coll.find_one(doc! { "_id": 1_i64 }).await.unwrap().unwrap();
        assert_eq!(stored.get_i64("_v").unwrap(), 1, "{stored}");
        assert_eq!(
            stored
                .get_document("addr")
                .unwrap()
                .get_str("city")
                .unwrap(),
            "x"
        );
        assert_eq!(
            store
                .get(&Key::new("things", 2).unwrap())
                .await
                .unwrap()
                .unwrap()
                .version,
            0,
            "the other one waits for its first read"
        );

        // Eagerly, on the client's path (no pushdown): read, changed, written
        // back with a compare-and-set on what was read.
        let (store, db) = b.fresh_named().await;
        let coll = raw(&b.url_for(&db), &db).await;
        for id in 1..=3_i64 {
            coll.insert_one(doc! { "_id": id, "n": 5_i32, "addr": { "zip": 1_i32, "city": "x" } })
                .await
                .unwrap();
        }
        add_likes_eagerly(&store, false).await;
        for id in 1..=3_i64 {
            let d = coll.find_one(doc! { "_id": id }).await.unwrap().unwrap();
            assert_eq!(
                (d.get_i64("_v").unwrap(), d.get_i64("likes").unwrap()),
                (1, 0),
                "{d}"
            );
        }
    }

    /// A BSON value as applications write them: Int32, Int64, doubles,
    /// strings, booleans, nulls, arrays and embedded documents (fields in any
    /// order).
    fn arb_bson() -> impl proptest::strategy::Strategy<Value = Bson> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            any::<i32>().prop_map(Bson::Int32),
            any::<i64>().prop_map(Bson::Int64),
            (-1.0e12..1.0e12_f64).prop_map(Bson::Double),
            "[a-z]{0,4}".prop_map(Bson::String),
            any::<bool>().prop_map(Bson::Boolean),
            Just(Bson::Null),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
                proptest::collection::vec(("[a-z$.]{1,3}", inner), 0..4).prop_map(|fields| {
                    let mut d = Document::new();
                    for (k, v) in fields {
                        d.insert(k, v);
                    }
                    Bson::Document(d)
                }),
            ]
        })
    }

    /// As a property: any document an application wrote (Int32 numbers,
    /// embedded documents in its own field order, arrays of them, field names
    /// with `.` and `$`) migrates lazily on the client's path without a
    /// conflict and keeps every name and value.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_any_document_an_application_wrote_migrates_keeping_its_values() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        let (store, db) = b.fresh_named().await;
        let coll = raw(&b.url_for(&db), &db).await;
        let lazy = add_likes_lazily(&store).await;
        let next = std::sync::atomic::AtomicI64::new(1);
        let strategy = proptest::collection::vec(("[a-z$.]{1,3}", arb_bson()), 1..5);
        let (store, lazy, coll, next) = (&store, &lazy, &coll, &next);
        tern_testkit::prop::check(48, &strategy, |fields| async move {
            let id = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut d = doc! { "_id": id };
            for (k, v) in fields {
                d.insert(k, v);
            }
            coll.insert_one(d.clone()).await.unwrap();
            let key = Key::new("things", id).unwrap();
            let before = store.get(&key).await.unwrap().unwrap();
            let mut got = lazy.get(&key).await.unwrap().unwrap();
            assert_eq!(got.value.remove("likes"), Some(Value::Int(0)), "{d}");
            assert_eq!(got.value, before.value, "{d}");
            let mut after = store.get(&key).await.unwrap().unwrap();
            assert_eq!(after.version, 1, "{d}");
            after.value.remove("likes");
            assert_eq!(after.value, before.value, "{d}");
            let stored = coll.find_one(doc! { "_id": id }).await.unwrap().unwrap();
            let mut names: Vec<&String> = stored.keys().collect();
            let mut want: Vec<&String> = d.keys().collect();
            let added = ["_v".to_owned(), "likes".to_owned()];
            want.extend(&added);
            names.sort();
            want.sort();
            assert_eq!(names, want, "{d} stored as {stored}");
        });
    }

    /// A document as another program writes it with dotted and `$` names
    /// (legal since MongoDB 5.0), at the top and nested, next to plain ones;
    /// some named like extended JSON keys (`$date`, `$numberLong`), which the
    /// driver's own decoding would take for the values they stand for, and
    /// `$map`, which SecantusDB parses as an operator even under `$literal`.
    fn foreign_doc(id: i64) -> Document {
        let mut nested = Document::new();
        nested.insert("$y", 2.5);
        nested.insert("c.d", Bson::Array(vec![Bson::Int64(1), "s".into()]));
        nested.insert("$date", 5_i64);
        let mut d = doc! { "_id": id, "a.b": 1_i64 };
        d.insert("$x", nested);
        d.insert("n", 5_i64);
        d.insert("$numberLong", "7");
        // Named like an operator, with what would be wrong arguments.
        d.insert("$map", doc! { "$float": 1_i64 });
        d.insert("plain", "p");
        d
    }

    /// A fresh store, and its collection `things` for the driver's own writes.
    async fn fresh_things(
        b: &tern_integration_tests::mongodb::MongoBackend,
    ) -> (Arc<dyn Store>, mongodb::Collection<Document>) {
        let (store, db) = b.fresh_named().await;
        (store, raw(&b.url_for(&db), &db).await)
    }

    /// [`foreign_doc`] in the form tern wrote before 2026-11-29 (names escaped).
    fn legacy_doc(id: i64) -> Document {
        doc! {
            "_id": id, "a%2Eb": 1_i64,
            "%24x": { "%24y": 2.5, "c%2Ed": [1_i64, "s"], "%24date": 5_i64 },
            "n": 5_i64, "%24numberLong": "7", "%24map": { "%24float": 1_i64 }, "plain": "p",
        }
    }

    /// Document `id` as stored (read raw: the driver's decoding of a
    /// `Document` would take `$numberLong` for an extended JSON value).
    async fn as_stored(coll: &mongodb::Collection<Document>, id: i64) -> Document {
        let raw = coll
            .clone_with_type::<bson::RawDocumentBuf>()
            .find_one(doc! { "_id": id })
            .await
            .unwrap()
            .unwrap();
        Document::try_from(raw).unwrap()
    }

    /// `stored` is `original` with `_v` and `likes` added, every other field
    /// under its name with its value and BSON type.
    fn kept_with_likes(original: &Document, stored: &Document, version: i64) {
        let mut want = original.clone();
        want.insert("_v", version);
        want.insert("likes", 0_i64);
        let sorted = |d: &Document| {
            let mut fields: Vec<(String, Bson)> =
                d.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            fields
        };
        assert_eq!(sorted(stored), sorted(&want), "{stored}");
    }

    /// Issue 34 item 12: documents another program wrote with dotted and
    /// `$`-prefixed field names migrate on the client's path (lazily, and
    /// eagerly) and eagerly inside the server, keeping every name and value;
    /// documents tern wrote before with those names escaped (`a%2Eb`, `%24x`)
    /// still read and migrate; a step on such a name runs on the client.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_dotted_and_dollar_field_names_migrate_keeping_names_and_values() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        // Lazily, on first read through the lazy client.
        let (store, coll) = fresh_things(&b).await;
        coll.insert_one(foreign_doc(1)).await.unwrap();
        // The form tern wrote before 2026-11-29.
        coll.insert_one(legacy_doc(2)).await.unwrap();
        let lazy = add_likes_lazily(&store).await;
        for id in [1, 2] {
            let got = lazy
                .get(&Key::new("things", id).unwrap())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(got.version, 1);
            assert_eq!(got.get("a.b"), Some(&Value::Int(1)), "{got:?}");
            assert_eq!(
                got.get("$x"),
                Some(&Value::Map(m(
                    r#"{"$y": 2.5, "c.d": [1, "s"], "$date": 5}"#
                ))),
                "{got:?}"
            );
            let stored = as_stored(&coll, id).await;
            // Both now hold the names as they are.
            kept_with_likes(&foreign_doc(id), &stored, 1);
        }

        // Eagerly: on the client's path, and inside the server (pushdown).
        for pushdown in [false, true] {
            let (store, coll) = fresh_things(&b).await;
            for id in 1..=3_i64 {
                coll.insert_one(foreign_doc(id)).await.unwrap();
            }
            add_likes_eagerly(&store, pushdown).await;
            for id in 1..=3_i64 {
                let stored = as_stored(&coll, id).await;
                kept_with_likes(&foreign_doc(id), &stored, 1);
            }
        }

        // Steps on such names run inside the server, on both stored forms; a
        // condition on one is declined before anything is written (the
        // migration then runs that stage on the client).
        let (store, coll) = fresh_things(&b).await;
        coll.insert_one(foreign_doc(1)).await.unwrap();
        coll.insert_one(legacy_doc(2)).await.unwrap();
        let unset = |name: &str| PushStep {
            conditions: vec![],
            op: PushOp::Unset {
                path: vec![name.into()],
            },
        };
        let request = |steps| PushdownRequest {
            kind: "things".into(),
            from: 0,
            steps,
            cursor: None,
            limit: 10,
        };
        let mut cond = unset("n");
        cond.conditions = vec![Condition::eq("a.b", 1)];
        let e = store
            .update_in_place(request(vec![cond]))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), tern_core::store::ErrorKind::Unsupported, "{e}");
        assert_eq!(as_stored(&coll, 1).await, foreign_doc(1));
        let page = store
            .update_in_place(request(vec![unset("a.b"), unset("$x")]))
            .await
            .unwrap();
        assert_eq!((page.advanced, page.changed), (2, vec![2, 2]));
        for id in [1, 2] {
            let mut want = foreign_doc(id);
            want.remove("a.b");
            want.remove("$x");
            want.insert("_v", 2_i64);
            let stored = as_stored(&coll, id).await;
            // The legacy document keeps its other fields in their legacy form.
            let key = Key::new("things", id).unwrap();
            let got = store.get(&key).await.unwrap().unwrap();
            assert_eq!(got.version, 2);
            assert!(
                !got.value.contains_key("a.b") && !got.value.contains_key("$x"),
                "{stored}"
            );
            if id == 1 {
                assert_eq!(stored, want);
            }
            assert_eq!(got.value.len(), 4, "{stored}");
        }
        // Listing kinds reads one document of each collection.
        assert_eq!(store.kinds().await.unwrap(), ["things"]);

        // tern's own writes of such names: a put and a compare-and-set replace.
        let key = Key::new("things", 9).unwrap();
        let mut e = Entity::new(key.clone(), m(r#"{"$x": {"$y": 1}, "a.b": "v", "%": 1}"#));
        store.put(e.clone()).await.unwrap();
        let stored = as_stored(&coll, 9).await;
        let names: Vec<&str> = stored.keys().map(String::as_str).collect();
        assert_eq!(names, ["_id", "_v", "$x", "%25", "a.b"], "{stored}");
        let mut new = e.clone();
        new.value.insert("a.b".into(), Value::from("w"));
        let outcome = store
            .write_checked(vec![tern_core::store::Write::Replace {
                expected: e.clone(),
                new: new.clone(),
            }])
            .await
            .unwrap();
        assert_eq!(outcome, vec![tern_core::store::WriteOutcome::Applied]);
        e = store.get(&key).await.unwrap().unwrap();
        assert_eq!(e, new);
    }

    /// Runs `add things.likes = 0` eagerly (inside the server with
    /// `pushdown`, else on the client's path: read, changed, written back
    /// with a compare-and-set on what was read), without retries.
    async fn add_likes_eagerly(store: &Arc<dyn Store>, pushdown: bool) {
        let set = tern_testkit::battery::set(&[(1, "add things.likes = 0\n")]);
        let report = tern_core::migrate::Migrator::new(Arc::clone(store), set)
            .with_run_options(tern_core::migrate::RunOptions {
                pushdown,
                max_retries: 0,
                ..Default::default()
            })
            .up(None)
            .await
            .unwrap();
        assert_eq!(report.applied.len(), 1, "{report:?}");
    }

    /// Installs `add things.likes = 0` lazily; a lazy client of `things` at 1.
    async fn add_likes_lazily(store: &Arc<dyn Store>) -> tern_core::lazy::LazyClient {
        tern_testkit::lazy::up(store, &[(1, "lazy\nadd things.likes = 0\n")])
            .await
            .unwrap();
        tern_core::lazy::LazyClient::builder(Arc::clone(store))
            .declare("things", 1)
            .connect()
            .await
            .unwrap()
    }

    /// Sets `path` (dotted; numbers index arrays, one past the end appends) in `doc`.
    fn set_path(doc: &mut Document, path: &str, value: Bson) {
        let parts: Vec<&str> = path.split('.').collect();
        let (last, walk) = parts.split_last().unwrap();
        let mut at = doc.get_mut(walk.first().copied().unwrap_or(*last));
        if walk.is_empty() {
            doc.insert(*last, value);
            return;
        }
        for part in &walk[1..] {
            at = match at.unwrap() {
                Bson::Document(d) => d.get_mut(*part),
                Bson::Array(a) => a.get_mut(part.parse::<usize>().unwrap()),
                other => panic!("{path}: {other} has no {part}"),
            };
        }
        match at.unwrap() {
            Bson::Document(d) => {
                d.insert(*last, value);
            }
            Bson::Array(a) => {
                let i: usize = last.parse().unwrap();
                if i == a.len() {
                    a.push(value);
                } else {
                    a[i] = value;
                }
            }
            other => panic!("{path}: {other} has no {last}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_bson_types_round_trip_through_tern() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
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
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
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
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
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
        let ents = things(&[
            (1, 0, r#"{"a": null, "t": "x"}"#),
            (2, 0, r#"{"t": "x", "n": {"k": 1}}"#),
            (3, 0, r#"{"a": [null, 1], "n": 5}"#),
            (4, 1, r#"{"a": 1, "t": "y"}"#),
            (5, 0, r#"{"b": [{"a": null}], "a": 1.0}"#),
            (6, 7, r#"{"a": 2}"#),
            (7, 0, r#"{"$oid": "x", "a.b": 1, "n": {"k": 1.0}}"#),
        ]);
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
                // Dotted and `$` names as they are, in update pipelines.
                PushStep {
                    conditions: vec![Condition::eq("a", 1)],
                    op: PushOp::Set {
                        path: vec!["$x".into()],
                        value: Value::Int(1),
                    },
                },
                PushStep {
                    conditions: vec![],
                    op: PushOp::Set {
                        path: vec!["c.d".into()],
                        value: Value::Map(m(r#"{"$map": {"$q": 1}, "e.f": "$g"}"#)),
                    },
                },
                PushStep {
                    conditions: vec![],
                    op: PushOp::Rename {
                        from: "$x".into(),
                        to: "x.y".into(),
                    },
                },
            ],
        )
        .await;
    }
}

mod fast_path {
    use super::specific::{m, things};
    use tern_core::model::{Entity, Key, Value};
    use tern_core::store::{PushOp, PushStep};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_pushdown_without_conditions_equals_the_reference() {
        let ents = things(&[
            (1, 0, r#"{"text": "a"}"#),
            (2, 0, r#"{"likes": 0, "text": "b"}"#),
            (3, 0, r#"{"likes": 0.0}"#),
            (4, 0, r#"{"content": 1, "text": null}"#),
            (5, 0, r#"{}"#),
            (6, 0, r#"{"likes": [0], "text": "f", "gone": 1}"#),
            (7, 0, r#"{"likes": "0", "text": "g", "gone": null}"#),
            (8, 0, r#"{"likes": 0.0, "text": "h", "gone": []}"#),
            (9, 0, r#"{"likes": null, "text": "i", "gone": {}}"#),
        ]);
        let steps = tern_testkit::conformance::release2_steps();
        // Entities 6-9: every step changes each of them (0 in an array, "0", 0.0 and
        // null are not the integer 0), so one update moves the whole batch; with
        // an unset of a property each of them has, in any form.
        let mut unset = steps.clone();
        unset.push(PushStep {
            conditions: vec![],
            op: PushOp::Unset {
                path: vec!["gone".into()],
            },
        });
        super::specific::same_as_reference(&ents[5..], unset).await;
        super::specific::same_as_reference(&ents, steps.clone()).await;
        // Some entities part-way: the general path.
        let mut mixed = ents;
        mixed[1].version = 1;
        super::specific::same_as_reference(&mixed, steps).await;
    }

    /// A nested set without conditions where some entities hold a non-document on the
    /// way (MongoDB would fail a whole `update_many` on them): the same as the reference.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_pushdown_of_a_nested_set_skips_non_documents_like_the_reference() {
        let ents: Vec<Entity> = [
            (1, r#"{"meta": "x", "text": "a"}"#),
            (2, r#"{"meta": {"k": 0}, "text": "b"}"#),
            (3, r#"{"meta": {}}"#),
            (4, r#"{"meta": [1], "text": "d"}"#),
            (5, r#"{}"#),
        ]
        .into_iter()
        .map(|(id, json)| Entity {
            key: Key::new("things", id).unwrap(),
            version: 0,
            value: m(json),
        })
        .collect();
        let steps = vec![
            PushStep {
                conditions: vec![],
                op: PushOp::Set {
                    path: vec!["meta".into(), "k".into()],
                    value: Value::Int(1),
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
        super::specific::same_as_reference(&ents, steps).await;
    }
}

/// `write_batch` as `bulkWrite` commands: exact outcomes per write, order per key.
mod bulk_writes {
    use std::sync::Arc;

    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::{Store, Write, WriteOutcome};
    use tern_integration_tests::mongodb::backend;
    use tern_mongodb::MongoStore;
    use tern_testkit::battery::or_skip;

    use WriteOutcome::{Applied, Conflict};

    /// A fresh store, or `None` (printed) when no server is available.
    async fn fresh() -> Option<(MongoStore, String)> {
        let b = or_skip(backend(), None).await?;
        let (_, db) = b.fresh_named().await;
        let url = b.url_for(&db);
        Some((
            MongoStore::connect(tern_mongodb::MongoConfig::from_url(&url).unwrap())
                .await
                .unwrap(),
            db,
        ))
    }

    fn ent(kind: &str, id: i64, version: u64, n: i64) -> Entity {
        let mut value = Map::new();
        value.insert("n".into(), Value::Int(n));
        Entity {
            key: Key::new(kind, id).unwrap(),
            version,
            value,
        }
    }

    async fn writes_to_one_key_apply_in_order(store: &dyn Store) {
        let k = |v, n| ent("things", 1, v, n);
        let writes = vec![
            Write::Insert(k(0, 0)),
            Write::Replace {
                expected: k(0, 0),
                new: k(1, 1),
            },
            // Stale: the entity is at version 1 by now.
            Write::Replace {
                expected: k(0, 0),
                new: k(5, 5),
            },
            Write::Insert(k(7, 7)),
            Write::Delete(k(0, 0).key),
            Write::Insert(k(2, 2)),
            Write::Put(ent("other", 1, 3, 3)),
            Write::Replace {
                expected: k(2, 2),
                new: k(3, 3),
            },
        ];
        let outcomes = store.write_batch(writes).await.unwrap();
        assert_eq!(
            outcomes,
            vec![
                Applied, Applied, Conflict, Conflict, Applied, Applied, Applied, Applied
            ]
        );
        assert_eq!(store.get(&k(0, 0).key).await.unwrap(), Some(k(3, 3)));
        assert_eq!(
            store.get(&ent("other", 1, 0, 0).key).await.unwrap(),
            Some(ent("other", 1, 3, 3))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_bulk_writes_to_one_key_apply_in_order() {
        let Some((store, _)) = fresh().await else {
            return;
        };
        writes_to_one_key_apply_in_order(&store).await;
        let Some((store, _)) = fresh().await else {
            return;
        };
        writes_to_one_key_apply_in_order(&store.with_single_writes()).await;
    }

    /// A batch of 3,000 compare-and-set replaces over two kinds, every third one stale
    /// and every seventh one of a missing entity: each outcome is the write's own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_bulk_replace_outcomes_are_exact_per_write() {
        let Some((store, _)) = fresh().await else {
            return;
        };
        let n = 3000i64;
        let kind = |i: i64| if i % 2 == 0 { "even" } else { "odd" };
        let stored: Vec<Write> = (0..n)
            .filter(|i| i % 7 != 0)
            .map(|i| Write::Put(ent(kind(i), i, 1, i)))
            .collect();
        store.write_batch(stored).await.unwrap();
        let mut want = Vec::new();
        let writes: Vec<Write> = (0..n)
            .map(|i| {
                let stale = i % 3 == 0;
                want.push(if i % 7 == 0 || stale {
                    Conflict
                } else {
                    Applied
                });
                Write::Replace {
                    expected: ent(kind(i), i, 1, if stale { -1 } else { i }),
                    new: ent(kind(i), i, 2, i + 1),
                }
            })
            .collect();
        let outcomes = store.write_batch(writes).await.unwrap();
        assert_eq!(outcomes.len(), want.len());
        for (i, (got, want)) in outcomes.iter().zip(&want).enumerate() {
            assert_eq!(got, want, "write {i}");
        }
        for i in [1i64, 2, 3, 7, 2999] {
            let got = store.get(&ent(kind(i), i, 0, 0).key).await.unwrap();
            let expect = match want[i as usize] {
                _ if i % 7 == 0 => None,
                Applied => Some(ent(kind(i), i, 2, i + 1)),
                Conflict => Some(ent(kind(i), i, 1, i)),
            };
            assert_eq!(got, expect, "entity {i}");
        }
    }

    /// The store contract with one write at a time (servers before MongoDB 8.0).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_single_writes_pass_the_store_contract() {
        let Some((store, _)) = fresh().await else {
            return;
        };
        let store: Arc<dyn Store> = Arc::new(store.with_single_writes());
        if let Err(failures) = tern_testkit::conformance::run_all(store).await {
            panic!("{failures}");
        }
    }
}

/// copy/move run on the client through a join index ([SE] semantics in
/// linear time): each kind is read page by page a bounded number of times per
/// statement, and no join partner is looked up per entity.
mod joins {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use tern_core::store::{Result, ScanPage, ScanRequest, Store};
    use tern_integration_tests::mongodb::backend;
    use tern_testkit::battery::{self, RELEASE2, RELEASE3, or_skip};
    use tern_testkit::intercept::{Intercept, Intercepted};

    /// Counts scan pages per kind: `pages` all of them, `lookups` those that
    /// carry conditions (a lookup of join partners by value).
    #[derive(Debug, Default)]
    struct CountingScans {
        pages: Mutex<BTreeMap<String, usize>>,
        lookups: Mutex<BTreeMap<String, usize>>,
    }

    #[async_trait]
    impl Intercept for CountingScans {
        async fn scan(
            &self,
            inner: &dyn Store,
            kind: &str,
            request: ScanRequest,
        ) -> Result<ScanPage> {
            let counter = if request.filter.conditions.is_empty() {
                &self.pages
            } else {
                &self.lookups
            };
            *counter.lock().unwrap().entry(kind.to_owned()).or_default() += 1;
            inner.scan(kind, request).await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb_copy_and_move_read_each_kind_a_bounded_number_of_times() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        let (inner, _) = b.fresh_named().await;
        // 40 users with 5 posts each; batches of 20.
        let data = battery::blog(40, 5);
        let posts = data.iter().filter(|e| e.key.kind == "blogpost").count();
        let users = data.len() - posts;
        battery::load(inner.as_ref(), &data).await;
        let store = Arc::new(Intercepted::new(inner, CountingScans::default()));
        let batch = 20;
        battery::migrator(
            Arc::clone(&store) as Arc<dyn Store>,
            &[(1, RELEASE2), (2, RELEASE3)],
            batch,
        )
        .up(None)
        .await
        .unwrap();
        assert_eq!(
            battery::export(store.as_ref()).await,
            battery::reference_export(&data, batch).await,
            "the same entities as the reference"
        );
        let pages = store.hooks().pages.lock().unwrap().clone();
        let lookups = store.hooks().lookups.lock().unwrap().clone();
        eprintln!("scan pages per kind: {pages:?}; lookups by value: {lookups:?}");
        assert!(
            lookups.is_empty(),
            "the join index needs no lookup of partners by value: {lookups:?}"
        );
        // Each statement reads a kind in a few whole passes (index build, safety
        // check, the stage itself, the census), never once per entity of the
        // other kind: at most 12 passes of (entities / batch + 1) pages for the
        // two migrations, where a per-entity lookup would need hundreds.
        for (kind, n) in [("user", users), ("blogpost", posts)] {
            let read = pages.get(kind).copied().unwrap_or(0);
            let bound = 12 * (n.div_ceil(batch) + 1);
            assert!(
                (1..=bound).contains(&read),
                "{read} scan pages of {kind} for {n} entities in batches of {batch} (at most {bound})"
            );
        }
    }
}
