//! Solving the program with CBC (COIN-OR, linked from Debian's `coinor-libcbc-dev`), lexicographically:
//! least cost, then fewest column families, then least space.

use coin_cbc::{Col, Model, Sense, Solution};

use crate::bip::Formulation;
use crate::error::{AdvisorError, Result};

/// Relative tolerance when pinning an optimum before the next objective.
pub const PIN_TOLERANCE: f64 = 1e-6;

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

/// Solves `f` lexicographically.
/// `time_limit`: seconds per stage; when it runs out, the best feasible solution found is taken and
/// the result is marked not optimal.
pub fn solve(f: &Formulation, time_limit: Option<f64>) -> Result<Solved> {
    let mut m = Model::default();
    m.set_parameter("logLevel", "0");
    m.set_parameter("slogLevel", "0");
    if let Some(t) = time_limit {
        m.set_parameter("timeMode", "elapsed");
        m.set_parameter("seconds", &format!("{t}"));
    }
    let mut optimal = true;
    let cols: Vec<Col> = f.vars.iter().map(|_| m.add_binary()).collect();
    for c in &f.constraints {
        let row = m.add_row();
        for &(v, coef) in &c.terms {
            m.set_weight(row, cols[v], coef);
        }
        if c.lo.is_finite() {
            m.set_row_lower(row, c.lo);
        }
        if c.hi.is_finite() {
            m.set_row_upper(row, c.hi);
        }
    }
    m.set_obj_sense(Sense::Minimize);

    // 1. Least cost.
    for (i, &c) in f.cost.iter().enumerate() {
        m.set_obj_coeff(cols[i], c);
    }
    let s1 = run(&m, f, "the cost minimization", &mut optimal)?;
    let cost: f64 = f
        .cost
        .iter()
        .enumerate()
        .map(|(i, c)| c * s1.col(cols[i]))
        .sum();
    let pin = m.add_row();
    for (i, &c) in f.cost.iter().enumerate() {
        if c != 0.0 {
            m.set_weight(pin, cols[i], c);
        }
    }
    m.set_row_upper(pin, cost + PIN_TOLERANCE * cost.abs().max(1e-9));

    // 2. Fewest column families among the cheapest schemas, then least space: one solve, with the
    // count weighted above the largest possible sum of normalized sizes.
    let is_cf: Vec<bool> = f
        .vars
        .iter()
        .map(|v| matches!(v, crate::bip::Var::Cf(_)))
        .collect();
    let n_cf = is_cf.iter().filter(|c| **c).count() as f64;
    let max_size = f.size.iter().copied().fold(0.0_f64, f64::max).max(1.0);
    for (i, col) in cols.iter().enumerate() {
        let c = if is_cf[i] {
            (n_cf + 1.0) + f.size[i] / max_size
        } else {
            0.0
        };
        m.set_obj_coeff(*col, c);
    }
    let s3 = match run(
        &m,
        f,
        "the column family count and space minimization",
        &mut optimal,
    ) {
        Ok(s) => s,
        // Out of time without a solution: keep the cheapest schema found by the first stage.
        Err(AdvisorError::Solver(_)) if time_limit.is_some() => {
            optimal = false;
            s1
        }
        Err(e) => return Err(e),
    };
    let count = cols
        .iter()
        .enumerate()
        .filter(|(i, c)| is_cf[*i] && s3.col(**c) > 0.5)
        .count();
    let x: Vec<f64> = cols
        .iter()
        .map(|c| if s3.col(*c) > 0.5 { 1.0 } else { 0.0 })
        .collect();
    Ok(Solved {
        x,
        cost,
        column_families: count,
        optimal,
    })
}

fn run(m: &Model, f: &Formulation, what: &str, optimal: &mut bool) -> Result<Solution> {
    let t = std::time::Instant::now();
    let s = m.solve();
    tracing::debug!(
        stage = what,
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
    let x: Vec<f64> = raw.col_solution().iter().map(|v| v.round()).collect();
    if raw.is_seconds_limit_reached() && x.len() == f.vars.len() && f.feasible(&x) {
        *optimal = false;
        return Ok(s);
    }
    Err(AdvisorError::Solver(format!(
        "CBC did not prove {what} optimal"
    )))
}
