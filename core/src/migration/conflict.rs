//! One target of an unsafe `move`/`copy`, with the statement that found it.

use std::fmt;

/// A target that an unsafe `move`/`copy` writes from sources with different
/// values ([SE] Proposition 2), found by a dry run or overridden by
/// `--force-unsafe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    /// The statement, as text.
    pub statement: String,
    /// The target and its sources: `key: source=value, source=value`.
    pub target: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.target)
    }
}

/// The statements of `conflicts` with their number of conflicting targets,
/// in the order they were first found.
pub fn per_statement(conflicts: &[Conflict]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for c in conflicts {
        match out.iter_mut().find(|(s, _)| *s == c.statement) {
            Some((_, n)) => *n += 1,
            None => out.push((c.statement.clone(), 1)),
        }
    }
    out
}

/// Drops repeated (statement, target) pairs (a batch retried after a
/// concurrent write finds its conflicts again), keeping the first.
pub fn dedup(conflicts: &mut Vec<Conflict>) {
    let mut seen = std::collections::HashSet::new();
    conflicts.retain(|c| seen.insert((c.statement.clone(), c.target.clone())));
}

/// The refusal of `conflicts` (`None` when there are none): it names the
/// first unsafe statement with its own conflicts, and counts the other
/// statements' conflicts per statement.
pub fn refusal(conflicts: &[Conflict]) -> Option<super::error::MigrateError> {
    let mut groups = per_statement(conflicts).into_iter();
    let (statement, _) = groups.next()?;
    Some(super::error::MigrateError::Unsafe {
        conflicts: conflicts
            .iter()
            .filter(|c| c.statement == statement)
            .map(|c| c.target.clone())
            .collect(),
        statement,
        others: groups.collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_are_counted_per_statement() {
        let c = |s: &str, t: &str| Conflict {
            statement: s.into(),
            target: t.into(),
        };
        let all = [c("copy", "a"), c("move", "b"), c("copy", "c")];
        assert_eq!(
            per_statement(&all),
            vec![("copy".to_owned(), 2), ("move".to_owned(), 1)]
        );
    }
}
