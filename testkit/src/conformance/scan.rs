//! Checks of scans, kinds, counts and the census.

use std::collections::{BTreeMap, BTreeSet};

use crate::pages::page_of;

use super::{
    CheckResult, Failure, Namespace, by_key, clear_kinds, ensure, ensure_eq, entity, map, put_all,
    scan_all,
};
use tern_core::model::{Key, Value};
use tern_core::store::{Condition, Cursor, Filter, Store, StoreExt, VersionFilter, Write};

/// Pages of every size visit every entity (exactly once and in id order with
/// [`Features::scan_ordered`](tern_core::store::Features::scan_ordered)); a
/// kind with no entities scans empty.
pub async fn scan_pagination(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("pages");
    let mut entities = Vec::new();
    for i in -5i64..10 {
        entities.push(entity(
            &kind,
            i,
            (i.rem_euclid(3)) as u64,
            &[("i", Value::Int(i))],
        ));
    }
    for i in 0..8 {
        entities.push(entity(
            &kind,
            format!("s{i:02}"),
            1,
            &[("s", Value::Int(i))],
        ));
    }
    put_all(store, &entities).await?;
    let want = by_key(&entities);
    for limit in [1, 2, 3, 5, 7, 23, 100] {
        let got = scan_all(store, &kind, &Filter::all(), limit).await?;
        ensure_eq!(got, want, "a full scan with limit {limit}");
    }
    let empty = scan_all(store, &ns.kind("nothing"), &Filter::all(), 10).await?;
    ensure!(
        empty.is_empty(),
        "a scan of a kind without entities returned {} entities",
        empty.len()
    );
    clear_kinds(store, &[&kind]).await
}

/// A scan resumes from a cursor that went through its serialized (JSON) form,
/// in a fresh request.
pub async fn scan_resume(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("resume");
    let entities: Vec<_> = (0..10)
        .map(|i| entity(&kind, i, 0, &[("i", Value::Int(i))]))
        .collect();
    put_all(store, &entities).await?;

    let mut seen = BTreeMap::new();
    let mut cursor = None;
    // Read until a page hands back a cursor (pages may be empty).
    for _ in 0..1000 {
        let page = page_of(store, &kind, &Filter::all(), cursor.take(), 3).await?;
        seen.extend(page.entities.into_iter().map(|e| (e.key.clone(), e)));
        match page.cursor {
            Some(c) if seen.is_empty() => cursor = Some(c),
            other => {
                cursor = other;
                break;
            }
        }
    }
    let first: BTreeSet<Key> = seen.keys().cloned().collect();
    if let Some(c) = cursor {
        let text = serde_json::to_string(&c)
            .map_err(|e| Failure::new(format!("serialize cursor: {e}")))?;
        let restored: Cursor =
            serde_json::from_str(&text).map_err(|e| Failure::new(format!("parse cursor: {e}")))?;
        ensure_eq!(restored, c, "a cursor survives JSON");
        let mut cursor = Some(restored);
        while let Some(c) = cursor {
            let page = page_of(store, &kind, &Filter::all(), Some(c), 4).await?;
            for e in page.entities {
                if store.features().scan_ordered {
                    ensure!(
                        !first.contains(&e.key),
                        "an ordered scan returned {} again after resuming",
                        e.key
                    );
                }
                seen.insert(e.key.clone(), e);
            }
            cursor = page.cursor;
        }
    }
    ensure_eq!(seen, by_key(&entities), "first page plus the resumed scan");
    clear_kinds(store, &[&kind]).await
}

