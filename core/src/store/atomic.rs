//! Several writes as one: the all-or-nothing, guarded write that lazy migration
//! needs across keys ([`Store::write_atomic`](super::Store::write_atomic)).
//!
//! A lazy kind rename moves an entity from `old:id` to `new:id` on access: the
//! write under the new name and the removal of the stale copy under the old
//! one must happen together, and only if nobody changed either meanwhile.
//! A [`Guard`] states what must still hold; the writes apply only if every
//! guard and every write's own condition holds, all of them or none.

use crate::model::{Entity, Key};

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
