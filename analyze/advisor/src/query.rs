//! Queries and updates over the conceptual model, as the advisor sees them after parsing.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::graph::{QueryGraph, estimate_rows};
use crate::model::{Attr, Model};

/// A query: a graph, selected attributes, predicates and an order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Query {
    /// The query graph.
    pub graph: QueryGraph,
    /// Selected attributes.
    pub select: BTreeSet<Attr>,
    /// Attributes with an equality predicate against a parameter.
    pub eq: BTreeSet<Attr>,
    /// Attributes with one or more range predicates.
    pub range: BTreeSet<Attr>,
    /// ORDER BY attributes.
    pub order: Vec<Attr>,
    /// LIMIT.
    pub limit: Option<u64>,
}

impl Query {
    /// Every attribute the query touches.
    pub fn attrs(&self) -> BTreeSet<Attr> {
        let mut all = self.select.clone();
        all.extend(&self.eq);
        all.extend(&self.range);
        all.extend(&self.order);
        all
    }

    /// Whether running `self` also answers `other`: the same graph, predicates, order and limit,
    /// and every attribute `other` selects among those `self` selects (the rows are the same, each
    /// with the attributes `other` needs). A query covers itself.
    pub fn covers(&self, other: &Query) -> bool {
        self.graph == other.graph
            && self.eq == other.eq
            && self.range == other.range
            && self.order == other.order
            && self.limit == other.limit
            && other.select.is_subset(&self.select)
    }

    /// Estimated result rows (before LIMIT).
    pub fn estimated_rows(&self, model: &Model) -> f64 {
        estimate_rows(model, &self.graph, &self.eq, &self.range)
    }
}

/// The kind of an update statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateKind {
    /// INSERT INTO E SET ... [AND CONNECT TO ...].
    Insert,
    /// UPDATE E [FROM path] SET ... WHERE ...
    Update,
    /// DELETE FROM E [path] WHERE ...
    Delete,
    /// CONNECT E(?) TO rel(?).
    Connect,
    /// DISCONNECT E(?) FROM rel(?).
    Disconnect,
}

/// An update statement.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Update {
    /// What it does.
    pub kind: UpdateKind,
    /// The entity written.
    pub entity: usize,
    /// The graph of the FROM path and WHERE clause (the entity alone for INSERT and CONNECT).
    pub graph: QueryGraph,
    /// Fields written (INSERT: all fields given, and the id).
    pub set: BTreeSet<Attr>,
    /// Equality predicates of the WHERE clause (CONNECT: the ids).
    pub eq: BTreeSet<Attr>,
    /// Range predicates of the WHERE clause.
    pub range: BTreeSet<Attr>,
    /// Relationships created or removed (INSERT ... AND CONNECT TO, CONNECT, DISCONNECT).
    pub connections: BTreeSet<usize>,
}

impl Update {
    /// Estimated number of entities the statement writes.
    pub fn estimated_entities(&self, model: &Model) -> f64 {
        match self.kind {
            UpdateKind::Insert | UpdateKind::Connect | UpdateKind::Disconnect => 1.0,
            UpdateKind::Update | UpdateKind::Delete => {
                estimate_rows(model, &self.graph, &self.eq, &self.range).max(1.0)
            }
        }
    }
}
