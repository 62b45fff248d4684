//! Checks of the [`Partitions`] facet: the partitions of a split are disjoint
//! and together cover the kind, whatever is written meanwhile.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckResult, Failure, Namespace, clear_kinds, ensure, ensure_eq, entity, put_all};
use tern_core::model::{Key, Value};
use tern_core::store::{
    Cursor, Filter, Partition, Partitions, PushOp, PushStep, PushdownRequest, ScanRequest, Store,
    Write,
};

/// Entities in the big kind of the check.
const ENTITIES: i64 = 300;

/// Where the store has the facet ([`Store::partitions`]): for every `count`
/// from 1 to 16, [`Partitions::split`] returns between 1 and `count`
/// partitions, which scanned in small pages (resumed from the cursor's text)
/// return only entities of the kind that pass the filter, each entity in
/// exactly one partition (a store whose scan may repeat an entity may repeat
/// it only within its partition), and together every entity. A kind of three
/// entities splits too (fewer partitions than asked are allowed). Entities
/// written and deleted while the partitions are scanned: each one that lives
/// throughout is returned by exactly one partition. Where the store pushes
/// steps down, [`Partitions::update_partition`] over every partition advances
/// each entity exactly once. A store without the facet passes.
pub async fn partitions(store: &dyn Store) -> CheckResult {
    let Some(parts) = store.features().partitions else {
        return Ok(());
    };
    let ns = Namespace::new();
    let kind = ns.kind("parts");
    let small = ns.kind("parts_small");
    let all: Vec<_> = (0..ENTITIES)
        .map(|i| {
            entity(
                &kind,
                i,
                i.rem_euclid(2).unsigned_abs(),
                &[("n", Value::Int(i))],
            )
        })
        .collect();
    put_all(store, &all).await?;
    let expected: BTreeSet<Key> = all.iter().map(|e| e.key.clone()).collect();
    let odd: BTreeSet<Key> = all
        .iter()
        .filter(|e| e.version == 1)
        .map(|e| e.key.clone())
        .collect();
    let ordered = store.features().scan_ordered;

    for count in 1..=16 {
        let split = parts.split(&kind, count).await?;
        check_split(&split, count)?;
        let seen = scan_split(parts, &kind, &split, &Filter::all(), 7, ordered).await?;
        check_cover(&seen, &expected, &format!("a split in {count}"))?;
    }
    // The filter is the scan's.
    let split = parts.split(&kind, 5).await?;
    let seen = scan_split(parts, &kind, &split, &Filter::at_version(1), 11, ordered).await?;
    check_cover(&seen, &odd, "a split in 5, versions 1 only")?;

    // A small kind: any number of partitions, together its three entities.
    let few: Vec<_> = (0..3).map(|i| entity(&small, i, 0, &[])).collect();
    put_all(store, &few).await?;
    let split = parts.split(&small, 16).await?;
    check_split(&split, 16)?;
    let seen = scan_split(parts, &small, &split, &Filter::all(), 2, ordered).await?;
    check_cover(
        &seen,
        &few.iter().map(|e| e.key.clone()).collect(),
        "a kind of 3 split in 16",
    )?;

    written_meanwhile(store, parts, &kind, &expected, ordered).await?;
    if store.features().pushdown.is_some() {
        pushed_down(store, parts, &kind).await?;
    }
    clear_kinds(store, &[&kind, &small]).await
}

/// At least one partition, at most `count`, no two alike.
fn check_split(split: &[Partition], count: usize) -> CheckResult {
    ensure!(
        !split.is_empty() && split.len() <= count,
        "split(_, {count}) returned {} partitions (1 to {count} allowed)",
        split.len()
    );
    let specs: BTreeSet<&str> = split.iter().map(|p| p.spec.as_str()).collect();
    ensure_eq!(
        specs.len(),
        split.len(),
        "split(_, {count}) returned two partitions alike: {split:?}"
    );
    Ok(())
}

