//! The cost model: `T(n, w)` per lookup step and the cost of writes.

use serde::{Deserialize, Serialize};

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
