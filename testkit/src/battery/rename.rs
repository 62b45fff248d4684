//! The battery of the kind rename (`rename kind a to b`), on every store.
//!
//! Each test returns `Err(reason)` when the store cannot rename kinds: it has
//! then checked that `tern up` refuses the rename before writing anything, and
//! the reason is reported as the skip.

use std::sync::Arc;
#[cfg(feature = "fault-injection")]
use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Mutex,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use super::{Backend, export, load, migrator};
#[cfg(feature = "fault-injection")]
use super::{
    InsertHook, OldApplication, crash_once_then_resume, map, migrator_with, scan_kind, set,
    throttled,
};
use tern_core::lang::eval::{self, EvalOptions};
#[cfg(feature = "fault-injection")]
use tern_core::migrate::{FaultAt, FaultHook, FaultPoint, KindRename, Migrator};
use tern_core::migrate::{MigrateError, StateDoc};
use tern_core::model::Entity;
use tern_core::model::json::entity_to_json_line;
#[cfg(feature = "fault-injection")]
use tern_core::model::{Key, Value};
use tern_core::store::Store;
#[cfg(feature = "fault-injection")]
use tern_core::store::{Filter, ScanRequest, StoreExt, Write};

/// The state document as stored.
pub async fn state_doc(store: &dyn Store) -> StateDoc {
    tern_core::migrate::state::load(store).await.unwrap().doc
}

/// What applying `scripts` in order to `entities` gives by the reference
/// semantics (`lang::eval`), as an export (JSON Lines, sorted).
pub fn reference(entities: &[Entity], scripts: &[(u32, &str)]) -> String {
    let mut state: eval::State = entities
        .iter()
        .map(|e| (e.key.clone(), e.clone()))
        .collect();
    for (_, text) in scripts {
        let script = tern_core::lang::parse(text).unwrap();
        eval::apply_script(script.statements(), &mut state, &EvalOptions::default()).unwrap();
    }
    let mut lines: Vec<String> = state.values().map(entity_to_json_line).collect();
    lines.sort();
    lines.join("\n")
}

/// `Ok` when the store renames kinds. Otherwise checks that `tern up` refuses
/// a kind rename with a clear error before writing anything, and returns the
/// skip reason.
pub async fn rename_supported(backend: &dyn Backend) -> Result<(), String> {
    let store = backend.fresh().await;
    if store.features().kind_rename.is_some() {
        return Ok(());
    }
    load(store.as_ref(), &super::blog(2, 1)).await;
    let before = export(store.as_ref()).await;
    let err = migrator(
        Arc::clone(&store),
        &[(1, "rename kind blogpost to post")],
        10,
    )
    .up(None)
    .await
    .unwrap_err();
    let scheme = store.info().scheme;
    let text = err.to_string();
    assert!(
        matches!(err, MigrateError::Invalid { id: 1, .. })
            && text.contains(&format!("rename kind is not supported on {scheme}")),
        "{text}"
    );
    assert_eq!(export(store.as_ref()).await, before, "nothing written");
    let doc = state_doc(store.as_ref()).await;
    assert!(doc.renames.is_empty() && doc.running.is_none(), "{doc:?}");
    Err(format!(
        "the {scheme} store cannot rename kinds; `tern up` refuses with: {text}"
    ))
}

/// A fault hook that writes `entity` (unconditionally) the first time the run
/// reaches `point`, and never crashes.
#[cfg(feature = "fault-injection")]
fn put_once_at(store: &Arc<dyn Store>, point: FaultPoint, entity: Entity) -> FaultHook {
    let store = Arc::clone(store);
    let done = AtomicBool::new(false);
    Arc::new(move |p| {
        if p == point && !done.swap(true, Ordering::SeqCst) {
            let (s, e) = (Arc::clone(&store), entity.clone());
            crate::blocking::block_on_aside(s.put(e)).unwrap();
        }
        false
    })
}

/// The migrations of the rename tests.
#[cfg(feature = "fault-injection")]
const RENAME: &[(u32, &str)] = &[
    (1, super::RELEASE2),
    (2, "rename kind blogpost to post"),
    (3, "add post.seen = true"),
];

