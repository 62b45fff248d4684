//! The safety check of move and copy: \[SE\] Proposition 2.
//!
//! add, delete and rename are safe by construction (\[SE\] Proposition 1,
//! [`Statement::is_safe_by_construction`](crate::lang::Statement::is_safe_by_construction)).
//! A move or copy is **unsafe** when one target can be written by two sources
//! with different values: the paper's loop visits the sources in an
//! unspecified order and the last writer wins, so the result would depend on
//! that order. Rewriting a target with the *same* value is safe.
//!
//! The paper decides this by a dry run of the operator's nested loops that
//! remembers which targets were already updated (a bit vector the size of the
//! store) and flags a target "to be overwritten with different property
//! values": [`check_transfer`] does exactly that over an in-memory state, in
//! O(|sources| × |targets|). [`SafetyChecker`] is the same check fed one target
//! at a time with the sources that join it, so `tern check` and `tern plan` can
//! run it over a real store in batches without loading it.
//!
//! The value compared is the value written, compared structurally: `1` and
//! `1.0` are different writes (the stored type would depend on the order).
//! Under tern's default semantics a source that lacks the property writes
//! nothing; with [`EvalOptions::literal_transfer`] it writes "absent", which
//! conflicts with any value.

use std::fmt;

use crate::lang::ast::Transfer;
use crate::lang::conflict::TargetConflict;
use crate::lang::eval::{
    EvalOptions, State, TargetResolution, joins, resolve_target_with, source_matches,
    target_matches, transfer_value,
};
use crate::model::{Entity, Key, Value};

/// A property of the statement itself worth a warning, whatever the data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StaticWarning {
    /// No join condition: every matching source meets every matching target
    /// (the paper's unsafe example `copy user.url to blogpost`). Safe only if
    /// all matching sources that have the property agree on its value.
    CrossProduct,
    /// A target condition or the join's target side reads the property being
    /// moved or copied. tern evaluates conditions on the state before the
    /// statement; the paper's loop would see the writes of earlier iterations,
    /// so the two can differ.
    ReadsTransferredProperty {
        /// The condition or join side, as written.
        prop: String,
    },
    /// Source and target kind are the same: the statement is rejected.
    SameKind,
}

impl fmt::Display for StaticWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaticWarning::CrossProduct => f.write_str(
                "no join condition: every matching source meets every matching target (cross product); \
                 safe only if all sources agree on the value",
            ),
            StaticWarning::ReadsTransferredProperty { prop } => write!(
                f,
                "{prop} reads the transferred property; tern evaluates it before the statement, \
                 the paper's loop would see earlier writes"
            ),
            StaticWarning::SameKind => f.write_str("source and target kind are the same"),
        }
    }
}

/// The warnings a move or copy deserves before looking at any data.
pub fn static_warnings(t: &Transfer) -> Vec<StaticWarning> {
    let mut warnings = Vec::new();
    if t.prop.kind == t.to_kind {
        warnings.push(StaticWarning::SameKind);
    }
    if t.join.is_none() {
        warnings.push(StaticWarning::CrossProduct);
    }
    let moved = &t.prop.path;
    // Two paths overlap when one is a prefix of the other.
    let overlaps = |path: &[String]| path.iter().zip(moved).all(|(a, b)| a == b);
    let target_side = t
        .join
        .iter()
        .map(|j| &j.target)
        .chain(t.target_conditions.iter().map(|a| &a.prop));
    for prop in target_side {
        if overlaps(&prop.path) {
            warnings.push(StaticWarning::ReadsTransferredProperty {
                prop: prop.to_string(),
            });
        }
    }
    warnings
}

/// The result of a safety check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SafetyReport {
    /// Warnings about the statement itself ([`static_warnings`]).
    pub warnings: Vec<StaticWarning>,
    /// Target-kind entities examined.
    pub targets_examined: u64,
    /// Targets written at least once (by a source with the property, or with
    /// [`EvalOptions::literal_transfer`] by any matching source).
    pub targets_written: u64,
    /// Source-to-target writes: the iterations of the paper's inner loop that
    /// write.
    pub writes: u64,
    /// How many targets conflict (may exceed `conflicts.len()` when limited).
    pub conflict_count: u64,
    /// The conflicting targets, in the order found, up to the limit.
    pub conflicts: Vec<TargetConflict>,
}

impl SafetyReport {
    /// Is the statement safe on the data examined (no conflicting target)?
    pub fn is_safe(&self) -> bool {
        self.conflict_count == 0
    }
}

/// The paper's dry run of a move or copy over an in-memory state (\[SE\]
/// Proposition 2), with tern's default semantics.
pub fn check_transfer(t: &Transfer, state: &State) -> SafetyReport {
    check_transfer_with(t, state, &EvalOptions::default())
}

