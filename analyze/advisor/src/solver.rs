//! Solving the program with CBC (COIN-OR, linked from Debian's `coinor-libcbc-dev`), lexicographically:
//! least cost, then fewest column families, then least space.
//!
//! Three things keep CBC fast without giving up optimality: the program is split into independent
//! components (groups of queries sharing no candidate), each solved on its own; CBC starts from a
//! feasible schema found by a greedy local search ([`Formulation::heuristic`]), so it prunes from
//! the first node; and the second stage starts from the first stage's optimum.

use std::time::Duration;

use coin_cbc::{Col, Model, Sense, Solution};

use crate::bip::{Formulation, Var};
use crate::error::{AdvisorError, Result};

/// Relative tolerance when pinning an optimum before the next objective.
pub const PIN_TOLERANCE: f64 = 1e-6;

/// Time the greedy start may take.
const HEURISTIC_BUDGET: Duration = Duration::from_secs(2);

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

/// How to solve.
#[derive(Debug, Clone, Copy)]
pub struct Strategy {
    /// Solve independent components separately.
    pub split: bool,
    /// Start CBC from the greedy schema.
    pub greedy_start: bool,
    /// Leave out dominated column families.
    pub prune: bool,
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy {
            split: true,
            greedy_start: false,
            prune: true,
        }
    }
}

/// Solves `f` lexicographically.
/// `time_limit`: seconds per stage; when it runs out, the best feasible solution found is taken and
/// the result is marked not optimal.
pub fn solve(f: &Formulation, time_limit: Option<f64>) -> Result<Solved> {
    let mut st = Strategy::default();
    if std::env::var("TMP_START").is_ok() { st.greedy_start = true; }
    if std::env::var("TMP_NOPRUNE").is_ok() { st.prune = false; }
    solve_with(f, time_limit, st)
}

