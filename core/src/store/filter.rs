//! Scan filters: a version filter and equality conditions with \[SE\] atom semantics.

use serde::{Deserialize, Serialize};

use crate::model::{Entity, Map, Value, Version};

/// Which versions a scan returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum VersionFilter {
    /// Every version.
    #[default]
    Any,
    /// Only entities at exactly this version (a missing version property is 0).
    Exactly(Version),
    /// Only entities below this version.
    Below(Version),
}

impl VersionFilter {
    /// Does `version` pass?
    pub fn matches(self, version: Version) -> bool {
        match self {
            VersionFilter::Any => true,
            VersionFilter::Exactly(v) => version == v,
            VersionFilter::Below(v) => version < v,
        }
    }
}

/// One atom: the property at `path` equals one of `values`, with \[SE\] semantics.
///
/// - An absent property (or an absent step along the path) never matches.
/// - A multi-valued property (an array) matches when one of its elements
///   equals the literal ([`Value::atom_matches`]).
/// - Numbers compare by numeric value (`1 = 1.0`).
/// - `values` with one element is the paper's equality atom; several values
///   are a disjunction, used to look up the sources of a join in batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// The property path: one name for a top-level property, more for a nested one.
    pub path: Vec<String>,
    /// The literals; the atom holds when the property matches any of them.
    pub values: Vec<Value>,
}

impl Condition {
    /// An equality atom on a top-level property.
    pub fn eq(name: impl Into<String>, value: impl Into<Value>) -> Condition {
        Condition {
            path: vec![name.into()],
            values: vec![value.into()],
        }
    }

    /// Does the entity value satisfy the atom?
    pub fn matches_map(&self, map: &Map) -> bool {
        match lookup(map, &self.path) {
            Some(found) => self.values.iter().any(|v| found.atom_matches(v)),
            None => false,
        }
    }
}

/// The value at `path` inside `map`, walking nested maps. `None` when any step is absent
/// or is not a map.
pub fn lookup<'a>(map: &'a Map, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut current = map.get(first)?;
    for name in rest {
        match current {
            Value::Map(inner) => current = inner.get(name)?,
            _ => return None,
        }
    }
    Some(current)
}

/// A scan filter: the version filter and a conjunction of atoms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    /// Which versions.
    pub version: VersionFilter,
    /// All of these atoms must hold.
    pub conditions: Vec<Condition>,
}

impl Filter {
    /// Every entity.
    pub fn all() -> Filter {
        Filter::default()
    }

    /// Entities at exactly `version`.
    pub fn at_version(version: Version) -> Filter {
        Filter {
            version: VersionFilter::Exactly(version),
            conditions: Vec::new(),
        }
    }

    /// Does the entity pass? The reference that every store's filtering must agree with.
    pub fn matches(&self, entity: &Entity) -> bool {
        self.version.matches(entity.version)
            && self.conditions.iter().all(|c| c.matches_map(&entity.value))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::Key;

    fn entity(props: &[(&str, Value)]) -> Entity {
        Entity {
            key: Key::new("k", 1).unwrap(),
            version: 2,
            value: props
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn absent_never_matches() {
        let e = entity(&[]);
        assert!(
            !Filter {
                version: VersionFilter::Any,
                conditions: vec![Condition::eq("a", Value::Null)]
            }
            .matches(&e)
        );
    }

    #[test]
    fn null_matches_null() {
        let e = entity(&[("a", Value::Null)]);
        assert!(Condition::eq("a", Value::Null).matches_map(&e.value));
    }

    #[test]
    fn nested_paths() {
        let mut inner = Map::new();
        inner.insert("name".into(), "Ann".into());
        let e = entity(&[("author", Value::Map(inner))]);
        let c = Condition {
            path: vec!["author".into(), "name".into()],
            values: vec!["Ann".into()],
        };
        assert!(c.matches_map(&e.value));
        let c = Condition {
            path: vec!["author".into(), "x".into()],
            values: vec!["Ann".into()],
        };
        assert!(!c.matches_map(&e.value));
    }

    #[test]
    fn version_filters() {
        let e = entity(&[]);
        assert!(Filter::at_version(2).matches(&e));
        assert!(!Filter::at_version(1).matches(&e));
        assert!(
            Filter {
                version: VersionFilter::Below(3),
                conditions: vec![]
            }
            .matches(&e)
        );
        assert!(
            !Filter {
                version: VersionFilter::Below(2),
                conditions: vec![]
            }
            .matches(&e)
        );
    }
}