/// `rename kind blogpost to post` re-keys every entity (ids, values and
/// versions kept), exactly as the reference semantics say; the kind's version
/// moves to the new name; the prefix history is kept; no `blogpost` entity
/// remains. The dry run shows it without writing. A rename onto a kind that
/// holds entities is refused before anything is written.
#[cfg(feature = "fault-injection")]
pub async fn rename_kind_rekeys_every_entity_and_keeps_the_prefix_history(
    backend: &dyn Backend,
) -> Result<(), String> {
    rename_supported(backend).await?;
    let entities = super::blog(5, 2);
    let posts = entities.iter().filter(|e| e.key.kind == "blogpost").count() as u64;

    // The dry run first: it reports the stages and writes nothing.
    let store = backend.fresh().await;
    load(store.as_ref(), &entities).await;
    let before = export(store.as_ref()).await;
    let dry = migrator(Arc::clone(&store), RENAME, 4)
        .dry_run(None, 3)
        .await
        .unwrap();
    assert_eq!(
        export(store.as_ref()).await,
        before,
        "the dry run wrote nothing"
    );
    let stages: Vec<(&str, u64)> = dry
        .stages
        .iter()
        .map(|s| (s.description.as_str(), s.counts.processed))
        .collect();
    assert_eq!(
        stages,
        vec![
            ("blogpost: v0 -> v2 (2 step(s))", posts),
            ("rename kind blogpost to post", posts),
            // The renamed entities are visible to the next stage of the dry run.
            ("post: v2 -> v3 (1 step(s))", posts),
        ]
    );
    assert!(
        dry.samples
            .iter()
            .any(|(k, c)| k.kind == "post" && c.before.is_none() && c.after.is_some()),
        "{:?}",
        dry.samples
    );

    // The real run.
    let report = migrator(Arc::clone(&store), RENAME, 4)
        .up(None)
        .await
        .unwrap();
    assert_eq!(report.applied.len(), 3);
    assert_eq!(
        report.applied[1].counts.processed, posts,
        "every post renamed"
    );
    assert_eq!(export(store.as_ref()).await, reference(&entities, RENAME));
    assert_eq!(
        store.count("blogpost", Filter::all()).await.unwrap(),
        0,
        "no blogpost remains"
    );
    let doc = state_doc(store.as_ref()).await;
    assert_eq!(doc.kinds, BTreeMap::from([("post".to_owned(), 3)]));
    assert_eq!(doc.renames.len(), 1);
    let KindRename {
        migration,
        from,
        to,
        ..
    } = &doc.renames[0];
    assert_eq!(
        (*migration, from.as_str(), to.as_str()),
        (2, "blogpost", "post")
    );
    assert_eq!(doc.former_kinds("post"), vec!["blogpost".to_owned()]);
    assert!(doc.running.is_none());
    // The census of `tern verify` sees every post at the kind's version.
    let census = Migrator::new(Arc::clone(&store), set(RENAME))
        .census()
        .await
        .unwrap();
    let post = census.iter().find(|c| c.kind == "post").unwrap();
    assert_eq!((post.expected, post.behind()), (3, 0));
    assert!(
        !census
            .iter()
            .any(|c| c.kind == "blogpost" && !c.versions.is_empty())
    );

    // Old code writes the old kind during a later stage of the same migration:
    // the migration's census moves it, and brings it through the new kind's steps.
    let store = backend.fresh().await;
    load(store.as_ref(), &entities).await;
    let scripts: &[(u32, &str)] = &[(1, "rename kind blogpost to post\nadd post.seen = true")];
    let late = Entity::new(
        Key::new("blogpost", "late").unwrap(),
        map(&[("title", "late".into())]),
    );
    let hook = put_once_at(
        &store,
        FaultPoint {
            migration: 1,
            stage: 1,
            phase: 0,
            batch: 0,
            at: FaultAt::AfterCheckpoint,
        },
        late.clone(),
    );
    let report = migrator(Arc::clone(&store), scripts, 4)
        .with_fault_hook(hook)
        .up(None)
        .await
        .unwrap();
    assert!(report.applied[0].counts.swept >= 1);
    let mut with_late = entities.clone();
    with_late.push(late);
    assert_eq!(export(store.as_ref()).await, reference(&with_late, scripts));

    // Onto a kind in use: refused, nothing written, no history recorded.
    let store = backend.fresh().await;
    load(store.as_ref(), &entities).await;
    store
        .put(Entity::new(
            Key::new("post", "taken").unwrap(),
            map(&[("x", Value::Int(1))]),
        ))
        .await
        .unwrap();
    let before = export(store.as_ref()).await;
    let err = migrator(
        Arc::clone(&store),
        &[(1, "rename kind blogpost to post")],
        4,
    )
    .up(None)
    .await
    .unwrap_err();
    assert!(
        matches!(&err, MigrateError::RenameKindRefused { reason, .. } if reason.contains("post already holds 1 entities")),
        "{err}"
    );
    assert_eq!(err.exit_code(), 1);
    assert_eq!(export(store.as_ref()).await, before, "nothing written");
    let doc = state_doc(store.as_ref()).await;
    assert!(
        doc.renames.is_empty() && doc.running.is_none(),
        "no history, no interrupted run: the migration can still be edited ({doc:?})"
    );
    Ok(())
}

