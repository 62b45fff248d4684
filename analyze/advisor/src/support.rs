//! Which column families an update modifies, and the support queries that find what to write
//! ([NoSE] Algorithm 3).

use std::collections::BTreeSet;

use crate::column_family::ColumnFamily;
use crate::model::{Attr, Model};
use crate::query::{Query, Update, UpdateKind};

/// What maintaining one column family under one update takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Support {
    /// Queries to run first (their results give the keys and values to write).
    pub queries: Vec<Query>,
    /// Estimated rows (C ↦ V pairs) written per execution of the update.
    pub rows: f64,
    /// Rows are inserted (put).
    pub inserts: bool,
    /// Rows are deleted first (DELETE, DISCONNECT, or an UPDATE of a key attribute).
    pub deletes: bool,
    /// The support queries cannot be formed (their graph would be cyclic): the column family cannot
    /// be maintained and is not recommended.
    pub impossible: bool,
}

/// `None` when `u` does not modify `cf`; otherwise the support queries and the writes.
pub fn support_queries(model: &Model, u: &Update, cf: &ColumnFamily) -> Option<Support> {
    let e = u.entity;
    let per_entity = |graph_rows: f64, entity: usize| graph_rows / model.entities[entity].count;
    match u.kind {
        UpdateKind::Update | UpdateKind::Delete => {
            let modifies = match u.kind {
                UpdateKind::Update => u.set.iter().any(|a| cf.has(*a)),
                _ => cf.graph.entities.contains(&e),
            };
            if !modifies {
                return None;
            }
            let key: BTreeSet<Attr> = cf.key.iter().chain(&cf.clustering).copied().collect();
            let key_change = u.kind == UpdateKind::Update && u.set.iter().any(|a| key.contains(a));
            let needed = if key_change { cf.attrs() } else { key };
            let select: BTreeSet<Attr> = needed.difference(&u.eq).copied().collect();
            let rows = u.estimated_entities(model) * per_entity(cf.rows(model), e);
            let mut s = Support {
                queries: Vec::new(),
                rows,
                inserts: u.kind == UpdateKind::Update,
                deletes: u.kind == UpdateKind::Delete || key_change,
                impossible: false,
            };
            if !select.is_empty() {
                match cf.graph.union(&u.graph, model) {
                    Some(graph) => s.queries.push(Query {
                        graph,
                        select,
                        eq: u.eq.clone(),
                        range: u.range.clone(),
                        order: Vec::new(),
                        limit: None,
                    }),
                    None => s.impossible = true,
                }
            }
            Some(s)
        }
        UpdateKind::Insert => {
            if !cf.graph.entities.contains(&e) {
                return None;
            }
            let at_e = cf.graph.edges_at(model, e);
            if at_e.iter().any(|r| !u.connections.contains(r)) {
                // The new entity has no related entities along this edge yet: no rows appear.
                return None;
            }
            let mut s = Support {
                queries: Vec::new(),
                rows: 1.0,
                inserts: true,
                deletes: false,
                impossible: false,
            };
            for r in at_e {
                let y = model.other(r, e);
                split_side(model, cf, r, y, &mut s);
            }
            Some(s)
        }
        UpdateKind::Connect | UpdateKind::Disconnect => {
            let r = *u.connections.iter().next()?;
            if !cf.graph.edges.contains(&r) {
                return None;
            }
            let mut s = Support {
                queries: Vec::new(),
                rows: 1.0,
                inserts: u.kind == UpdateKind::Connect,
                deletes: u.kind == UpdateKind::Disconnect,
                impossible: false,
            };
            let rel = &model.relationships[r];
            for side in [rel.from, rel.to] {
                split_side(model, cf, r, side, &mut s);
            }
            Some(s)
        }
    }
}

/// The support query for the side of `cf`'s graph that `root` is on when `rel` is cut; multiplies
/// the rows written by the rows of that side per `root`.
fn split_side(model: &Model, cf: &ColumnFamily, rel: usize, root: usize, s: &mut Support) {
    let side = cf.graph.component(model, root, Some(rel));
    let graph = cf.graph.induced(model, &side);
    s.rows *= graph.join_size(model) / model.entities[root].count;
    let root_id = Attr::id(root);
    let select: BTreeSet<Attr> = cf
        .attrs()
        .into_iter()
        .filter(|a| side.contains(&a.entity) && *a != root_id)
        .collect();
    if !select.is_empty() {
        s.queries.push(Query {
            graph,
            select,
            eq: BTreeSet::from([root_id]),
            range: BTreeSet::new(),
            order: Vec::new(),
            limit: None,
        });
    }
}
