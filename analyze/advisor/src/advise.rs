//! The advisor's pipeline: enumerate, plan, formulate, solve, and read the plans off the solution.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::bip::{Demand, Formulation, Weighted};
use crate::budget::{Budget, Interrupt};
use crate::column_family::ColumnFamily;
use crate::cost::CostModel;
use crate::cover;
use crate::enumerate::{Enumerator, Pool};
use crate::error::{AdvisorError, Result};
use crate::model::Model;
use crate::planner::{PlanSpace, plan, plan_within};
use crate::query::{Query, Update};
use crate::render::render_query;
use crate::solver::solve_with;
use crate::support::{Support, support_queries};
use crate::workload::{Body, Workload};

/// Options of one run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The workload mix whose weights apply.
    pub mix: String,
    /// The space budget in bytes.
    pub space_budget: Option<f64>,
    /// The cost model.
    pub cost: CostModel,
    /// Seconds the solver may spend per stage; past it the best schema found is taken and marked
    /// not proven optimal.
    pub time_limit: Option<f64>,
    /// How the program is solved (the default prunes, splits and solves once).
    pub strategy: crate::solver::Strategy,
    /// The caller's cheap "stop now" check (Ctrl-C): every phase polls it.
    pub interrupt: Interrupt,
    /// Enumerate prefixes that carry the next entity's id after an edge
    /// ([`crate::enumerate::decompose_past`]); off only to measure what they cost.
    pub past_prefixes: bool,
    /// The bound on the enumeration's work without which a long query's enumeration grows with
    /// the cube of its length ([`crate::enumerate::DEFAULT_WORK_LIMIT`]); `None`: unbounded.
    pub enumeration_limit: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mix: "default".into(),
            space_budget: None,
            cost: CostModel::default(),
            time_limit: None,
            strategy: crate::solver::Strategy::default(),
            interrupt: Interrupt::none(),
            past_prefixes: true,
            enumeration_limit: Some(crate::enumerate::DEFAULT_WORK_LIMIT),
        }
    }
}

/// A recommended column family.
#[derive(Debug, Clone, Serialize)]
pub struct RecommendedCf {
    /// Its name (`cf1`, `cf2`, ...).
    pub name: String,
    /// The triple `[K][C][V]`.
    pub triple: String,
    /// `CREATE TABLE` for Cassandra.
    pub cql: String,
    /// Estimated rows.
    pub rows: f64,
    /// Estimated size in bytes.
    pub size_bytes: f64,
    /// The column family itself.
    pub definition: ColumnFamily,
}

/// One step of a chosen plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlanStep {
    /// The column family (`cfN`).
    pub cf: String,
    /// Number of gets.
    pub gets: f64,
    /// Rows per get.
    pub width: f64,
    /// Clustering attributes bound in the get.
    pub clustering_bound: Vec<String>,
    /// Attributes filtered by the client.
    pub filter: Vec<String>,
    /// A client-side sort follows.
    pub sort: bool,
    /// Rows after the step.
    pub rows: f64,
    /// Cost of the step (ms).
    pub cost: f64,
}

/// The chosen plan of a query.
#[derive(Debug, Clone, Serialize)]
pub struct QueryPlan {
    /// The statement's name (support queries: `UPDATE-NAME/cfN/i`).
    pub name: String,
    /// The query.
    pub text: String,
    /// Weight in the mix.
    pub weight: f64,
    /// Lookups, filters, sort.
    pub steps: Vec<PlanStep>,
    /// LIMIT, applied last.
    pub limit: Option<u64>,
    /// Cost of one execution (ms).
    pub cost: f64,
}

/// Maintaining one column family under one update.
#[derive(Debug, Clone, Serialize)]
pub struct Maintenance {
    /// The column family.
    pub cf: String,
    /// Support queries with their plans.
    pub support: Vec<QueryPlan>,
    /// Rows written per execution.
    pub rows: f64,
    /// Old rows are deleted.
    pub deletes: bool,
    /// New rows are put.
    pub inserts: bool,
    /// Cost of the writes (ms).
    pub write_cost: f64,
}

