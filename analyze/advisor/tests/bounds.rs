//! The enumeration's work bound: without a time limit a long query's enumeration stops widening
//! at it (with a note), every query keeps a plan, and the bound is the only thing that changes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use tern_advisor::advise::prepare;
use tern_advisor::synthetic::chain;
use tern_advisor::{Options, advise};

#[test]
fn a_long_chain_stops_at_the_work_bound_with_a_note_and_keeps_a_plan() {
    let s = chain(120);
    let m = common::model(&s.model);
    let w = common::workload(&m, &s.workload);
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
        let s = chain(12);
        let m = common::model(&s.model);
        let w = common::workload(&m, &s.workload);
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
