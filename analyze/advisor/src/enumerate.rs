//! Candidate enumeration ([NoSE] Algorithms 1, 2 and 4, and candidate combination).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::column_family::ColumnFamily;
use crate::model::{Attr, Model};
use crate::query::{Query, Update};
use crate::support::support_queries;

/// Above this many relaxable predicates, relaxation drops at most two of them at a time.
const FULL_RELAXATION_LIMIT: usize = 6;

/// The pool of candidate column families.
#[derive(Debug, Default, Clone)]
pub struct Pool {
    /// Candidates in the order found.
    pub candidates: Vec<ColumnFamily>,
    index: HashMap<ColumnFamily, usize>,
}

impl Pool {
    /// Adds a candidate; returns its index.
    pub fn add(&mut self, cf: ColumnFamily) -> usize {
        if let Some(&i) = self.index.get(&cf) {
            return i;
        }
        self.index.insert(cf.clone(), self.candidates.len());
        self.candidates.push(cf);
        self.candidates.len() - 1
    }

    /// The index of a candidate, if present.
    pub fn find(&self, cf: &ColumnFamily) -> Option<usize> {
        self.index.get(cf).copied()
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }
}

/// The materialized view of a query (Algorithm 1, with every equality predicate in the partition
/// key as in the paper's example, and every entity's id in the key or clustering so rows are unique).
pub fn materialize(q: &Query) -> ColumnFamily {
    let key = q.eq.clone();
    let mut clustering: Vec<Attr> = Vec::new();
    // Ranges first, the ordered attribute first among them, then the remaining ORDER BY attributes.
    for a in q.order.iter().filter(|a| q.range.contains(a)) {
        clustering.push(*a);
    }
    for a in &q.range {
        if !clustering.contains(a) {
            clustering.push(*a);
        }
    }
    for a in &q.order {
        if !clustering.contains(a) && !key.contains(a) {
            clustering.push(*a);
        }
    }
    for &e in &q.graph.entities {
        let id = Attr::id(e);
        if !key.contains(&id) && !clustering.contains(&id) {
            clustering.push(id);
        }
    }
    ColumnFamily::new(key, clustering, q.select.clone(), q.graph.clone())
}

/// Relaxed versions of a query (including itself): predicates and ORDER BY attributes moved into SELECT,
/// keeping at least one equality predicate.
pub fn relax(q: &Query) -> Vec<Query> {
    let items: Vec<(u8, Attr)> =
        q.eq.iter()
            .map(|a| (0, *a))
            .chain(q.range.iter().map(|a| (1, *a)))
            .chain(q.order.iter().map(|a| (2, *a)))
            .collect();
    let n = items.len().min(20);
    let mut out = Vec::new();
    for mask in 0u32..(1u32 << n) {
        if n > FULL_RELAXATION_LIMIT && mask.count_ones() > 2 {
            continue;
        }
        let mut r = q.clone();
        for (i, (kind, a)) in items.iter().enumerate().take(n) {
            if mask & (1 << i) != 0 {
                match kind {
                    0 => {
                        r.eq.remove(a);
                    }
                    1 => {
                        r.range.remove(a);
                    }
                    _ => r.order.retain(|o| o != a),
                }
                r.select.insert(*a);
            }
        }
        if !r.eq.is_empty() {
            out.push(r);
        }
    }
    out
}

/// Splits `q` at relationship `rel`: the prefix query on the side of `cut` (returning `cut`'s id and
/// the selected attributes of its side) and the remainder query keyed by `cut`'s id.
pub fn decompose(model: &Model, q: &Query, rel: usize, cut: usize) -> Option<(Query, Query)> {
    let side_p = q.graph.component(model, cut, Some(rel));
    let other = model.other(rel, cut);
    let side_r = q.graph.component(model, other, Some(rel));
    let in_p = |a: &Attr| side_p.contains(&a.entity);
    let in_r = |a: &Attr| side_r.contains(&a.entity);
    let mut select: BTreeSet<Attr> = q
        .select
        .iter()
        .chain(&q.order)
        .copied()
        .filter(in_p)
        .collect();
    select.insert(Attr::id(cut));
    let prefix = Query {
        graph: q.graph.induced(model, &side_p),
        select,
        eq: q.eq.iter().copied().filter(in_p).collect(),
        range: q.range.iter().copied().filter(in_p).collect(),
        order: Vec::new(),
        limit: None,
    };
    let trivial = side_p.len() == 1
        && prefix.range.is_empty()
        && prefix.eq.iter().all(|a| *a == Attr::id(cut))
        && prefix.select.iter().all(|a| *a == Attr::id(cut));
    if prefix.eq.is_empty() || trivial {
        return None;
    }
    let mut rest = side_r.clone();
    rest.insert(cut);
    let mut eq: BTreeSet<Attr> = q.eq.iter().copied().filter(in_r).collect();
    eq.insert(Attr::id(cut));
    let remainder = Query {
        graph: q.graph.induced(model, &rest),
        select: q.select.iter().copied().filter(in_r).collect(),
        eq,
        range: q.range.iter().copied().filter(in_r).collect(),
        order: q.order.iter().copied().filter(in_r).collect(),
        limit: None,
    };
    Some((prefix, remainder))
}

