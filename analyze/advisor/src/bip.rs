//! The binary integer program of [NoSE] (Figs. 8, 9 and 13) in a solver-neutral form.
//!
//! Variables: `δ_j` per candidate column family that appears in some plan, and one variable per plan
//! step (a query, a column family and the step's place in the plan DAG; where a column family occurs
//! once in a query's plan space this is the paper's `δ_ij`). Constraints: one unit of flow through
//! each query's plan DAG (for a support query of an update: one unit if any column family it serves
//! is chosen and no query covering it runs, none otherwise, so support plans exist only for
//! chosen column families; one update runs an identical support query once, and a support query
//! that covers others in their place), `step ≤ δ_j`, and the optional space
//! budget. The objective is the weighted cost of all steps plus the weighted cost of the writes
//! each chosen column family needs.

use std::collections::{BTreeMap, BTreeSet};

use crate::planner::PlanSpace;

/// A linear constraint `lo ≤ Σ coef·x ≤ hi`.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    /// (variable, coefficient) pairs.
    pub terms: Vec<(usize, f64)>,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

impl Constraint {
    /// Whether a 0/1 assignment satisfies the constraint (with a small tolerance).
    pub fn holds(&self, x: &[f64]) -> bool {
        let v: f64 = self.terms.iter().map(|(i, c)| c * x[*i]).sum();
        v >= self.lo - 1e-6 && v <= self.hi + 1e-6
    }
}

/// What a variable stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// `δ_j`: column family `j` (pool index) is in the schema.
    Cf(usize),
    /// A step of a plan space: (plan space, step index).
    Step(usize, usize),
    /// Whether the (shared) support query of a plan space runs.
    Runs(usize),
}

/// How much flow a plan space must carry.
#[derive(Debug, Clone, PartialEq)]
pub enum Demand {
    /// A query: exactly one plan.
    One,
    /// A support query of one update, shared by the column families it maintains (`cfs`): one plan
    /// if any of them is chosen and none of the queries that cover it runs (`covered_by`: indices,
    /// in the program's list of plan spaces, of the same update's support queries that also
    /// answer it, [`crate::query::Query::covers`]); none otherwise. A covering query may run for
    /// any column family whose queries it covers, whether or not one of its own is chosen.
    IfAnyChosen {
        /// The column families whose choice needs the query's answer.
        cfs: Vec<usize>,
        /// The plan spaces whose queries cover this one.
        covered_by: Vec<usize>,
    },
}

/// A plan space with its weight and demand.
#[derive(Debug, Clone)]
pub struct Weighted<'a> {
    /// The plan space.
    pub space: &'a PlanSpace,
    /// The statement's weight.
    pub weight: f64,
    /// Its demand.
    pub demand: Demand,
}

/// The formulated program.
#[derive(Debug, Clone, Default)]
pub struct Formulation {
    /// Variables (all binary).
    pub vars: Vec<Var>,
    /// The cost objective.
    pub cost: Vec<f64>,
    /// Estimated size of each variable's column family (0 for step variables).
    pub size: Vec<f64>,
    /// Constraints.
    pub constraints: Vec<Constraint>,
    /// Variable of each column family.
    pub cf_var: BTreeMap<usize, usize>,
    /// Variable of each (plan space, step).
    pub step_var: BTreeMap<(usize, usize), usize>,
    /// The plan DAG of each plan space, in the program's variables (for the dominance test).
    pub dags: Vec<Dag>,
    /// Column families (pool indices) that cannot be chosen.
    pub forbidden: BTreeSet<usize>,
}

/// A step seen from its column family: (plan space, from state, to state, cost).
type StepAt = (usize, usize, Option<usize>, f64);

/// One plan space as the program sees it: its step variables as edges of a DAG.
#[derive(Debug, Clone, Default)]
pub struct Dag {
    /// Edges: (step variable, from state, to state (`None`: the answer), column family).
    pub edges: Vec<(usize, usize, Option<usize>, usize)>,
    /// Edges leaving each state (indices into `edges`).
    pub out: Vec<Vec<usize>>,
    /// `None` for a query (always one plan); for a shared support query, its `Runs` variable and
    /// the column families whose choice makes it run.
    pub runs: Option<(usize, Vec<usize>)>,
}

impl Formulation {
    /// The column families (pool indices) a solution `x` of the program chooses.
    pub fn chosen(&self, x: &[f64]) -> BTreeSet<usize> {
        self.cf_var
            .iter()
            .filter(|(_, v)| x[**v] > 0.5)
            .map(|(j, _)| *j)
            .collect()
    }

