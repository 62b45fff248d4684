//! The advisor's store side on an in-memory store: the recommended schema and the baseline give
//! the same answers, the scratch kinds are removed, calibration fits and cleans up.

mod common;

use common::example;
use tern_advisor::Options;
use tern_advisor::advise::prepare;
use tern_advisor_exec::calibrate::{CALIBRATION_KIND, calibrate};
use tern_advisor_exec::{Written, compare_on};
use tern_core::migrate::CancelFlag;
use tern_core::store::memory::MemoryStore;
use tern_core::store::{Filter, Store};

async fn kinds_left(store: &MemoryStore, prefix: &str) -> Vec<String> {
    let kinds = store.kinds().await.unwrap_or_else(|e| panic!("{e}"));
    let mut left = Vec::new();
    for k in kinds.into_iter().filter(|k| k.starts_with(prefix)) {
        if store.count(&k, Filter::all()).await.unwrap_or(0) > 0 {
            left.push(k);
        }
    }
    left
}

#[tokio::test]
async fn both_schemas_answer_alike_and_the_scratch_kinds_go() {
    if !tern_advisor::solver::AVAILABLE {
        println!("skipped: tern-advisor was built without CBC");
        return;
    }
    let (model, workload) = example("eac");
    let opts = Options::default();
    let prepared = prepare(&model, &workload, &opts).unwrap_or_else(|e| panic!("{e}"));
    let rec = prepared.recommend(&opts).unwrap_or_else(|e| panic!("{e}"));
    let store = MemoryStore::new();
    let mut written = Written::default();
    let c = compare_on(
        &store,
        "t_exec",
        &model,
        &prepared,
        &rec,
        &opts,
        200,
        2,
        &CancelFlag::new(),
        &mut written,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .unwrap_or_else(|| panic!("not cancelled"));
    assert!(!written.is_empty());
    assert_eq!(c.queries.len(), rec.queries.len());
    let mut answered = 0;
    for (i, (name, _)) in c.queries.iter().enumerate() {
        let (r, b) = (c.recommended.per_query[i], c.baseline.per_query[i]);
        let (Some((_, rr)), Some((_, br))) = (r, b) else {
            panic!("{name}: no plan in one schema: {r:?} {b:?}");
        };
        assert!((rr - br).abs() < 1e-9, "{name}: {rr} rows vs {br}");
        answered += usize::from(rr > 0.0);
    }
    assert!(answered > 0, "no query returned a row: {c:?}");
    assert!(!kinds_left(&store, "t_exec").await.is_empty());
    let n = written
        .remove(&store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    assert_eq!(kinds_left(&store, "t_exec").await, Vec::<String>::new());
}

/// `--execute` runs the updates too: on both schemas each update's support queries and writes,
/// after the queries; the rows it writes are real (read back by the queries run again after them,
/// which both schemas answer alike), and the scratch kinds still go.
#[tokio::test]
async fn updates_run_on_both_schemas_and_keep_them_answering_alike() {
    if !tern_advisor::solver::AVAILABLE {
        println!("skipped: tern-advisor was built without CBC");
        return;
    }
    for name in ["eac", "hotel"] {
        let (model, workload) = example(name);
        let opts = Options::default();
        let prepared = prepare(&model, &workload, &opts).unwrap_or_else(|e| panic!("{e}"));
        let rec = prepared.recommend(&opts).unwrap_or_else(|e| panic!("{e}"));
        let store = MemoryStore::new();
        let mut written = Written::default();
        let tag = format!("t_upd_{name}");
        let c = compare_on(
            &store,
            &tag,
            &model,
            &prepared,
            &rec,
            &opts,
            300,
            4,
            &CancelFlag::new(),
            &mut written,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("not cancelled"));
        let report = tern_advisor_exec::render_comparison("memory:", 4, 300, &c);
        assert_eq!(c.updates.len(), rec.updates.len(), "{report}");
        assert!(!c.updates.is_empty(), "{name} has updates");
        let mut wrote = 0.0;
        for (i, (u, _)) in c.updates.iter().enumerate() {
            // The recommendation maintains every update it was advised for.
            let Some((ms, rows)) = c.recommended_updates.per_query[i] else {
                panic!("{name}: {u} not run on the recommended schema\n{report}");
            };
            assert!(ms >= 0.0);
            wrote += rows;
        }
        assert!(wrote > 0.0, "{name}: no update wrote a row\n{report}");
        assert!(c.differ_after.is_empty(), "{name}\n{report}");
        assert!(
            report.contains("-- weighted mean per statement, queries and updates: recommended "),
            "{report}"
        );
        written
            .remove(&store)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            kinds_left(&store, &tag).await,
            Vec::<String>::new(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn calibration_fits_non_negative_constants_and_removes_its_kind() {
    let store = MemoryStore::new();
    let base = tern_advisor::cost::CostModel::default();
    let (fitted, measured) = calibrate(&store, &base)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(measured.gets.len(), 12);
    for c in [
        fitted.request,
        fitted.partition,
        fitted.row,
        fitted.insert,
        fitted.delete,
        fitted.sort,
    ] {
        assert!(c.is_finite() && c >= 0.0, "{fitted:?}");
    }
    assert_eq!(
        store
            .count(CALIBRATION_KIND, Filter::all())
            .await
            .unwrap_or(1),
        0
    );
}
