//! Candidate enumeration ([NoSE] Algorithms 1, 2 and 4, and candidate combination).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::budget::{Budget, ENUMERATION_SHARE};
use crate::column_family::ColumnFamily;
use crate::error::Result;
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

/// `q`'s entities on either side of relationship `rel`: those reached from `cut` without crossing
/// it (the prefix's side) and those reached from the entity across it, `far` (the remainder's).
struct Sides {
    p: BTreeSet<usize>,
    far: usize,
    r: BTreeSet<usize>,
}

impl Sides {
    fn new(model: &Model, q: &Query, rel: usize, cut: usize) -> Sides {
        let far = model.other(rel, cut);
        Sides {
            p: q.graph.component(model, cut, Some(rel)),
            far,
            r: q.graph.component(model, far, Some(rel)),
        }
    }

    /// The prefix query over `entities`: `q`'s predicates on the prefix's side, its selected
    /// and (with `ordered`, also kept as the order) ORDER BY attributes there, and `key`'s id.
    fn prefix(
        &self,
        model: &Model,
        q: &Query,
        entities: &BTreeSet<usize>,
        key: usize,
        ordered: bool,
    ) -> Query {
        let in_p = |a: &Attr| self.p.contains(&a.entity);
        let mut select: BTreeSet<Attr> = q
            .select
            .iter()
            .chain(&q.order)
            .copied()
            .filter(in_p)
            .collect();
        select.insert(Attr::id(key));
        Query {
            graph: q.graph.induced(model, entities),
            select,
            eq: q.eq.iter().copied().filter(in_p).collect(),
            range: q.range.iter().copied().filter(in_p).collect(),
            order: if ordered {
                q.order.iter().copied().filter(in_p).collect()
            } else {
                Vec::new()
            },
            limit: None,
        }
    }

    /// The remainder query over `entities`: the rest of `q` on the remainder's side, keyed by
    /// `key`'s id.
    fn remainder(&self, model: &Model, q: &Query, entities: &BTreeSet<usize>, key: usize) -> Query {
        let in_r = |a: &Attr| self.r.contains(&a.entity);
        let mut eq: BTreeSet<Attr> = q.eq.iter().copied().filter(in_r).collect();
        eq.insert(Attr::id(key));
        Query {
            graph: q.graph.induced(model, entities),
            select: q.select.iter().copied().filter(in_r).collect(),
            eq,
            range: q.range.iter().copied().filter(in_r).collect(),
            order: q.order.iter().copied().filter(in_r).collect(),
            limit: None,
        }
    }
}

/// Splits `q` at relationship `rel`: the prefix query on the side of `cut` (returning `cut`'s id and
/// the selected attributes of its side) and the remainder query keyed by `cut`'s id.
pub fn decompose(model: &Model, q: &Query, rel: usize, cut: usize) -> Option<(Query, Query)> {
    let sides = Sides::new(model, q, rel, cut);
    let prefix = sides.prefix(model, q, &sides.p, cut, false);
    let trivial = sides.p.len() == 1
        && prefix.range.is_empty()
        && prefix.eq.iter().all(|a| *a == Attr::id(cut))
        && prefix.select.iter().all(|a| *a == Attr::id(cut));
    if prefix.eq.is_empty() || trivial {
        return None;
    }
    let mut rest = sides.r.clone();
    rest.insert(cut);
    let remainder = sides.remainder(model, q, &rest, cut);
    Some((prefix, remainder))
}