/// The plan of an update.
#[derive(Debug, Clone, Serialize)]
pub struct UpdatePlan {
    /// The statement's name.
    pub name: String,
    /// The statement.
    pub text: String,
    /// Weight in the mix.
    pub weight: f64,
    /// Column families to maintain.
    pub maintain: Vec<Maintenance>,
    /// Cost of one execution (ms): support queries and writes.
    pub cost: f64,
}

/// The advisor's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    /// The mix.
    pub mix: String,
    /// The schema.
    pub column_families: Vec<RecommendedCf>,
    /// One plan per query.
    pub queries: Vec<QueryPlan>,
    /// One plan per update.
    pub updates: Vec<UpdatePlan>,
    /// Σ weight × query cost.
    pub query_cost: f64,
    /// Σ weight × update cost.
    pub update_cost: f64,
    /// query_cost + update_cost.
    pub total_cost: f64,
    /// Σ size of the column families.
    pub total_size_bytes: f64,
    /// Candidates enumerated.
    pub candidates: usize,
    /// Variables of the program.
    pub variables: usize,
    /// Constraints of the program.
    pub constraints: usize,
    /// The solver proved the schema optimal (false: a time limit stopped it).
    pub optimal: bool,
    /// What the time limit cut short (enumeration, planning, the solve), in words.
    pub notes: Vec<String>,
}

/// Everything computed before solving (exposed for tests and the benchmark).
pub struct Prepared<'a> {
    /// The model.
    pub model: &'a Model,
    /// The candidates.
    pub pool: Pool,
    /// Queries: (name, text, weight, plan space).
    pub queries: Vec<(String, String, f64, PlanSpace)>,
    /// Updates: (name, text, weight, update, maintained column families).
    pub updates: Vec<PreparedUpdate>,
    /// The run's clock (started by [`prepare`]) and interrupt.
    pub budget: Budget,
    /// What the time limit cut short so far.
    pub notes: Vec<String>,
}

/// A column family an update modifies: (pool index, what it takes, support query plan spaces).
pub type Maintained = (usize, Support, Vec<PlanSpace>);

/// An update ready for the program: (name, text, weight, update, column families it modifies).
pub type PreparedUpdate = (String, String, f64, Update, Vec<Maintained>);

/// Enumerates candidates and plans every statement.
pub fn prepare<'a>(model: &'a Model, workload: &Workload, opts: &Options) -> Result<Prepared<'a>> {
    let weighted = weighted_statements(workload, opts)?;
    let budget = Budget::new(opts.time_limit, opts.interrupt.clone());
    let mut notes = Vec::new();
    let mut e = Enumerator::with_budget(model, budget.clone());
    e.past_prefixes = opts.past_prefixes;
    e.work_limit = opts.enumeration_limit;
    if opts.time_limit.is_some() {
        // Every query's own materialized view first: whatever the time limit cuts, each query
        // keeps a plan.
        for (s, _) in &weighted {
            if let Body::Query(q) = &s.body {
                e.add_materialized(q);
            }
        }
    }
    for (s, _) in &weighted {
        if let Body::Query(q) = &s.body {
            e.enumerate(q)?;
        }
    }
    let updates: Vec<&Update> = weighted
        .iter()
        .filter_map(|(s, _)| match &s.body {
            Body::Update(u) => Some(u),
            Body::Query(_) => None,
        })
        .collect();
    e.enumerate_support(&updates)?;
    e.combine();
    tracing::debug!(work = e.work, candidates = e.pool.len(), "enumerated");
    if e.cut_by_work {
        notes.push(format!(
            "the enumeration stopped widening at its bound ({} units of work, `--enumeration-limit`) after {:.1} s with {} candidates: the schema is the best among them",
            e.work_limit.unwrap_or_default(),
            budget.elapsed(),
            e.pool.len()
        ));
    } else if e.cut {
        notes.push(format!(
            "the time limit stopped the enumeration after {:.1} s with {} candidates: the schema is the best among them",
            budget.elapsed(),
            e.pool.len()
        ));
    }
    let pool = e.pool;
    plan_all(model, &weighted, pool, opts, budget, notes, true)
}

