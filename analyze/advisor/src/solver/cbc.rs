//! The CBC side of the solver (the `cbc` feature): the model of each part and its solves.

use coin_cbc::{Col, Model, Sense, Solution};

use super::{PIN_TOLERANCE, Strategy, WINDOW};
use crate::bip::{Formulation, Var};
use crate::error::{AdvisorError, Result};

/// The CBC model of one sub-program and what its two strategies share.
struct Part<'a> {
    f: &'a Formulation,
    vars: &'a [usize],
    m: Model,
    cols: Vec<Col>,
    costs: Vec<f64>,
    is_cf: Vec<bool>,
    n_cf: f64,
}

impl Part<'_> {
    /// The cost of a solution (its 0/1 values rounded).
    fn cost_of(&self, s: &Solution) -> f64 {
        self.costs
            .iter()
            .zip(&self.cols)
            .map(|(c, col)| c * s.col(*col).round())
            .sum()
    }

    /// The 0/1 values of a solution.
    fn zero_one(&self, s: &Solution) -> Vec<f64> {
        self.cols
            .iter()
            .map(|c| if s.col(*c) > 0.5 { 1.0 } else { 0.0 })
            .collect()
    }

    /// The LP relaxation's bound, values and reduced costs, when proven optimal.
    fn lp_relaxation(&self) -> Option<(f64, Vec<f64>, Vec<f64>)> {
        let mut lp = self.m.clone();
        for c in &self.cols {
            lp.set_continuous(*c);
        }
        let s = lp.solve();
        s.raw().is_proven_optimal().then(|| {
            let x: Vec<f64> = self.cols.iter().map(|c| s.col(*c)).collect();
            // One call for the whole array (the columns are 0..n, added first): each
            // `Solution::reduced_cost(col)` call fetched it from CBC anew (WS 4x: 1.2 s of LP).
            let all = s.raw().reduced_cost();
            let d: Vec<f64> = (0..self.cols.len())
                .map(|i| all.get(i).copied().unwrap_or(0.0))
                .collect();
            (s.raw().obj_value(), x, d)
        })
    }
}

/// Builds the CBC model of the sub-program on `vars` and `rows`, minimizing cost.
fn build_part<'a>(
    f: &'a Formulation,
    vars: &'a [usize],
    rows: &[usize],
    time_limit: Option<f64>,
) -> Part<'a> {
    let mut local = vec![usize::MAX; f.vars.len()];
    for (i, &v) in vars.iter().enumerate() {
        local[v] = i;
    }
    let mut m = Model::default();
    m.set_log_level(0);
    m.set_parameter("logLevel", "0");
    m.set_parameter("slogLevel", "0");
    // Measured on WS 3x and 4x (docs/benchmarks.md): CBC's preprocessing (CglPreProcess) took
    // seconds and removed little from these flow programs, and the feasibility pump's later passes
    // (each a mini branch and bound of the LP's support) rarely improved on its first.
    m.set_parameter("preprocess", "off");
    m.set_parameter("passFeasibilityPump", "1");
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
    let is_cf: Vec<bool> = vars
        .iter()
        .map(|&v| matches!(f.vars[v], Var::Cf(_)))
        .collect();
    let n_cf = is_cf.iter().filter(|c| **c).count() as f64;
    for (col, &c) in cols.iter().zip(&costs) {
        m.set_obj_coeff(*col, c);
    }
    Part {
        f,
        vars,
        m,
        cols,
        costs,
        is_cf,
        n_cf,
    }
}

/// Solves the sub-program on `vars` (program variable indices) and `rows` (constraint indices):
/// returns the 0/1 values of `vars` and their cost.
pub(super) fn solve_part(
    f: &Formulation,
    vars: &[usize],
    rows: &[usize],
    time_limit: Option<f64>,
    strategy: Strategy,
    optimal: &mut bool,
) -> Result<(Vec<f64>, f64)> {
    let (one_solve, exact_space) = (strategy.one_solve, strategy.exact_space);
    let mut p = build_part(f, vars, rows, time_limit);
    // The LP relaxation: its bound scales ε, its reduced costs fix variables in stage 2.
    let lp = p.lp_relaxation();
    match (one_solve, &lp) {
        (true, Some((z, _, _))) if exact_space => {
            let (x, cost) = one_weighted_solve(&mut p, *z, optimal)?;
            space_stage(&mut p, lp.as_ref(), x, cost, time_limit, optimal)
        }
        (true, Some((z, _, _))) => one_weighted_solve(&mut p, *z, optimal),
        _ => two_stage_solve(&mut p, lp.as_ref(), time_limit, optimal),
    }
}