/// Splits `q` at relationship `rel` one entity further than [`decompose`]: the prefix query on the
/// side of `cut` also crosses `rel` and returns the id of the entity beyond it (`next`), and the
/// remainder is the other side alone, keyed by `next`'s id. The prefix's column family then carries
/// `next`'s id in its clustering key after the prefix's own attributes (e.g.
/// `[users.id][buynow.date, buynow.id, items.id][buynow.qty]`), which saves the remainder one get
/// (from `cut`'s id to `next`'s). `None` when the remainder would need nothing but `next`'s id, or
/// when the prefix has neither an ORDER BY attribute nor a range predicate.
pub fn decompose_past(model: &Model, q: &Query, rel: usize, cut: usize) -> Option<(Query, Query)> {
    let sides = Sides::new(model, q, rel, cut);
    let next = sides.far;
    let mut prefix_entities = sides.p.clone();
    prefix_entities.insert(next);
    let prefix = sides.prefix(model, q, &prefix_entities, next, true);
    // Only where the prefix orders its rows (ORDER BY or a range on its side): there the next
    // entity's id rides in a clustering key that is needed anyway. Without it the shape only
    // duplicates the plain prefix plus one get, and on the Watts-Strogatz benchmark those extra
    // candidates made CBC's search many times longer (WS 3x: 5 s to over 30 s).
    if prefix.eq.is_empty() || (prefix.order.is_empty() && prefix.range.is_empty()) {
        return None;
    }
    let remainder = sides.remainder(model, q, &sides.r, next);
    let trivial = sides.r.len() == 1
        && remainder.range.is_empty()
        && remainder.select.iter().all(|a| *a == Attr::id(next))
        && remainder.eq.iter().all(|a| *a == Attr::id(next));
    if trivial {
        return None;
    }
    Some((prefix, remainder))
}

/// The default bound on the enumeration's work ([`Enumerator::work_limit`]), in attributes and
/// entities of the candidates and queries it has built: far above what the examples and the
/// Watts–Strogatz benchmarks need (WS 4x: about 40,000), reached by a chain of about 130
/// entities with one query along it, whose enumeration otherwise grows with the cube of its
/// length. Past it the enumeration stops widening, as at a time limit.
pub const DEFAULT_WORK_LIMIT: u64 = 1_000_000;

/// The enumerator: Algorithm 2 per query, Algorithm 4 for updates, then combination.
pub struct Enumerator<'m> {
    model: &'m Model,
    /// The candidates found so far.
    pub pool: Pool,
    seen: HashSet<Query>,
    budget: Budget,
    /// The time limit (or the work bound) stopped the enumeration before it was complete.
    pub cut: bool,
    /// Also enumerate the prefixes one entity past an edge ([`decompose_past`]).
    pub past_prefixes: bool,
    /// The enumeration stops widening once it has built this much (attributes and entities of
    /// the candidates added and the queries decomposed); `None`: no bound.
    pub work_limit: Option<u64>,
    /// The work done so far, in the units of [`Enumerator::work_limit`].
    pub work: u64,
    /// The work bound (not the time limit) stopped the enumeration.
    pub cut_by_work: bool,
}

impl<'m> Enumerator<'m> {
    /// An empty enumerator without a time limit.
    pub fn new(model: &'m Model) -> Self {
        Enumerator::with_budget(model, Budget::unlimited())
    }

    /// An empty enumerator that stops widening once [`ENUMERATION_SHARE`] of the budget's time
    /// limit has passed, and returns [`crate::error::AdvisorError::Cancelled`] once its interrupt is set.
    pub fn with_budget(model: &'m Model, budget: Budget) -> Self {
        Enumerator {
            model,
            pool: Pool::default(),
            seen: HashSet::new(),
            budget,
            cut: false,
            past_prefixes: true,
            work_limit: Some(DEFAULT_WORK_LIMIT),
            work: 0,
            cut_by_work: false,
        }
    }

    /// Whether the time share of enumeration or its work bound is used up (and notes it); `Err`
    /// when interrupted.
    fn out_of_time(&mut self) -> Result<bool> {
        self.budget.check()?;
        if self.cut {
            return Ok(true);
        }
        if self.work_limit.is_some_and(|l| self.work > l) {
            self.cut = true;
            self.cut_by_work = true;
        } else if self.budget.past(ENUMERATION_SHARE) {
            self.cut = true;
        }
        Ok(self.cut)
    }