    /// Builds the program. `write_cost[j]` is the weighted cost of maintaining `j`, `sizes[j]` its
    /// size, `forbidden` the column families that cannot be maintained.
    pub fn build(
        spaces: &[Weighted<'_>],
        write_cost: &BTreeMap<usize, f64>,
        sizes: &dyn Fn(usize) -> f64,
        forbidden: &[usize],
        space_budget: Option<f64>,
    ) -> Formulation {
        let mut f = Formulation::default();
        let cf = |f: &mut Formulation, j: usize| f.cf(j, write_cost, sizes);
        // The `Runs` variable of every support query first: a covered query's rows name those of
        // the queries that cover it, wherever they are in the list.
        let mut runs_var: BTreeMap<usize, usize> = BTreeMap::new();
        for (k, w) in spaces.iter().enumerate() {
            if let Demand::IfAnyChosen { .. } = &w.demand {
                runs_var.insert(k, f.vars.len());
                f.vars.push(Var::Runs(k));
                f.cost.push(0.0);
                f.size.push(0.0);
            }
        }
        for (k, w) in spaces.iter().enumerate() {
            let demand_var = match &w.demand {
                Demand::One => None,
                Demand::IfAnyChosen { cfs, covered_by } => {
                    let y = runs_var[&k];
                    let others: Vec<usize> = covered_by
                        .iter()
                        .filter(|a| **a != k)
                        .filter_map(|a| runs_var.get(a).copied())
                        .collect();
                    for &j in cfs {
                        let d = cf(&mut f, j);
                        // δ_j ≤ runs + Σ runs of the queries covering it.
                        let mut terms = vec![(d, 1.0), (y, -1.0)];
                        terms.extend(others.iter().map(|v| (*v, -1.0)));
                        f.constraints.push(Constraint {
                            terms,
                            lo: f64::NEG_INFINITY,
                            hi: 0.0,
                        });
                    }
                    Some(y)
                }
            };
            let mut dag = Dag {
                runs: demand_var.map(|y| {
                    let cfs = match &w.demand {
                        Demand::IfAnyChosen { cfs, .. } => cfs.clone(),
                        Demand::One => Vec::new(),
                    };
                    (y, cfs)
                }),
                ..Dag::default()
            };
            let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            let mut by_cf: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            let mut inn: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for (s, step) in w.space.steps.iter().enumerate() {
                let v = f.vars.len();
                f.vars.push(Var::Step(k, s));
                f.cost.push(w.weight * step.cost);
                f.size.push(0.0);
                f.step_var.insert((k, s), v);
                out.entry(step.from).or_default().push(v);
                if let Some(t) = step.to {
                    inn.entry(t).or_default().push(v);
                }
                by_cf.entry(step.cf).or_default().push(v);
                let top = step.from.max(step.to.unwrap_or(0));
                if dag.out.len() <= top {
                    dag.out.resize(top + 1, Vec::new());
                }
                dag.out[step.from].push(dag.edges.len());
                dag.edges.push((v, step.from, step.to, step.cf));
            }
            if dag.out.is_empty() {
                dag.out.push(Vec::new());
            }
            f.dags.push(dag);
            // A plan uses a column family at most once: Σ steps on j ≤ δ_j (tighter than one row per step).
            for (j, steps) in by_cf {
                let d = cf(&mut f, j);
                let mut terms: Vec<(usize, f64)> = steps.into_iter().map(|v| (v, 1.0)).collect();
                terms.push((d, -1.0));
                f.constraints.push(Constraint {
                    terms,
                    lo: f64::NEG_INFINITY,
                    hi: 0.0,
                });
            }
            f.flow_rows(&out, &inn, demand_var);
        }
        f.forbidden = forbidden.iter().copied().collect();
        for &j in forbidden {
            let Some(&d) = f.cf_var.get(&j) else { continue };
            f.constraints.push(Constraint {
                terms: vec![(d, 1.0)],
                lo: 0.0,
                hi: 0.0,
            });
        }
        if let Some(budget) = space_budget {
            let terms = f.cf_var.values().map(|&v| (v, f.size[v])).collect();
            f.constraints.push(Constraint {
                terms,
                lo: f64::NEG_INFINITY,
                hi: budget,
            });
        }
        f
    }

    /// The variable δ_j of column family `j`, added on first use.
    fn cf(
        &mut self,
        j: usize,
        write_cost: &BTreeMap<usize, f64>,
        sizes: &dyn Fn(usize) -> f64,
    ) -> usize {
        if let Some(&v) = self.cf_var.get(&j) {
            return v;
        }
        self.vars.push(Var::Cf(j));
        self.cost.push(write_cost.get(&j).copied().unwrap_or(0.0));
        self.size.push(sizes(j));
        self.cf_var.insert(j, self.vars.len() - 1);
        self.vars.len() - 1
    }

    /// The flow rows of one query's plan graph: out of the root equals the demand (1, or the
    /// demand variable), conservation at every other state.
    fn flow_rows(
        &mut self,
        out: &BTreeMap<usize, Vec<usize>>,
        inn: &BTreeMap<usize, Vec<usize>>,
        demand_var: Option<usize>,
    ) {
        let f = self;
        // Flow out of the root equals the demand.
        let mut root: Vec<(usize, f64)> = out
            .get(&0)
            .map(|v| v.iter().map(|x| (*x, 1.0)).collect())
            .unwrap_or_default();
        match demand_var {
            None => f.constraints.push(Constraint {
                terms: root,
                lo: 1.0,
                hi: 1.0,
            }),
            Some(d) => {
                root.push((d, -1.0));
                f.constraints.push(Constraint {
                    terms: root,
                    lo: 0.0,
                    hi: 0.0,
                });
            }
        }
        // Conservation at every other state.
        let states: std::collections::BTreeSet<usize> = out
            .keys()
            .chain(inn.keys())
            .copied()
            .filter(|s| *s != 0)
            .collect();
        for s in states {
            let mut terms: Vec<(usize, f64)> = Vec::new();
            for v in out.get(&s).into_iter().flatten() {
                terms.push((*v, 1.0));
            }
            for v in inn.get(&s).into_iter().flatten() {
                terms.push((*v, -1.0));
            }
            f.constraints.push(Constraint {
                terms,
                lo: 0.0,
                hi: 0.0,
            });
        }
    }

    /// Whether an assignment satisfies every constraint.
    pub fn feasible(&self, x: &[f64]) -> bool {
        self.constraints.iter().all(|c| c.holds(x))
    }
}

impl Formulation {
    /// The independent parts of the program: groups of variables no constraint connects (queries
    /// sharing no candidate column family). Each group lists its variables and its constraints.
    pub fn components(&self) -> Vec<(Vec<usize>, Vec<usize>)> {
        let n = self.vars.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut i: usize) -> usize {
            while p[i] != i {
                p[i] = p[p[i]];
                i = p[i];
            }
            i
        }
        for c in &self.constraints {
            let Some(&(first, _)) = c.terms.first() else {
                continue;
            };
            for &(v, _) in &c.terms[1..] {
                let (a, b) = (find(&mut parent, first), find(&mut parent, v));
                if a != b {
                    parent[a] = b;
                }
            }
        }
        let mut groups: BTreeMap<usize, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
        for v in 0..n {
            let r = find(&mut parent, v);
            groups.entry(r).or_default().0.push(v);
        }
        for (i, c) in self.constraints.iter().enumerate() {
            if let Some(&(v, _)) = c.terms.first() {
                let r = find(&mut parent, v);
                groups.entry(r).or_default().1.push(i);
            }
        }
        groups.into_values().collect()
    }
}