/// [`solve`] with an explicit strategy (the plain one is kept to check the others against).
pub fn solve_with(f: &Formulation, time_limit: Option<f64>, strategy: Strategy) -> Result<Solved> {
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
        let t = std::time::Instant::now();
        let dominated = f.dominated();
        eprintln!("TMP dominated {} of {} in {:.3}s", dominated.len(), f.cf_var.len(), t.elapsed().as_secs_f64());
        let mut g = f.clone();
        for j in dominated {
            if let Some(&v) = g.cf_var.get(&j) {
                g.constraints.push(crate::bip::Constraint { terms: vec![(v, 1.0)], lo: 0.0, hi: 0.0 });
            }
            g.forbidden.insert(j);
        }
        pruned = g;
        &pruned
    } else {
        f
    };
    let start = if strategy.greedy_start {
        let t = std::time::Instant::now();
        let s = f.heuristic(HEURISTIC_BUDGET);
        eprintln!("TMP greedy {:.3}s {:?}", t.elapsed().as_secs_f64(), s.as_ref().map(|x| f.objective(x)));
        tracing::debug!(
            seconds = t.elapsed().as_secs_f64(),
            cost = s.as_ref().map(|x| f.objective(x)),
            "greedy start"
        );
        s
    } else {
        None
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
    for (vars, rows) in &parts {
        let part = solve_part(f, vars, rows, start.as_deref(), time_limit, &mut optimal)?;
        for (i, &v) in vars.iter().enumerate() {
            x[v] = part.0[i];
        }
        cost += part.1;
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

/// Solves the sub-program on `vars` (program variable indices) and `rows` (constraint indices):
/// returns the 0/1 values of `vars` and the optimal cost.
fn solve_part(
    f: &Formulation,
    vars: &[usize],
    rows: &[usize],
    start: Option<&[f64]>,
    time_limit: Option<f64>,
    optimal: &mut bool,
) -> Result<(Vec<f64>, f64)> {
    let mut local = vec![usize::MAX; f.vars.len()];
    for (i, &v) in vars.iter().enumerate() {
        local[v] = i;
    }
    let mut m = Model::default();
    m.set_log_level(0);
    if let Ok(e) = std::env::var("TMP_CBC") { for kv in e.split(',') { if let Some((k, v)) = kv.split_once('=') { m.set_parameter(k, v); } } }
    m.set_parameter("logLevel", "0");
    m.set_parameter("slogLevel", "0");
    if let Some(t) = time_limit {
        m.set_parameter("timeMode", "elapsed");
        m.set_parameter("seconds", &format!("{t}"));
    }
    let cols: Vec<Col> = vars.iter().map(|_| m.add_binary()).collect();
    for &r in rows {
        let c = &f.constraints[r];
        let row = m.add_row();
        for &(v, coef) in &c.terms {
            m.set_weight(row, cols[local[v]], coef);
        }
        if c.lo.is_finite() {
            m.set_row_lower(row, c.lo);
        }
        if c.hi.is_finite() {
            m.set_row_upper(row, c.hi);
        }
    }
    m.set_obj_sense(Sense::Minimize);
    let costs: Vec<f64> = vars.iter().map(|&v| f.cost[v]).collect();
    let value = |s: &Solution| -> f64 {
        costs
            .iter()
            .zip(&cols)
            .map(|(c, col)| c * s.col(*col).round())
            .sum()
    };

    // 1. Least cost.
    for (col, &c) in cols.iter().zip(&costs) {
        m.set_obj_coeff(*col, c);
    }
    if let Some(x) = start {
        for (col, &v) in cols.iter().zip(vars) {
            m.set_col_initial_solution(*col, x[v]);
        }
    }
    // The LP relaxation's bound and reduced costs, for fixing variables in stage 2.
    let lp = {
        let mut lp = m.clone();
        for c in &cols {
            lp.set_continuous(*c);
        }
        lp.remove_initial_solution();
        let s = lp.solve();
        s.raw().is_proven_optimal().then(|| {
            let x: Vec<f64> = cols.iter().map(|c| s.col(*c)).collect();
            let d: Vec<f64> = cols.iter().map(|c| s.reduced_cost(*c)).collect();
            (s.raw().obj_value(), x, d)
        })
    };
    if let Some(x) = start {
        let bad: Vec<_> = rows.iter().filter(|r| !f.constraints[**r].holds(x)).collect();
        eprintln!("TMP start bad rows {}", bad.len());
        if vars.len() == 52 {
            for &r in rows { eprintln!("TMP row {:?}", f.constraints[r]); }
            for &v in vars { eprintln!("TMP var {v} {:?} cost {} x {}", f.vars[v], f.cost[v], x[v]); }
        }
    }
    let s1 = run(&m, f, vars, "the cost minimization", optimal)?;
    let cost = value(&s1);
    eprintln!("TMP stage1 cost {cost} obj {}", s1.raw().obj_value());
    let pin = m.add_row();
    for (col, &c) in cols.iter().zip(&costs) {
        if c != 0.0 {
            m.set_weight(pin, *col, c);
        }
    }
    let pinned = cost + PIN_TOLERANCE * cost.abs().max(1e-9);
    m.set_row_upper(pin, pinned);
    // Reduced-cost fixing: a variable at a bound of the LP optimum whose reduced cost exceeds the
    // gap between the pinned cost and the LP bound cannot leave that bound in any schema within
    // the pin (LP duality: cost(x) >= z_LP + Σ d_i (x_i - x*_i)).
    if let Some((z, xl, d)) = &lp {
        let gap = pinned - z + 1e-7 * pinned.abs().max(1.0);
        let mut fixed = 0;
        for (i, col) in cols.iter().enumerate() {
            if xl[i] < 1e-9 && d[i] > gap {
                m.set_col_upper(*col, 0.0);
                fixed += 1;
            } else if xl[i] > 1.0 - 1e-9 && -d[i] > gap {
                m.set_col_lower(*col, 1.0);
                fixed += 1;
            }
        }
        eprintln!("TMP fixed {fixed} of {} gap {gap}", cols.len());
    }

    // 2. Fewest column families among the cheapest schemas, then least space: one solve, with the
    // count weighted above the largest possible sum of normalized sizes. It starts from stage 1's
    // schema, which satisfies the pin.
    let is_cf: Vec<bool> = vars
        .iter()
        .map(|&v| matches!(f.vars[v], Var::Cf(_)))
        .collect();
    let n_cf = is_cf.iter().filter(|c| **c).count() as f64;
    let max_size = vars
        .iter()
        .map(|&v| f.size[v])
        .fold(0.0_f64, f64::max)
        .max(1.0);
    for (i, col) in cols.iter().enumerate() {
        let c = if is_cf[i] {
            (n_cf + 1.0) + f.size[vars[i]] / max_size
        } else {
            0.0
        };
        m.set_obj_coeff(*col, c);
    }
    // Stage 1's schema satisfies the pin: only a strictly better one is of interest, so CBC gets its
    // value as a cutoff (a cutoff prunes like an incumbent; CBC 2.10's MIP start can make it
    // report a feasible program infeasible). No solution under the cutoff: stage 1's is optimal.
    m.remove_initial_solution();
    let sec1: f64 = cols
        .iter()
        .enumerate()
        .filter(|(i, c)| is_cf[*i] && s1.col(**c) > 0.5)
        .map(|(i, _)| (n_cf + 1.0) + f.size[vars[i]] / max_size)
        .sum();
    if std::env::var("TMP_NOCUT").is_err() {
    m.set_parameter("cutoff", &format!("{}", sec1 - 1e-9 * sec1.max(1.0)));
    }
    let s2 = match run(
        &m,
        f,
        vars,
        "the column family count and space minimization",
        optimal,
    ) {
        Ok(s) => s,
        // Out of time without a solution: keep the cheapest schema found by the first stage.
        Err(AdvisorError::Solver(_)) if time_limit.is_some() => {
            *optimal = false;
            s1
        }
        Err(AdvisorError::NoSolution(_)) => s1,
        Err(e) => return Err(e),
    };
    let x = cols
        .iter()
        .map(|c| if s2.col(*c) > 0.5 { 1.0 } else { 0.0 })
        .collect();
    Ok((x, cost))
}

fn run(
    m: &Model,
    f: &Formulation,
    vars: &[usize],
    what: &str,
    optimal: &mut bool,
) -> Result<Solution> {
    let t = std::time::Instant::now();
    let s = m.solve();
    tracing::debug!(
        stage = what,
        variables = vars.len(),
        seconds = t.elapsed().as_secs_f64(),
        "CBC solve"
    );
    eprintln!("TMP {what} vars={} {:.3}s", vars.len(), t.elapsed().as_secs_f64());
    let raw = s.raw();
    if raw.is_proven_infeasible() || raw.is_initial_solve_proven_primal_infeasible() {
        return Err(AdvisorError::NoSolution(
            "no schema satisfies the constraints (is the space budget too small?)".into(),
        ));
    }
    if raw.is_proven_optimal() {
        return Ok(s);
    }
    if raw.is_seconds_limit_reached() && raw.col_solution().len() == vars.len() {
        // Check the incumbent against the part's constraints, in the program's numbering.
        let mut x = vec![0.0; f.vars.len()];
        for (i, &v) in vars.iter().enumerate() {
            x[v] = raw.col_solution()[i].round();
        }
        let ok = f
            .constraints
            .iter()
            .filter(|c| c.terms.first().is_some_and(|(v, _)| vars.contains(v)))
            .all(|c| c.holds(&x));
        if ok {
            *optimal = false;
            return Ok(s);
        }
    }
    Err(AdvisorError::Solver(format!(
        "CBC did not prove {what} optimal"
    )))
}