/// Every entity seen by exactly one partition, and together `expected`.
fn check_cover(seen: &BTreeMap<Key, usize>, expected: &BTreeSet<Key>, what: &str) -> CheckResult {
    let got: BTreeSet<Key> = seen.keys().cloned().collect();
    let missing: Vec<&Key> = expected.difference(&got).take(5).collect();
    ensure!(
        missing.is_empty(),
        "{what}: the partitions together missed {} entities, e.g. {missing:?}",
        expected.difference(&got).count()
    );
    let extra: Vec<&Key> = got.difference(expected).take(5).collect();
    ensure!(
        extra.is_empty(),
        "{what}: the partitions returned entities that do not pass the filter or do not exist: {extra:?}"
    );
    Ok(())
}

/// Scans every partition of `split` whole, in pages of `limit` (each resumed
/// from its cursor's text, as a worker on another host would): for each
/// entity, the partition that returned it.
///
/// # Errors
/// A [`Failure`] when an entity comes from two partitions, an ordered store
/// repeats one, or an entity of another kind or failing the filter is returned.
async fn scan_split(
    parts: &dyn Partitions,
    kind: &str,
    split: &[Partition],
    filter: &Filter,
    limit: usize,
    ordered: bool,
) -> Result<BTreeMap<Key, usize>, Failure> {
    let mut seen = BTreeMap::new();
    for (i, partition) in split.iter().enumerate() {
        let mut cursor = None;
        let mut pages = 0;
        loop {
            pages += 1;
            ensure!(
                pages < 100_000,
                "partition {} of {kind:?} did not end after 100000 pages",
                partition.label
            );
            let page = parts
                .scan_partition(
                    kind,
                    partition,
                    ScanRequest {
                        filter: filter.clone(),
                        cursor,
                        limit,
                    },
                )
                .await?;
            for e in page.entities {
                ensure_eq!(e.key.kind, kind, "a partition returned another kind");
                ensure!(
                    filter.matches(&e),
                    "partition {} returned {} which does not pass {filter:?}",
                    partition.label,
                    e.key
                );
                match seen.insert(e.key.clone(), i) {
                    Some(j) if j != i => {
                        return Err(Failure::new(format!(
                            "{} is in two partitions: {} and {} (of {})",
                            e.key,
                            split[j].label,
                            partition.label,
                            split.len()
                        )));
                    }
                    Some(_) if ordered => {
                        return Err(Failure::new(format!(
                            "partition {} returned {} twice, on a store whose scans are ordered",
                            partition.label, e.key
                        )));
                    }
                    _ => {}
                }
            }
            // Through text, as a checkpoint keeps it.
            cursor = page.cursor.map(|c| Cursor(c.0.as_str().to_owned()));
            if cursor.is_none() {
                break;
            }
        }
    }
    Ok(seen)
}