/// A crash at every fault point of the rename stage (its check, each batch,
/// its census) resumes to exactly the reference result, with one history entry.
#[cfg(feature = "fault-injection")]
pub async fn rename_kind_resumes_after_a_crash_at_every_fault_point(
    backend: &dyn Backend,
) -> Result<(), String> {
    rename_supported(backend).await?;
    let scripts: &[(u32, &str)] = &[
        (1, "add blogpost.likes = 0"),
        (2, "rename kind blogpost to post\nadd post.seen = true"),
    ];
    let entities = super::blog(6, 2);
    let expected = reference(&entities, scripts);
    let batch = 4;
    let mut points = vec![
        (0, 0, FaultAt::BeforeCheckpoint),
        (0, 0, FaultAt::AfterCheckpoint),
    ];
    // 14 posts: 4 batches on an ordered store; SCAN may need a few more.
    for b in 0..6 {
        for at in [
            FaultAt::BeforeWrite,
            FaultAt::BeforeCheckpoint,
            FaultAt::AfterCheckpoint,
        ] {
            points.push((1, b, at));
        }
    }
    for at in [
        FaultAt::BeforeWrite,
        FaultAt::BeforeCheckpoint,
        FaultAt::AfterCheckpoint,
    ] {
        points.push((2, 0, at));
    }
    let mut crashes = 0;
    for (phase, batch_no, at) in points {
        let point = FaultPoint {
            migration: 2,
            stage: 0,
            phase,
            batch: batch_no,
            at,
        };
        let store = backend.fresh().await;
        load(store.as_ref(), &entities).await;
        let (crashed, report) =
            crash_once_then_resume(point, || migrator(Arc::clone(&store), scripts, batch)).await;
        if crashed {
            crashes += 1;
            assert!(
                report.applied.first().is_some_and(|m| m.id == 2),
                "the interrupted migration 2 resumes ({point:?})"
            );
        }
        assert_eq!(
            export(store.as_ref()).await,
            expected,
            "after a crash at {point:?}"
        );
        let doc = state_doc(store.as_ref()).await;
        assert_eq!(doc.renames.len(), 1, "one history entry ({point:?})");
        assert_eq!(doc.kinds, BTreeMap::from([("post".to_owned(), 2)]));
    }
    // Check (2) + at least 4 batches (12) + the census batch (3).
    assert!(
        crashes >= 17,
        "the fault points were reached ({crashes} crashes)"
    );
    Ok(())
}

