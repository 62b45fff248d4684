//! Several writes as one: the all-or-nothing, guarded write that lazy migration
//! needs across keys ([`AtomicWrites::write_atomic`](super::AtomicWrites::write_atomic)).
//!
//! A lazy kind rename moves an entity from `old:id` to `new:id` on access: the
//! write under the new name and the removal of the stale copy under the old
//! one must happen together, and only if nobody changed either meanwhile.
//! A [`Guard`] states what must still hold; the writes apply only if every
//! guard and every write's own condition holds, all of them or none.

use crate::model::{Entity, Key};

/// Which keys one [`AtomicWrites::write_atomic`](super::AtomicWrites::write_atomic) may
/// span ([`AtomicWrites::scope`](super::AtomicWrites::scope)). A store without
/// the [`AtomicWrites`](super::AtomicWrites) facet has none: lazy kind renames
/// are refused at install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicScope {
    /// The keys of one id under several kind names (an entity and its copies
    /// under former names): what one access of a lazy kind rename needs. A
    /// Redis Cluster whose ids are hash tags keeps such keys in one slot.
    OneId,
    /// Any keys: the writes of several entities may go in one call.
    AnyKeys,
}

/// A condition of [`AtomicWrites::write_atomic`](super::AtomicWrites::write_atomic) on a key it may not write.
#[derive(Debug, Clone, PartialEq)]
pub enum Guard {
    /// No entity has this key.
    Absent(Key),
    /// The stored entity is still this one (its version and its value, as a
    /// [`Write::Replace`](super::Write::Replace) compares them).
    Unchanged(Entity),
}

impl Guard {
    /// The key the guard is about.
    pub fn key(&self) -> &Key {
        match self {
            Guard::Absent(k) => k,
            Guard::Unchanged(e) => &e.key,
        }
    }
}
