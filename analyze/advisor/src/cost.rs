//! The cost model: `T(n, w)` per lookup step and the cost of writes.

use serde::{Deserialize, Serialize};

use crate::error::{AdvisorError, Result, Span};

/// Cost constants in milliseconds. The defaults describe a single Cassandra node on a local
/// network (see docs/advisor.md); `--calibrate` is meant to replace them with measured values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// Fixed cost of one lookup step (one request round trip).
    pub request: f64,
    /// Cost per partition read (per get).
    pub partition: f64,
    /// Cost per row (C ↦ V pair) read.
    pub row: f64,
    /// Cost per row inserted (put).
    pub insert: f64,
    /// Cost per row deleted.
    pub delete: f64,
    /// The constant penalty of a client-side sort.
    pub sort: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel::CASSANDRA
    }
}

impl CostModel {
    /// Defaults for Cassandra.
    pub const CASSANDRA: CostModel = CostModel {
        request: 0.5,
        partition: 0.2,
        row: 0.005,
        insert: 0.3,
        delete: 0.3,
        sort: 0.05,
    };

    /// `T(n, w)`: `n` gets of `w` rows each.
    pub fn lookup(&self, n: f64, w: f64) -> f64 {
        self.request + self.partition * n + self.row * n * w
    }

    /// Writing `rows` rows, optionally deleting the old ones first.
    pub fn write(&self, rows: f64, inserts: bool, deletes: bool) -> f64 {
        let mut c = 0.0;
        if inserts {
            c += self.insert * rows;
        }
        if deletes {
            c += self.delete * rows;
        }
        c
    }
}

/// The names of the constants in a costs file, in the order of [`CostModel`]'s fields.
pub const CONSTANT_NAMES: [&str; 6] = ["request", "partition", "row", "insert", "delete", "sort"];

impl CostModel {
    /// Parses a costs file (`tern advise --costs FILE`): one `NAME = VALUE` a line (milliseconds),
    /// `#` comments, names from [`CONSTANT_NAMES`]. Constants not given keep their value in `base`
    /// (normally [`CostModel::CASSANDRA`]).
    ///
    /// # Errors
    /// [`AdvisorError::Input`] at `file:line:col` for an unknown name, a repeated one, or a value
    /// that is not a finite number of at least 0.
    pub fn parse(base: &CostModel, file: &str, text: &str) -> Result<CostModel> {
        let mut m = *base;
        let mut seen = [false; 6];
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or_default();
            if line.trim().is_empty() {
                continue;
            }
            let at = |col: usize| Span {
                file: file.to_string(),
                line: i + 1,
                col,
            };
            let indent = line.len() - line.trim_start().len();
            let Some((name, value)) = line.split_once('=') else {
                return Err(AdvisorError::input(
                    &at(indent + 1),
                    format!(
                        "expected `NAME = VALUE` (milliseconds), NAME one of {}",
                        CONSTANT_NAMES.join(", ")
                    ),
                ));
            };
            let name = name.trim();
            let Some(k) = CONSTANT_NAMES.iter().position(|n| *n == name) else {
                return Err(AdvisorError::input(
                    &at(indent + 1),
                    format!(
                        "unknown cost constant `{name}`: the model's constants are {}",
                        CONSTANT_NAMES.join(", ")
                    ),
                ));
            };
            if std::mem::replace(&mut seen[k], true) {
                return Err(AdvisorError::input(
                    &at(indent + 1),
                    format!("`{name}` is given twice"),
                ));
            }
            let vcol = name.len() + indent + 2 + (value.len() - value.trim_start().len());
            let v: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    AdvisorError::input(
                        &at(vcol + 1),
                        format!(
                            "`{}` is not a cost: write a number of milliseconds, at least 0",
                            value.trim()
                        ),
                    )
                })?;
            let slot = match k {
                0 => &mut m.request,
                1 => &mut m.partition,
                2 => &mut m.row,
                3 => &mut m.insert,
                4 => &mut m.delete,
                _ => &mut m.sort,
            };
            *slot = v;
        }
        Ok(m)
    }

    /// The constants as a costs file [`CostModel::parse`] reads back.
    pub fn to_file(&self) -> String {
        let v = [
            self.request,
            self.partition,
            self.row,
            self.insert,
            self.delete,
            self.sort,
        ];
        CONSTANT_NAMES
            .iter()
            .zip(v)
            .map(|(n, v)| format!("{n} = {v}\n"))
            .collect()
    }
}

/// One measurement for [`CostModel::fit`]: `gets` gets of partitions holding `width` rows each took
/// `ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Number of gets (partitions read).
    pub gets: f64,
    /// Rows per partition.
    pub width: f64,
    /// Measured time (ms).
    pub ms: f64,
}

