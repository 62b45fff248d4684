//! Support queries shared when one covers another, and column families over the same entities by
//! different relationships told apart in the output.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use tern_advisor::advise::{UpdatePlan, cost_schema, prepare};
use tern_advisor::bip::Var;
use tern_advisor::solver::{Strategy, WINDOW, solve_with};
use tern_advisor::{Options, Recommendation, advise, render, schema};

const USERS: &str = "
entity User 100000
  id UserID
  field City string 20 distinct 100
  field Age int distinct 80
  field Name string 30
";

/// Moving a user to another city changes the partition key of both column families: each needs
/// the user's old row (its city and clustering attributes) before the delete and the put. The
/// support query of `by_name` (city, name, age) covers that of `by_age` (city, age).
const MOVES: &str = "
ByAge 10: SELECT User.UserID FROM User WHERE User.City = ?c ORDER BY User.Age;
ByName 10: SELECT User.Age FROM User WHERE User.City = ?c ORDER BY User.Name;
Move 1: UPDATE User SET City = ?city WHERE User.UserID = ?u;
";

fn costed(schema_text: &str) -> Recommendation {
    let m = common::model(USERS);
    let w = common::workload(&m, MOVES);
    // The support queries find the user's old row by id.
    let text = format!("users [User.UserID][][User.City, User.Age, User.Name]\n{schema_text}");
    let given = schema::parse(&m, "s", &text).unwrap_or_else(|e| panic!("{e}"));
    let c = cost_schema(&m, &w, &Options::default(), &given).unwrap();
    assert!(
        c.unserved.iter().all(|u| u.starts_with("query")),
        "{:?}",
        c.unserved
    );
    c.schema
}

fn update<'r>(r: &'r Recommendation, name: &str) -> &'r UpdatePlan {
    r.updates.iter().find(|u| u.name == name).unwrap()
}

const BY_AGE: &str = "by_age [User.City][User.Age, User.UserID][]\n";
const BY_NAME: &str = "by_name [User.City][User.Name, User.UserID][User.Age]\n";

#[test]
fn a_support_query_covered_by_another_runs_once_in_its_place() {
    let age = costed(BY_AGE);
    let name = costed(BY_NAME);
    let both = costed(&format!("{BY_AGE}{BY_NAME}"));
    let support = |u: &UpdatePlan| -> Vec<String> {
        u.maintain
            .iter()
            .flat_map(|m| m.support.iter().map(|s| s.text.clone()))
            .collect()
    };
    let (a, n, b) = (
        update(&age, "Move"),
        update(&name, "Move"),
        update(&both, "Move"),
    );
    assert_eq!(support(a).len(), 1, "{a:#?}");
    assert_eq!(support(n).len(), 1, "{n:#?}");
    // Both column families: one support query runs, by_name's (it has by_age's attributes too).
    assert_eq!(support(b), support(n), "{b:#?}");
    assert!(support(b)[0].contains("User.Name"), "{b:#?}");
    // It costs by_name's maintenance plus only the writes of by_age.
    let writes = |u: &UpdatePlan, cf: &str| {
        u.maintain
            .iter()
            .find(|m| m.cf == cf)
            .map(|m| m.write_cost)
            .unwrap()
    };
    let expected = n.cost + writes(a, "by_age");
    assert!(
        (b.cost - expected).abs() < 1e-12,
        "{} vs {expected}",
        b.cost
    );
    assert!(
        b.cost < a.cost + n.cost,
        "{} vs {}",
        b.cost,
        a.cost + n.cost
    );
    // The text says which query runs for which column family.
    let text = render::text(&both);
    assert_eq!(text.matches("    support: ").count(), 1, "{text}");
}

