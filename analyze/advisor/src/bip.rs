//! The binary integer program of [NoSE] (Figs. 8, 9 and 13) in a solver-neutral form.
//!
//! Variables: `δ_j` per candidate column family that appears in some plan, and one variable per plan
//! step (a query, a column family and the step's place in the plan DAG; where a column family occurs
//! once in a query's plan space this is the paper's `δ_ij`). Constraints: one unit of flow through
//! each query's plan DAG (for a support query of an update: one unit if any column family it serves
//! is chosen, none otherwise, so support plans exist only for chosen column families; one update
//! runs an identical support query once), `step ≤ δ_j`, and the optional space
//! budget. The objective is the weighted cost of all steps plus the weighted cost of the writes
//! each chosen column family needs.

use std::collections::BTreeMap;

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
    /// A support query of one update, shared by the column families it maintains: one plan if any
    /// of them is chosen, none otherwise.
    IfAnyChosen(Vec<usize>),
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
}

impl Formulation {
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
        let cf = |f: &mut Formulation, j: usize| -> usize {
            if let Some(&v) = f.cf_var.get(&j) {
                return v;
            }
            f.vars.push(Var::Cf(j));
            f.cost.push(write_cost.get(&j).copied().unwrap_or(0.0));
            f.size.push(sizes(j));
            f.cf_var.insert(j, f.vars.len() - 1);
            f.vars.len() - 1
        };
        for (k, w) in spaces.iter().enumerate() {
            let demand_var = match &w.demand {
                Demand::One => None,
                Demand::IfAnyChosen(cfs) => {
                    let y = f.vars.len();
                    f.vars.push(Var::Runs(k));
                    f.cost.push(0.0);
                    f.size.push(0.0);
                    for &j in cfs {
                        let d = cf(&mut f, j);
                        f.constraints.push(Constraint {
                            terms: vec![(d, 1.0), (y, -1.0)],
                            lo: f64::NEG_INFINITY,
                            hi: 0.0,
                        });
                    }
                    Some(y)
                }
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
            }
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

    /// Whether an assignment satisfies every constraint.
    pub fn feasible(&self, x: &[f64]) -> bool {
        self.constraints.iter().all(|c| c.holds(x))
    }
}
