//! Checks of [`Store::rename_kind`].

use std::collections::BTreeSet;

use super::{
    CheckResult, Failure, Namespace, by_key, clear_kinds, ensure, ensure_eq, entity, put_all,
    scan_all,
};
use crate::intercept::Forward as _;
use tern_core::model::{Key, Value};
use tern_core::store::{Cursor, Filter, RenameKindRequest, Store};

/// Without [`Features::kind_rename`](tern_core::store::Features::kind_rename),
/// [`Store::rename_kind`] answers `Unsupported`. With it: `limit: 0` writes
/// nothing; a pass in batches (cursors resumed from their serialized form)
/// moves every entity of the old kind to the new one with the same id, version
/// and value, reporting each exact count; an entity whose id the new kind
/// already holds stays where it is, the new kind's entity is not overwritten,
/// and it is reported as a collision (again by a second pass, which moves nothing).
pub async fn rename_kind(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let (from, to) = (ns.kind("rename_from"), ns.kind("rename_to"));
    let request = |cursor: Option<Cursor>, limit: usize| RenameKindRequest {
        from: from.clone(),
        to: to.clone(),
        cursor,
        limit,
    };
    if store.features().kind_rename.is_none() {
        // Nothing to check: the store has no kind-rename code to call.
        return Ok(());
    }

    let old: Vec<_> = (0..11i64)
        .map(|i| {
            entity(
                &from,
                i,
                (i % 3) as u64,
                &[("i", Value::Int(i)), ("s", Value::from(format!("v{i}")))],
            )
        })
        .collect();
    let squatter = entity(&to, 3, 7, &[("mine", Value::Bool(true))]);
    put_all(store, &old).await?;
    put_all(store, std::slice::from_ref(&squatter)).await?;

    let checked = store.rename_kind(request(None, 0)).await?;
    ensure!(
        checked.renamed == 0 && checked.collisions.is_empty() && checked.cursor.is_none(),
        "limit 0 must only check the request, got {checked:?}"
    );
    ensure_eq!(
        scan_all(store, &from, &Filter::all(), 50).await?.len(),
        old.len(),
        "entities of the old kind after a limit-0 call"
    );

    let (renamed, collisions) = rename_pass(store, &request, 3).await?;
    let kept = Key {
        kind: from.clone(),
        id: Value::Int(3),
    };
    ensure_eq!(renamed, 10, "entities renamed by a pass");
    ensure_eq!(
        collisions,
        BTreeSet::from([kept.clone()]),
        "collisions reported by a pass"
    );

    let mut want_new = by_key(
        &old.iter()
            .filter(|e| e.key.id != Value::Int(3))
            .map(|e| {
                let mut e = e.clone();
                e.key.kind = to.clone();
                e
            })
            .collect::<Vec<_>>(),
    );
    want_new.insert(squatter.key.clone(), squatter.clone());
    ensure_eq!(
        scan_all(store, &to, &Filter::all(), 50).await?,
        want_new,
        "the new kind after the rename (its own entity untouched)"
    );
    let want_old = by_key(
        &old.iter()
            .filter(|e| e.key == kept)
            .cloned()
            .collect::<Vec<_>>(),
    );
    ensure_eq!(
        scan_all(store, &from, &Filter::all(), 50).await?,
        want_old,
        "the old kind after the rename (only the collision left)"
    );

    // A whole pass (a page of a store's own scan, e.g. Redis SCAN over a
    // busy database, may hold none of the kind's keys and still go on).
    let (again, collisions) = rename_pass(store, &request, 50).await?;
    ensure!(
        again == 0 && collisions == BTreeSet::from([kept.clone()]),
        "a second pass must move nothing and report the collision again, got {again} renamed, \
         collisions {collisions:?}"
    );
    clear_kinds(store, &[&from, &to]).await
}

/// One whole rename pass in batches of `limit`, each cursor resumed from its
/// serialized form as a checkpoint keeps it: the entities renamed and the
/// collisions reported.
async fn rename_pass(
    store: &dyn Store,
    request: &impl Fn(Option<Cursor>, usize) -> RenameKindRequest,
    limit: usize,
) -> Result<(u64, BTreeSet<Key>), Failure> {
    let mut renamed = 0;
    let mut collisions = BTreeSet::new();
    let mut cursor: Option<Cursor> = None;
    for round in 0.. {
        ensure!(
            round < 100_000,
            "a rename pass did not end after 100,000 batches"
        );
        let page = store.rename_kind(request(cursor.take(), limit)).await?;
        ensure!(
            page.renamed <= limit as u64,
            "a batch of limit {limit} renamed {}",
            page.renamed
        );
        renamed += page.renamed;
        collisions.extend(page.collisions);
        match page.cursor {
            Some(c) => {
                let text = serde_json::to_string(&c).map_err(|e| Failure::new(e.to_string()))?;
                cursor =
                    Some(serde_json::from_str(&text).map_err(|e| Failure::new(e.to_string()))?);
            }
            None => break,
        }
    }
    Ok((renamed, collisions))
}