impl Formulation {
    /// Column families (pool indices) that an optimal schema never needs: `j` is dominated by `k`
    /// when every plan step on `j` has a step on `k` between the same two states of the same plan
    /// space at no greater cost, `k` costs no more to maintain, is no larger, is not forbidden, and
    /// makes no support query run that `j` does not. Replacing every dominated column family by an
    /// undominated one that dominates it keeps every plan (no plan uses one column family twice:
    /// a second lookup on it would leave the state unchanged) and changes neither cost, count nor
    /// space for the worse, so the lexicographic optimum is unchanged. Of two equivalent column
    /// families the one with the lower index is kept.
    pub fn dominated(&self) -> BTreeSet<usize> {
        use std::collections::HashMap;
        let mut steps_of: BTreeMap<usize, Vec<StepAt>> = BTreeMap::new();
        let mut at: HashMap<(usize, usize, Option<usize>), Vec<usize>> = HashMap::new();
        let mut best: HashMap<(usize, usize, Option<usize>, usize), f64> = HashMap::new();
        let mut runs_of: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (d, dag) in self.dags.iter().enumerate() {
            for &(v, from, to, cf) in &dag.edges {
                steps_of
                    .entry(cf)
                    .or_default()
                    .push((d, from, to, self.cost[v]));
                at.entry((d, from, to)).or_default().push(cf);
                let c = best.entry((d, from, to, cf)).or_insert(f64::INFINITY);
                *c = c.min(self.cost[v]);
            }
            if let Some((_, cfs)) = &dag.runs {
                for &j in cfs {
                    runs_of.entry(j).or_default().insert(d);
                }
            }
        }
        let empty = BTreeSet::new();
        let dominates = |k: usize, j: usize| -> bool {
            let (Some(&vk), Some(&vj)) = (self.cf_var.get(&k), self.cf_var.get(&j)) else {
                return false;
            };
            if self.forbidden.contains(&k)
                || self.cost[vk] > self.cost[vj]
                || self.size[vk] > self.size[vj]
                || !runs_of
                    .get(&k)
                    .unwrap_or(&empty)
                    .is_subset(runs_of.get(&j).unwrap_or(&empty))
            {
                return false;
            }
            steps_of.get(&j).is_none_or(|steps| {
                steps
                    .iter()
                    .all(|&(d, from, to, c)| best.get(&(d, from, to, k)).is_some_and(|ck| *ck <= c))
            })
        };
        let mut out = BTreeSet::new();
        for (&j, steps) in &steps_of {
            let Some(&(d, from, to, _)) = steps.first() else {
                continue;
            };
            let mut ks: Vec<usize> = at.get(&(d, from, to)).cloned().unwrap_or_default();
            ks.sort_unstable();
            ks.dedup();
            if ks
                .into_iter()
                .any(|k| k != j && dominates(k, j) && (k < j || !dominates(j, k)))
            {
                out.insert(j);
            }
        }
        out
    }
}
