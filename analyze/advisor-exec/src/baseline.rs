//! The normalized baseline schema `--execute` compares the recommendation with.

use std::collections::BTreeSet;

use tern_advisor::column_family::ColumnFamily;
use tern_advisor::graph::QueryGraph;
use tern_advisor::model::{Attr, Model};
use tern_advisor::query::Query;

/// The normalized baseline for a workload's queries: per entity `[id][][fields]`; per
/// relationship `[child id][][parent id]` and `[parent id][child id][]`; per non-id attribute of
/// an equality predicate `[attr][id][]`.
pub fn baseline(model: &Model, queries: &[&Query]) -> Vec<ColumnFamily> {
    let mut out: Vec<ColumnFamily> = Vec::new();
    let mut push = |cf: ColumnFamily| {
        if !out.contains(&cf) {
            out.push(cf);
        }
    };
    for (e, ent) in model.entities.iter().enumerate() {
        let values = (1..ent.fields.len())
            .map(|f| Attr {
                entity: e,
                field: f,
            })
            .collect();
        push(ColumnFamily::new(
            BTreeSet::from([Attr::id(e)]),
            Vec::new(),
            values,
            QueryGraph::single(e),
        ));
    }
    for (r, rel) in model.relationships.iter().enumerate() {
        let graph = QueryGraph {
            entities: BTreeSet::from([rel.from, rel.to]),
            edges: BTreeSet::from([r]),
        };
        push(ColumnFamily::new(
            BTreeSet::from([Attr::id(rel.from)]),
            Vec::new(),
            BTreeSet::from([Attr::id(rel.to)]),
            graph.clone(),
        ));
        push(ColumnFamily::new(
            BTreeSet::from([Attr::id(rel.to)]),
            vec![Attr::id(rel.from)],
            BTreeSet::new(),
            graph,
        ));
    }
    for q in queries {
        for a in q.eq.iter().filter(|a| !a.is_id()) {
            push(ColumnFamily::new(
                BTreeSet::from([*a]),
                vec![Attr::id(a.entity)],
                BTreeSet::new(),
                QueryGraph::single(a.entity),
            ));
        }
    }
    out
}