/// Old application code keeps writing the old kind during the rename:
/// entities it inserts under `blogpost` are moved (by the batches or by the
/// census passes), and updates that find their entity under either name
/// (read `blogpost`, else `post`, then compare-and-set) are never lost.
#[cfg(feature = "fault-injection")]
pub async fn rename_kind_with_a_concurrent_writer_on_the_old_kind(
    backend: &dyn Backend,
) -> Result<(), String> {
    rename_supported(backend).await?;
    const N: i64 = 300;
    let store = backend.fresh().await;
    let entities: Vec<Entity> = (0..N)
        .map(|i| {
            Entity::new(
                Key::new("blogpost", i).unwrap(),
                map(&[("hits", Value::Int(0))]),
            )
        })
        .collect();
    load(store.as_ref(), &entities).await;
    let gate = Arc::new(tokio::sync::Mutex::new(true));
    // Old code inserts new entities under the old name, until the census
    // starts (see the hook below).
    let insert: InsertHook = {
        let gate = Arc::clone(&gate);
        Box::new(move |store, n| {
            let gate = Arc::clone(&gate);
            Box::pin(async move {
                let open = gate.lock().await;
                if !*open {
                    return false;
                }
                let e = Entity::new(
                    Key::new("blogpost", 10_000 + n).unwrap(),
                    map(&[("hits", Value::Int(0)), ("late", Value::Bool(true))]),
                );
                store.put(e).await.unwrap();
                true
            })
        })
    };
    // Under the old name, else under the new one (the fallback of a lazy reader).
    let writer = OldApplication::start(&store, N, &["blogpost", "post"], insert).await;
    let writes_before = writer.writes();
    // When the census starts, old code stops inserting (an application that
    // keeps writing the old kind after the migration ends is left to `tern
    // verify`), with one last insert after the batches: only the census can find it.
    let census_starts = FaultPoint {
        migration: 1,
        stage: 0,
        phase: 2,
        batch: 0,
        at: FaultAt::BeforeWrite,
    };
    let hook: FaultHook = {
        let (store, gate) = (Arc::clone(&store), Arc::clone(&gate));
        Arc::new(move |p| {
            if p == census_starts {
                let (store, gate) = (Arc::clone(&store), Arc::clone(&gate));
                crate::blocking::block_on_aside(async move {
                    let mut open = gate.lock().await;
                    if *open {
                        *open = false;
                        store
                            .put(Entity::new(
                                Key::new("blogpost", 99_999).unwrap(),
                                map(&[("hits", Value::Int(0)), ("late", Value::Bool(true))]),
                            ))
                            .await
                            .unwrap();
                    }
                });
            }
            false
        })
    };
    let report = migrator_with(
        Arc::clone(&store),
        set(&[(1, "rename kind blogpost to post")]),
        throttled(10, 1500.0),
    )
    .with_fault_hook(hook)
    .up(None)
    .await;
    let writes_during = writer.writes() - writes_before;
    let (updates, inserted) = writer.stop().await;
    let report = report.unwrap();
    assert!(
        writes_during >= 20,
        "the writer ran during the rename ({writes_during} writes)"
    );
    // The writer's inserts and the one after the batches.
    let inserted = inserted + 1;
    assert!(
        report.applied[0].counts.swept >= 1,
        "the census moved the late insert: {:?}",
        report.applied[0].counts
    );
    assert_eq!(store.count("blogpost", Filter::all()).await.unwrap(), 0);
    let mut seen = BTreeSet::new();
    for e in &scan_kind(&store, "post").await {
        let Value::Int(id) = e.key.id else {
            panic!("{:?}", e.key)
        };
        seen.insert(id);
        if id < 10_000 {
            assert_eq!(
                e.get("hits"),
                Some(&Value::Int(updates.get(&id).copied().unwrap_or(0))),
                "no lost update on {}",
                e.key
            );
        } else {
            assert_eq!(e.get("late"), Some(&Value::Bool(true)));
        }
    }
    assert_eq!(seen.len() as u64, N as u64 + inserted, "every entity moved");
    assert_eq!(
        report.applied[0].counts.processed,
        N as u64 + inserted,
        "each entity renamed once"
    );
    Ok(())
}

