//! The fast solving strategy (pruning, components, one weighted solve) against the program solved
//! as formulated in two stages: same cost, same number of column families, same space (the one
//! weighted solve alone: within 1 % on these cases; with the space stage: the same).

mod common;

use tern_advisor::advise::prepare;
use tern_advisor::bip::Var;
use tern_advisor::solver::{Strategy, WINDOW, solve_with};
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
        Strategy {
            exact_space: true,
            ..Strategy::default()
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
        // The one weighted solve alone does not break space ties (its space term is below CBC's
        // tolerances; measured 0.8 % more space than the exact answer on WS 1x, 1.4 % on WS 2x);
        // with the space stage, and the two-stage strategies, exactly.
        let space_tolerance = if strategy.one_solve && !strategy.exact_space {
            0.01
        } else {
            WINDOW
        };
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

/// The reported costs are the program's objective at the solved schema: the query cost is the
/// weighted cost of the queries' plan steps the solver chose, the update cost the weighted cost of
/// the chosen support-plan steps plus the chosen column families' write costs, the total their sum
/// and the solver's `cost` (CBC's own log shows each component's objective separately, with the
/// `ε·(count + space)` term of the one weighted solve, so it differs: WS 3x logs 725.65 for its main
/// component against a total of 743.78).
#[test]
fn the_reported_costs_are_the_programs_objective() {
    let s = generate(1, 42);
    let ws = common::model(&s.model);
    let ws_w = common::workload(&ws, &s.workload);
    let (eac, eac_w) = common::example("eac");
    let (hotel, hotel_w) = common::example("hotel");
    for (name, m, w) in [
        ("eac", &eac, &eac_w),
        ("hotel", &hotel, &hotel_w),
        ("ws1x", &ws, &ws_w),
    ] {
        let opts = Options::default();
        let p = prepare(m, w, &opts).unwrap_or_else(|e| panic!("{e}"));
        let f = p.formulate(&opts);
        let solved = solve_with(&f, None, Strategy::default()).unwrap_or_else(|e| panic!("{e}"));
        let (mut queries, mut rest) = (0.0, 0.0);
        for (i, v) in f.vars.iter().enumerate() {
            let c = f.cost[i] * solved.x[i];
            match v {
                Var::Step(k, _) if *k < p.queries.len() => queries += c,
                _ => rest += c,
            }
        }
        let chosen = f.chosen(&solved.x);
        let rec = p
            .read_off(&chosen, &opts, f.vars.len(), f.constraints.len())
            .unwrap_or_else(|e| panic!("{e}"));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        assert!(rest > 0.0, "{name}: the workload has updates");
        assert!(close(queries + rest, solved.cost), "{name}: objective");
        assert!(close(rec.query_cost, queries), "{name}: query cost");
        assert!(close(rec.update_cost, rest), "{name}: update cost");
        assert!(close(rec.total_cost, solved.cost), "{name}: total");
        // And `recommend` reports the cost of the schema it solves for.
        let r = p.recommend(&opts).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            (r.total_cost - solved.cost).abs() <= WINDOW * solved.cost,
            "{name}: recommend"
        );
    }
}