/// Cost plus ε·(count + normalized space), ε scaled by the LP bound `z`: one CBC solve.
fn one_weighted_solve(p: &mut Part<'_>, z: f64, optimal: &mut bool) -> Result<(Vec<f64>, f64)> {
    let (f, vars) = (p.f, p.vars);
    let total_size: f64 = vars
        .iter()
        .zip(&p.is_cf)
        .filter(|(_, c)| **c)
        .map(|(v, _)| f.size[*v])
        .sum::<f64>()
        .max(1.0);
    let eps = WINDOW * z.abs().max(1e-9) / (p.n_cf + 1.0);
    for (i, col) in p.cols.iter().enumerate() {
        let extra = if p.is_cf[i] {
            eps * (1.0 + f.size[vars[i]] / total_size)
        } else {
            0.0
        };
        p.m.set_obj_coeff(*col, p.costs[i] + extra);
    }
    // CBC's default cutoff increment (1e-5) would hide one column family's ε.
    p.m.set_parameter("increment", &format!("{}", eps * 1e-3));
    p.m.set_parameter("allowableGap", &format!("{}", eps * 1e-3));
    p.m.set_parameter("ratioGap", "0");
    let s = run(&p.m, f, vars, "cost, count and space", optimal)?;
    Ok((p.zero_one(&s), p.cost_of(&s)))
}

/// After the one weighted solve (schema `x`, cost `cost`): the least space among the schemas
/// that cost no more (relative tolerance [`PIN_TOLERANCE`]) and have no more column families, with
/// reduced-cost fixing from the LP and `x`'s space as a cutoff. No better schema: `x`.
fn space_stage(
    p: &mut Part<'_>,
    lp: Option<&(f64, Vec<f64>, Vec<f64>)>,
    x: Vec<f64>,
    cost: f64,
    time_limit: Option<f64>,
    optimal: &mut bool,
) -> Result<(Vec<f64>, f64)> {
    let (f, vars) = (p.f, p.vars);
    let mut m = p.m.clone();
    let pinned = cost + PIN_TOLERANCE * cost.abs().max(1e-9);
    let pin = m.add_row();
    for (col, &c) in p.cols.iter().zip(&p.costs) {
        if c != 0.0 {
            m.set_weight(pin, *col, c);
        }
    }
    m.set_row_upper(pin, pinned);
    let count = m.add_row();
    let n: f64 = (0..x.len()).filter(|i| p.is_cf[*i] && x[*i] > 0.5).count() as f64;
    for (i, col) in p.cols.iter().enumerate() {
        if p.is_cf[i] {
            m.set_weight(count, *col, 1.0);
        }
    }
    m.set_row_upper(count, n);
    if let Some((z, xl, d)) = lp {
        let gap = pinned - z + 1e-7 * pinned.abs().max(1.0);
        for (i, col) in p.cols.iter().enumerate() {
            if xl[i] < 1e-9 && d[i] > gap {
                m.set_col_upper(*col, 0.0);
            } else if xl[i] > 1.0 - 1e-9 && -d[i] > gap {
                m.set_col_lower(*col, 1.0);
            }
        }
    }
    let max_size = vars
        .iter()
        .map(|&v| f.size[v])
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let mut space = 0.0;
    for (i, col) in p.cols.iter().enumerate() {
        let w = if p.is_cf[i] {
            f.size[vars[i]] / max_size
        } else {
            0.0
        };
        m.set_obj_coeff(*col, w);
        space += w * x[i];
    }
    // Sizes are normalized by the largest: a row of a few bytes is still above these.
    m.set_parameter("increment", "1e-9");
    m.set_parameter("allowableGap", "1e-9");
    // Only a strictly smaller schema is of interest; none: `x` is the answer.
    m.set_parameter("cutoff", &format!("{}", space - 1e-9));
    match run(&m, f, vars, "the space minimization", optimal) {
        Ok(s) => Ok((p.zero_one(&s), p.cost_of(&s))),
        Err(AdvisorError::NoSolution(_)) => Ok((x, cost)),
        // Out of time without a better schema: keep `x`, not proven least in space.
        Err(AdvisorError::Solver(_)) if time_limit.is_some() => {
            *optimal = false;
            Ok((x, cost))
        }
        Err(e) => Err(e),
    }
}