/// A split in 4, scanned page by page in turns (one page of each partition
/// in turn), while every turn deletes entities and writes new ones: each
/// entity that lived throughout is returned by exactly one partition.
async fn written_meanwhile(
    store: &dyn Store,
    parts: &dyn Partitions,
    kind: &str,
    expected: &BTreeSet<Key>,
    ordered: bool,
) -> CheckResult {
    let split = parts.split(kind, 4).await?;
    let mut cursors: Vec<Option<Option<Cursor>>> = vec![Some(None); split.len()];
    let mut seen: BTreeMap<Key, usize> = BTreeMap::new();
    let mut deleted = BTreeSet::new();
    let mut added = BTreeSet::new();
    let mut turn = 0i64;
    while cursors.iter().any(Option::is_some) {
        turn += 1;
        ensure!(
            turn < 100_000,
            "the partitions did not end after 100000 turns"
        );
        // Each turn deletes one entity and adds one.
        let victim = Key::new(kind, (turn * 37) % ENTITIES)
            .map_err(|e| Failure::new(format!("a key: {e}")))?;
        let newcomer = entity(kind, 1_000_000 + turn, 0, &[]);
        added.insert(newcomer.key.clone());
        deleted.insert(victim.clone());
        store
            .write_batch(vec![Write::Delete(victim), Write::Put(newcomer)])
            .await?;
        for (i, partition) in split.iter().enumerate() {
            let Some(cursor) = cursors[i].take() else {
                continue;
            };
            let page = parts
                .scan_partition(
                    kind,
                    partition,
                    ScanRequest {
                        filter: Filter::all(),
                        cursor,
                        limit: 5,
                    },
                )
                .await?;
            for e in page.entities {
                ensure_eq!(e.key.kind, kind, "a partition returned another kind");
                match seen.insert(e.key.clone(), i) {
                    Some(j) if j != i => {
                        return Err(Failure::new(format!(
                            "{} is in two partitions while entities were written: {} and {}",
                            e.key, split[j].label, partition.label
                        )));
                    }
                    Some(_) if ordered => {
                        return Err(Failure::new(format!(
                            "partition {} returned {} twice, on a store whose scans are ordered",
                            partition.label, e.key
                        )));
                    }
                    _ => {}
                }
            }
            cursors[i] = page.cursor.map(Some);
        }
    }
    let live: BTreeSet<Key> = expected.difference(&deleted).cloned().collect();
    let missing: Vec<&Key> = live.iter().filter(|k| !seen.contains_key(*k)).collect();
    ensure!(
        missing.is_empty(),
        "entities that lived throughout the scan were missed by every partition: {} of {}, e.g. {:?}",
        missing.len(),
        live.len(),
        missing.iter().take(5).collect::<Vec<_>>()
    );
    let stray: Vec<&Key> = seen
        .keys()
        .filter(|k| !expected.contains(*k) && !added.contains(*k))
        .take(5)
        .collect();
    ensure!(
        stray.is_empty(),
        "the partitions returned entities never written: {stray:?}"
    );
    // Put the deleted ones back for the next checks.
    let back: Vec<_> = deleted
        .iter()
        .filter_map(|k| match &k.id {
            Value::Int(i) => Some(entity(
                kind,
                *i,
                i.rem_euclid(2).unsigned_abs(),
                &[("n", Value::Int(*i))],
            )),
            _ => None,
        })
        .collect();
    put_all(store, &back).await?;
    let adds: Vec<Write> = added.into_iter().map(Write::Delete).collect();
    store.write_batch(adds).await?;
    Ok(())
}

/// [`Partitions::update_partition`] over every partition of a split in 3,
/// in batches of 8: every entity at version 0 advances exactly once, with
/// the step's change, and the counts add up.
async fn pushed_down(store: &dyn Store, parts: &dyn Partitions, kind: &str) -> CheckResult {
    let split = parts.split(kind, 3).await?;
    let at_zero: BTreeSet<Key> = (0..ENTITIES)
        .filter(|i| i % 2 == 0)
        .filter_map(|i| Key::new(kind, i).ok())
        .collect();
    let mut advanced = 0u64;
    for partition in &split {
        let mut cursor = None;
        for pages in 0.. {
            ensure!(pages < 100_000, "update_partition did not end");
            let page = parts
                .update_partition(
                    partition,
                    PushdownRequest {
                        kind: kind.to_owned(),
                        from: 0,
                        steps: vec![PushStep {
                            conditions: vec![],
                            op: PushOp::Set {
                                path: vec!["pushed".to_owned()],
                                value: Value::Bool(true),
                            },
                        }],
                        cursor,
                        limit: 8,
                    },
                )
                .await?;
            advanced += page.advanced;
            cursor = page.cursor.map(|c| Cursor(c.0.as_str().to_owned()));
            if cursor.is_none() {
                break;
            }
        }
    }
    ensure_eq!(
        advanced,
        at_zero.len() as u64,
        "update_partition over the partitions of a split must advance each entity once"
    );
    for key in &at_zero {
        let got = store
            .get(key)
            .await?
            .ok_or_else(|| Failure::new(format!("{key} vanished")))?;
        ensure!(
            got.version == 1 && got.value.get("pushed") == Some(&Value::Bool(true)),
            "{key} was not advanced by update_partition: {got:?}"
        );
    }
    Ok(())
}