/// Statements of the mix with their weights.
fn weighted_statements<'w>(
    workload: &'w Workload,
    opts: &Options,
) -> Result<Vec<(&'w crate::workload::Statement, f64)>> {
    let mixes = workload.mixes();
    if !mixes.contains(&opts.mix) {
        return Err(AdvisorError::UnknownMix(
            opts.mix.clone(),
            mixes.into_iter().collect::<Vec<_>>().join(", "),
        ));
    }
    Ok(workload
        .statements
        .iter()
        .filter_map(|s| {
            s.weights
                .get(&opts.mix)
                .filter(|w| **w > 0.0)
                .map(|w| (s, *w))
        })
        .collect())
}

/// Plans every statement over `pool`. With `require`, a query without a plan is an error (the
/// enumerated pool always answers); without it (a given schema), the query is kept with an empty
/// plan space and the report says so.
fn plan_all<'a>(
    model: &'a Model,
    weighted: &[(&crate::workload::Statement, f64)],
    pool: Pool,
    opts: &Options,
    budget: Budget,
    mut notes: Vec<String>,
    require: bool,
) -> Result<Prepared<'a>> {
    let mut queries = Vec::new();
    let mut ups = Vec::new();
    let mut planning_cut = false;
    for (s, w) in weighted {
        match &s.body {
            Body::Query(q) => {
                let (space, cut) = plan_within(model, &opts.cost, &pool, q, &budget)?;
                planning_cut |= cut;
                if require && !space.is_answerable() {
                    return Err(AdvisorError::input(
                        &s.span,
                        format!("no candidate column family can answer query `{}`", s.name),
                    ));
                }
                queries.push((s.name.clone(), s.text.clone(), *w, space));
            }
            Body::Update(u) => {
                let mut maint = Vec::new();
                for (j, cf) in pool.candidates.iter().enumerate() {
                    budget.check()?;
                    if let Some(sup) = support_queries(model, u, cf) {
                        let mut spaces = Vec::with_capacity(sup.queries.len());
                        for q in &sup.queries {
                            let (space, cut) = plan_within(model, &opts.cost, &pool, q, &budget)?;
                            planning_cut |= cut;
                            spaces.push(space);
                        }
                        maint.push((j, sup, spaces));
                    }
                }
                ups.push((s.name.clone(), s.text.clone(), *w, u.clone(), maint));
            }
        }
    }
    if planning_cut {
        notes.push(format!(
            "the time limit stopped the planning at {:.1} s: plans through more column families were not explored for some statements",
            budget.elapsed()
        ));
    }
    Ok(Prepared {
        model,
        pool,
        queries,
        updates: ups,
        budget,
        notes,
    })
}

