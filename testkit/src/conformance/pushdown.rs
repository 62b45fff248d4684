//! Checks of [`Store::update_in_place`].

use super::{
    CheckResult, Failure, Namespace, by_key, clear_kinds, ensure, ensure_eq, entity, map, put_all,
    scan_all,
};
use crate::intercept::Forward as _;
use tern_core::model::{Entity, Key, Value};
use tern_core::store::{
    Advanced, Condition, Cursor, ErrorKind, Filter, PushOp, PushStep, PushdownRequest, StepsFrom,
    Store, pushdown,
};

/// Without [`Features::pushdown`](tern_core::store::Features::pushdown),
/// [`Store::update_in_place`] answers `Unsupported`. With it, a store may still
/// decline (with `Unsupported`, writing nothing) steps it cannot run exactly —
/// conditions or nested paths — but must run unconditional top-level steps
/// ([`simple_steps`]). The steps it runs behave as
/// [`pushdown`](tern_core::store::pushdown) defines: entities at `from + i` go
/// through steps `i..`, conditions see earlier steps, nested sets create maps
/// but never go through a non-map, renames of absent properties change
/// nothing, entities at other versions are untouched; per-step counts and the
/// number advanced are exact; batches respect the limit and resume from
/// serialized cursors; a second run changes nothing.
pub async fn update_in_place(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("pushdown");
    let path = |p: &str| p.split('.').map(str::to_owned).collect::<Vec<_>>();
    let steps = vec![
        PushStep {
            conditions: vec![Condition::eq("cat", "x")],
            op: PushOp::Set {
                path: path("a.b"),
                value: Value::Int(1),
            },
        },
        PushStep {
            conditions: vec![],
            op: PushOp::Rename {
                from: "old".into(),
                to: "new".into(),
            },
        },
        PushStep {
            conditions: vec![Condition {
                path: path("a.b"),
                values: vec![Value::Int(1)],
            }],
            op: PushOp::Unset { path: path("tmp") },
        },
    ];
    let request = |cursor: Option<Cursor>| PushdownRequest {
        kind: kind.clone(),
        from: 3,
        steps: steps.clone(),
        cursor,
        limit: 4,
    };

    if store.features().pushdown.is_none() {
        // Nothing to check: the store has no pushdown code to call.
        return Ok(());
    }

    // Does the store run conditions and nested paths, or decline them?
    let probe = ns.kind("pushdown_probe");
    put_all(
        store,
        &[entity(
            &probe,
            0,
            3,
            &[("cat", "x".into()), ("old", Value::Int(1))],
        )],
    )
    .await?;
    let mut probe_request = request(None);
    probe_request.kind = probe.clone();
    let declined = match store.update_in_place(probe_request).await {
        Ok(_) => false,
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            let left = scan_all(store, &probe, &Filter::all(), 100).await?;
            ensure_eq!(
                left.values().map(|e| e.version).collect::<Vec<_>>(),
                vec![3],
                "a declined pushdown writes nothing"
            );
            true
        }
        Err(e) => return Err(e.into()),
    };
    clear_kinds(store, &[&probe]).await?;
    if declined {
        return simple_steps(store).await;
    }

    let i = Value::Int;
    let entities = vec![
        entity(&kind, 0, 3, &[("cat", "x".into()), ("old", i(1))]),
        entity(
            &kind,
            1,
            3,
            &[("cat", "x".into()), ("a", i(5)), ("old", i(2))],
        ),
        entity(
            &kind,
            2,
            3,
            &[("cat", "y".into()), ("old", i(3)), ("tmp", i(1))],
        ),
        entity(
            &kind,
            3,
            3,
            &[("cat", "x".into()), ("a", map(&[("c", i(1))]))],
        ),
        entity(
            &kind,
            4,
            3,
            &[
                ("cat", Value::Array(vec!["x".into(), "z".into()])),
                ("new", i(0)),
                ("old", i(4)),
            ],
        ),
        entity(&kind, 5, 3, &[]),
        entity(
            &kind,
            6,
            3,
            &[("cat", "x".into()), ("a", map(&[("b", i(1))]))],
        ),
        entity(&kind, 7, 4, &[("cat", "x".into()), ("old", i(7))]),
        entity(&kind, 8, 4, &[("cat", "x".into()), ("old", i(8))]),
        entity(&kind, 9, 4, &[("cat", "x".into()), ("old", i(9))]),
        entity(&kind, 10, 5, &[("old", i(1)), ("tmp", i(1))]),
        entity(&kind, 11, 5, &[("old", i(1)), ("tmp", i(1))]),
        entity(&kind, 12, 2, &[("cat", "x".into()), ("old", i(1))]),
        entity(&kind, 13, 6, &[("cat", "x".into()), ("old", i(1))]),
        entity(&kind, 14, 9, &[("cat", "x".into()), ("old", i(1))]),
        entity(&kind, 15, 3, &[("cat", "x".into()), ("tmp", "t".into())]),
        entity(&kind, 16, 3, &[("cat", "x".into()), ("tmp", "t".into())]),
        entity(&kind, 17, 4, &[("tmp", i(2))]),
    ];
    put_all(store, &entities).await?;

    // The reference, in key order.
    let mut want = entities.clone();
    let mut want_changed = vec![0u64; steps.len()];
    let mut want_advanced = 0u64;
    for e in &mut want {
        want_advanced += u64::from(pushdown::advance(3, &steps, e, &mut want_changed));
    }
    ensure_eq!(
        (want_advanced, want_changed.clone()),
        (15, vec![5, 7, 2]),
        "the reference semantics"
    );

    let (advanced, changed) = run_batches(store, &request).await?;
    ensure_eq!(
        (advanced, changed),
        (want_advanced, want_changed),
        "entities advanced and changed per step"
    );
    let got = scan_all(store, &kind, &Filter::all(), 100).await?;
    ensure_eq!(got, by_key(&want), "the entities after the steps");

    // Spot checks of the semantics, independent of the reference.
    let get = |id: i64| {
        got.get(&Key {
            kind: kind.clone(),
            id: Value::Int(id),
        })
        .cloned()
    };
    let spot =
        |id: i64, version: u64, props: &[(&str, Value)]| Some(entity(&kind, id, version, props));
    ensure_eq!(
        get(1),
        spot(1, 6, &[("cat", "x".into()), ("a", i(5)), ("new", i(2))]),
        "a set through a non-map"
    );
    ensure_eq!(
        get(3),
        spot(
            3,
            6,
            &[("cat", "x".into()), ("a", map(&[("b", i(1)), ("c", i(1))]))]
        ),
        "a nested set"
    );
    ensure_eq!(
        get(5),
        spot(5, 6, &[]),
        "an entity no step matches still advances"
    );
    ensure_eq!(
        get(15),
        spot(15, 6, &[("cat", "x".into()), ("a", map(&[("b", i(1))]))]),
        "conditions see earlier steps"
    );
    ensure_eq!(
        get(10),
        spot(10, 6, &[("old", i(1)), ("tmp", i(1))]),
        "an entity at from + 2 gets only the last step"
    );
    ensure_eq!(
        get(7),
        spot(7, 6, &[("cat", "x".into()), ("new", i(7))]),
        "an entity at from + 1 skips the first step"
    );
    for (id, version) in [(12, 2), (13, 6), (14, 9)] {
        ensure_eq!(
            get(id).map(|e| e.version),
            Some(version),
            "entity {id} at a version outside the steps"
        );
    }

    let (advanced, changed) = run_batches(store, &request).await?;
    ensure_eq!((advanced, changed), (0, vec![0, 0, 0]), "a second run");
    ensure_eq!(
        scan_all(store, &kind, &Filter::all(), 100).await?,
        by_key(&want),
        "the entities after a second run"
    );
    clear_kinds(store, &[&kind]).await
}