/// The enumerator: Algorithm 2 per query, Algorithm 4 for updates, then combination.
pub struct Enumerator<'m> {
    model: &'m Model,
    /// The candidates found so far.
    pub pool: Pool,
    seen: HashSet<Query>,
}

impl<'m> Enumerator<'m> {
    /// An empty enumerator.
    pub fn new(model: &'m Model) -> Self {
        Enumerator {
            model,
            pool: Pool::default(),
            seen: HashSet::new(),
        }
    }

    /// Adds the materialized view of `q`, and when it has values, its key-only version and one
    /// id ↦ values column family per entity with selected attributes.
    pub fn add_materialized(&mut self, q: &Query) {
        let mv = materialize(q);
        if !mv.values.is_empty() {
            let key_only = ColumnFamily::new(
                mv.key.clone(),
                mv.clustering.clone(),
                BTreeSet::new(),
                mv.graph.clone(),
            );
            self.pool.add(key_only);
            for &e in &q.graph.entities {
                let values: BTreeSet<Attr> = mv
                    .values
                    .iter()
                    .copied()
                    .filter(|a| a.entity == e && !a.is_id())
                    .collect();
                if !values.is_empty() {
                    let cf = ColumnFamily::new(
                        BTreeSet::from([Attr::id(e)]),
                        Vec::new(),
                        values,
                        crate::graph::QueryGraph::single(e),
                    );
                    self.pool.add(cf);
                }
            }
        }
        self.pool.add(mv);
    }

    /// Algorithm 2: the materialized view, relaxed prefixes at every edge, and the remainders recursively.
    pub fn enumerate(&mut self, q: &Query) {
        if !self.seen.insert(q.clone()) {
            return;
        }
        for r in relax(q) {
            self.add_materialized(&r);
        }
        let model = self.model;
        for &rel in &q.graph.edges {
            let r = &model.relationships[rel];
            for cut in [r.from, r.to] {
                if let Some((prefix, remainder)) = decompose(model, q, rel, cut) {
                    for p in relax(&prefix) {
                        self.add_materialized(&p);
                    }
                    self.enumerate(&remainder);
                }
            }
        }
    }

    /// Algorithm 4: support queries of every update against every candidate, twice.
    pub fn enumerate_support(&mut self, updates: &[&Update]) {
        for _ in 0..2 {
            let snapshot = self.pool.candidates.clone();
            for u in updates {
                for cf in &snapshot {
                    if let Some(sq) = support_queries(self.model, u, cf) {
                        for q in sq.queries {
                            self.enumerate(&q);
                        }
                    }
                }
            }
        }
    }

    /// Combination: for two candidates with the same partition key, no clustering key and different
    /// values, a candidate with the union of the values.
    pub fn combine(&mut self) {
        let model = self.model;
        let flat: Vec<ColumnFamily> = self
            .pool
            .candidates
            .iter()
            .filter(|c| c.clustering.is_empty() && !c.values.is_empty())
            .cloned()
            .collect();
        for (i, a) in flat.iter().enumerate() {
            for b in &flat[i + 1..] {
                if a.key == b.key
                    && a.values != b.values
                    && let Some(graph) = a.graph.union(&b.graph, model)
                {
                    let values = a.values.union(&b.values).copied().collect();
                    self.pool
                        .add(ColumnFamily::new(a.key.clone(), Vec::new(), values, graph));
                }
            }
        }
    }
}
