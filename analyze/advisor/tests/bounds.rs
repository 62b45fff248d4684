//! The enumeration's work bound: without a time limit a long query's enumeration stops widening
//! at it (with a note), every query keeps a plan, and the bound is the only thing that changes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use tern_advisor::advise::prepare;
use tern_advisor::{Options, advise};

/// A chain of `n` entities and one query along all of it.
fn chain(n: usize) -> (String, String) {
    let mut model = String::new();
    for i in 0..n {
        model.push_str(&format!(
            "entity E{i} 1000\n  id E{i}Id\n  field E{i}F string 20 distinct 10\n"
        ));
    }
    for i in 1..n {
        model.push_str(&format!("fk E{i}.Up -> E{}.Down\n", i - 1));
    }
    let path: Vec<&str> = std::iter::once("E0")
        .chain(std::iter::repeat_n("Down", n - 1))
        .collect();
    let workload = format!(
        "Q: SELECT E{}.E{}F FROM {} WHERE E0.E0F = ?x;\n",
        n - 1,
        n - 1,
        path.join(".")
    );
    (model, workload)
}

#[test]
fn a_long_chain_stops_at_the_work_bound_with_a_note_and_keeps_a_plan() {
    let (m, w) = chain(120);
    let m = common::model(&m);
    let w = common::workload(&m, &w);
    let opts = Options {
        enumeration_limit: Some(30_000),
        ..Options::default()
    };
    let p = prepare(&m, &w, &opts).unwrap();
    assert!(
        p.notes
            .iter()
            .any(|n| n.starts_with("the enumeration stopped widening at its bound (30000 units")),
        "{:?}",
        p.notes
    );
    // The unbounded enumeration of this chain has about 7,400 candidates (one per sub-path).
    assert!(p.pool.len() < 2_000, "{} candidates", p.pool.len());
    let rec = p.recommend(&opts).unwrap();
    assert_eq!(rec.queries.len(), 1);
    assert!(!rec.queries[0].steps.is_empty());
    assert!(rec.notes.iter().any(|n| n.contains("its bound")));
}

#[test]
fn below_the_bound_nothing_changes() {
    // The examples and a short chain stay far below the default bound: the same advice as
    // without any bound, and no note.
    for (m, w) in [common::example("hotel"), {
        let (m, w) = chain(12);
        let m = common::model(&m);
        let w = common::workload(&m, &w);
        (m, w)
    }] {
        let bounded = advise(&m, &w, &Options::default()).unwrap();
        let free = advise(
            &m,
            &w,
            &Options {
                enumeration_limit: None,
                ..Options::default()
            },
        )
        .unwrap();
        assert!(bounded.notes.is_empty(), "{:?}", bounded.notes);
        assert_eq!(bounded.candidates, free.candidates);
        assert!((bounded.total_cost - free.total_cost).abs() < 1e-9);
    }
}
