//! Enumeration shapes a human expert uses, and given schemas (`--compare`) costed like advice.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use tern_advisor::advise::{cost_schema, prepare};
use tern_advisor::column_family::ColumnFamily;
use tern_advisor::model::Attr;
use tern_advisor::{Options, advise, schema};

const SHOP: &str = "
entity User 1000
  id UserID
entity BuyNow 100000
  id BuyNowID
  field Date date distinct 1000
  field Qty int distinct 10
entity Item 10000
  id ItemID
  field ItemName string 30
fk BuyNow.User -> User.BuyNows
fk BuyNow.Item -> Item.BuyNows
";

const PURCHASES: &str = "
Purchases: SELECT Item.ItemName, BuyNow.Qty FROM User.BuyNows.Item
    WHERE User.UserID = ?user ORDER BY BuyNow.Date;
";

#[test]
fn the_clustering_key_can_carry_the_next_entitys_id_after_a_prefix() {
    let m = common::model(SHOP);
    let w = common::workload(&m, PURCHASES);
    let p = prepare(&m, &w, &Options::default()).unwrap();
    let a = |e: &str, f: &str| {
        let e = m.entity(e).unwrap();
        m.field(e, f).unwrap()
    };
    let (user, buynow, item) = (
        m.entity("User").unwrap(),
        m.entity("BuyNow").unwrap(),
        m.entity("Item").unwrap(),
    );
    // [User.UserID][BuyNow.Date, BuyNow.BuyNowID, Item.ItemID][BuyNow.Qty] over User–BuyNow–Item.
    let expert = ColumnFamily::new(
        BTreeSet::from([Attr::id(user)]),
        vec![a("BuyNow", "Date"), Attr::id(buynow), Attr::id(item)],
        BTreeSet::from([a("BuyNow", "Qty")]),
        tern_advisor::graph::QueryGraph {
            entities: BTreeSet::from([user, buynow, item]),
            edges: (0..m.relationships.len()).collect(),
        },
    );
    let j = p.pool.find(&expert).unwrap_or_else(|| {
        panic!(
            "not enumerated; candidates:\n{}",
            p.pool
                .candidates
                .iter()
                .map(|c| c.triple(&m))
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    // A plan of two gets uses it: the purchases in order with the item's id, then the items.
    let space = &p.queries[0].3;
    let two_gets = space
        .plans()
        .into_iter()
        .any(|plan| plan.len() == 2 && space.steps[plan[0]].cf == j && !space.steps[plan[0]].sort);
    assert!(
        two_gets,
        "no two-get plan through the expert's column family"
    );
}

#[test]
fn the_printed_recommendation_costs_exactly_what_the_advice_says() {
    for name in ["hotel", "eac"] {
        let (m, w) = common::example(name);
        let opts = Options::default();
        let rec = advise(&m, &w, &opts).unwrap();
        // The triples as printed, fed back.
        let text: String = rec
            .column_families
            .iter()
            .map(|c| format!("{} {}\n", c.name, c.triple))
            .collect();
        let given = schema::parse(&m, "rec.schema", &text).unwrap_or_else(|e| panic!("{e}"));
        let costed = cost_schema(&m, &w, &opts, &given).unwrap();
        assert!(costed.unserved.is_empty(), "{:?}", costed.unserved);
        let (a, b) = (rec.total_cost, costed.schema.total_cost);
        assert!((a - b).abs() <= 1e-9 * a.max(1.0), "{name}: {a} vs {b}");
        // The CQL as emitted (with the `-- cfN [K][C][V] via ...` comments), fed back.
        let cql: String = rec
            .column_families
            .iter()
            .map(|c| format!("-- {} {}\n{}\n\n", c.name, c.triple, c.cql))
            .collect();
        let given = schema::parse(&m, "rec.cql", &cql).unwrap_or_else(|e| panic!("{e}\n{cql}"));
        let costed = cost_schema(&m, &w, &opts, &given).unwrap();
        let b = costed.schema.total_cost;
        assert!(
            (a - b).abs() <= 1e-9 * a.max(1.0),
            "{name} (CQL): {a} vs {b}"
        );
        let names: Vec<&str> = given.iter().map(|g| g.name.as_str()).collect();
        let want: Vec<&str> = rec
            .column_families
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, want);
    }
}

#[test]
fn a_hand_written_schema_is_costed_and_what_it_cannot_serve_is_named() {
    let (m, w) = common::example("hotel");
    let text = std::fs::read_to_string(common::examples().join("hotel.schema")).unwrap();
    let given = schema::parse(&m, "hotel.schema", &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(given.len(), 7);
    let opts = Options::default();
    let costed = cost_schema(&m, &w, &opts, &given).unwrap();
    let rec = advise(&m, &w, &opts).unwrap();
    // Every query has a plan; the first one takes three gets where the advice takes fewer.
    assert_eq!(costed.schema.queries.len(), 4);
    let q1 = |r: &tern_advisor::Recommendation| {
        r.queries
            .iter()
            .find(|q| q.name == "GuestsByCityAmenityRate")
            .map(|q| q.cost)
            .unwrap()
    };
    assert!(
        q1(&costed.schema) > q1(&rec),
        "{} vs {}",
        q1(&costed.schema),
        q1(&rec)
    );
    assert!(
        costed
            .unserved
            .iter()
            .any(|u| u.starts_with("update `NewReservation`")),
        "{:?}",
        costed.unserved
    );
}

#[test]
fn a_bad_schema_is_refused_at_file_line_and_column() {
    let (m, _) = common::example("hotel");
    for (text, needle) in [
        (
            "[Guest.GuestID][][Guest.Nope]\n",
            "s:1:18: `Guest` has no field `Nope`; its fields are: GuestID, GuestName, GuestEmail",
        ),
        ("x [Guest.GuestID][]\n", "s:1:20: expected `[`"),
        (
            "[][][Guest.GuestName]\n",
            "s:1:1: a column family needs a partition key",
        ),
        (
            "[Guest.GuestID][][Hotel.HotelName] via Room.Nope\n",
            "s:1:35: `Room.Nope` is not a relationship",
        ),
        (
            "a [Guest.GuestID][][]\na [Hotel.HotelID][][]\n",
            "s:1:1: the column family name `a` is used twice",
        ),
        (
            "CREATE TABLE t (guest_nope text, PRIMARY KEY ((guest_nope)));\n",
            "s:1:1: column `guest_nope` of `t` is no attribute of the model",
        ),
        (
            "CREATE TABLE t (guest_guestid bigint, PRIMARY KEY ((guest_guestid)))\n",
            "s:1:1: a statement does not end with `;`",
        ),
    ] {
        match schema::parse(&m, "s", text) {
            Err(e) => assert!(e.to_string().starts_with(needle), "{text:?}: {e}"),
            Ok(g) => panic!("{text:?} parsed: {g:?}"),
        }
    }
}

#[test]
fn limit_bounds_the_rows_a_plan_reads() {
    let m = common::model(
        "
entity User 10
  id UserId
entity Tweet 1000
  id TweetId
  field Body string 140
  field Timestamp date
fk Tweet.User -> User.Tweets
",
    );
    let cost = |limit: &str| {
        let w = common::workload(
            &m,
            &format!(
                "Q: SELECT Tweet.Body FROM Tweet.User WHERE User.UserId = ?u ORDER BY Tweet.Timestamp{limit};"
            ),
        );
        let r = advise(&m, &w, &Options::default()).unwrap();
        r.queries[0].clone()
    };
    let all = cost("");
    let five = cost(" LIMIT 5");
    // One get of the user's 100 tweets in order; with LIMIT 5 it reads 5 of them.
    assert_eq!(all.steps.len(), 1);
    assert!((all.steps[0].width - 100.0).abs() < 1e-9, "{all:?}");
    assert_eq!(five.steps.len(), 1);
    assert!((five.steps[0].width - 5.0).abs() < 1e-9, "{five:?}");
    let c = tern_advisor::cost::CostModel::CASSANDRA;
    assert!((five.cost - c.lookup(1.0, 5.0)).abs() < 1e-12, "{five:?}");
    assert!(five.cost < all.cost);
}