    /// Adds a candidate to the pool, counting its size as work when it is new.
    fn add(&mut self, cf: ColumnFamily) {
        let size =
            (cf.key.len() + cf.clustering.len() + cf.values.len() + cf.graph.entities.len()) as u64;
        let before = self.pool.len();
        self.pool.add(cf);
        if self.pool.len() > before {
            self.work += size;
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
            self.add(key_only);
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
                    self.add(cf);
                }
            }
        }
        self.add(mv);
    }

    /// Algorithm 2: the materialized view, relaxed prefixes at every edge (also the prefixes that
    /// reach one entity past the edge, [`decompose_past`]), and the remainders, breadth first.
    /// Past the time share only the materialized view of `q` itself is added (it answers `q`).
    ///
    /// # Errors
    /// [`crate::error::AdvisorError::Cancelled`] when the budget's interrupt is set.
    pub fn enumerate(&mut self, q: &Query) -> Result<()> {
        if self.out_of_time()? {
            if self.seen.insert(q.clone()) {
                self.add_materialized(q);
            }
            return Ok(());
        }
        let model = self.model;
        let first = q;
        let mut work = std::collections::VecDeque::from([q.clone()]);
        while let Some(q) = work.pop_front() {
            if self.out_of_time()? {
                // The query itself keeps its own materialized view (it answers it).
                if self.seen.insert(first.clone()) {
                    self.add_materialized(first);
                }
                break;
            }
            if !self.seen.insert(q.clone()) {
                continue;
            }
            self.work += (q.graph.entities.len() + q.select.len()) as u64;
            for r in relax(&q) {
                self.add_materialized(&r);
            }
            for &rel in &q.graph.edges {
                if self.out_of_time()? {
                    break;
                }
                let r = &model.relationships[rel];
                for cut in [r.from, r.to] {
                    if let Some((prefix, remainder)) = decompose(model, &q, rel, cut) {
                        for p in relax(&prefix) {
                            self.add_materialized(&p);
                        }
                        self.work += remainder.graph.entities.len() as u64;
                        work.push_back(remainder);
                    }
                    // One entity past the edge: only along a foreign key (each `cut` has one next).
                    if !self.past_prefixes || r.from != cut {
                        continue;
                    }
                    if let Some((prefix, remainder)) = decompose_past(model, &q, rel, cut) {
                        for p in relax(&prefix) {
                            self.add_materialized(&p);
                        }
                        self.work += remainder.graph.entities.len() as u64;
                        work.push_back(remainder);
                    }
                }
            }
        }
        Ok(())
    }

    /// Algorithm 4: support queries of every update against every candidate, twice. Past the time
    /// share, only their materialized views are added (so every support query has a plan).
    ///
    /// # Errors
    /// [`crate::error::AdvisorError::Cancelled`] when the budget's interrupt is set.
    pub fn enumerate_support(&mut self, updates: &[&Update]) -> Result<()> {
        for _ in 0..2 {
            let snapshot = self.pool.candidates.clone();
            for u in updates {
                for cf in &snapshot {
                    self.budget.check()?;
                    if let Some(sq) = support_queries(self.model, u, cf) {
                        for q in sq.queries {
                            self.enumerate(&q)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Combination: for two candidates with the same partition key, no clustering key and different
    /// values, a candidate with the union of the values. Candidates are grouped by partition key
    /// first (only pairs within a group are compared); past the time share, combination stops.
    pub fn combine(&mut self) {
        let model = self.model;
        let mut groups: HashMap<&BTreeSet<Attr>, Vec<usize>> = HashMap::new();
        for (i, c) in self.pool.candidates.iter().enumerate() {
            if c.clustering.is_empty() && !c.values.is_empty() {
                groups.entry(&c.key).or_default().push(i);
            }
        }
        let mut found = Vec::new();
        'groups: for members in groups.values() {
            for (x, &i) in members.iter().enumerate() {
                if self.budget.past(ENUMERATION_SHARE) {
                    self.cut = true;
                    break 'groups;
                }
                let a = &self.pool.candidates[i];
                for &k in &members[x + 1..] {
                    let b = &self.pool.candidates[k];
                    if a.values != b.values
                        && let Some(graph) = a.graph.union(&b.graph, model)
                    {
                        let values = a.values.union(&b.values).copied().collect();
                        found.push((
                            i,
                            k,
                            ColumnFamily::new(a.key.clone(), Vec::new(), values, graph),
                        ));
                    }
                }
            }
        }
        // In the order of the pairs in the pool: the candidates' numbering stays deterministic.
        found.sort_by_key(|(i, k, _)| (*i, *k));
        for (_, _, cf) in found {
            self.pool.add(cf);
        }
    }
}