/// Version filters and conditions agree with [`Filter::matches`]: array
/// membership, whole-array literals, absent properties never match (not even
/// `null`), `1 = 1.0`, nested paths, disjunctions.
pub async fn scan_filter(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("filter");
    let arr = |items: &[Value]| Value::Array(items.to_vec());
    let entities = vec![
        entity(
            &kind,
            "a",
            0,
            &[
                ("tags", arr(&["x".into(), "y".into()])),
                ("n", Value::Int(1)),
                ("author", map(&[("name", "Ann".into())])),
                ("nul", Value::Null),
            ],
        ),
        entity(
            &kind,
            "b",
            1,
            &[("tags", "x".into()), ("n", Value::Float(1.0))],
        ),
        entity(&kind, "c", 1, &[("tags", arr(&[])), ("n", Value::Int(2))]),
        entity(&kind, "d", 2, &[]),
        entity(
            &kind,
            "e",
            2,
            &[("n", "1".into()), ("tags", arr(&[arr(&["x".into()])]))],
        ),
        entity(
            &kind,
            "f",
            3,
            &[("n", Value::Float(1.5)), ("author", "Ann".into())],
        ),
        entity(
            &kind,
            "g",
            0,
            &[("nul", arr(&[Value::Null])), ("n", Value::Float(-0.0))],
        ),
    ];
    put_all(store, &entities).await?;

    let cond = |path: &str, values: Vec<Value>| Condition {
        path: path.split('.').map(str::to_owned).collect(),
        values,
    };
    let with = |version: VersionFilter, conditions: Vec<Condition>| Filter {
        version,
        conditions,
    };
    let any = VersionFilter::Any;
    let cases: Vec<(Filter, &str)> = vec![
        (Filter::all(), "abcdefg"),
        (Filter::at_version(1), "bc"),
        (with(VersionFilter::Below(2), vec![]), "abcg"),
        (Filter::at_version(99), ""),
        (with(any, vec![cond("tags", vec!["x".into()])]), "ab"),
        (with(any, vec![cond("tags", vec![arr(&["x".into()])])]), "e"),
        (
            with(
                any,
                vec![cond("tags", vec![arr(&["x".into(), "y".into()])])],
            ),
            "a",
        ),
        (with(any, vec![cond("n", vec![Value::Int(1)])]), "ab"),
        (with(any, vec![cond("n", vec![Value::Float(1.0)])]), "ab"),
        (with(any, vec![cond("n", vec![Value::Int(0)])]), "g"),
        (with(any, vec![cond("nul", vec![Value::Null])]), "ag"),
        (with(any, vec![cond("zz", vec![Value::Null])]), ""),
        (
            with(any, vec![cond("author.name", vec!["Ann".into()])]),
            "a",
        ),
        (
            with(any, vec![cond("n", vec![Value::Int(2), "1".into()])]),
            "ce",
        ),
        (
            with(
                VersionFilter::Exactly(1),
                vec![cond("n", vec![Value::Int(1)])],
            ),
            "b",
        ),
        (
            with(
                VersionFilter::Below(1),
                vec![cond("tags", vec!["x".into()])],
            ),
            "a",
        ),
        (
            with(
                any,
                vec![
                    cond("tags", vec!["x".into()]),
                    cond("n", vec![Value::Int(1)]),
                ],
            ),
            "ab",
        ),
        (
            with(
                any,
                vec![
                    cond("tags", vec!["y".into()]),
                    cond("n", vec![Value::Float(1.0)]),
                ],
            ),
            "a",
        ),
    ];
    for (filter, ids) in cases {
        let want: BTreeSet<Key> = ids
            .chars()
            .map(|c| Key {
                kind: kind.clone(),
                id: Value::String(c.to_string()),
            })
            .collect();
        let reference: BTreeSet<Key> = entities
            .iter()
            .filter(|e| filter.matches(e))
            .map(|e| e.key.clone())
            .collect();
        ensure_eq!(reference, want, "Filter::matches itself, for {filter:?}");
        for limit in [1, 100] {
            let got = scan_all(store, &kind, &filter, limit).await?;
            let keys: BTreeSet<Key> = got.keys().cloned().collect();
            ensure_eq!(keys, want, "scan with {filter:?}, limit {limit}");
        }
    }
    clear_kinds(store, &[&kind]).await
}

/// Entities deleted after a page was returned are not returned by the rest of the scan.
pub async fn scan_skips_deleted(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("deleted");
    let entities: Vec<_> = (0..12).map(|i| entity(&kind, i, 0, &[])).collect();
    put_all(store, &entities).await?;

    let mut seen = BTreeSet::new();
    let mut cursor = None;
    for _ in 0..1000 {
        let page = page_of(store, &kind, &Filter::all(), cursor.take(), 3).await?;
        seen.extend(page.entities.into_iter().map(|e| e.key));
        cursor = page.cursor;
        if !seen.is_empty() || cursor.is_none() {
            break;
        }
    }
    let deleted: Vec<Key> = entities
        .iter()
        .map(|e| e.key.clone())
        .filter(|k| !seen.contains(k))
        .collect();
    store
        .write_batch(deleted.iter().cloned().map(Write::Delete).collect())
        .await?;
    while let Some(c) = cursor {
        let page = page_of(store, &kind, &Filter::all(), Some(c), 3).await?;
        for e in page.entities {
            ensure!(
                !deleted.contains(&e.key),
                "the scan returned {} after it was deleted",
                e.key
            );
        }
        cursor = page.cursor;
    }
    clear_kinds(store, &[&kind]).await
}