/// The program prices a covered support query as the report does (not at all when the covering
/// one runs), on this workload and on the examples (the objective against the reported costs),
/// and the solve matches the two-stage solve of the program as formulated.
#[test]
fn the_program_shares_covered_support_queries_as_the_report_does() {
    let m = common::model(USERS);
    // A heavy move: sharing its support query matters to the choice.
    for weight in ["1", "50"] {
        let w = common::workload(&m, &MOVES.replace("Move 1:", &format!("Move {weight}:")));
        let opts = Options::default();
        let p = prepare(&m, &w, &opts).unwrap();
        let f = p.formulate(&opts);
        // Some support query's rows name the queries covering it.
        let covering = f
            .constraints
            .iter()
            .filter(|c| {
                c.terms.len() > 2
                    && matches!(f.vars[c.terms[0].0], Var::Cf(_))
                    && c.terms[1..]
                        .iter()
                        .all(|(v, k)| *k == -1.0 && matches!(f.vars[*v], Var::Runs(_)))
            })
            .count();
        assert!(covering > 0, "no covering support query formulated");
        let solved = solve_with(&f, None, Strategy::default()).unwrap();
        let chosen = f.chosen(&solved.x);
        let rec = p
            .read_off(&chosen, &opts, f.vars.len(), f.constraints.len())
            .unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        assert!(
            close(rec.total_cost, solved.cost),
            "weight {weight}: reported {} vs objective {}",
            rec.total_cost,
            solved.cost
        );
        let plain = advise(
            &m,
            &w,
            &Options {
                strategy: Strategy::plain(),
                ..Options::default()
            },
        )
        .unwrap();
        assert!(
            (plain.total_cost - rec.total_cost).abs() <= WINDOW * plain.total_cost,
            "weight {weight}: {} vs {}",
            plain.total_cost,
            rec.total_cost
        );
        // The objective's update part is the support steps that run plus the writes.
        let rest: f64 = f
            .vars
            .iter()
            .enumerate()
            .filter(|(_, v)| !matches!(v, Var::Step(k, _) if *k < p.queries.len()))
            .map(|(i, _)| f.cost[i] * solved.x[i])
            .sum();
        assert!(close(rec.update_cost, rest), "weight {weight}");
    }
}

/// Two column families over the same entities by different relationships: their triples (text
/// output, `advise_schema.cql` comments) name the relationship each follows.
#[test]
fn column_families_over_the_same_entities_by_different_relationships_print_apart() {
    let m = common::model(
        "
entity Person 1000
  id PersonID
  field Name string 20
entity Loan 10000
  id LoanID
  field Day date distinct 365
fk Loan.Lender -> Person.Lent
fk Loan.Borrower -> Person.Borrowed
",
    );
    let w = common::workload(
        &m,
        "
Lenders: SELECT Lender.Name FROM Loan.Lender WHERE Loan.Day = ?d;
Borrowers: SELECT Borrower.Name FROM Loan.Borrower WHERE Loan.Day = ?d;
",
    );
    let rec = advise(&m, &w, &Options::default()).unwrap();
    let two: Vec<&str> = rec
        .column_families
        .iter()
        .filter(|c| c.definition.graph.entities.len() == 2)
        .map(|c| c.triple.as_str())
        .collect();
    assert_eq!(two.len(), 2, "{two:?}");
    // The same key, clustering and values: only `via` tells them apart.
    let without_via: Vec<&str> = two
        .iter()
        .map(|t| t.split(" via ").next().unwrap())
        .collect();
    assert_eq!(without_via[0], without_via[1]);
    let mut vias: Vec<&str> = two
        .iter()
        .map(|t| t.split(" via ").nth(1).unwrap_or(""))
        .collect();
    vias.sort_unstable();
    assert_eq!(vias, ["Loan.Borrower", "Loan.Lender"]);
    let text = render::text(&rec);
    for t in &two {
        assert!(text.contains(t), "{t} not in:\n{text}");
    }
    // The text and the emitted CQL read back give the same schema.
    let triples: String = rec
        .column_families
        .iter()
        .map(|c| format!("{} {}\n", c.name, c.triple))
        .collect();
    let given = schema::parse(&m, "s", &triples).unwrap();
    for (g, c) in given.iter().zip(&rec.column_families) {
        assert_eq!(g.cf, c.definition);
    }
}
