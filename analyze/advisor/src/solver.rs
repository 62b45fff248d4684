//! Solving the program with CBC (COIN-OR, linked from Debian's `coinor-libcbc-dev`), lexicographically:
//! least cost, then fewest column families, then least space.
//!
//! The default [`Strategy`] keeps the optimum and is several times faster than solving the program
//! as formulated in two stages:
//! - **pruning**: dominated column families ([`Formulation::dominated`]) are fixed out;
//! - **splitting**: independent components (groups of queries sharing no candidate) are solved
//!   separately;
//! - **one solve**: instead of a cost stage, a pin on the optimal cost and a count-and-space stage
//!   (whose pin row makes CBC's bounds weak), one solve minimizes
//!   `cost + ε·(count + space/total space)` with `ε = WINDOW·z_LP/(candidates + 1)`
//!   (`z_LP`: the LP bound, at most the optimal cost). Its optimum costs at most
//!   `(1 + WINDOW)·optimum`, and no schema in that window has both no
//!   greater cost and fewer column families. Where cheapest schemas tie exactly this is the
//!   two-stage answer in cost and count. Space is not tie-broken: its term (at most ε times a
//!   schema's share of all candidates' space) is below CBC's tolerances, so CBC returns a schema of
//!   that cost and count, not the smallest (measured against the exact answer: equal on EAC and
//!   hotel, +0.8 % space on WS 1x, +1.4 % on WS 2x, +1.0 % on WS 3x, +1.5 % on WS 4x).
//!   [`Strategy::exact_space`] adds a third solve (space minimized with cost and count pinned) that
//!   makes it exact, at several times the run time. The tests compare all of them.
//! - **CBC settings**: preprocessing off and one feasibility-pump pass (measured on WS 3x and 4x:
//!   CglPreProcess cost seconds for nothing on these flow programs, and the pump's later passes
//!   rarely improved on its first).
//!
//! The two-stage path ([`Strategy::plain`]) remains for the comparison and as the fallback when the
//! LP relaxation cannot be solved. Its second stage gets reduced-cost fixing from the LP and stage
//! one's schema as a cutoff.

#[cfg(feature = "cbc")]
mod cbc;

use crate::bip::Formulation;
#[cfg(feature = "cbc")]
use crate::bip::{Constraint, Var};
use crate::error::{AdvisorError, Result};

/// Relative tolerance when pinning an optimum before the next objective (two-stage solve).
pub const PIN_TOLERANCE: f64 = 1e-6;

/// The one weighted solve's window: its schema costs at most `(1 + WINDOW)` times the optimum.
/// Smaller, CBC's tolerances hide the space tie-break (measured: at 1e-6 a larger column family
/// was kept in the username test, at 1e-5 not).
pub const WINDOW: f64 = 1e-5;

/// The chosen values of the variables and the objective values.
#[derive(Debug, Clone)]
pub struct Solved {
    /// 0/1 per variable.
    pub x: Vec<f64>,
    /// The optimal weighted cost.
    pub cost: f64,
    /// The number of column families.
    pub column_families: usize,
    /// Both stages proved optimal (false when a time limit stopped one with a feasible solution).
    pub optimal: bool,
}

/// How to solve (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strategy {
    /// Fix dominated column families out before solving.
    pub prune: bool,
    /// Solve independent components separately.
    pub split: bool,
    /// One weighted solve instead of two stages.
    pub one_solve: bool,
    /// After the one weighted solve, a third solve for the least space among the schemas of its
    /// cost and count (exact space tie-break; slow: WS 3x 39 s against 5 s, see docs/benchmarks.md).
    pub exact_space: bool,
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy {
            prune: true,
            split: true,
            one_solve: true,
            exact_space: false,
        }
    }
}

impl Strategy {
    /// The program as formulated, in two stages (the reference the faster strategy is tested against).
    pub const fn plain() -> Self {
        Strategy {
            prune: false,
            split: false,
            one_solve: false,
            exact_space: false,
        }
    }
}

/// Solves `f` lexicographically with the default strategy.
/// `time_limit`: seconds for the whole solve (each independent part gets what is left); when it runs out, the best feasible solution found is taken and
/// the result is marked not optimal.
pub fn solve(f: &Formulation, time_limit: Option<f64>) -> Result<Solved> {
    solve_with(f, time_limit, Strategy::default())
}

/// [`solve`] with an explicit strategy.
pub fn solve_with(f: &Formulation, time_limit: Option<f64>, strategy: Strategy) -> Result<Solved> {
    #[cfg(feature = "cbc")]
    {
        solve_cbc(f, time_limit, strategy)
    }
    #[cfg(not(feature = "cbc"))]
    {
        let _ = (f, time_limit, strategy);
        Err(AdvisorError::NoSolver)
    }
}

/// Whether this build has the solver (the `cbc` feature, on by default).
pub const AVAILABLE: bool = cfg!(feature = "cbc");

/// [`solve_with`] by CBC.
#[cfg(feature = "cbc")]
fn solve_cbc(f: &Formulation, time_limit: Option<f64>, strategy: Strategy) -> Result<Solved> {
    if f.constraints
        .iter()
        .any(|c| c.terms.is_empty() && (c.lo > 1e-9 || c.hi < -1e-9))
    {
        return Err(AdvisorError::NoSolution(
            "a statement has no plan over the candidates".into(),
        ));
    }
    let pruned;
    let f = if strategy.prune {
        let dominated = f.dominated();
        tracing::debug!(
            dominated = dominated.len(),
            candidates = f.cf_var.len(),
            "dominated column families"
        );
        let mut g = f.clone();
        for j in dominated {
            if let Some(&v) = g.cf_var.get(&j) {
                g.constraints.push(Constraint {
                    terms: vec![(v, 1.0)],
                    lo: 0.0,
                    hi: 0.0,
                });
            }
            g.forbidden.insert(j);
        }
        pruned = g;
        &pruned
    } else {
        f
    };
    let parts = if strategy.split {
        f.components()
    } else {
        vec![(
            (0..f.vars.len()).collect(),
            (0..f.constraints.len()).collect(),
        )]
    };
    tracing::debug!(components = parts.len(), "program split");
    let mut x = vec![0.0; f.vars.len()];
    let mut cost = 0.0;
    let mut optimal = true;
    let start = std::time::Instant::now();
    for (vars, rows) in &parts {
        // The limit bounds the solve as a whole: each part gets what is left (at least 5 % of it).
        let left = time_limit.map(|t| (t - start.elapsed().as_secs_f64()).max(0.05 * t).max(0.01));
        let (xs, c) = cbc::solve_part(f, vars, rows, left, strategy, &mut optimal)?;
        for (i, &v) in vars.iter().enumerate() {
            x[v] = xs[i];
        }
        cost += c;
    }
    let column_families = f
        .vars
        .iter()
        .zip(&x)
        .filter(|(v, x)| matches!(v, Var::Cf(_)) && **x > 0.5)
        .count();
    Ok(Solved {
        x,
        cost,
        column_families,
        optimal,
    })
}
