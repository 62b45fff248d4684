//! Checks of a batch written with a metadata document ([`Store::write_batch_with_meta`]).

use std::sync::Arc;

use super::{CheckResult, Failure, Namespace, clear_kinds, ensure, ensure_eq, entity, put_all};
use tern_core::model::{Entity, Value};
use tern_core::store::{
    BatchMetaOutcome, Error, ErrorKind, MetaCas, MetaChange, MetaUpdate, MetaValueFn, Store,
    StoreExt, Write, WriteOutcome,
};

/// A document that records which writes applied: `{"applied":[true,false,...]}`.
fn record_outcomes() -> MetaValueFn {
    Arc::new(|outcomes: &[WriteOutcome]| {
        let applied: Vec<bool> = outcomes
            .iter()
            .map(|o| *o == WriteOutcome::Applied)
            .collect();
        Ok(serde_json::json!({ "applied": applied }).to_string())
    })
}

fn same_json(a: &str, b: &serde_json::Value) -> bool {
    serde_json::from_str::<serde_json::Value>(a).is_ok_and(|a| a == *b)
}

/// The entity stored under `e`'s key, compared with what is expected there.
async fn stored_is(
    store: &dyn Store,
    e: &Entity,
    want: Option<&Entity>,
    what: &str,
) -> CheckResult {
    ensure_eq!(store.get(&e.key).await?.as_ref(), want, "{what}");
    Ok(())
}

/// The writes get the outcomes [`Store::write_batch`] would give, and the
/// document is written from exactly those outcomes with the next revision.
/// With a stale revision the document is not written and, where the store
/// says the call is atomic ([`AtomicBatchWithMeta`](tern_core::store::AtomicBatchWithMeta)), neither is
/// any entity; otherwise the `Conflict` says whether the writes were applied,
/// and they were or were not accordingly. A failing document function fails
/// the call, and an atomic store then writes nothing.
pub async fn batch_with_meta(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new();
    let kind = ns.kind("batch_meta");
    let name = ns.meta("checkpoint");
    let atomic = store.features().atomic_batch_with_meta.is_some();
    let a = entity(&kind, 1, 0, &[("x", Value::Int(1))]);
    let b = entity(&kind, 2, 0, &[("x", Value::Int(2))]);
    put_all(store, &[a.clone(), b.clone()]).await?;
    ensure_eq!(
        store
            .meta_cas(&name, MetaChange::create(r#"{"applied":[]}"#))
            .await?,
        MetaCas::Applied(1),
        "create the document"
    );

    // One write of each outcome.
    let a1 = entity(&kind, 1, 1, &[("x", Value::Int(10))]);
    let stale_b = entity(&kind, 2, 7, &[("x", Value::Int(2))]);
    let c = entity(&kind, 3, 0, &[("x", Value::Int(3))]);
    let writes = vec![
        Write::Replace {
            expected: a.clone(),
            new: a1.clone(),
        },
        Write::Replace {
            expected: stale_b,
            new: entity(&kind, 2, 8, &[("x", Value::Int(20))]),
        },
        Write::Insert(b.clone()),
        Write::Put(c.clone()),
    ];
    let out = store
        .write_checked_with_meta(
            writes,
            MetaUpdate {
                name: name.clone(),
                expected: Some(1),
                value: record_outcomes(),
            },
        )
        .await?;
    use WriteOutcome::{Applied, Conflict};
    ensure_eq!(
        out,
        BatchMetaOutcome::Applied {
            writes: vec![Applied, Conflict, Conflict, Applied],
            revision: 2,
        },
        "a batch with its document"
    );
    let doc = store
        .meta_get(&name)
        .await?
        .ok_or_else(|| Failure::new("the document is missing after the batch"))?;
    ensure!(
        doc.revision == 2
            && same_json(
                &doc.value,
                &serde_json::json!({ "applied": [true, false, false, true] })
            ),
        "the document written from the outcomes: {doc:?}"
    );
    stored_is(store, &a, Some(&a1), "the applied replace").await?;
    stored_is(store, &b, Some(&b), "the conflicting replace and insert").await?;
    stored_is(store, &c, Some(&c), "the put").await?;

    // Fenced: the document moved on (revision 2, not 1).
    let a2 = entity(&kind, 1, 2, &[("x", Value::Int(100))]);
    let d = entity(&kind, 4, 0, &[("x", Value::Int(4))]);
    let fenced = store
        .write_checked_with_meta(
            vec![
                Write::Replace {
                    expected: a1.clone(),
                    new: a2.clone(),
                },
                Write::Put(d.clone()),
            ],
            MetaUpdate {
                name: name.clone(),
                expected: Some(1),
                value: record_outcomes(),
            },
        )
        .await?;
    let BatchMetaOutcome::Conflict { current, writes } = fenced else {
        return Err(Failure::new(format!(
            "a stale revision must conflict, got {fenced:?}"
        )));
    };
    ensure!(
        current.as_ref().is_some_and(|e| e.revision == 2),
        "the conflict shows the current document: {current:?}"
    );
    match writes {
        None => {
            stored_is(store, &a, Some(&a1), "a fenced batch (none applied)").await?;
            stored_is(store, &d, None, "a fenced batch (none applied)").await?;
        }
        Some(outcomes) => {
            ensure!(
                !atomic,
                "the store says the call is atomic, but a fenced batch was applied: {outcomes:?}"
            );
            ensure_eq!(outcomes, vec![Applied, Applied], "a fenced batch's writes");
            stored_is(store, &a, Some(&a2), "a fenced batch (applied)").await?;
            stored_is(store, &d, Some(&d), "a fenced batch (applied)").await?;
        }
    }

    // A document that cannot be made fails the call.
    let e = entity(&kind, 5, 0, &[("x", Value::Int(5))]);
    let failing: MetaValueFn = Arc::new(|_: &[WriteOutcome]| {
        Err(Error::new(ErrorKind::Unexpected, "refused by the check"))
    });
    let failed = store
        .write_checked_with_meta(
            vec![Write::Put(e.clone())],
            MetaUpdate {
                name: name.clone(),
                expected: Some(2),
                value: failing,
            },
        )
        .await;
    ensure!(
        failed.is_err(),
        "a failing document function must fail the call: {failed:?}"
    );
    if atomic {
        stored_is(store, &e, None, "an atomic batch whose document failed").await?;
    }
    let doc = store.meta_get(&name).await?;
    ensure!(
        doc.as_ref().is_some_and(|d| d.revision == 2),
        "the document after a fenced and a failed call: {doc:?}"
    );

    clear_kinds(store, &[&kind]).await?;
    ensure_eq!(
        store.meta_cas(&name, MetaChange::delete(2)).await?,
        MetaCas::Applied(0),
        "cleanup"
    );
    Ok(())
}