/// The blog's release 2 as pushdown steps, unconditional: `likes` set to 0,
/// `text` renamed to `content`.
pub fn release2_steps() -> Vec<PushStep> {
    vec![
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
    ]
}

/// Unconditional top-level steps (set, rename, unset), which every store with
/// `update_pushdown` runs: same results as the reference, in batches.
pub(super) async fn simple_steps(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("pushdown_simple");
    let mut steps = release2_steps();
    steps.push(PushStep {
        conditions: vec![],
        op: PushOp::Unset {
            path: vec!["tmp".into()],
        },
    });
    let i = Value::Int;
    let entities = vec![
        entity(&kind, 0, 0, &[("text", "a".into()), ("tmp", i(1))]),
        entity(&kind, 1, 0, &[("likes", i(0)), ("content", "old".into())]),
        entity(
            &kind,
            2,
            1,
            &[("text", "b".into()), ("content", "c".into())],
        ),
        entity(&kind, 3, 2, &[("tmp", "t".into()), ("text", "kept".into())]),
        entity(&kind, 4, 3, &[("text", "done".into())]),
        entity(&kind, 5, 0, &[]),
        entity(
            &kind,
            6,
            0,
            &[("text", Value::Array(vec![i(1), "x".into()]))],
        ),
    ];
    put_all(store, &entities).await?;
    let mut want = entities.clone();
    let mut want_changed = vec![0u64; steps.len()];
    for e in &mut want {
        pushdown::advance(0, &steps, e, &mut want_changed);
    }
    let request = |cursor: Option<Cursor>| PushdownRequest {
        kind: kind.clone(),
        from: 0,
        steps: steps.clone(),
        cursor,
        limit: 2,
    };
    let (advanced, changed) = run_batches(store, &request).await?;
    ensure_eq!(
        (advanced, changed),
        (6, want_changed),
        "unconditional steps: advanced and changed per step"
    );
    ensure_eq!(
        scan_all(store, &kind, &Filter::all(), 100).await?,
        by_key(&want),
        "unconditional steps: the entities after the steps"
    );
    let (advanced, _) = run_batches(store, &request).await?;
    ensure_eq!(advanced, 0, "unconditional steps: a second run");
    clear_kinds(store, &[&kind]).await
}