/// A key of the new kind written during the rename is never overwritten: an
/// entity of the old kind whose id the new kind took (here one written under
/// `post` before its `blogpost` moved, and one written back under `blogpost`
/// by old code after it moved) stays where it is; the run stops with both keys
/// listed. Once each pair is resolved, `tern up` resumes and finishes.
#[cfg(feature = "fault-injection")]
pub async fn rename_kind_never_overwrites_and_stops_on_a_namesake(
    backend: &dyn Backend,
) -> Result<(), String> {
    rename_supported(backend).await?;
    let store = backend.fresh().await;
    let entities: Vec<Entity> = (0..20i64)
        .map(|i| {
            Entity::new(
                Key::new("blogpost", i).unwrap(),
                map(&[("n", Value::Int(i))]),
            )
        })
        .collect();
    load(store.as_ref(), &entities).await;
    let scripts: &[(u32, &str)] = &[(1, "rename kind blogpost to post")];
    // After the first batch: a new entity under `post` with the id of a post
    // that has not moved yet, and a stale write under `blogpost` for one that has.
    let chosen = Arc::new(Mutex::new(None::<(Value, Value)>));
    let (s2, c2) = (Arc::clone(&store), Arc::clone(&chosen));
    let hook: FaultHook = Arc::new(move |p| {
        let first = p
            == FaultPoint {
                migration: 1,
                stage: 0,
                phase: 1,
                batch: 0,
                at: FaultAt::AfterCheckpoint,
            };
        if first && c2.lock().unwrap().is_none() {
            let s3 = Arc::clone(&s2);
            let ids = crate::blocking::block_on_aside(async move {
                let first_of = |kind: &'static str| {
                    let s = Arc::clone(&s3);
                    async move {
                        // Every page: one of a store's own scan (Redis SCAN
                        // over a busy database) may hold none of the kind.
                        let (mut ids, mut cursor) = (Vec::new(), None);
                        loop {
                            let page = s
                                .scan(
                                    kind,
                                    ScanRequest {
                                        filter: Filter::all(),
                                        cursor: cursor.take(),
                                        limit: 100,
                                    },
                                )
                                .await
                                .unwrap();
                            ids.extend(page.entities.into_iter().map(|e| e.key.id));
                            cursor = page.cursor;
                            if cursor.is_none() {
                                break;
                            }
                        }
                        ids.into_iter().min().unwrap()
                    }
                };
                let waiting = first_of("blogpost").await;
                let moved = first_of("post").await;
                s3.put(Entity::new(
                    Key::new("post", waiting.clone()).unwrap(),
                    map(&[("squatter", Value::Bool(true))]),
                ))
                .await
                .unwrap();
                s3.put(Entity::new(
                    Key::new("blogpost", moved.clone()).unwrap(),
                    map(&[("stale", Value::Bool(true))]),
                ))
                .await
                .unwrap();
                (waiting, moved)
            });
            *c2.lock().unwrap() = Some(ids);
        }
        false
    });
    let err = migrator(Arc::clone(&store), scripts, 5)
        .with_fault_hook(hook)
        .up(None)
        .await
        .unwrap_err();
    let (waiting, moved) = chosen.lock().unwrap().clone().unwrap();
    let text = err.to_string();
    assert!(
        matches!(err, MigrateError::RenameKindRefused { .. })
            && text.contains(&Key::new("blogpost", waiting.clone()).unwrap().to_string())
            && text.contains(&Key::new("blogpost", moved.clone()).unwrap().to_string())
            && text.contains("nothing was overwritten"),
        "{text}"
    );
    // Both copies of each pair are intact.
    let get = |kind: &'static str, id: &Value| {
        let s = Arc::clone(&store);
        let key = Key::new(kind, id.clone()).unwrap();
        async move { s.get(&key).await.unwrap().unwrap() }
    };
    assert_eq!(
        get("post", &waiting).await.get("squatter"),
        Some(&Value::Bool(true))
    );
    assert_eq!(
        get("blogpost", &waiting).await.get("n"),
        Some(&waiting.clone())
    );
    assert_eq!(
        get("blogpost", &moved).await.get("stale"),
        Some(&Value::Bool(true))
    );
    assert_eq!(get("post", &moved).await.get("n"), Some(&moved.clone()));
    assert!(state_doc(store.as_ref()).await.running.is_some());
    // Resolve: the squatter and the stale copy go; `tern up` finishes the rename.
    store
        .write_batch(vec![
            Write::Delete(Key::new("post", waiting.clone()).unwrap()),
            Write::Delete(Key::new("blogpost", moved.clone()).unwrap()),
        ])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let report = migrator(Arc::clone(&store), scripts, 5)
        .up(None)
        .await
        .unwrap();
    assert!(report.applied[0].resumed);
    assert_eq!(
        export(store.as_ref()).await,
        reference(&entities, scripts),
        "every original entity under post, nothing else"
    );
    Ok(())
}