impl Prepared<'_> {
    /// The column families that can matter: those in some query's plans, and, repeatedly, those in
    /// the support plans of column families that can matter. The others only add write costs.
    pub fn useful(&self) -> BTreeSet<usize> {
        let mut useful: BTreeSet<usize> = self
            .queries
            .iter()
            .flat_map(|q| q.3.steps.iter().map(|s| s.cf))
            .collect();
        loop {
            let before = useful.len();
            for (_, _, _, _, maint) in &self.updates {
                for (j, _, spaces) in maint {
                    if useful.contains(j) {
                        let more: Vec<usize> = spaces
                            .iter()
                            .flat_map(|s| s.steps.iter().map(|st| st.cf))
                            .collect();
                        useful.extend(more);
                    }
                }
            }
            if useful.len() == before {
                return useful;
            }
        }
    }

    /// The program.
    pub fn formulate(&self, opts: &Options) -> Formulation {
        let useful = self.useful();
        let mut spaces = Vec::new();
        for (_, _, w, space) in &self.queries {
            spaces.push(Weighted {
                space,
                weight: *w,
                demand: Demand::One,
            });
        }
        let mut write_cost: BTreeMap<usize, f64> = BTreeMap::new();
        let mut forbidden = Vec::new();
        for (_, _, w, _, maint) in &self.updates {
            // Identical support queries of one update run once, for every column family they serve.
            let mut shared: Vec<(&PlanSpace, Vec<usize>)> = Vec::new();
            for (j, sup, sp) in maint {
                if !useful.contains(j) {
                    continue;
                }
                if sup.impossible || sp.iter().any(|s| !s.is_answerable()) {
                    forbidden.push(*j);
                    continue;
                }
                *write_cost.entry(*j).or_default() +=
                    w * opts.cost.write(sup.rows, sup.inserts, sup.deletes);
                for s in sp {
                    match shared.iter_mut().find(|(x, _)| x.query == s.query) {
                        Some((_, cfs)) => cfs.push(*j),
                        None => shared.push((s, vec![*j])),
                    }
                }
            }
            // A support query another one covers (same rows, fewer attributes) need not run when
            // that one runs.
            let base = spaces.len();
            for (b, (space, cfs)) in shared.iter().enumerate() {
                let covered_by = shared
                    .iter()
                    .enumerate()
                    .filter(|(a, (s, _))| *a != b && s.query.covers(&space.query))
                    .map(|(a, _)| base + a)
                    .collect();
                spaces.push(Weighted {
                    space,
                    weight: *w,
                    demand: Demand::IfAnyChosen {
                        cfs: cfs.clone(),
                        covered_by,
                    },
                });
            }
        }
        let model = self.model;
        let pool = &self.pool;
        Formulation::build(
            &spaces,
            &write_cost,
            &|j| pool.candidates[j].size(model),
            &forbidden,
            opts.space_budget,
        )
    }

    /// Solves and reads off the schema and the plans.
    pub fn recommend(&self, opts: &Options) -> Result<Recommendation> {
        self.budget.check()?;
        let f = self.formulate(opts);
        self.budget.check()?;
        let solved = solve_with(&f, self.budget.solve_seconds(), opts.strategy)?;
        let chosen = f.chosen(&solved.x);
        tracing::debug!(cost = solved.cost, cfs = solved.column_families, "solved");
        let mut r = self.read_off(&chosen, opts, f.vars.len(), f.constraints.len())?;
        // The report prices each statement's cheapest plan over the schema; the program priced
        // the plans it chose. Equal at an optimum (tests/solver.rs pins it); below it when a time
        // limit stopped the solver with plans it had not improved yet.
        if solved.optimal && (r.total_cost - solved.cost).abs() > 1e-6 * solved.cost.abs().max(1.0)
        {
            tracing::warn!(
                reported = r.total_cost,
                objective = solved.cost,
                "the reported cost differs from the program's objective"
            );
        }
        r.optimal = solved.optimal;
        r.notes = self.notes.clone();
        if !solved.optimal {
            r.notes.push(format!(
                "the time limit stopped the solver at {:.1} s: the best schema it had found, not proven optimal",
                self.budget.elapsed()
            ));
        }
        Ok(r)
    }

    /// Candidate `j` of the pool as a recommended column family called `name`.
    fn recommended(&self, j: usize, name: String) -> RecommendedCf {
        let model = self.model;
        let cf = &self.pool.candidates[j];
        RecommendedCf {
            triple: cf.triple(model),
            cql: cf.cql(model, &name),
            rows: cf.rows(model),
            size_bytes: cf.size(model),
            definition: cf.clone(),
            name,
        }
    }

    /// The recommendation for a given set of column families (pool indices).
    pub fn read_off(
        &self,
        chosen: &BTreeSet<usize>,
        opts: &Options,
        variables: usize,
        constraints: usize,
    ) -> Result<Recommendation> {
        let names: BTreeMap<usize, String> = chosen
            .iter()
            .enumerate()
            .map(|(i, j)| (*j, format!("cf{}", i + 1)))
            .collect();
        let (r, _) = self.read_off_named(chosen, &names, opts, variables, constraints, false)?;
        Ok(r)
    }

    /// [`Prepared::read_off`] with the column families' names given. With `partial`, a statement
    /// the schema cannot serve is left out and named in the second result (a query without a plan;
    /// an update with a support query without one) instead of failing.
    pub fn read_off_named(
        &self,
        chosen: &BTreeSet<usize>,
        names: &BTreeMap<usize, String>,
        opts: &Options,
        variables: usize,
        constraints: usize,
        partial: bool,
    ) -> Result<(Recommendation, Vec<String>)> {
        let model = self.model;
        let useful = self.useful();
        let mut unserved = Vec::new();
        let plan_of = |name: String, text: String, weight: f64, space: &PlanSpace| {
            plan_in(model, chosen, names, name, text, weight, space)
        };
        let mut queries = Vec::new();
        let mut query_cost = 0.0;
        for (name, text, w, space) in &self.queries {
            let p = match plan_of(name.clone(), text.clone(), *w, space) {
                Ok(p) => p,
                Err(_) if partial => {
                    unserved.push(format!("query `{name}`: no plan over the schema"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            query_cost += w * p.cost;
            queries.push(p);
        }
        let mut updates = Vec::new();
        let mut update_cost = 0.0;
        'updates: for (name, text, w, _, maint) in &self.updates {
            let mut ms = Vec::new();
            let mut cost = 0.0;
            // The support queries the chosen column families need, each once.
            let mut needed: Vec<&PlanSpace> = Vec::new();
            for (j, sup, spaces) in maint {
                if !chosen.contains(j) {
                    continue;
                }
                if partial && sup.impossible {
                    let cf = names.get(j).cloned().unwrap_or_default();
                    unserved.push(format!("update `{name}`: cannot maintain {cf}"));
                    continue 'updates;
                }
                for s in spaces {
                    if !needed.iter().any(|n| n.query == s.query) {
                        needed.push(s);
                    }
                }
            }
            // The queries that may run in their place: as in the program, the support queries
            // of the column families that can matter and can be maintained, and the needed ones.
            let mut runners: Vec<&PlanSpace> = needed.clone();
            for (j, sup, spaces) in maint {
                if !(chosen.contains(j) || useful.contains(j))
                    || sup.impossible
                    || spaces.iter().any(|s| !s.is_answerable())
                {
                    continue;
                }
                for s in spaces {
                    if !runners.iter().any(|n| n.query == s.query) {
                        runners.push(s);
                    }
                }
            }
            let priced: Vec<(&Query, Option<f64>)> = runners
                .iter()
                .map(|s| {
                    let c = s.cheapest(|j| chosen.contains(&j)).map(|(c, _)| c);
                    (&s.query, c)
                })
                .collect();
            let needed_q: Vec<&Query> = needed.iter().map(|s| &s.query).collect();
            let Some(runs) = cover::cheapest(&needed_q, &priced) else {
                let lost = needed_q
                    .iter()
                    .find(|n| !priced.iter().any(|(r, c)| c.is_some() && r.covers(n)))
                    .map(|n| render_query(model, n))
                    .unwrap_or_default();
                if partial {
                    unserved.push(format!(
                        "update `{name}`: a support query has no plan over the schema ({lost})"
                    ));
                    continue 'updates;
                }
                return Err(AdvisorError::Solver(format!(
                    "no plan for a support query of `{name}` in the chosen schema ({lost})"
                )));
            };
            let mut printed = vec![false; runs.len()];
            for (j, sup, spaces) in maint {
                if !chosen.contains(j) {
                    continue;
                }
                let cf = names.get(j).cloned().unwrap_or_default();
                let mut support = Vec::new();
                for s in spaces {
                    // The query that answers this one (itself or one covering it), printed with
                    // the first column family that needs it.
                    let Some(n) = needed.iter().position(|n| n.query == s.query) else {
                        continue;
                    };
                    let Some(r) = runs.iter().position(|r| r.served.contains(&n)) else {
                        continue;
                    };
                    if printed[r] {
                        continue;
                    }
                    printed[r] = true;
                    let runner = runners[runs[r].runner];
                    let p = plan_of(
                        format!("{name}/{cf}/{}", support.len() + 1),
                        render_query(model, &runner.query),
                        *w,
                        runner,
                    )?;
                    cost += p.cost;
                    support.push(p);
                }
                let write_cost = opts.cost.write(sup.rows, sup.inserts, sup.deletes);
                cost += write_cost;
                ms.push(Maintenance {
                    cf,
                    support,
                    rows: sup.rows,
                    deletes: sup.deletes,
                    inserts: sup.inserts,
                    write_cost,
                });
            }
            update_cost += w * cost;
            updates.push(UpdatePlan {
                name: name.clone(),
                text: text.clone(),
                weight: *w,
                maintain: ms,
                cost,
            });
        }
        let column_families: Vec<RecommendedCf> = chosen
            .iter()
            .map(|&j| self.recommended(j, names.get(&j).cloned().unwrap_or_default()))
            .collect();
        Ok((
            Recommendation {
                mix: opts.mix.clone(),
                total_size_bytes: column_families.iter().map(|c| c.size_bytes).sum(),
                column_families,
                queries,
                updates,
                query_cost,
                update_cost,
                total_cost: query_cost + update_cost,
                candidates: self.pool.len(),
                variables,
                constraints,
                optimal: true,
                notes: Vec::new(),
            },
            unserved,
        ))
    }
}

/// The cheapest plan of `space` over the `chosen` column families (named by `names`).
fn plan_in(
    model: &Model,
    chosen: &BTreeSet<usize>,
    names: &BTreeMap<usize, String>,
    name: String,
    text: String,
    weight: f64,
    space: &PlanSpace,
) -> Result<QueryPlan> {
    let (cost, path) = space.cheapest(|j| chosen.contains(&j)).ok_or_else(|| {
        AdvisorError::Solver(format!("no plan for `{name}` in the chosen schema"))
    })?;
    let attrs =
        |v: &[crate::model::Attr]| v.iter().map(|a| model.attr_name(*a)).collect::<Vec<_>>();
    let steps = path
        .iter()
        .map(|&i| {
            let s = &space.steps[i];
            PlanStep {
                cf: names.get(&s.cf).cloned().unwrap_or_default(),
                gets: s.gets,
                width: s.width,
                clustering_bound: attrs(&s.clustering_bound),
                filter: attrs(&s.filter),
                sort: s.sort,
                rows: s.rows,
                cost: s.cost,
            }
        })
        .collect();
    Ok(QueryPlan {
        name,
        text,
        weight,
        steps,
        limit: space.query.limit,
        cost,
    })
}

/// A given schema costed for the workload ([`cost_schema`]).
#[derive(Debug, Clone, Serialize)]
pub struct Costed {
    /// The schema with its plans and costs, as a recommendation is reported (statements it
    /// cannot serve are left out of the plans and the costs).
    pub schema: Recommendation,
    /// The statements the schema cannot serve, and why.
    pub unserved: Vec<String>,
}

/// Costs a given schema for the workload (`tern advise --compare`): every statement planned over
/// exactly these column families with the same cost model, named as given.
///
/// # Errors
/// An unknown mix, or the interrupt.
pub fn cost_schema(
    model: &Model,
    workload: &Workload,
    opts: &Options,
    schema: &[crate::schema::GivenCf],
) -> Result<Costed> {
    let weighted = weighted_statements(workload, opts)?;
    let mut pool = Pool::default();
    let mut names = BTreeMap::new();
    for g in schema {
        let j = pool.add(g.cf.clone());
        names.entry(j).or_insert_with(|| g.name.clone());
    }
    let budget = Budget::new(None, opts.interrupt.clone());
    let prepared = plan_all(model, &weighted, pool, opts, budget, Vec::new(), false)?;
    let chosen: BTreeSet<usize> = names.keys().copied().collect();
    let (schema, unserved) = prepared.read_off_named(&chosen, &names, opts, 0, 0, true)?;
    Ok(Costed { schema, unserved })
}

/// Runs the advisor.
pub fn advise(model: &Model, workload: &Workload, opts: &Options) -> Result<Recommendation> {
    prepare(model, workload, opts)?.recommend(opts)
}

/// The plan space of one query over an explicit set of column families (for tests and reports).
pub fn plan_space(model: &Model, cost: &CostModel, cfs: &[ColumnFamily], q: &Query) -> PlanSpace {
    let mut pool = Pool::default();
    for cf in cfs {
        pool.add(cf.clone());
    }
    plan(model, cost, &pool, q)
}