/// Kinds are separate spaces even when their names are prefixes of each other
/// and they share ids; [`Store::kinds`] is sorted and lists exactly the kinds
/// that hold entities.
pub async fn kinds_isolated(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let names = [ns.kind("is"), ns.kind("iso"), ns.kind("iso_x")];
    let mut entities = Vec::new();
    for kind in &names {
        for id in 1..=3 {
            entities.push(entity(kind, id, 0, &[("kind", kind.as_str().into())]));
        }
    }
    put_all(store, &entities).await?;
    for kind in &names {
        let got = scan_all(store, kind, &Filter::all(), 2).await?;
        let want = by_key(
            &entities
                .iter()
                .filter(|e| &e.key.kind == kind)
                .cloned()
                .collect::<Vec<_>>(),
        );
        ensure_eq!(got, want, "a scan of kind {kind:?}");
        let one = store
            .get(&Key {
                kind: kind.clone(),
                id: Value::Int(1),
            })
            .await?;
        ensure_eq!(
            one.and_then(|e| e.value.get("kind").cloned()),
            Some(Value::String(kind.clone())),
            "get in kind {kind:?}"
        );
    }

    let kinds = store.kinds().await?;
    ensure!(
        kinds.windows(2).all(|w| w[0] < w[1]),
        "kinds() must be sorted without duplicates: {kinds:?}"
    );
    for kind in &names {
        ensure!(kinds.contains(kind), "kinds() lacks {kind:?}: {kinds:?}");
    }

    clear_kinds(store, &[&names[2]]).await?;
    let kinds = store.kinds().await?;
    ensure!(
        !kinds.contains(&names[2]),
        "kinds() still lists {:?} after its last entity was deleted",
        names[2]
    );
    ensure!(
        kinds.contains(&names[0]) && kinds.contains(&names[1]),
        "kinds() lost a kind: {kinds:?}"
    );
    ensure!(
        scan_all(store, &names[2], &Filter::all(), 10)
            .await?
            .is_empty(),
        "a scan of an emptied kind"
    );

    clear_kinds(store, &[&names[0], &names[1]]).await?;
    let kinds = store.kinds().await?;
    ensure!(
        names.iter().all(|k| !kinds.contains(k)),
        "kinds() lists emptied kinds: {kinds:?}"
    );
    Ok(())
}

/// [`Store::count`], [`Store::version_census`] and (where the store has one)
/// [`Store::estimate_count`] agree with the data.
pub async fn count_and_census(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("census");
    let versions = [0u64, 0, 0, 1, 1, 2, 2, 2, 2, 5];
    let entities: Vec<_> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| entity(&kind, i as i64, *v, &[("n", Value::Int(i as i64 % 3))]))
        .collect();
    put_all(store, &entities).await?;

    let n0 = || vec![Condition::eq("n", 0)];
    let cases = [
        (Filter::all(), 10),
        (Filter::at_version(2), 4),
        (
            Filter {
                version: VersionFilter::Below(2),
                conditions: vec![],
            },
            5,
        ),
        (
            Filter {
                version: VersionFilter::Any,
                conditions: n0(),
            },
            4,
        ),
        (
            Filter {
                version: VersionFilter::Exactly(2),
                conditions: n0(),
            },
            1,
        ),
        (Filter::at_version(3), 0),
    ];
    for (filter, want) in cases {
        ensure_eq!(
            store.count(&kind, filter.clone()).await?,
            want,
            "count with {filter:?}"
        );
    }
    let census = store.version_census(&kind).await?;
    ensure_eq!(
        census,
        BTreeMap::from([(0, 3), (1, 2), (2, 4), (5, 1)]),
        "version census"
    );
    // The progress estimate, where the store has one, is exact while nobody writes.
    if let Some(estimate) = store.estimate_count(&kind).await? {
        ensure_eq!(estimate, 10, "estimate_count of a quiescent kind");
    }

    let empty = ns.kind("census_empty");
    ensure_eq!(
        store.count(&empty, Filter::all()).await?,
        0,
        "count of a kind without entities"
    );
    ensure_eq!(
        store.version_census(&empty).await?,
        BTreeMap::new(),
        "census of a kind without entities"
    );
    if let Some(estimate) = store.estimate_count(&empty).await? {
        ensure_eq!(estimate, 0, "estimate_count of a kind without entities");
    }
    clear_kinds(store, &[&kind]).await
}