/// Runs a pushdown to the end, batch by batch, cursors through JSON.
async fn run_batches(
    store: &dyn Store,
    request: &dyn Fn(Option<Cursor>) -> PushdownRequest,
) -> Result<(u64, Vec<u64>), Failure> {
    let mut advanced = 0;
    let mut changed = vec![0; request(None).steps.len()];
    let mut cursor = None;
    for _ in 0..1000 {
        let req = request(cursor.take());
        let limit = req.limit as u64;
        let page = store.update_in_place(req).await?;
        ensure!(
            page.advanced <= limit,
            "a batch advanced {} entities, more than its limit {limit}",
            page.advanced
        );
        ensure_eq!(
            page.changed.len(),
            changed.len(),
            "one changed counter per step"
        );
        advanced += page.advanced;
        for (total, n) in changed.iter_mut().zip(&page.changed) {
            *total += n;
        }
        match page.cursor {
            None => return Ok((advanced, changed)),
            Some(c) => {
                let text = serde_json::to_string(&c)
                    .map_err(|e| Failure::new(format!("serialize cursor: {e}")))?;
                cursor = Some(
                    serde_json::from_str(&text)
                        .map_err(|e| Failure::new(format!("parse cursor: {e}")))?,
                );
            }
        }
    }
    Err(Failure::new(
        "update_in_place did not finish after 1000 batches",
    ))
}

/// [`Store::get_advanced`]: where the store runs it (it may answer
/// `Unsupported`, writing nothing), an entity at a version the steps cover
/// comes back advanced through the remaining steps, exactly as
/// [`pushdown::advance`] defines, and is stored so, marked migrated; an
/// entity at another version comes back as stored, unchanged, not marked; an
/// absent key is `None`.
pub async fn get_advanced(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("advanced");
    let steps = add_then_rename();
    let stored = [
        entity(&kind, 1, 2, &[("old", Value::Int(1))]),
        entity(
            &kind,
            2,
            3,
            &[("old", Value::Int(2)), ("added", Value::Int(0))],
        ),
        entity(&kind, 3, 1, &[("old", Value::Int(3))]),
        entity(&kind, 4, 4, &[("old", Value::Int(4))]),
    ];
    put_all(store, &stored).await?;
    let key = |id: i64| Key::new(&kind, id).map_err(|e| Failure::new(e.to_string()));
    match store.get_advanced(&key(1)?, &[], Some(&steps)).await {
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            let now = scan_all(store, &kind, &Filter::all(), 100).await?;
            ensure_eq!(now, by_key(&stored), "get_advanced declined but wrote");
            return clear_kinds(store, &[&kind]).await;
        }
        Err(e) => return Err(e.into()),
        Ok(got) => {
            let mut want = stored[0].clone();
            let migrated = pushdown::advance(steps.from, &steps.steps, &mut want, &mut [0, 0]);
            let want_read = Advanced {
                entity: want.clone(),
                migrated,
            };
            ensure_eq!(got, Some(want_read), "get_advanced of an entity at from");
            ensure_eq!(
                store.get(&key(1)?).await?,
                Some(want),
                "stored after get_advanced"
            );
        }
    }
    for (i, e) in stored.iter().enumerate().skip(1) {
        let mut want = e.clone();
        // Entities 1 (at from + 1) advances; 2 (below from) and 3 (at the target) do not.
        let migrated = pushdown::advance(steps.from, &steps.steps, &mut want, &mut [0, 0]);
        ensure_eq!(migrated, i == 1, "the steps cover entity {i}");
        let got = store.get_advanced(&e.key, &[], Some(&steps)).await?;
        let want_read = Advanced {
            entity: want.clone(),
            migrated,
        };
        ensure_eq!(got, Some(want_read), "get_advanced of entity {i}");
        ensure_eq!(store.get(&e.key).await?, Some(want), "stored entity {i}");
    }
    ensure!(
        store
            .get_advanced(&key(99)?, &[], Some(&steps))
            .await?
            .is_none(),
        "get_advanced of an absent key"
    );
    clear_kinds(store, &[&kind]).await
}

