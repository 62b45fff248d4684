//! Query planning: the plan space of a query over the candidate pool, as a DAG of lookup steps.
//!
//! A state is what remains to be answered: a subgraph of the query graph, the equality values known
//! (parameters, and the id of the entity joined from the previous step), the range predicates and the
//! attributes still to fetch. A step is a get against one column family, followed by client-side
//! filtering; it leads to a smaller state or to the answer. States are shared, so the plan space is a
//! DAG (the paper's plan graph, Fig. 9).

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use crate::budget::{Budget, PLANNING_SHARE};
use crate::column_family::ColumnFamily;
use crate::cost::CostModel;
use crate::enumerate::Pool;
use crate::error::Result;
use crate::graph::{QueryGraph, RANGE_SELECTIVITY, eq_selectivity, estimate_rows};
use crate::model::{Attr, Model};
use crate::query::Query;

/// What remains to be answered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct State {
    /// The remaining part of the query graph.
    pub graph: QueryGraph,
    /// Attributes whose values are known for an equality lookup.
    pub eq: BTreeSet<Attr>,
    /// Range predicates still to apply.
    pub range: BTreeSet<Attr>,
    /// Attributes still to fetch.
    pub select: BTreeSet<Attr>,
    /// The entity whose ids the previous step produced.
    pub join: Option<usize>,
    /// Whether the rows so far are in the query's order.
    pub sorted: bool,
}

/// One lookup step of a plan (with its filter, sort and limit).
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The state the step starts from.
    pub from: usize,
    /// The state it leads to; `None` when it answers the query.
    pub to: Option<usize>,
    /// The column family (index in the pool).
    pub cf: usize,
    /// Number of gets.
    pub gets: f64,
    /// Rows returned per get.
    pub width: f64,
    /// Clustering attributes bound in the get (equalities, then at most one range).
    pub clustering_bound: Vec<Attr>,
    /// Predicates applied by the client after the get.
    pub filter: Vec<Attr>,
    /// A client-side sort follows.
    pub sort: bool,
    /// Rows after the step.
    pub rows: f64,
    /// The step's cost `T(gets, width)`, plus the sort penalty.
    pub cost: f64,
}

/// The plan space of one query.
#[derive(Debug, Clone, Serialize)]
pub struct PlanSpace {
    /// The query.
    pub query: Query,
    /// States; `states[0]` is the whole query.
    pub states: Vec<State>,
    /// Steps (edges of the DAG). Steps into states that cannot be completed are left out.
    pub steps: Vec<Step>,
}

impl PlanSpace {
    /// Whether the query has at least one plan.
    pub fn is_answerable(&self) -> bool {
        self.steps.iter().any(|s| s.from == 0)
    }

    /// Every complete plan as its list of step indices (exponential: for tests and reports).
    pub fn plans(&self) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.walk(0, &mut path, &mut out);
        out
    }

    fn walk(&self, state: usize, path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        for (i, s) in self
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.from == state)
        {
            path.push(i);
            match s.to {
                None => out.push(path.clone()),
                Some(next) => self.walk(next, path, out),
            }
            path.pop();
        }
    }

    /// The cheapest plan using only column families for which `allowed` holds.
    pub fn cheapest(&self, allowed: impl Fn(usize) -> bool) -> Option<(f64, Vec<usize>)> {
        let mut memo: HashMap<usize, Option<(f64, Vec<usize>)>> = HashMap::new();
        self.best_from(0, &allowed, &mut memo)
    }

    fn best_from(
        &self,
        state: usize,
        allowed: &dyn Fn(usize) -> bool,
        memo: &mut HashMap<usize, Option<(f64, Vec<usize>)>>,
    ) -> Option<(f64, Vec<usize>)> {
        if let Some(m) = memo.get(&state) {
            return m.clone();
        }
        let mut best: Option<(f64, Vec<usize>)> = None;
        for (i, s) in self.steps.iter().enumerate() {
            if s.from != state || !allowed(s.cf) {
                continue;
            }
            let rest = match s.to {
                None => Some((0.0, Vec::new())),
                Some(next) => self.best_from(next, allowed, memo),
            };
            if let Some((c, mut path)) = rest {
                let total = c + s.cost;
                if best.as_ref().is_none_or(|(b, _)| total < *b - 1e-12) {
                    path.insert(0, i);
                    best = Some((total, path));
                }
            }
        }
        memo.insert(state, best.clone());
        best
    }
}

/// Plans `q` against every usable candidate of `pool`.
pub fn plan(model: &Model, cost: &CostModel, pool: &Pool, q: &Query) -> PlanSpace {
    match plan_within(model, cost, pool, q, &Budget::unlimited()) {
        Ok((space, _)) => space,
        // Unreachable: an unlimited budget has no interrupt. An empty space says "no plan".
        Err(_) => PlanSpace {
            query: q.clone(),
            states: Vec::new(),
            steps: Vec::new(),
        },
    }
}

