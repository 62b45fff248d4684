//! The paper's examples: the plan space of Fig. 7, the plan-graph constraints of Fig. 9, and the
//! EasyAntiCheat schema of Fig. 16.

mod common;

use std::collections::BTreeSet;

use tern_advisor::advise::plan_space;
use tern_advisor::bip::{Demand, Formulation, Var, Weighted};
use tern_advisor::column_family::ColumnFamily;
use tern_advisor::cost::CostModel;
use tern_advisor::graph::QueryGraph;
use tern_advisor::model::{Attr, Model};
use tern_advisor::workload::Body;
use tern_advisor::{Options, advise};

fn attr(m: &Model, name: &str) -> Attr {
    let (e, f) = name.split_once('.').unwrap_or((name, ""));
    let entity = m.entity(e).unwrap_or_else(|| panic!("no entity {e}"));
    m.field(entity, f)
        .unwrap_or_else(|| panic!("no field {name}"))
}

fn graph(m: &Model, entities: &[&str]) -> QueryGraph {
    let set: BTreeSet<usize> = entities
        .iter()
        .map(|e| m.entity(e).unwrap_or_else(|| panic!("no {e}")))
        .collect();
    let full = QueryGraph {
        entities: (0..m.entities.len()).collect(),
        edges: (0..m.relationships.len()).collect(),
    };
    full.induced(m, &set)
}

fn cf(
    m: &Model,
    key: &[&str],
    clustering: &[&str],
    values: &[&str],
    entities: &[&str],
) -> ColumnFamily {
    ColumnFamily::new(
        key.iter().map(|a| attr(m, a)).collect(),
        clustering.iter().map(|a| attr(m, a)).collect(),
        values.iter().map(|a| attr(m, a)).collect(),
        graph(m, entities),
    )
}

/// CF1..CF5 of Fig. 7 over the hotel model.
fn fig7_cfs(m: &Model) -> Vec<ColumnFamily> {
    let all = ["Hotel", "Room", "Amenity"];
    vec![
        // CF1: the materialized view.
        cf(
            m,
            &["Hotel.HotelCity", "Amenity.AmenityID"],
            &["Room.RoomRate", "Room.RoomID"],
            &[],
            &all,
        ),
        // CF2: HotelCity (and amenity) -> RoomIDs.
        cf(
            m,
            &["Hotel.HotelCity", "Amenity.AmenityID"],
            &["Room.RoomID"],
            &[],
            &all,
        ),
        // CF3: HotelCity -> HotelIDs.
        cf(m, &["Hotel.HotelCity"], &["Hotel.HotelID"], &[], &["Hotel"]),
        // CF4: HotelID (and amenity) -> RoomIDs.
        cf(
            m,
            &["Hotel.HotelID", "Amenity.AmenityID"],
            &["Room.RoomID"],
            &[],
            &all,
        ),
        // CF5: RoomID -> RoomRate.
        cf(m, &["Room.RoomID"], &[], &["Room.RoomRate"], &["Room"]),
    ]
}

fn fig7_query(m: &Model) -> tern_advisor::query::Query {
    let w = common::workload(
        m,
        "Fig7: SELECT Room.RoomID FROM Room WHERE Room.Hotel.HotelCity = ?city \
         AND Room.Amenity.AmenityID = ?amenityID AND Room.RoomRate > ?rate;",
    );
    match &w.statements[0].body {
        Body::Query(q) => q.clone(),
        Body::Update(_) => panic!("not a query"),
    }
}

/// The hotel model and the plan space of Fig. 7's query over Fig. 7's column families.
fn fig7_space() -> (Model, tern_advisor::planner::PlanSpace) {
    let (m, _) = common::example("hotel");
    let space = plan_space(&m, &CostModel::default(), &fig7_cfs(&m), &fig7_query(&m));
    (m, space)
}

#[test]
fn fig7_hotel_query_has_exactly_the_three_plans_of_the_paper() {
    let (m, space) = fig7_space();
    let mut plans: Vec<Vec<usize>> = space
        .plans()
        .into_iter()
        .map(|p| p.into_iter().map(|s| space.steps[s].cf).collect())
        .collect();
    plans.sort();
    assert_eq!(
        plans,
        vec![vec![0], vec![1, 4], vec![2, 3, 4]],
        "plans as CF indices (CF1 = 0)"
    );
    // The two multi-step plans filter on the room rate after fetching it from CF5.
    for p in space.plans() {
        let last = &space.steps[*p.last().unwrap_or(&0)];
        if last.cf == 4 {
            assert_eq!(last.filter, vec![attr(&m, "Room.RoomRate")]);
        }
    }
    // Both multi-step plans reach CF5 in the same state (the plan graph is a DAG, as in Fig. 9).
    let into_cf5: BTreeSet<usize> = space
        .steps
        .iter()
        .filter(|s| s.cf == 4)
        .map(|s| s.from)
        .collect();
    assert_eq!(into_cf5.len(), 1);
}

/// The constraints of Fig. 9, verbatim, over δ_{1,j} (step of CF j) and δ_j.
fn fig9_holds(d1: &[f64; 5], d: &[f64; 5]) -> bool {
    d1[3] <= d1[2]
        && d1[4] <= d1[1] + d1[3]
        && (0..5).all(|j| d1[j] <= d[j])
        && d1[0] + d1[1] + d1[2] == 1.0
        && d1[0] + d1[1] + d1[3] == 1.0
        && d1[0] + d1[4] == 1.0
}

