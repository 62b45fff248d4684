//! The fast solving strategy (pruning, components, one weighted solve) against the program solved
//! as formulated in two stages: same cost, same number of column families, same space (the one
//! weighted solve: within 1 %).

mod common;

use tern_advisor::advise::prepare;
use tern_advisor::solver::{Strategy, WINDOW};
use tern_advisor::synthetic::generate;
use tern_advisor::{Model, Options, Recommendation, Workload};

fn recommend(m: &Model, w: &Workload, strategy: Strategy) -> Recommendation {
    let opts = Options {
        strategy,
        ..Options::default()
    };
    prepare(m, w, &opts)
        .and_then(|p| p.recommend(&opts))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn assert_same(name: &str, m: &Model, w: &Workload) {
    let plain = recommend(m, w, Strategy::plain());
    for strategy in [
        Strategy::default(),
        Strategy {
            prune: true,
            ..Strategy::plain()
        },
        Strategy {
            split: true,
            ..Strategy::plain()
        },
    ] {
        let fast = recommend(m, w, strategy);
        let close = |a: f64, b: f64| (a - b).abs() <= WINDOW * a.abs().max(b.abs()).max(1.0);
        assert!(
            close(fast.total_cost, plain.total_cost),
            "{name} {strategy:?}: cost {} vs {}",
            fast.total_cost,
            plain.total_cost
        );
        assert_eq!(
            fast.column_families.len(),
            plain.column_families.len(),
            "{name} {strategy:?}: column families"
        );
        // The one weighted solve breaks space ties only as far as CBC's tolerances see them
        // (measured: 0.4 % more space on WS 1x); the two-stage strategies exactly.
        let space_tolerance = if strategy.one_solve { 0.01 } else { WINDOW };
        assert!(
            (fast.total_size_bytes - plain.total_size_bytes).abs()
                <= space_tolerance * plain.total_size_bytes,
            "{name} {strategy:?}: size {} vs {}",
            fast.total_size_bytes,
            plain.total_size_bytes
        );
        assert!(fast.optimal);
    }
}

#[test]
fn the_fast_strategy_matches_the_two_stage_solve_on_the_examples() {
    for name in ["eac", "hotel"] {
        let (m, w) = common::example(name);
        assert_same(name, &m, &w);
    }
}

#[test]
fn the_fast_strategy_matches_the_two_stage_solve_on_watts_strogatz_1x() {
    let s = generate(1, 42);
    let m = common::model(&s.model);
    let w = common::workload(&m, &s.workload);
    assert_same("ws1x", &m, &w);
}

#[test]
fn dominated_candidates_are_found_and_independent_queries_split() {
    let (m, w) = common::example("eac");
    let opts = Options::default();
    let p = prepare(&m, &w, &opts).unwrap_or_else(|e| panic!("{e}"));
    let f = p.formulate(&opts);
    let dominated = f.dominated();
    assert!(!dominated.is_empty(), "EAC has dominated candidates");
    // A dominated column family is never recommended.
    let rec = p.recommend(&opts).unwrap_or_else(|e| panic!("{e}"));
    for cf in &rec.column_families {
        let j = p.pool.find(&cf.definition).unwrap_or(usize::MAX);
        assert!(!dominated.contains(&j), "{} is dominated", cf.name);
    }

    // Two entities with no relationship: their queries share no candidate.
    let m = common::model(
        "entity A 100\n  id AId\n  field AX int\nentity B 100\n  id BId\n  field BX int\n",
    );
    let w = common::workload(
        &m,
        "QA: SELECT A.AId FROM A WHERE A.AX = ?;\nQB: SELECT B.BId FROM B WHERE B.BX = ?;\n",
    );
    let p = prepare(&m, &w, &opts).unwrap_or_else(|e| panic!("{e}"));
    let f = p.formulate(&opts);
    assert!(f.components().len() >= 2, "{:?}", f.components().len());
    let rec = p.recommend(&opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rec.queries.len(), 2);
}