/// Least cost, then (cost pinned) fewest column families and least space.
fn two_stage_solve(
    p: &mut Part<'_>,
    lp: Option<&(f64, Vec<f64>, Vec<f64>)>,
    time_limit: Option<f64>,
    optimal: &mut bool,
) -> Result<(Vec<f64>, f64)> {
    let (f, vars) = (p.f, p.vars);
    // 1. Least cost.
    let s1 = run(&p.m, f, vars, "the cost minimization", optimal)?;
    let cost = p.cost_of(&s1);
    let pin = p.m.add_row();
    for (col, &c) in p.cols.iter().zip(&p.costs) {
        if c != 0.0 {
            p.m.set_weight(pin, *col, c);
        }
    }
    let pinned = cost + PIN_TOLERANCE * cost.abs().max(1e-9);
    p.m.set_row_upper(pin, pinned);
    // Reduced-cost fixing: a variable at a bound of the LP optimum whose reduced cost exceeds the
    // gap between the pinned cost and the LP bound cannot leave that bound in any schema within
    // the pin (LP duality: cost(x) >= z_LP + Σ d_i (x_i - x*_i)).
    if let Some((z, xl, d)) = lp {
        let gap = pinned - z + 1e-7 * pinned.abs().max(1.0);
        for (i, col) in p.cols.iter().enumerate() {
            if xl[i] < 1e-9 && d[i] > gap {
                p.m.set_col_upper(*col, 0.0);
            } else if xl[i] > 1.0 - 1e-9 && -d[i] > gap {
                p.m.set_col_lower(*col, 1.0);
            }
        }
    }

    // 2. Fewest column families among the cheapest schemas, then least space: one solve, with the
    // count weighted above the largest possible sum of normalized sizes.
    let max_size = vars
        .iter()
        .map(|&v| f.size[v])
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let n_cf = p.n_cf;
    let weight = |i: usize| (n_cf + 1.0) + f.size[vars[i]] / max_size;
    for (i, col) in p.cols.iter().enumerate() {
        p.m.set_obj_coeff(*col, if p.is_cf[i] { weight(i) } else { 0.0 });
    }
    // Stage 1's schema satisfies the pin: only a strictly better one is of interest, so CBC gets
    // its value as a cutoff (CBC 2.10's MIP start can make it report a feasible program
    // infeasible). No solution under the cutoff: stage 1's schema is optimal.
    let sec1: f64 = p
        .cols
        .iter()
        .enumerate()
        .filter(|(i, c)| p.is_cf[*i] && s1.col(**c) > 0.5)
        .map(|(i, _)| weight(i))
        .sum();
    p.m.set_parameter("cutoff", &format!("{}", sec1 - 1e-9 * sec1.max(1.0)));
    let s2 = match run(
        &p.m,
        f,
        vars,
        "the column family count and space minimization",
        optimal,
    ) {
        Ok(s) => s,
        Err(AdvisorError::NoSolution(_)) => s1,
        // Out of time without a solution: keep the cheapest schema found by the first stage.
        Err(AdvisorError::Solver(_)) if time_limit.is_some() => {
            *optimal = false;
            s1
        }
        Err(e) => return Err(e),
    };
    Ok((p.zero_one(&s2), cost))
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
        let mut inside = vec![false; f.vars.len()];
        for (i, &v) in vars.iter().enumerate() {
            x[v] = raw.col_solution()[i].round();
            inside[v] = true;
        }
        let ok = f
            .constraints
            .iter()
            .filter(|c| c.terms.first().is_some_and(|(v, _)| inside[*v]))
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
