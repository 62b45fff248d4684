//! Query graphs: connected, acyclic subgraphs of the entity graph, and their join sizes.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use crate::model::{Attr, Model};

/// A connected acyclic subgraph of the entity graph: entities and the relationships joining them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct QueryGraph {
    /// Entity indices.
    pub entities: BTreeSet<usize>,
    /// Relationship indices (each joins two of `entities`).
    pub edges: BTreeSet<usize>,
}

impl QueryGraph {
    /// A graph of one entity.
    pub fn single(entity: usize) -> Self {
        QueryGraph {
            entities: BTreeSet::from([entity]),
            edges: BTreeSet::new(),
        }
    }

    /// Whether `a`'s entity is in the graph.
    pub fn has(&self, a: Attr) -> bool {
        self.entities.contains(&a.entity)
    }

    /// Whether `other` is a subgraph of `self`.
    pub fn contains(&self, other: &QueryGraph) -> bool {
        other.entities.is_subset(&self.entities) && other.edges.is_subset(&self.edges)
    }

    /// The union of two graphs; `None` unless the result is a tree (connected and acyclic).
    pub fn union(&self, other: &QueryGraph, model: &Model) -> Option<QueryGraph> {
        let g = QueryGraph {
            entities: self.entities.union(&other.entities).copied().collect(),
            edges: self.edges.union(&other.edges).copied().collect(),
        };
        g.is_tree(model).then_some(g)
    }

    /// Whether the graph is connected and acyclic.
    pub fn is_tree(&self, model: &Model) -> bool {
        !self.entities.is_empty()
            && self.edges.len() + 1 == self.entities.len()
            && self
                .component(model, *self.entities.iter().next().unwrap_or(&0), None)
                .len()
                == self.entities.len()
    }

    /// The entities reachable from `start` without crossing relationship `cut` (linear in the
    /// graph's size: one pass builds the adjacency).
    pub fn component(&self, model: &Model, start: usize, cut: Option<usize>) -> BTreeSet<usize> {
        let adj = self.adjacency(model);
        let mut seen = BTreeSet::from([start]);
        let mut stack = vec![start];
        while let Some(e) = stack.pop() {
            for &(r, next) in adj.get(&e).map(Vec::as_slice).unwrap_or_default() {
                if Some(r) == cut {
                    continue;
                }
                if self.entities.contains(&next) && seen.insert(next) {
                    stack.push(next);
                }
            }
        }
        seen
    }

    /// Per entity, its edges as (relationship, other end).
    fn adjacency(&self, model: &Model) -> HashMap<usize, Vec<(usize, usize)>> {
        let mut adj: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
        for &r in &self.edges {
            let rel = &model.relationships[r];
            adj.entry(rel.from).or_default().push((r, rel.to));
            adj.entry(rel.to).or_default().push((r, rel.from));
        }
        adj
    }

    /// The subgraph induced by `entities`.
    pub fn induced(&self, model: &Model, entities: &BTreeSet<usize>) -> QueryGraph {
        QueryGraph {
            entities: entities.clone(),
            edges: self
                .edges
                .iter()
                .copied()
                .filter(|&r| {
                    let rel = &model.relationships[r];
                    entities.contains(&rel.from) && entities.contains(&rel.to)
                })
                .collect(),
        }
    }

    /// The relationships of the graph that touch `entity`.
    pub fn edges_at(&self, model: &Model, entity: usize) -> Vec<usize> {
        self.edges
            .iter()
            .copied()
            .filter(|&r| {
                model.relationships[r].from == entity || model.relationships[r].to == entity
            })
            .collect()
    }

    /// Estimated number of rows of the join of all entities along the edges (uniformity assumed).
    pub fn join_size(&self, model: &Model) -> f64 {
        let Some(&root) = self.entities.iter().next() else {
            return 0.0;
        };
        let mut size = model.entities[root].count;
        let adj = self.adjacency(model);
        let mut seen = BTreeSet::from([root]);
        let mut stack = vec![root];
        while let Some(e) = stack.pop() {
            for &(r, next) in adj.get(&e).map(Vec::as_slice).unwrap_or_default() {
                let rel = &model.relationships[r];
                if !seen.insert(next) {
                    continue;
                }
                if rel.from == e {
                    // Each `from` has exactly one `to`.
                } else {
                    // Each `to` has count(from)/count(to) `from`s.
                    size *= model.entities[rel.from].count / model.entities[rel.to].count;
                }
                stack.push(next);
            }
        }
        size
    }
}

/// The fraction of rows kept by an equality predicate on `a`.
pub fn eq_selectivity(model: &Model, a: Attr) -> f64 {
    let e = &model.entities[a.entity];
    if a.is_id() {
        1.0 / e.count
    } else {
        1.0 / model.attr(a).distinct.max(1.0)
    }
}

/// The fraction of rows kept by a range predicate (NoSE's uniform 10 %).
pub const RANGE_SELECTIVITY: f64 = 0.1;

/// Estimated rows of `graph` filtered by equality predicates on `eq` and range predicates on `range`.
pub fn estimate_rows(
    model: &Model,
    graph: &QueryGraph,
    eq: &BTreeSet<Attr>,
    range: &BTreeSet<Attr>,
) -> f64 {
    let mut rows = graph.join_size(model);
    for &a in eq {
        rows *= eq_selectivity(model, a);
    }
    for _ in range {
        rows *= RANGE_SELECTIVITY;
    }
    rows
}
