//! Checks of the metadata space.

use super::{CheckResult, Failure, Namespace, clear_kinds, ensure, ensure_eq, entity, scan_all};
use tern_core::model::Value;
use tern_core::store::{Filter, MetaCas, MetaChange, MetaEntry, Store, StoreExt};

/// Compares JSON texts as JSON: a store may keep a document in its own form.
fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The revision and JSON of an entry, or a failure.
/// Deletes the metadata document `name` at revision 1 (`what` names the step
/// in a failure).
async fn delete_at_1(store: &dyn Store, name: &str, what: &str) -> CheckResult {
    ensure_eq!(
        store.meta_cas(name, MetaChange::delete(1)).await?,
        MetaCas::Applied(0),
        "{what}"
    );
    Ok(())
}

fn entry_of(entry: Option<MetaEntry>, what: &str) -> Result<MetaEntry, Failure> {
    entry.ok_or_else(|| Failure::new(format!("{what}: the document is missing")))
}

/// Compare-and-set on revisions: create with `expected: None`, conflict on a
/// wrong revision (returning the current entry), revisions count up from 1,
/// delete with the right revision.
pub async fn metadata_cas(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let name = ns.meta("doc");
    let v1 = r#"{"state":"running","n":1,"text":"héllo"}"#;
    let v2 = r#"{"state":"done","n":2}"#;

    ensure_eq!(
        store.meta_get(&name).await?,
        None,
        "a document never written"
    );
    ensure_eq!(
        store.meta_cas(&name, MetaChange::create(v1)).await?,
        MetaCas::Applied(1),
        "create"
    );
    let got = entry_of(store.meta_get(&name).await?, "get after create")?;
    ensure!(
        got.revision == 1 && same_json(&got.value, v1),
        "get after create: {got:?}"
    );

    for (expected, what) in [
        (None, "create of an existing document"),
        (Some(5), "write with a wrong revision"),
    ] {
        match store
            .meta_cas(
                &name,
                MetaChange {
                    expected,
                    value: Some(v2),
                },
            )
            .await?
        {
            MetaCas::Conflict(Some(current)) => {
                ensure!(
                    current.revision == 1 && same_json(&current.value, v1),
                    "{what}: conflict shows {current:?}"
                )
            }
            other => {
                return Err(Failure::new(format!(
                    "{what}: expected a conflict with the current entry, got {other:?}"
                )));
            }
        }
    }
    ensure_eq!(
        store.meta_cas(&name, MetaChange::replace(1, v2)).await?,
        MetaCas::Applied(2),
        "write with the right revision"
    );
    let got = entry_of(store.meta_get(&name).await?, "get after update")?;
    ensure!(
        got.revision == 2 && same_json(&got.value, v2),
        "get after update: {got:?}"
    );
    ensure_eq!(
        store.meta_cas(&name, MetaChange::replace(2, v2)).await?,
        MetaCas::Applied(3),
        "a write of the same value"
    );

    ensure!(
        matches!(
            store.meta_cas(&name, MetaChange::delete(2)).await?,
            MetaCas::Conflict(Some(_))
        ),
        "a delete with a stale revision must conflict"
    );
    ensure_eq!(
        store.meta_cas(&name, MetaChange::delete(3)).await?,
        MetaCas::Applied(0),
        "delete with the right revision"
    );
    ensure_eq!(store.meta_get(&name).await?, None, "get after delete");
    ensure_eq!(
        store.meta_cas(&name, MetaChange::replace(3, v1)).await?,
        MetaCas::Conflict(None),
        "a write expecting a revision of a missing document"
    );
    ensure_eq!(
        store.meta_cas(&name, MetaChange::create(v1)).await?,
        MetaCas::Applied(1),
        "create again after delete"
    );
    delete_at_1(store, &name, "cleanup").await
}

/// [`Store::meta_list`] lists the names with a prefix, sorted, and no others.
pub async fn metadata_list(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let names = ["p/b", "p/a", "p/c/d", "q/a", "p"].map(|n| ns.meta(n));
    for name in &names {
        ensure_eq!(
            store.meta_cas(name, MetaChange::create("{}")).await?,
            MetaCas::Applied(1),
            "create {name}"
        );
    }
    let want_p: Vec<String> = ["p/a", "p/b", "p/c/d"].map(|n| ns.meta(n)).to_vec();
    ensure_eq!(
        store.meta_list(&ns.meta("p/")).await?,
        want_p,
        "list by prefix"
    );
    let mut all = names.to_vec();
    all.sort();
    ensure_eq!(
        store.meta_list(&ns.meta("")).await?,
        all,
        "list the whole namespace"
    );
    ensure_eq!(
        store.meta_list(&ns.meta("z")).await?,
        Vec::<String>::new(),
        "list a prefix without documents"
    );
    let everything = store.meta_list("").await?;
    ensure!(
        everything.windows(2).all(|w| w[0] < w[1]),
        "meta_list(\"\") must be sorted: {everything:?}"
    );
    ensure!(
        names.iter().all(|n| everything.contains(n)),
        "meta_list(\"\") lacks a document"
    );
    for name in &names {
        delete_at_1(store, name, &format!("delete {name}")).await?;
    }
    ensure_eq!(
        store.meta_list(&ns.meta("")).await?,
        Vec::<String>::new(),
        "list after deleting all"
    );
    Ok(())
}

/// Metadata never shows up as a kind, and an entity kind with a metadata
/// document's name does not touch the document.
pub async fn metadata_not_kinds(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let name = ns.kind("meta_like");
    ensure_eq!(
        store
            .meta_cas(&name, MetaChange::create(r#"{"x":1}"#))
            .await?,
        MetaCas::Applied(1),
        "create"
    );
    ensure!(
        !store.kinds().await?.contains(&name),
        "kinds() lists a metadata document"
    );
    ensure!(
        scan_all(store, &name, &Filter::all(), 10).await?.is_empty(),
        "a scan returned a metadata document"
    );

    store
        .put(entity(&name, "1", 0, &[("y", Value::Int(2))]))
        .await?;
    let doc = entry_of(
        store.meta_get(&name).await?,
        "get after an entity of the same name was written",
    )?;
    ensure!(
        doc.revision == 1 && same_json(&doc.value, r#"{"x":1}"#),
        "the document changed: {doc:?}"
    );
    clear_kinds(store, &[&name]).await?;
    ensure!(
        store.meta_get(&name).await?.is_some(),
        "deleting entities deleted a metadata document"
    );
    delete_at_1(store, &name, "cleanup").await
}