#[test]
fn fig9_plan_graph_constraints_admit_exactly_the_assignments_of_the_paper() {
    let (_, space) = fig7_space();
    let f = Formulation::build(
        &[Weighted {
            space: &space,
            weight: 1.0,
            demand: Demand::One,
        }],
        &Default::default(),
        &|_| 1.0,
        &[],
        None,
    );
    // Every CF occurs in exactly one step, so step variables are the paper's δ_{1,j}.
    let mut step_of_cf = [usize::MAX; 5];
    let mut cf_var = [usize::MAX; 5];
    for (v, var) in f.vars.iter().enumerate() {
        match var {
            Var::Step(_, s) => step_of_cf[space.steps[*s].cf] = v,
            Var::Cf(j) => cf_var[*j] = v,
            Var::Runs(_) => panic!("no support queries here"),
        }
    }
    assert!(step_of_cf.iter().chain(&cf_var).all(|v| *v != usize::MAX));
    assert_eq!(
        f.vars.len(),
        10,
        "5 step variables and 5 column family variables"
    );
    let mut agree = 0;
    for bits in 0u32..1024 {
        let mut x = vec![0.0; f.vars.len()];
        let mut d1 = [0.0; 5];
        let mut d = [0.0; 5];
        for j in 0..5 {
            d1[j] = f64::from((bits >> j) & 1);
            d[j] = f64::from((bits >> (5 + j)) & 1);
            x[step_of_cf[j]] = d1[j];
            x[cf_var[j]] = d[j];
        }
        assert_eq!(
            f.feasible(&x),
            fig9_holds(&d1, &d),
            "assignment δ1={d1:?} δ={d:?}"
        );
        agree += usize::from(f.feasible(&x));
    }
    // Three plans, each with any superset of its column families present.
    assert_eq!(agree, 16 + 8 + 4);
}

#[test]
fn eac_workload_reproduces_the_shapes_of_fig16() {
    let (m, w) = common::example("eac");
    let r = match advise(&m, &w, &Options::default()) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let find = |pred: &dyn Fn(&ColumnFamily) -> bool| {
        r.column_families.iter().find(|c| pred(&c.definition))
    };
    let a = |n: &str| attr(&m, n);
    // CF1: keyed by server, ordered by timestamp, admin flag denormalized, positions as values.
    let cf1 = find(&|c| {
        c.key == BTreeSet::from([a("Server.ServerID")])
            && c.clustering.first() == Some(&a("PlayerState.ServerTimestamp"))
            && c.has(a("Player.IsAdmin"))
            && c.has(a("Player.PlayerID"))
            && ["PlayerState.PosX", "PlayerState.PosY", "PlayerState.PosZ"]
                .iter()
                .all(|p| c.values.contains(&a(p)))
    })
    .unwrap_or_else(|| {
        panic!(
            "no CF1 in {:#?}",
            r.column_families
                .iter()
                .map(|c| &c.triple)
                .collect::<Vec<_>>()
        )
    });
    // Q1 and Q2 are one get on CF1 plus a filter (player id, admin flag).
    for (q, filtered) in [("Q1", "Player.PlayerID"), ("Q2", "Player.IsAdmin")] {
        let p = r
            .queries
            .iter()
            .find(|p| p.name == q)
            .unwrap_or_else(|| panic!("no {q}"));
        assert_eq!(p.steps.len(), 1, "{q}");
        assert_eq!(p.steps[0].cf, cf1.name, "{q}");
        assert_eq!(p.steps[0].filter, vec![filtered.to_string()], "{q}");
    }
    // CF2: server id -> name and IP.
    assert!(
        find(&|c| c.key == BTreeSet::from([a("Server.ServerID")])
            && c.clustering.is_empty()
            && c.values == BTreeSet::from([a("Server.ServerName"), a("Server.ServerIP")]))
        .is_some()
    );
    // CF3: player -> sessions, for Q5.
    assert!(
        find(&|c| c.key == BTreeSet::from([a("Player.PlayerID")])
            && c.clustering == vec![a("Session.SessionID")])
        .is_some()
    );
    // CF4 and CF5 exist only for support queries: session -> (player, server, admin flag) for new
    // states, player -> admin flag for new sessions.
    let cf4 = find(&|c| {
        c.key == BTreeSet::from([a("Session.SessionID")])
            && ["Player.PlayerID", "Server.ServerID", "Player.IsAdmin"]
                .iter()
                .all(|x| c.has(a(x)))
            && !c.has(a("PlayerState.StateID"))
    })
    .unwrap_or_else(|| panic!("no CF4"));
    let cf5 = find(&|c| {
        c.key == BTreeSet::from([a("Player.PlayerID")])
            && c.values == BTreeSet::from([a("Player.IsAdmin")])
    })
    .unwrap_or_else(|| panic!("no CF5"));
    assert_eq!(
        r.column_families.len(),
        5,
        "{:#?}",
        r.column_families
            .iter()
            .map(|c| &c.triple)
            .collect::<Vec<_>>()
    );
    for support_only in [cf4, cf5] {
        assert!(
            r.queries
                .iter()
                .all(|q| q.steps.iter().all(|s| s.cf != support_only.name))
        );
        assert!(r.updates.iter().any(|u| u.maintain.iter().any(|mt| {
            mt.support
                .iter()
                .any(|s| s.steps.iter().any(|st| st.cf == support_only.name))
        })));
    }
    let new_state = r
        .updates
        .iter()
        .find(|u| u.name == "NewState")
        .unwrap_or_else(|| panic!("no NewState"));
    let m1 = new_state
        .maintain
        .iter()
        .find(|mt| mt.cf == cf1.name)
        .unwrap_or_else(|| panic!("CF1 not maintained"));
    assert_eq!(m1.support.len(), 1);
    assert_eq!(m1.support[0].steps[0].cf, cf4.name);
}
