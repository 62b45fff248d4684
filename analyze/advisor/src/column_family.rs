//! Column families `K ↦ (C ↦ V)`: partition key, clustering key, values, and the graph they cover.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::graph::QueryGraph;
use crate::model::{Attr, Model};

/// A candidate or recommended column family.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ColumnFamily {
    /// Partition key attributes.
    pub key: BTreeSet<Attr>,
    /// Clustering key attributes, in order.
    pub clustering: Vec<Attr>,
    /// Value attributes.
    pub values: BTreeSet<Attr>,
    /// The part of the entity graph whose join the column family stores.
    pub graph: QueryGraph,
}

impl ColumnFamily {
    /// Builds a column family, dropping repeated attributes (key first, then clustering, then values).
    pub fn new(
        key: BTreeSet<Attr>,
        clustering: Vec<Attr>,
        values: BTreeSet<Attr>,
        graph: QueryGraph,
    ) -> Self {
        let mut seen = key.clone();
        let clustering: Vec<Attr> = clustering.into_iter().filter(|a| seen.insert(*a)).collect();
        let values = values.into_iter().filter(|a| !seen.contains(a)).collect();
        ColumnFamily {
            key,
            clustering,
            values,
            graph,
        }
    }

    /// All attributes stored.
    pub fn attrs(&self) -> BTreeSet<Attr> {
        let mut all = self.key.clone();
        all.extend(&self.clustering);
        all.extend(&self.values);
        all
    }

    /// Whether the column family stores `a`.
    pub fn has(&self, a: Attr) -> bool {
        self.key.contains(&a) || self.clustering.contains(&a) || self.values.contains(&a)
    }

    /// Estimated number of rows (C ↦ V pairs): the size of the join it stores.
    pub fn rows(&self, model: &Model) -> f64 {
        self.graph.join_size(model)
    }

    /// Estimated size in bytes.
    pub fn size(&self, model: &Model) -> f64 {
        let width: f64 = self.attrs().iter().map(|a| model.attr(*a).size).sum();
        self.rows(model) * width
    }

    /// The triple notation `[K][C][V]` with `Entity.Field` names, then, when the column family
    /// joins entities, ` via HOLDER.FK, ...`: the relationships it follows (two column families over
    /// the same entities by different relationships differ there). `tern advise --compare` reads
    /// it back ([`crate::schema`]).
    pub fn triple(&self, model: &Model) -> String {
        let list = |it: &mut dyn Iterator<Item = &Attr>| {
            it.map(|a| model.attr_name(*a))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = format!(
            "[{}][{}][{}]",
            list(&mut self.key.iter()),
            list(&mut self.clustering.iter()),
            list(&mut self.values.iter())
        );
        if !self.graph.edges.is_empty() {
            let via: Vec<String> = self
                .graph
                .edges
                .iter()
                .map(|&r| {
                    let rel = &model.relationships[r];
                    format!("{}.{}", model.entities[rel.from].name, rel.name)
                })
                .collect();
            out.push_str(" via ");
            out.push_str(&via.join(", "));
        }
        out
    }

    /// The CQL column name of an attribute.
    pub fn column(model: &Model, a: Attr) -> String {
        format!("{}_{}", model.entities[a.entity].name, model.attr(a).name).to_ascii_lowercase()
    }

    /// `CREATE TABLE name (...)` for Cassandra.
    pub fn cql(&self, model: &Model, name: &str) -> String {
        let col = |a: &Attr| Self::column(model, *a);
        let mut lines: Vec<String> = self
            .key
            .iter()
            .chain(&self.clustering)
            .chain(&self.values)
            .map(|a| format!("  {} {}", col(a), model.attr(*a).ty.cql()))
            .collect();
        let key = self.key.iter().map(col).collect::<Vec<_>>().join(", ");
        let mut pk = format!("({key})");
        for c in &self.clustering {
            pk.push_str(", ");
            pk.push_str(&col(c));
        }
        lines.push(format!("  PRIMARY KEY ({pk})"));
        let mut out = format!("CREATE TABLE {name} (\n{}\n)", lines.join(",\n"));
        if !self.clustering.is_empty() {
            let order = self
                .clustering
                .iter()
                .map(|c| format!("{} ASC", col(c)))
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(" WITH CLUSTERING ORDER BY ({order})"));
        }
        out.push(';');
        out
    }
}
