//! Exact small cases: cardinality estimates, the username workload, monotonicity under updates,
//! and the space budget.

mod common;

use std::collections::BTreeSet;

use proptest::prelude::*;
use tern_advisor::graph::{QueryGraph, estimate_rows};
use tern_advisor::solver::WINDOW;
use tern_advisor::workload::Body;
use tern_advisor::{AdvisorError, Options, advise};

const TWEETS: &str = "
entity User 10
  id UserId
  field Username string 20
entity Tweet 1000
  id TweetId
  field Body string 140 distinct 5
  field Timestamp date
fk Tweet.User -> User.Tweets
";

#[test]
fn tweet_estimates_match_the_reference_rows() {
    let m = common::model(TWEETS);
    let tweet = m.entity("Tweet").unwrap_or_default();
    let g = QueryGraph::single(tweet);
    let a = |f: &str| m.field(tweet, f).unwrap_or_else(|| panic!("{f}"));
    let none = BTreeSet::new();
    let rows = |eq: &[&str], range: &[&str]| {
        estimate_rows(
            &m,
            &g,
            &eq.iter().map(|f| a(f)).collect(),
            &range.iter().map(|f| a(f)).collect(),
        )
    };
    assert_eq!(rows(&["TweetId"], &[]), 1.0);
    assert_eq!(rows(&["Body"], &[]), 200.0);
    assert!((rows(&["Body"], &["Timestamp"]) - 20.0).abs() < 1e-9);
    assert!((rows(&[], &["Timestamp"]) - 100.0).abs() < 1e-9);
    assert_eq!(estimate_rows(&m, &g, &none, &none), 1000.0);
    // The same through parsed queries (a range alone is not a valid query: no equality predicate).
    let w = common::workload(
        &m,
        "A: SELECT Tweet.Body FROM Tweet WHERE Tweet.TweetId = ?;
         B: SELECT Tweet.TweetId FROM Tweet WHERE Tweet.Body = ?;
         C: SELECT Tweet.TweetId FROM Tweet WHERE Tweet.Body = ? AND Tweet.Timestamp > ?;
         D: SELECT Tweet.Body FROM Tweet.User WHERE User.UserId = ?;",
    );
    let est: Vec<f64> = w
        .statements
        .iter()
        .map(|s| match &s.body {
            Body::Query(q) => q.estimated_rows(&m),
            Body::Update(_) => 0.0,
        })
        .collect();
    assert!(
        (est[0] - 1.0).abs() < 1e-9
            && (est[1] - 200.0).abs() < 1e-9
            && (est[2] - 20.0).abs() < 1e-9
    );
    assert!((est[3] - 100.0).abs() < 1e-9, "tweets of one user");
}

const USERS: &str = "
entity User 10000
  id UserId
  field Username string 20
  field City string 20 distinct 500
  field Country string 20 distinct 50
";

const USER_WORKLOAD: &str = "
group Writes default=98
  Rename: UPDATE User SET Username = ?name WHERE User.UserId = ?id;
group Reads default=1
  ByCity: SELECT User.Username FROM User WHERE User.City = ?city;
  ByCountry: SELECT User.Username FROM User WHERE User.Country = ?country;
";

#[test]
fn update_heavy_workload_keeps_the_username_in_one_shared_column_family() {
    let m = common::model(USERS);
    let w = common::workload(&m, USER_WORKLOAD);
    let r = match advise(&m, &w, &Options::default()) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let mut triples: Vec<&str> = r
        .column_families
        .iter()
        .map(|c| c.triple.as_str())
        .collect();
    triples.sort();
    assert_eq!(
        triples,
        vec![
            "[User.City][User.UserId][]",
            "[User.Country][User.UserId][]",
            "[User.UserId][][User.Username]",
        ]
    );
    // Each lookup goes through its index, then the shared column family.
    for q in &r.queries {
        assert_eq!(q.steps.len(), 2, "{}", q.name);
        assert_eq!(q.steps[1].cf, q.steps[1].cf);
    }
    assert_eq!(r.queries[0].steps[1].cf, r.queries[1].steps[1].cf);
    // The rename is one put, no support query.
    assert_eq!(r.updates[0].maintain.len(), 1);
    assert!(r.updates[0].maintain[0].support.is_empty());
    assert!((r.total_cost - (r.query_cost + r.update_cost)).abs() < 1e-9);
}

