//! Several writes as one: the all-or-nothing, guarded write that lazy migration
//! needs across keys ([`Store::write_atomic`](super::Store::write_atomic)).
//!
//! A lazy kind rename moves an entity from `old:id` to `new:id` on access: the
//! write under the new name and the removal of the stale copy under the old
//! one must happen together, and only if nobody changed either meanwhile.
//! A [`Guard`] states what must still hold; the writes apply only if every
//! guard and every write's own condition holds, all of them or none.

use crate::model::{Entity, Key};

/// Which keys one [`Store::write_atomic`](super::Store::write_atomic) may
/// span ([`Capability::atomic_writes`](super::Capability::atomic_writes)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AtomicScope {
    /// `write_atomic` is not implemented: lazy kind renames are refused at install.
    #[default]
    None,
    /// The keys of one id under several kind names (an entity and its copies
    /// under former names): what one access of a lazy kind rename needs. A
    /// Redis Cluster whose ids are hash tags keeps such keys in one slot.
    OneId,
    /// Any keys: the writes of several entities may go in one call.
    AnyKeys,
}

impl AtomicScope {
    /// `write_atomic` is implemented, for one id at least.
    pub fn supported(self) -> bool {
        self != AtomicScope::None
    }
}

/// A condition of [`Store::write_atomic`](super::Store::write_atomic) on a key it may not write.
#[derive(Debug, Clone, PartialEq)]
pub enum Guard {
    /// No entity has this key.
    Absent(Key),
    /// The stored entity is still this one (its version; its value too where
    /// [`Capability::cas_compares_value`](super::Capability::cas_compares_value)).
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