/// [`plan`] within a budget: once [`PLANNING_SHARE`] of its time limit has passed, no new
/// intermediate state is opened (steps that answer the query, or lead to states already planned,
/// still count), so the plan space is smaller but every query keeps the plans found so far.
/// Returns the plan space and whether the time limit cut it.
///
/// # Errors
/// [`crate::error::AdvisorError::Cancelled`] when the budget's interrupt is set.
pub fn plan_within(
    model: &Model,
    cost: &CostModel,
    pool: &Pool,
    q: &Query,
    budget: &Budget,
) -> Result<(PlanSpace, bool)> {
    budget.check()?;
    let reachable: BTreeSet<Attr> =
        q.eq.iter()
            .copied()
            .chain(q.graph.entities.iter().map(|e| Attr::id(*e)))
            .collect();
    let usable: Vec<usize> = pool
        .candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| q.graph.contains(&c.graph) && c.key.is_subset(&reachable))
        .map(|(i, _)| i)
        .collect();
    let mut select = q.select.clone();
    select.extend(&q.order);
    let root = State {
        graph: q.graph.clone(),
        eq: q.eq.clone(),
        range: q.range.clone(),
        select,
        join: None,
        sorted: q.order.is_empty(),
    };
    let mut p = Planner {
        model,
        cost,
        pool,
        q,
        usable,
        states: vec![root.clone()],
        index: HashMap::from([(root, 0)]),
        live: HashMap::new(),
        steps: Vec::new(),
        budget,
        cut: false,
        cancelled: false,
        polls: 0,
    };
    p.expand(0);
    if p.cancelled {
        return Err(crate::error::AdvisorError::Cancelled);
    }
    let cut = p.cut;
    let live = p.live;
    let steps = p
        .steps
        .into_iter()
        .filter(|s| s.to.is_none_or(|t| live.get(&t).copied().unwrap_or(false)))
        .collect();
    Ok((
        PlanSpace {
            query: q.clone(),
            states: p.states,
            steps,
        },
        cut,
    ))
}

struct Planner<'a> {
    model: &'a Model,
    cost: &'a CostModel,
    pool: &'a Pool,
    q: &'a Query,
    usable: Vec<usize>,
    states: Vec<State>,
    index: HashMap<State, usize>,
    live: HashMap<usize, bool>,
    steps: Vec<Step>,
    budget: &'a Budget,
    /// The time limit kept some states from being opened.
    cut: bool,
    /// The interrupt was seen: the search unwinds.
    cancelled: bool,
    /// Budget polls are every 64 states (reading the clock is not free).
    polls: u32,
}

