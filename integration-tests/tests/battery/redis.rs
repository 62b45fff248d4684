//! The battery on Redis: the plain server, a 3-master cluster, a container, and JSON-string kinds.

tern_integration_tests::redis_batteries!(tern_testkit::battery_tests);

/// Kinds renamed across slots, by copy (`tern_core::store::rename_copy`).
mod cluster_rename_copy {
    tern_testkit::rename_copy_tests!(
        "redis-cluster",
        tern_integration_tests::redis::cluster_backend()
    );
}

/// Redis-specific behaviour, on the server at `TERN_IT_REDIS_URL`.
mod specific {
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use tern_core::store::StoreExt;
    use tern_testkit::intercept::Forward as _;

    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::{
        ErrorKind, Filter, PushOp, PushStep, PushdownRequest, ScanRequest, Store, Write,
    };
    use tern_integration_tests::redis::backend;
    use tern_testkit::battery::or_skip;
    use tern_testkit::pages::{scan_pages, scan_pages_from};

    /// Writes `n` empty entities `item:0` ... `item:<n-1>`.
    async fn items(store: &dyn Store, n: i64) {
        let writes = (0..n)
            .map(|i| Write::Put(Entity::new(Key::new("item", i).unwrap(), Map::new())))
            .collect();
        store.write_batch(writes).await.unwrap();
    }

    /// Puts the entity `key` with `a` = 1.
    async fn put_a_1(store: &dyn Store, key: &Key) {
        store
            .put(Entity::new(
                key.clone(),
                [("a".to_owned(), Value::Int(1))].into(),
            ))
            .await
            .unwrap();
    }

    /// A fresh store on the server, its keys' prefix and a raw connection to
    /// the server, or `None` (skipped) where the server is not available.
    async fn fresh_with_raw() -> Option<(Arc<dyn Store>, String, redis::aio::MultiplexedConnection)>
    {
        let b = or_skip(backend(), None).await?;
        let url = b.fresh_url();
        let ns = prefix_of(&url);
        let store = tern_integration_tests::redis::open(&url).await.unwrap();
        let client = redis::Client::open(b.url()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        Some((store, ns, conn))
    }

    /// A fresh store on the server holding `n` items (see [`items`]), or
    /// `None` (skipped) where the server is not available.
    async fn fresh_with_items(n: i64) -> Option<Arc<dyn Store>> {
        let b = or_skip(backend(), None).await?;
        let store = b.try_fresh().await.unwrap();
        items(store.as_ref(), n).await;
        Some(store)
    }

    /// Sets `n` to `value` on every `item` at version `from` in server-side batches of
    /// `limit`, checking that no call advances more than `most` entities; gives the
    /// entities advanced and the calls made.
    async fn set_n_on_every_item(
        store: &dyn Store,
        from: u64,
        value: i64,
        limit: usize,
        most: u64,
    ) -> (u64, usize) {
        let (mut advanced, mut calls, mut cursor) = (0, 0, None);
        loop {
            let page = store
                .update_in_place(PushdownRequest {
                    kind: "item".into(),
                    from,
                    steps: vec![PushStep {
                        conditions: vec![],
                        op: PushOp::Set {
                            path: vec!["n".into()],
                            value: Value::Int(value),
                        },
                    }],
                    cursor,
                    limit,
                })
                .await
                .unwrap();
            assert!(page.advanced <= most, "{} > {most}", page.advanced);
            advanced += page.advanced;
            calls += 1;
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => return (advanced, calls),
            }
        }
    }

    use tern_integration_tests::redis::prefix_of;