/// A projected scan ([`Store::scan_projected`]) visits what a whole scan
/// visits, once each, with the filter still judged on the whole stored
/// entity: every entity that passes it, at its version, holding each named
/// property as stored (any other property it keeps is as stored too). Two
/// such scans of one kind read page by page in turn do not disturb each
/// other (a store may keep a cursor open between pages).
pub async fn scan_projected_pages(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("projected");
    let entities: Vec<_> = (0i64..23)
        .map(|i| {
            let mut props = vec![("n", Value::Int(i % 4)), ("big", Value::Int(i * 1000))];
            if i % 5 != 0 {
                props.push(("a", format!("a{i}").into()));
            }
            entity(&kind, i, (i % 3) as u64, &props)
        })
        .collect();
    put_all(store, &entities).await?;
    let names = ["a".to_owned()];
    let filters = [
        Filter::all(),
        Filter {
            version: VersionFilter::Any,
            conditions: vec![Condition::eq("n", Value::Int(1))],
        },
        Filter {
            version: VersionFilter::Exactly(2),
            conditions: Vec::new(),
        },
    ];
    for filter in &filters {
        let want: BTreeMap<Key, _> = entities
            .iter()
            .filter(|e| filter.matches(e))
            .map(|e| (e.key.clone(), e))
            .collect();
        for limit in [1, 2, 5, 7, 100] {
            // Two scans read in turn, page after page.
            let (mut first, mut second) = (Projected::default(), Projected::default());
            while !(first.done && second.done) {
                first.next(store, &kind, filter, &names, limit).await?;
                second.next(store, &kind, filter, &names, limit).await?;
            }
            for seen in [first.seen, second.seen] {
                let keys: Vec<&Key> = seen.iter().map(|e| &e.key).collect();
                let unique: BTreeSet<&Key> = keys.iter().copied().collect();
                ensure_eq!(
                    keys.len(),
                    unique.len(),
                    "a projected scan (limit {limit}, {filter:?}) returned an entity twice"
                );
                ensure_eq!(
                    unique,
                    want.keys().collect::<BTreeSet<_>>(),
                    "the keys of a projected scan (limit {limit}, {filter:?})"
                );
                for e in &seen {
                    let Some(stored) = want.get(&e.key) else {
                        continue;
                    };
                    ensure_eq!(e.version, stored.version, "the version of {}", e.key);
                    ensure_eq!(
                        e.value.get("a"),
                        stored.value.get("a"),
                        "the projected property of {}",
                        e.key
                    );
                    for (name, v) in &e.value {
                        ensure_eq!(
                            Some(v),
                            stored.value.get(name),
                            "property {name} of {} in a projected scan",
                            e.key
                        );
                    }
                }
            }
        }
    }
    // A pass abandoned after its first page leaves nothing that shows a
    // later pass an entity as it was before a change.
    let mut abandoned = Projected::default();
    abandoned
        .next(store, &kind, &Filter::all(), &names, 2)
        .await?;
    ensure!(
        !abandoned.done,
        "a projected scan of 23 entities ended after 2"
    );
    let last = entity(&kind, 22, 1, &[("a", "changed".into())]);
    put_all(store, std::slice::from_ref(&last)).await?;
    let mut again = Projected::default();
    while !again.done {
        again.next(store, &kind, &Filter::all(), &names, 2).await?;
    }
    let seen = again.seen.iter().find(|e| e.key == last.key);
    ensure_eq!(
        seen.and_then(|e| e.value.get("a")),
        last.value.get("a"),
        "a projected scan after an abandoned one, of an entity changed in between"
    );
    clear_kinds(store, &[&kind]).await
}

/// One projected scan read a page at a time.
#[derive(Default)]
struct Projected {
    seen: Vec<tern_core::model::Entity>,
    cursor: Option<Cursor>,
    done: bool,
    pages: usize,
}

impl Projected {
    async fn next(
        &mut self,
        store: &dyn Store,
        kind: &str,
        filter: &Filter,
        names: &[String],
        limit: usize,
    ) -> Result<(), Failure> {
        if self.done {
            return Ok(());
        }
        self.pages += 1;
        ensure!(
            self.pages < 1000,
            "a projected scan of 23 entities did not end"
        );
        let page = store
            .scan_projected(
                kind,
                tern_core::store::ScanRequest {
                    filter: filter.clone(),
                    cursor: self.cursor.take(),
                    limit,
                },
                names,
            )
            .await?;
        self.seen.extend(page.entities);
        self.cursor = page.cursor;
        self.done = self.cursor.is_none();
        Ok(())
    }
}