impl Planner<'_> {
    /// Expands a state; returns whether it can be completed.
    fn expand(&mut self, s: usize) -> bool {
        if let Some(&l) = self.live.get(&s) {
            return l;
        }
        self.live.insert(s, false);
        self.polls = self.polls.wrapping_add(1);
        if self.polls % 64 == 1 {
            if self.budget.check().is_err() {
                self.cancelled = true;
            }
            if self.budget.past(PLANNING_SHARE) {
                self.cut = true;
            }
        }
        if self.cancelled {
            return false;
        }
        let state = self.states[s].clone();
        let n = self.rows_before(&state);
        let mut any = false;
        for &j in &self.usable.clone() {
            let cf = &self.pool.candidates[j];
            if !cf.key.is_subset(&state.eq) || !state.graph.contains(&cf.graph) {
                continue;
            }
            if let Some(x) = state.join
                && !cf.key.contains(&Attr::id(x))
            {
                continue;
            }
            for next in self.transitions(&state, cf) {
                let next_id = match next {
                    None => None,
                    Some(ns) => {
                        let id = match self.index.get(&ns) {
                            Some(&id) => id,
                            // Out of time: no new states, only the plans already open.
                            None if self.cut => continue,
                            None => {
                                self.states.push(ns.clone());
                                self.index.insert(ns, self.states.len() - 1);
                                self.states.len() - 1
                            }
                        };
                        if !self.expand(id) {
                            continue;
                        }
                        Some(id)
                    }
                };
                let step = self.step(s, &state, n, j, next_id);
                self.steps.push(step);
                any = true;
            }
        }
        self.live.insert(s, any);
        any
    }

    /// Estimated rows entering a state: the already processed part of the query.
    fn rows_before(&self, state: &State) -> f64 {
        let Some(x) = state.join else { return 1.0 };
        let q = self.q;
        let done = difference_with(&q.graph.entities, &state.graph.entities, x);
        let g = q.graph.induced(self.model, &done);
        let eq: BTreeSet<Attr> =
            q.eq.iter()
                .copied()
                .filter(|a| done.contains(&a.entity) && !state.eq.contains(a))
                .collect();
        let range: BTreeSet<Attr> = q
            .range
            .iter()
            .copied()
            .filter(|a| done.contains(&a.entity) && !state.range.contains(a))
            .collect();
        estimate_rows(self.model, &g, &eq, &range)
    }

    /// The states a lookup on `cf` can lead to (`None`: the answer), without repeats.
    fn transitions(&self, state: &State, cf: &ColumnFamily) -> Vec<Option<State>> {
        let model = self.model;
        let needed: BTreeSet<Attr> = state
            .select
            .iter()
            .chain(&state.eq)
            .chain(&state.range)
            .copied()
            .collect();
        let missing: BTreeSet<Attr> = needed.iter().copied().filter(|a| !cf.has(*a)).collect();
        if cf.graph == state.graph && missing.is_empty() {
            return vec![None];
        }
        let sorted = if state.join.is_none() {
            self.first_step_sorted(state, cf)
        } else {
            state.sorted
        };
        let boundary: Vec<usize> = state
            .graph
            .edges
            .iter()
            .copied()
            .filter(|&r| {
                let rel = &model.relationships[r];
                cf.graph.entities.contains(&rel.from) != cf.graph.entities.contains(&rel.to)
            })
            .collect();
        let mut out: Vec<Option<State>> = Vec::new();
        for &x in &cf.graph.entities {
            if !cf.has(Attr::id(x)) {
                continue;
            }
            let ok_boundary = boundary.iter().all(|&r| {
                let rel = &model.relationships[r];
                rel.from == x || rel.to == x
            });
            if !ok_boundary
                || missing
                    .iter()
                    .any(|a| cf.graph.entities.contains(&a.entity) && a.entity != x)
            {
                continue;
            }
            let keep = difference_with(&state.graph.entities, &cf.graph.entities, x);
            let in_keep = |a: &Attr| keep.contains(&a.entity) && (a.entity != x || !cf.has(*a));
            let mut eq: BTreeSet<Attr> = state.eq.iter().copied().filter(in_keep).collect();
            eq.insert(Attr::id(x));
            let next = State {
                graph: state.graph.induced(model, &keep),
                eq,
                range: state.range.iter().copied().filter(in_keep).collect(),
                select: state.select.iter().copied().filter(in_keep).collect(),
                join: Some(x),
                sorted,
            };
            if next.graph == state.graph
                && next.eq == state.eq
                && next.range == state.range
                && next.select == state.select
            {
                continue;
            }
            // Only `x`'s id is left: the step answers the query.
            let done = next.graph.entities.len() == 1
                && next.range.is_empty()
                && next
                    .select
                    .iter()
                    .chain(&next.eq)
                    .all(|a| *a == Attr::id(x));
            let t = if done { None } else { Some(next) };
            if !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    fn first_step_sorted(&self, state: &State, cf: &ColumnFamily) -> bool {
        if self.q.order.is_empty() {
            return true;
        }
        let mut rest = cf.clustering.iter().skip_while(|a| state.eq.contains(a));
        self.q.order.iter().all(|o| rest.next() == Some(o))
    }

    fn step(&self, from: usize, state: &State, n: f64, j: usize, to: Option<usize>) -> Step {
        let model = self.model;
        let cf = &self.pool.candidates[j];
        let mut width = cf.rows(model);
        for a in &cf.key {
            width *= eq_selectivity(model, *a);
        }
        let mut clustering_bound = Vec::new();
        let mut it = cf.clustering.iter().peekable();
        while let Some(a) = it.peek() {
            if state.eq.contains(a) {
                width *= eq_selectivity(model, **a);
                clustering_bound.push(**a);
                it.next();
            } else {
                break;
            }
        }
        if let Some(a) = it.peek()
            && state.range.contains(a)
        {
            width *= RANGE_SELECTIVITY;
            clustering_bound.push(**a);
        }
        let mut rows = n * width;
        let mut filter = Vec::new();
        for a in state.eq.iter().chain(&state.range) {
            if cf.has(*a) && !cf.key.contains(a) && !clustering_bound.contains(a) {
                filter.push(*a);
                rows *= if state.eq.contains(a) {
                    eq_selectivity(model, *a)
                } else {
                    RANGE_SELECTIVITY
                };
            }
        }
        let next_sorted = if state.join.is_none() {
            self.first_step_sorted(state, cf)
        } else {
            state.sorted
        };
        let sort = to.is_none() && !next_sorted;
        // LIMIT bounds the rows read when this step answers the query in order and unfiltered:
        // the client stops after `limit` rows (at most that many per get, and no more gets than
        // needed to collect them).
        let mut n = n;
        if let (None, false, true, Some(limit)) =
            (to, sort, filter.is_empty(), self.q.limit.map(|l| l as f64))
        {
            if width > 0.0 {
                n = n.min((limit / width).ceil().max(1.0));
            }
            width = width.min(limit);
            rows = rows.min(limit);
        }
        let mut cost = self.cost.lookup(n, width);
        if sort {
            cost += self.cost.sort;
        }
        Step {
            from,
            to,
            cf: j,
            gets: n,
            width,
            clustering_bound,
            filter,
            sort,
            rows,
            cost,
        }
    }
}

/// The entities of `a` not in `b`, and `x`.
fn difference_with(a: &BTreeSet<usize>, b: &BTreeSet<usize>, x: usize) -> BTreeSet<usize> {
    let mut out: BTreeSet<usize> = a.difference(b).copied().collect();
    out.insert(x);
    out
}