    #[tokio::test]
    async fn unreachable_url_is_unavailable_and_hides_the_password() {
        let port = tern_integration_tests::common::free_port().unwrap();
        let url = format!("redis://app:s3cret@127.0.0.1:{port}/0?prefix=x");
        let err = tern_integration_tests::redis::open(&url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(err.is_temporary());
        let text = format!("{err} {err:?}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    }

    #[tokio::test]
    async fn int_ids_round_trip_and_foreign_hashes_read_as_typed_values() {
        let Some((store, ns, mut conn)) = fresh_with_raw().await else {
            return;
        };
        let mut value = Map::new();
        value.insert("name".into(), "Ann".into());
        value.insert("n".into(), Value::from("5"));
        let key = Key::new("user", 1234).unwrap();
        store
            .put(Entity::new(key.clone(), value.clone()))
            .await
            .unwrap();

        let raw: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(format!("{ns}:user:#1234"))
            .query_async(&mut conn)
            .await
            .unwrap();
        let raw: BTreeSet<_> = raw.into_iter().collect();
        let expected: BTreeSet<(String, String)> = [("name", "Ann"), ("n", "\"5\""), ("_v", "0")]
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect();
        assert_eq!(raw, expected);
        assert_eq!(store.get(&key).await.unwrap().unwrap().value, value);
        assert!(
            store
                .get(&Key::new("user", "1234").unwrap())
                .await
                .unwrap()
                .is_none(),
            "the string id \"1234\" is another key than the int 1234"
        );

        // A hash written by another program: plain text fields, no version.
        exec(
            &mut conn,
            redis::cmd("HSET")
                .arg(format!("{ns}:user:u9"))
                .arg("name")
                .arg("Bob")
                .arg("age")
                .arg("31")
                .arg("score")
                .arg("1.5"),
        )
        .await;
        let e = store
            .get(&Key::new("user", "u9").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.version, 0);
        assert_eq!(e.get("name"), Some(&Value::from("Bob")));
        assert_eq!(e.get("age"), Some(&Value::Int(31)));
        assert_eq!(e.get("score"), Some(&Value::Float(1.5)));
        // ... and tern's compare-and-set accepts it as read (no `_v` means 0).
        let mut new = e.clone();
        new.version = 1;
        let out = store
            .write_batch(vec![Write::Replace { expected: e, new }])
            .await
            .unwrap();
        assert_eq!(out, vec![tern_core::store::WriteOutcome::Applied]);
        assert_eq!(store.kinds().await.unwrap(), vec!["user".to_owned()]);
    }

    #[tokio::test]
    async fn pages_respect_the_limit_and_a_full_scan_sees_every_key() {
        let n = 2500;
        let Some(store) = fresh_with_items(n).await else {
            return;
        };
        let open = || async { Arc::clone(&store) };
        let pages = scan_pages(open, "item", &Filter::all(), 7, usize::MAX).await;
        let seen: BTreeSet<Key> = pages.entities.into_iter().map(|e| e.key).collect();
        assert_eq!(seen.len(), n as usize);
        assert!(pages.cursors.len() + 1 >= 2500 / 7);
        let bad = store
            .scan(
                "item",
                ScanRequest {
                    filter: Filter::all(),
                    cursor: Some(tern_core::store::Cursor("x".into())),
                    limit: 7,
                },
            )
            .await
            .unwrap_err();
        assert_eq!(bad.kind(), ErrorKind::InvalidCursor);
    }

    /// One server-side call touches at most `MAX_KEYS_PER_SCRIPT` keys (Redis runs a
    /// script alone), whatever batch the engine asks for; the pages still cover every key.
    #[tokio::test]
    async fn a_large_pushdown_batch_is_split_into_bounded_script_calls() {
        let n = 2500;
        let Some(store) = fresh_with_items(n).await else {
            return;
        };
        let most = tern_redis::MAX_KEYS_PER_SCRIPT as u64;
        let (advanced, pages) = set_n_on_every_item(store.as_ref(), 0, 0, 10_000, most).await;
        assert_eq!(advanced, n as u64, "every key advanced exactly once");
        assert!(pages >= 3, "2500 keys need at least 3 calls, took {pages}");
        let left = store
            .scan(
                "item",
                ScanRequest {
                    filter: Filter::at_version(0),
                    cursor: None,
                    limit: 10_000,
                },
            )
            .await
            .unwrap();
        assert!(left.entities.is_empty());
    }

    #[tokio::test]
    async fn kinds_with_the_separator_and_the_metadata_kind_are_refused() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        let store = b.try_fresh().await.unwrap();
        for kind in ["a:b", "__tern"] {
            let err = store
                .put(Entity::new(Key::new(kind, "x").unwrap(), Map::new()))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unsupported, "{kind}");
        }
        store
            .meta_cas("lease", tern_core::store::MetaChange::create("{}"))
            .await
            .unwrap();
        assert!(store.kinds().await.unwrap().is_empty());
    }

    fn rename_migrator(
        store: std::sync::Arc<dyn tern_core::store::Store>,
    ) -> tern_core::migrate::Migrator {
        tern_testkit::battery::migrator(store, &[(1, "rename kind user to member")], 2)
    }

    /// The error of the rename migration on `store` (it must fail), as text.
    async fn rename_error(store: &Arc<dyn Store>) -> String {
        rename_migrator(Arc::clone(store))
            .up(None)
            .await
            .unwrap_err()
            .to_string()
    }

    /// Runs a command that answers nothing of interest.
    async fn exec(conn: &mut redis::aio::MultiplexedConnection, cmd: &redis::Cmd) {
        let _: () = cmd.query_async(conn).await.unwrap();
    }

    async fn key_type(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> String {
        redis::cmd("TYPE").arg(key).query_async(conn).await.unwrap()
    }

    /// `rename kind` moves `ns:user:<id>` to `ns:member:<id>` with RENAMENX: fields,
    /// version and TTL kept; keys of other Redis types under `user:` are not entities
    /// and stay; a key of any type already at `ns:member:<id>` is never overwritten: the
    /// run stops naming it and resumes once it is gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rename_kind_moves_keys_and_never_overwrites_a_foreign_key() {
        let Some((store, ns, mut conn)) = fresh_with_raw().await else {
            return;
        };
        for i in 0..5 {
            let mut e = Entity::new(
                Key::new("user", format!("u{i}")).unwrap(),
                [("name".to_owned(), Value::from(format!("n{i}")))].into(),
            );
            e.version = 3;
            store.put(e).await.unwrap();
        }
        let raw = |k: &str| format!("{ns}:{k}");
        exec(
            &mut conn,
            redis::cmd("EXPIRE").arg(raw("user:u0")).arg(1000),
        )
        .await;
        // Not entities: a list under the old prefix, a list where u4 would go.
        exec(
            &mut conn,
            redis::cmd("RPUSH").arg(raw("user:queue")).arg("x"),
        )
        .await;
        exec(
            &mut conn,
            redis::cmd("RPUSH").arg(raw("member:u4")).arg("foreign"),
        )
        .await;

        let text = rename_error(&store).await;
        assert!(
            text.contains("cannot rename kind user to member") && text.contains("user:u4"),
            "{text}"
        );
        assert_eq!(key_type(&mut conn, &raw("member:u4")).await, "list");
        assert_eq!(key_type(&mut conn, &raw("user:u4")).await, "hash");
        assert_eq!(key_type(&mut conn, &raw("user:u1")).await, "none");

        // Resolve the collision; the next run resumes and finishes.
        exec(&mut conn, redis::cmd("DEL").arg(raw("member:u4"))).await;
        tokio::time::sleep(std::time::Duration::from_millis(80)).await;
        let report = rename_migrator(std::sync::Arc::clone(&store))
            .up(None)
            .await
            .unwrap();
        assert!(report.applied[0].resumed);
        for i in 0..5 {
            let fields: Vec<(String, String)> = redis::cmd("HGETALL")
                .arg(raw(&format!("member:u{i}")))
                .query_async(&mut conn)
                .await
                .unwrap();
            let fields: BTreeSet<_> = fields.into_iter().collect();
            let want: BTreeSet<(String, String)> = [
                ("name".to_owned(), format!("n{i}")),
                ("_v".to_owned(), "3".to_owned()),
            ]
            .into();
            assert_eq!(fields, want, "member:u{i}");
        }
        let ttl: i64 = redis::cmd("TTL")
            .arg(raw("member:u0"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 900, "the TTL moves with the key ({ttl})");
        assert_eq!(key_type(&mut conn, &raw("user:queue")).await, "list");
        let left: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{ns}:user:*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(left, vec![raw("user:queue")]);
        let doc = tern_testkit::battery::state_doc(store.as_ref()).await;
        assert_eq!(doc.former_kinds("member"), vec!["user".to_owned()]);
        assert_eq!(doc.kinds.get("member"), None, "user had no version step");
    }

    /// Renamed keys keep their Redis type: a hash kind cannot become a JSON-string kind.
    /// Refused before anything moves, naming the json= option; two JSON-string kinds
    /// (and another separator) rename fine.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rename_kind_needs_the_same_layout_on_both_names() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        let url = format!("{}&json=member", b.fresh_url());
        let store = tern_integration_tests::redis::open(&url).await.unwrap();
        let key = Key::new("user", "u1").unwrap();
        put_a_1(store.as_ref(), &key).await;
        let text = rename_error(&store).await;
        assert!(
            text.contains("kind user is stored as hash (the default) but kind member as json=")
                && text.contains("json="),
            "{text}"
        );
        assert!(store.get(&key).await.unwrap().is_some(), "nothing moved");
        let doc = tern_testkit::battery::state_doc(store.as_ref()).await;
        assert!(doc.renames.is_empty() && doc.running.is_none());

        let url = format!("{}&json=user,member&sep=/", b.fresh_url());
        let ns = prefix_of(&url);
        let store = tern_integration_tests::redis::open(&url).await.unwrap();
        put_a_1(store.as_ref(), &key).await;
        rename_migrator(std::sync::Arc::clone(&store))
            .up(None)
            .await
            .unwrap();
        let client = redis::Client::open(b.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        assert_eq!(
            key_type(&mut conn, &format!("{ns}/member/u1")).await,
            "string"
        );
        assert_eq!(key_type(&mut conn, &format!("{ns}/user/u1")).await, "none");
        let moved = store
            .get(&Key::new("member", "u1").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(moved.get("a"), Some(&Value::Int(1)));
    }

    /// In a database the kind fills, SCAN steps overflow the pages: the few extra
    /// keys ride in the cursor (`+` form), and a step far bigger than a small page
    /// is cut and repeated with its COUNT (`/` form); a cursor written by earlier
    /// versions (`<cursor>|<key>`) still resumes. Scans, server-side batches and
    /// counts see every key, whatever the page size. Uses database 9 of the server,
    /// which it empties.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scans_batches_and_counts_in_a_dense_database() {
        use tern_core::store::{Cursor, VersionFilter};
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        if b.url().contains('?') || b.url().matches('/').count() > 2 {
            eprintln!("skipped: TERN_IT_REDIS_URL names a database or options");
            return;
        }
        let url = format!("{}/9?prefix=dense", b.url());
        let client = redis::Client::open(format!("{}/9", b.url())).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("FLUSHDB").query_async(&mut conn).await.unwrap();
        let store = tern_integration_tests::redis::open(&url).await.unwrap();
        let n = 3000i64;
        items(store.as_ref(), n).await;
        let all: BTreeSet<Key> = (0..n).map(|i| Key::new("item", i).unwrap()).collect();

        let scan_all = |cursor: Option<Cursor>, limit: usize| {
            let store = Arc::clone(&store);
            async move {
                let open = || async { Arc::clone(&store) };
                let pages =
                    scan_pages_from(open, "item", &Filter::all(), limit, usize::MAX, cursor).await;
                let seen: BTreeSet<Key> = pages.entities.into_iter().map(|e| e.key).collect();
                let forms: BTreeSet<char> = pages
                    .cursors
                    .iter()
                    .flat_map(|c| c.0.chars().filter(|ch| matches!(ch, '+' | '/' | '|')))
                    .collect();
                (seen, forms)
            }
        };
        let (seen, forms) = scan_all(None, 7).await;
        assert_eq!(seen, all, "limit 7");
        assert!(forms.contains(&'/'), "small pages cut steps: {forms:?}");
        for limit in [150, 1000] {
            let (seen, forms) = scan_all(None, limit).await;
            assert_eq!(seen, all, "limit {limit}");
            assert!(!forms.contains(&'/'), "no step is repeated: {forms:?}");
        }
        let (seen, forms) = scan_all(None, 150).await;
        assert_eq!(seen, all);
        assert!(forms.contains(&'+'), "overflowing keys ride in the cursor");

        // A cursor of an earlier version: repeat step 0 (COUNT 1000), skip up to a key.
        let (_, mut step): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(0)
            .arg("MATCH")
            .arg("dense:item:*")
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        step.sort();
        let after = step[step.len() / 2].clone();
        let (seen, _) = scan_all(Some(Cursor(format!("0|{after}"))), 100).await;
        let skipped: BTreeSet<String> = step.iter().filter(|k| **k <= after).cloned().collect();
        let want: BTreeSet<Key> = all
            .iter()
            .filter(|k| !skipped.contains(&format!("dense:item:#{}", k.id)))
            .cloned()
            .collect();
        assert_eq!(seen, want, "a cursor of an earlier version resumes");

        // Server-side batches of every size advance every entity exactly once.
        for (from, limit) in [(0u64, 150usize), (1, 7), (2, 1000)] {
            let (advanced, _) =
                set_n_on_every_item(store.as_ref(), from, from as i64, limit, limit as u64).await;
            assert_eq!(advanced, n as u64, "batches of {limit}");
            let count = |version| {
                let store = std::sync::Arc::clone(&store);
                async move {
                    store
                        .count(
                            "item",
                            Filter {
                                version,
                                conditions: vec![],
                            },
                        )
                        .await
                        .unwrap()
                }
            };
            assert_eq!(count(VersionFilter::Exactly(from + 1)).await, n as u64);
            assert_eq!(count(VersionFilter::Below(from + 1)).await, 0);
            assert_eq!(count(VersionFilter::Any).await, n as u64);
        }
        let e = store
            .get(&Key::new("item", 5).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((e.version, e.get("n")), (3, Some(&Value::Int(2))));
        let _: () = redis::cmd("FLUSHDB").query_async(&mut conn).await.unwrap();
    }

    /// A put replaces the whole entity (a field it no longer has is gone) and
    /// keeps the key's TTL, for a hash (the put script: fields overwritten in
    /// place, the ones the entity lacks dropped; a key of another type
    /// replaced; a wide hash in several `HSET`s) and for a JSON string (one
    /// `SET ... KEEPTTL`, no script).
    #[tokio::test]
    async fn a_put_replaces_the_whole_entity_and_keeps_its_ttl() {
        let Some(b) = or_skip(backend(), None).await else {
            return;
        };
        let url = format!("{}&json=doc", b.fresh_url());
        let ns = prefix_of(&url);
        let store = tern_integration_tests::redis::open(&url).await.unwrap();
        let mut conn = redis::Client::open(b.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for kind in ["note", "doc"] {
            let key = Key::new(kind, "k").unwrap();
            let old: Map = [
                ("a".to_owned(), Value::Int(1)),
                ("gone".to_owned(), Value::Bool(true)),
            ]
            .into();
            store.put(Entity::new(key.clone(), old)).await.unwrap();
            let raw = format!("{ns}:{kind}:k");
            let _: bool = redis::cmd("EXPIRE")
                .arg(&raw)
                .arg(1000)
                .query_async(&mut conn)
                .await
                .unwrap();
            // A second entity in the same chunk (one script call for both on
            // one server), written before and without a TTL.
            let other = Key::new(kind, "k2").unwrap();
            let before: Map = [("b".to_owned(), Value::Int(1))].into();
            store.put(Entity::new(other.clone(), before)).await.unwrap();
            let new: Map = [("a".to_owned(), Value::Int(2))].into();
            let mut entity = Entity::new(key.clone(), new.clone());
            entity.version = 3;
            let new2: Map = [("c".to_owned(), Value::from("x"))].into();
            let mut entity2 = Entity::new(other.clone(), new2.clone());
            entity2.version = 3;
            store
                .write_checked(vec![Write::Put(entity), Write::Put(entity2)])
                .await
                .unwrap();
            let got = store.get(&key).await.unwrap().unwrap();
            assert_eq!((got.version, got.value), (3, new), "{kind}: replaced whole");
            let got = store.get(&other).await.unwrap().unwrap();
            assert_eq!(
                (got.version, got.value),
                (3, new2),
                "{kind}: the second too"
            );
            let ttl: i64 = redis::cmd("TTL")
                .arg(format!("{ns}:{kind}:k2"))
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(ttl, -1, "{kind}: no TTL where there was none");
            let ttl: i64 = redis::cmd("TTL")
                .arg(&raw)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert!(ttl > 900, "{kind}: the TTL is kept ({ttl})");
        }
        // A key of another type under a hash kind's name: replaced, its TTL kept.
        let raw = format!("{ns}:note:k3");
        let () = redis::cmd("SET")
            .arg(&raw)
            .arg("foreign")
            .arg("EX")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let k3 = Key::new("note", "k3").unwrap();
        let value: Map = [("a".to_owned(), Value::Int(3))].into();
        store
            .put(Entity::new(k3.clone(), value.clone()))
            .await
            .unwrap();
        assert_eq!(store.get(&k3).await.unwrap().unwrap().value, value);
        let ttl: i64 = redis::cmd("TTL")
            .arg(&raw)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 900, "the foreign key's TTL is kept ({ttl})");
        // A wide hash (more fields than one HSET of the script takes)
        // replaced by one with a field less.
        let wide = |n: usize| -> Map {
            (0..n)
                .map(|i| (format!("f{i}"), Value::Int(i as i64)))
                .collect()
        };
        store.put(Entity::new(k3.clone(), wide(601))).await.unwrap();
        assert_eq!(store.get(&k3).await.unwrap().unwrap().value, wide(601));
        store.put(Entity::new(k3.clone(), wide(600))).await.unwrap();
        assert_eq!(store.get(&k3).await.unwrap().unwrap().value, wide(600));
    }
}