/// The paper's dry run with the given options ([`EvalOptions::force`] is
/// ignored: this says whether forcing would be needed).
///
/// Simulates `foreach e in get(c1 ∧ θ1) do foreach f in get(c2 ∧ θ2) do
/// setProperty(f, n, getProperty(e, n)) od od` without writing, over the
/// state before the statement, marking each written target in a bit vector;
/// a write to an already written target with a different value flags it.
/// Every conflict is reported with all its writes.
pub fn check_transfer_with(t: &Transfer, state: &State, opts: &EvalOptions) -> SafetyReport {
    let sources: Vec<&Entity> = state.values().filter(|e| source_matches(t, e)).collect();
    let targets: Vec<&Entity> = state.values().filter(|e| e.key.kind == t.to_kind).collect();
    let mut report = SafetyReport {
        warnings: static_warnings(t),
        targets_examined: targets.len() as u64,
        ..SafetyReport::default()
    };
    let mut updated = vec![false; targets.len()];
    let mut first: Vec<Option<Value>> = vec![None; targets.len()];
    let mut conflicted = vec![false; targets.len()];
    let mut writes: Vec<Vec<(Key, Option<Value>)>> = vec![Vec::new(); targets.len()];
    for source in &sources {
        let value = transfer_value(t, source).cloned();
        if value.is_none() && !opts.literal_transfer {
            continue; // writes nothing
        }
        for (i, target) in targets.iter().enumerate() {
            if !(target_matches(t, target) && joins(t, source, target)) {
                continue;
            }
            report.writes += 1;
            if updated[i] {
                if first[i] != value {
                    conflicted[i] = true;
                }
            } else {
                updated[i] = true;
                first[i].clone_from(&value);
            }
            writes[i].push((source.key.clone(), value.clone()));
        }
    }
    report.targets_written = updated.iter().filter(|u| **u).count() as u64;
    for (i, target) in targets.iter().enumerate() {
        if conflicted[i] {
            report.conflict_count += 1;
            report.conflicts.push(TargetConflict {
                target: target.key.clone(),
                writes: std::mem::take(&mut writes[i]),
            });
        }
    }
    report
}

/// The streaming form of the check: feed each target (in any order, each
/// once) with candidate sources that may join it, e.g. from a
/// [`source_query`](crate::lang::eval::source_query) scan. Equivalent to
/// [`check_transfer_with`] when every target of the kind is fed.
#[derive(Debug, Clone)]
pub struct SafetyChecker {
    transfer: Transfer,
    opts: EvalOptions,
    limit: usize,
    report: SafetyReport,
}

impl SafetyChecker {
    /// A checker for `t` under `opts`, keeping every conflict.
    pub fn new(t: &Transfer, opts: &EvalOptions) -> SafetyChecker {
        SafetyChecker {
            transfer: t.clone(),
            opts: *opts,
            limit: usize::MAX,
            report: SafetyReport {
                warnings: static_warnings(t),
                ..SafetyReport::default()
            },
        }
    }

    /// Keeps at most `limit` conflicts in detail; all are still counted.
    #[must_use]
    pub fn with_conflict_limit(mut self, limit: usize) -> SafetyChecker {
        self.limit = limit;
        self
    }

    /// Checks one target against candidate sources (a superset of the joining
    /// ones is fine; they are filtered with θ1 and the join). Returns what the
    /// target would become, so a plan can show it.
    pub fn feed(&mut self, target: &Entity, sources: &[&Entity]) -> TargetResolution {
        let resolution = resolve_target_with(&self.transfer, target, sources, &self.opts);
        self.report.targets_examined += 1;
        let writers = match &resolution {
            TargetResolution::Unmatched | TargetResolution::Lacking { .. } => 0,
            TargetResolution::Set { sources, .. }
            | TargetResolution::Remove { sources }
            | TargetResolution::RemoveAfterSet { sources, .. } => sources.len(),
            TargetResolution::Conflict { writes } => writes.len(),
        };
        if writers > 0 {
            self.report.targets_written += 1;
            self.report.writes += writers as u64;
        }
        if let TargetResolution::Conflict { writes } = &resolution {
            self.report.conflict_count += 1;
            if self.report.conflicts.len() < self.limit {
                self.report.conflicts.push(TargetConflict {
                    target: target.key.clone(),
                    writes: writes.clone(),
                });
            }
        }
        resolution
    }

    /// The report so far.
    pub fn report(&self) -> &SafetyReport {
        &self.report
    }

    /// The final report.
    pub fn finish(self) -> SafetyReport {
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<SafetyChecker>();
        check::<SafetyReport>();
        check::<TargetConflict>();
    }
}
