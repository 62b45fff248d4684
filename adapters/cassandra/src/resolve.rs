//! Resolving a lightweight transaction whose outcome is unknown (a timeout, a broken
//! connection): after a serial read of the row, was it applied, may it be retried, or did
//! another writer change the row?
//!
//! A serial read sees every LWT that completed and finishes one left half-done, so the row it
//! returns is final with respect to our attempt.

use tern_core::model::Entity;
use tern_core::store::MetaEntry;

/// What the serial read says about an attempt whose outcome was unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// The row holds what the write wrote: it was applied.
    Applied,
    /// The row still holds what the write expected: it was not applied; run it again.
    Retry,
    /// The row holds something else: another writer changed it (a conflict).
    Conflict,
}

/// For an entity write: `stored` is the row now, `expected` what the write required
/// (`None`: the key must not exist, `IF NOT EXISTS`), `new` what it wrote. Both sides are
/// compared as the store reads them back.
pub(crate) fn entity(
    stored: Option<&Entity>,
    expected: Option<&Entity>,
    new: &Entity,
) -> Resolution {
    if stored == Some(new) {
        Resolution::Applied
    } else if stored == expected {
        Resolution::Retry
    } else {
        Resolution::Conflict
    }
}

/// For a serial put or delete (the `SerialWrites` facet: no expected row), `left` is what the
/// write leaves (`Some`: the entity put, `None`: no row, a delete): applied where the row holds
/// it; otherwise the attempt's outcome stays unknown (another writer may have overwritten it),
/// which the caller reports as the attempt's error, never as a conflict.
pub(crate) fn serial(stored: Option<&Entity>, left: Option<&Entity>) -> bool {
    stored == left
}

/// For a metadata compare-and-set: `stored` is the entry now, `expected` the revision it
/// required (`None`: must not exist) and `value` what it wrote (`None`: a delete).
pub(crate) fn meta(
    stored: Option<&MetaEntry>,
    expected: Option<u64>,
    value: Option<&str>,
) -> Resolution {
    match (stored, value) {
        (None, None) => Resolution::Applied,
        (Some(s), Some(v)) if s.revision == expected.unwrap_or(0) + 1 && s.value == v => {
            Resolution::Applied
        }
        (Some(s), _) if Some(s.revision) == expected => Resolution::Retry,
        (None, Some(_)) if expected.is_none() => Resolution::Retry,
        _ => Resolution::Conflict,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tern_core::model::{Key, Map, Value};

    fn e(version: u64, x: i64) -> Entity {
        let mut value = Map::new();
        value.insert("x".to_owned(), Value::Int(x));
        let mut e = Entity::new(Key::new("k", "a").unwrap(), value);
        e.version = version;
        e
    }

    #[test]
    fn entity_writes() {
        let (old, new) = (e(1, 1), e(2, 1));
        // Replace.
        assert_eq!(entity(Some(&new), Some(&old), &new), Resolution::Applied);
        assert_eq!(entity(Some(&old), Some(&old), &new), Resolution::Retry);
        assert_eq!(
            entity(Some(&e(1, 9)), Some(&old), &new),
            Resolution::Conflict
        );
        assert_eq!(entity(None, Some(&old), &new), Resolution::Conflict);
        // Insert (IF NOT EXISTS).
        assert_eq!(entity(None, None, &new), Resolution::Retry);
        assert_eq!(entity(Some(&new), None, &new), Resolution::Applied);
        assert_eq!(entity(Some(&old), None, &new), Resolution::Conflict);
    }

    #[test]
    fn serial_writes() {
        let (old, new) = (e(1, 1), e(2, 1));
        assert!(serial(Some(&new), Some(&new)));
        assert!(!serial(Some(&old), Some(&new)));
        assert!(!serial(None, Some(&new)));
        // A delete.
        assert!(serial(None, None));
        assert!(!serial(Some(&old), None));
    }

    #[test]
    fn metadata_writes() {
        let entry = |revision, value: &str| MetaEntry {
            value: value.to_owned(),
            revision,
        };
        // Create.
        assert_eq!(meta(None, None, Some("a")), Resolution::Retry);
        assert_eq!(
            meta(Some(&entry(1, "a")), None, Some("a")),
            Resolution::Applied
        );
        assert_eq!(
            meta(Some(&entry(1, "b")), None, Some("a")),
            Resolution::Conflict
        );
        // Update.
        assert_eq!(
            meta(Some(&entry(4, "a")), Some(3), Some("a")),
            Resolution::Applied
        );
        assert_eq!(
            meta(Some(&entry(3, "old")), Some(3), Some("a")),
            Resolution::Retry
        );
        assert_eq!(
            meta(Some(&entry(4, "b")), Some(3), Some("a")),
            Resolution::Conflict
        );
        assert_eq!(meta(None, Some(3), Some("a")), Resolution::Conflict);
        // Delete.
        assert_eq!(meta(None, Some(3), None), Resolution::Applied);
        assert_eq!(meta(Some(&entry(3, "a")), Some(3), None), Resolution::Retry);
        assert_eq!(
            meta(Some(&entry(4, "a")), Some(3), None),
            Resolution::Conflict
        );
    }
}