/// The steps of the `get_advanced` checks, from version 2: `add added = 7`
/// then `rename old to new`.
fn add_then_rename() -> StepsFrom {
    StepsFrom {
        from: 2,
        steps: vec![
            PushStep {
                conditions: vec![],
                op: PushOp::Set {
                    path: vec!["added".into()],
                    value: Value::Int(7),
                },
            },
            PushStep {
                conditions: vec![],
                op: PushOp::Rename {
                    from: "old".into(),
                    to: "new".into(),
                },
            },
        ],
    }
}

/// [`Store::get_advanced`] with former kind names, with and without steps:
/// where the store runs it (it may answer `Unsupported`, writing nothing),
/// an entity under the first former name that holds one moves to the key
/// (re-keyed, nothing left under that name), then gets the steps its version
/// calls for, and comes back marked migrated; an entity already under the
/// key is returned as stored (stepped if its version calls for it), its copy
/// under a former name untouched; an id absent under every name is `None`.
pub async fn get_advanced_moving(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let (old, mid, new) = (ns.kind("mvold"), ns.kind("mvmid"), ns.kind("mvnew"));
    let kinds = [old.as_str(), mid.as_str(), new.as_str()];
    let steps = add_then_rename();
    put_all(
        store,
        &[
            // Under the older former name, at `from`: moved, then both steps.
            entity(&old, 1, 2, &[("old", Value::Int(1))]),
            // Under the newer former name, at `from + 1`: moved, then the rename.
            entity(&mid, 2, 3, &[("old", Value::Int(2))]),
            // Under the new name at the target, and a stale copy under `old`.
            entity(&new, 3, 4, &[("new", Value::Int(3))]),
            entity(&old, 3, 2, &[("old", Value::Int(30))]),
            // Under `old` below `from`: moved, not stepped.
            entity(&old, 4, 1, &[("old", Value::Int(4))]),
            entity(&old, 5, 1, &[("old", Value::Int(5))]),
            // Under both former names: the newer one's moves.
            entity(&mid, 6, 3, &[("old", Value::Int(6))]),
            entity(&old, 6, 2, &[("old", Value::Int(60))]),
        ],
    )
    .await?;
    let key = |kind: &str, id: i64| Key::new(kind, id).map_err(|e| Failure::new(e.to_string()));
    // Id 4 is read without steps first (a move alone), then with them.
    let reads = [
        (1, true),
        (2, true),
        (3, true),
        (4, false),
        (4, true),
        (5, true),
        (6, true),
        (99, true),
    ];
    for (id, with_steps) in reads {
        let here = key(&new, id)?;
        let formers = [key(&mid, id)?, key(&old, id)?];
        let asked = with_steps.then_some(&steps);
        let before = scan_every(store, &kinds).await?;
        let got = match store.get_advanced(&here, &formers, asked).await {
            Err(e) if e.kind() == ErrorKind::Unsupported => {
                let now = scan_every(store, &kinds).await?;
                ensure_eq!(now, before, "get_advanced of id {id} declined but wrote");
                continue;
            }
            other => other?,
        };
        // What the trait's contract makes of `before`.
        let mut after = before.clone();
        let source = std::iter::once(&here)
            .chain(&formers)
            .find(|k| before.contains_key(k));
        let want = match source {
            None => None,
            Some(source) => {
                let mut e = after
                    .remove(source)
                    .ok_or_else(|| Failure::new("no source"))?;
                let moved = *source != here;
                e.key = here.clone();
                let stepped =
                    asked.is_some_and(|s| pushdown::advance(s.from, &s.steps, &mut e, &mut [0, 0]));
                after.insert(here.clone(), e.clone());
                Some(Advanced {
                    entity: e,
                    migrated: moved || stepped,
                })
            }
        };
        ensure_eq!(got, want, "get_advanced of id {id} (steps: {with_steps})");
        let now = scan_every(store, &kinds).await?;
        ensure_eq!(now, after, "stored after get_advanced of id {id}");
    }
    clear_kinds(store, &kinds).await
}

/// Every entity of `kinds`, by key.
async fn scan_every(
    store: &dyn Store,
    kinds: &[&str],
) -> Result<std::collections::BTreeMap<Key, Entity>, Failure> {
    let mut all = std::collections::BTreeMap::new();
    for kind in kinds {
        all.extend(scan_all(store, kind, &Filter::all(), 100).await?);
    }
    Ok(all)
}