impl CostModel {
    /// Fits `request`, `partition` and `row` of `T(n, w) = request + partition·n + row·n·w` to the
    /// samples by least squares (the normal equations, solved exactly); the other constants are kept
    /// from `self`. A fitted constant below zero (noise on a fast store) is set to zero. `None` when
    /// the samples do not determine the three constants (fewer than three distinct `(n, n·w)`
    /// combinations).
    pub fn fit(&self, samples: &[Sample]) -> Option<CostModel> {
        // Normal equations AᵀA β = Aᵀy with rows (1, n, n·w).
        let mut ata = [[0.0_f64; 3]; 3];
        let mut aty = [0.0_f64; 3];
        for s in samples {
            let row = [1.0, s.gets, s.gets * s.width];
            for i in 0..3 {
                for j in 0..3 {
                    ata[i][j] += row[i] * row[j];
                }
                aty[i] += row[i] * s.ms;
            }
        }
        let beta = solve3(ata, aty)?;
        Some(CostModel {
            request: beta[0].max(0.0),
            partition: beta[1].max(0.0),
            row: beta[2].max(0.0),
            ..*self
        })
    }
}

/// The least-squares slope of `y` against `x` (for the cost per row written, from batches of
/// different sizes), at least zero; `None` when the `x` do not vary.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 1e-12).then(|| (sxy / sxx).max(0.0))
}

/// Solves a 3×3 system by Gaussian elimination with partial pivoting; `None` when singular.
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    let scale = a
        .iter()
        .flatten()
        .fold(0.0_f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col];
        for r in col + 1..3 {
            let f = a[r][col] / pivot_row[col];
            for (x, p) in a[r].iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            b[r] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for r in (0..3).rev() {
        let s: f64 = (r + 1..3).map(|c| a[r][c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_the_constants_of_exact_samples() {
        let truth = CostModel {
            request: 0.3,
            partition: 0.07,
            row: 0.002,
            ..CostModel::CASSANDRA
        };
        let mut samples = Vec::new();
        for n in [1.0, 5.0, 20.0] {
            for w in [1.0, 10.0, 100.0] {
                samples.push(Sample {
                    gets: n,
                    width: w,
                    ms: truth.lookup(n, w),
                });
            }
        }
        let fitted = CostModel::CASSANDRA
            .fit(&samples)
            .unwrap_or_else(|| panic!("no fit"));
        assert!((fitted.request - 0.3).abs() < 1e-9, "{fitted:?}");
        assert!((fitted.partition - 0.07).abs() < 1e-9, "{fitted:?}");
        assert!((fitted.row - 0.002).abs() < 1e-9, "{fitted:?}");
        assert_eq!(fitted.insert, CostModel::CASSANDRA.insert);
    }

    #[test]
    fn a_costs_file_sets_the_named_constants_and_keeps_the_others() {
        let m = CostModel::parse(
            &CostModel::CASSANDRA,
            "c.costs",
            "# measured\nrequest = 0.25\n  row=0.001 # per row\nsort = 0\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.request, 0.25);
        assert_eq!(m.row, 0.001);
        assert_eq!(m.sort, 0.0);
        assert_eq!(m.partition, CostModel::CASSANDRA.partition);
        let back = CostModel::parse(&CostModel::CASSANDRA, "x", &m.to_file())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, m);
        for (text, needle) in [
            (
                "latency = 1\n",
                "c.costs:1:1: unknown cost constant `latency`: the model's constants are request, partition",
            ),
            ("row = -1\n", "c.costs:1:7: `-1` is not a cost"),
            ("row = fast\n", "c.costs:1:7: `fast` is not a cost"),
            ("row 1\n", "c.costs:1:1: expected `NAME = VALUE`"),
            ("row = 1\nrow = 2\n", "c.costs:2:1: `row` is given twice"),
        ] {
            match CostModel::parse(&CostModel::CASSANDRA, "c.costs", text) {
                Err(e) => assert!(e.to_string().starts_with(needle), "{e}"),
                Ok(m) => panic!("{text:?} parsed: {m:?}"),
            }
        }
    }

    #[test]
    fn slope_is_the_cost_per_row() {
        let pts = [(1.0, 0.5), (10.0, 1.4), (50.0, 5.4)];
        assert!((slope(&pts).unwrap_or(-1.0) - 0.1).abs() < 1e-9);
        assert!(slope(&[(3.0, 1.0), (3.0, 2.0)]).is_none());
    }

    #[test]
    fn fit_refuses_samples_that_do_not_determine_the_model() {
        let one = Sample {
            gets: 5.0,
            width: 10.0,
            ms: 1.0,
        };
        assert!(CostModel::CASSANDRA.fit(&[one, one, one]).is_none());
        assert!(CostModel::CASSANDRA.fit(&[]).is_none());
    }

    #[test]
    fn a_negative_fitted_constant_becomes_zero() {
        // Time falls with the number of gets: the partition constant would be negative.
        let samples = [
            (1.0, 1.0, 2.0),
            (2.0, 1.0, 1.5),
            (1.0, 10.0, 2.5),
            (4.0, 10.0, 3.0),
        ]
        .map(|(gets, width, ms)| Sample { gets, width, ms });
        let fitted = CostModel::CASSANDRA
            .fit(&samples)
            .unwrap_or_else(|| panic!("no fit"));
        assert!(fitted.partition >= 0.0 && fitted.request >= 0.0 && fitted.row >= 0.0);
    }
}