#[test]
fn a_read_heavy_workload_denormalizes_the_username() {
    let m = common::model(USERS);
    let w = common::workload(&m, &USER_WORKLOAD.replace("default=98", "default=0.001"));
    let r = advise(&m, &w, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        r.queries.iter().all(|q| q.steps.len() == 1),
        "{:#?}",
        r.queries
    );
}

#[test]
fn a_one_byte_space_budget_has_no_solution() {
    let m = common::model(USERS);
    let w = common::workload(&m, USER_WORKLOAD);
    let opts = Options {
        space_budget: Some(1.0),
        ..Options::default()
    };
    match advise(&m, &w, &opts) {
        Err(AdvisorError::NoSolution(msg)) => assert!(msg.contains("space budget"), "{msg}"),
        other => panic!("expected no solution, got {other:?}"),
    }
}

#[test]
fn a_space_budget_between_the_schemas_picks_the_smaller_one() {
    let m = common::model(USERS);
    let w = common::workload(&m, &USER_WORKLOAD.replace("default=98", "default=0.001"));
    let free = advise(&m, &w, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let opts = Options {
        space_budget: Some(free.total_size_bytes - 1.0),
        ..Options::default()
    };
    let tight = advise(&m, &w, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(tight.total_size_bytes <= free.total_size_bytes - 1.0);
    assert!(tight.total_cost >= free.total_cost);
}

#[test]
fn unknown_mix_is_an_error_naming_the_mixes() {
    let m = common::model(USERS);
    let w = common::workload(&m, USER_WORKLOAD);
    let opts = Options {
        mix: "nope".into(),
        ..Options::default()
    };
    let e = advise(&m, &w, &opts).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("default"), "{e}");
}

fn total(model: &str, workload: &str) -> f64 {
    let m = common::model(model);
    let w = common::workload(&m, workload);
    advise(&m, &w, &Options::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .total_cost
}

#[test]
fn adding_an_update_never_lowers_the_total_cost_on_the_examples() {
    for name in ["hotel", "eac"] {
        let (m, w) = common::example(name);
        let mut queries_only = w.clone();
        queries_only
            .statements
            .retain(|s| matches!(s.body, Body::Query(_)));
        let updates: Vec<_> = w
            .statements
            .iter()
            .filter(|s| matches!(s.body, Body::Update(_)))
            .cloned()
            .collect();
        let base = advise(&m, &queries_only, &Options::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .total_cost;
        // Each update alone, then all of them.
        for u in &updates {
            let mut one = queries_only.clone();
            one.statements.push(u.clone());
            let t = advise(&m, &one, &Options::default())
                .unwrap_or_else(|e| panic!("{e}"))
                .total_cost;
            assert!(
                t >= base - WINDOW * base,
                "{name} + {}: {t} < {base}",
                u.name
            );
        }
        let all = advise(&m, &w, &Options::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .total_cost;
        assert!(all >= base - WINDOW * base, "{name}: {all} < {base}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]
    #[test]
    fn adding_an_update_never_lowers_the_total_cost(
        w_city in 0.01f64..10.0, w_country in 0.01f64..10.0, w_update in 0.01f64..100.0,
        which in 0usize..3,
    ) {
        let update = [
            "U: UPDATE User SET Username = ? WHERE User.UserId = ?;",
            "U: UPDATE User SET City = ? WHERE User.UserId = ?;",
            "U: DELETE FROM User WHERE User.Country = ?;",
        ][which];
        let reads = format!(
            "group Reads default={w_city}\n ByCity: SELECT User.Username FROM User WHERE User.City = ?;\n\
             group Reads2 default={w_country}\n ByCountry: SELECT User.Username, User.City FROM User WHERE User.Country = ?;\n"
        );
        let with = format!("{reads}group W default={w_update}\n {update}\n");
        let before = total(USERS, &reads);
        let after = total(USERS, &with);
        prop_assert!(after >= before - WINDOW * before.abs(), "before {before}, after {after}");
    }
}
