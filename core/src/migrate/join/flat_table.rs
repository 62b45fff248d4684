//! The in-memory part of the join index: byte-string keys and their flat
//! summaries, all in one arena, found through a hash table of 4-byte offsets.
//!
//! One entry costs its bytes plus two varint lengths in the arena and a
//! share of the table (a `u32` and a control byte per bucket, buckets at most
//! 7/8 full), and no allocation of its own: the join benchmark's index holds
//! 1.22M users in 64 MiB before it spills (about 55 bytes an entry, table
//! included), where a boxed entry per key in a `HashSet` held 690k (about
//! 97). A replaced summary is appended and its old bytes stay, counted,
//! until the table is cleared (when it spills).

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::model::codec::{self, ValueReader};

/// At most this much of the arena is reserved up front (address space only:
/// pages become resident as they are written); a larger budget grows it.
const RESERVE_MAX: usize = 1 << 30;

/// Keys and summaries in one arena, found by key.
pub(crate) struct FlatTable {
    /// Records `key_len(varint) summary_len(varint) key summary`, appended.
    arena: Vec<u8>,
    /// The arena offset of each key's live record.
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

/// The key and summary of the record at `at` (empty slices for a bad offset,
/// which the table never holds).
fn record(arena: &[u8], at: u32) -> (&[u8], &[u8]) {
    let bytes = arena.get(at as usize..).unwrap_or_default();
    let mut r = ValueReader::new(bytes);
    let (Ok(k), Ok(s)) = (r.u64(), r.u64()) else {
        return (&[], &[]);
    };
    let start = r.position();
    let (k, s) = (k as usize, s as usize);
    let key = bytes.get(start..start + k).unwrap_or_default();
    let summary = bytes.get(start + k..start + k + s).unwrap_or_default();
    (key, summary)
}

impl FlatTable {
    /// An empty table whose arena reserves up to `budget` bytes of address space.
    pub(crate) fn new(budget: usize) -> FlatTable {
        let mut arena = Vec::new();
        // Reserving is an optimisation (no copy as the arena grows): where
        // the system refuses the address space, the arena grows as it goes.
        let _ = arena.try_reserve_exact(budget.min(RESERVE_MAX));
        FlatTable {
            arena,
            table: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// The summary of `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let hash = self.hasher.hash_one(key);
        let arena = &self.arena;
        self.table
            .find(hash, |&at| record(arena, at).0 == key)
            .map(|&at| record(arena, at).1)
    }

    /// Sets the summary of `key`. `false` (nothing changed) when the arena
    /// would pass 4 GiB, which a 4-byte offset cannot address: spill first.
    pub(crate) fn set(&mut self, key: &[u8], summary: &[u8]) -> bool {
        let at = self.arena.len();
        let Ok(at32) = u32::try_from(at) else {
            return false;
        };
        let mut rec = Vec::with_capacity(20);
        codec::put_u64(key.len() as u64, &mut rec);
        codec::put_u64(summary.len() as u64, &mut rec);
        if u32::try_from(at + rec.len() + key.len() + summary.len()).is_err() {
            return false;
        }
        self.arena.extend_from_slice(&rec);
        self.arena.extend_from_slice(key);
        self.arena.extend_from_slice(summary);
        let hash = self.hasher.hash_one(key);
        let FlatTable {
            arena,
            table,
            hasher,
        } = self;
        match table.find_mut(hash, |&old| record(arena, old).0 == key) {
            Some(slot) => *slot = at32,
            None => {
                table.insert_unique(hash, at32, |&old| hasher.hash_one(record(arena, old).0));
            }
        }
        true
    }

    /// Is it empty?
    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The bytes it takes: the arena's written part (replaced records
    /// included) and the table's buckets.
    pub(crate) fn bytes(&self) -> usize {
        let buckets = if self.table.capacity() == 0 {
            0
        } else {
            (self.table.capacity() * 8 / 7).next_power_of_two()
        };
        self.arena.len() + buckets * (std::mem::size_of::<u32>() + 1)
    }

    /// Every key with its summary, sorted by key (sorting 4-byte offsets,
    /// not pairs of slices: a spill of a million entries sorts 4 MB, not 32).
    pub(crate) fn sorted(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let arena = &self.arena;
        let mut offsets: Vec<u32> = self.table.iter().copied().collect();
        offsets.sort_unstable_by(|&a, &b| record(arena, a).0.cmp(record(arena, b).0));
        offsets.into_iter().map(move |at| record(arena, at))
    }

    /// Empties it, keeping the arena's reservation and the table's buckets.
    pub(crate) fn clear(&mut self) {
        self.arena.clear();
        self.table.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::FlatTable;

    proptest! {
        /// The table answers as a map would, whatever was set, replaced and
        /// cleared, and lists its entries sorted by key.
        #[test]
        fn answers_as_a_map(
            rounds in prop::collection::vec(
                prop::collection::vec((prop::collection::vec(0u8..4, 0..4), prop::collection::vec(any::<u8>(), 0..200)), 0..60),
                1..4,
            ),
        ) {
            let mut table = FlatTable::new(1 << 12);
            for round in rounds {
                table.clear();
                prop_assert!(table.is_empty());
                let mut want = BTreeMap::new();
                for (k, v) in round {
                    prop_assert!(table.set(&k, &v));
                    want.insert(k, v);
                }
                prop_assert_eq!(table.sorted().count(), want.len());
                for (k, v) in &want {
                    prop_assert_eq!(table.get(k), Some(v.as_slice()));
                }
                prop_assert_eq!(table.get(&[9, 9]), None);
                let listed: Vec<(Vec<u8>, Vec<u8>)> =
                    table.sorted().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                let expected: Vec<(Vec<u8>, Vec<u8>)> = want.into_iter().collect();
                prop_assert_eq!(listed, expected);
            }
        }
    }

    /// What it counts grows with what it holds, and clearing gives the arena back.
    #[test]
    fn counts_its_bytes() {
        let mut table = FlatTable::new(1 << 20);
        assert_eq!(table.bytes(), 0);
        for i in 0u32..1000 {
            assert!(table.set(&i.to_le_bytes(), b"summary of ten"));
        }
        // 1000 records of 2 + 4 + 14 bytes, and at least 1000 buckets of 5 bytes.
        assert!(table.bytes() >= 1000 * 20 + 1000 * 5, "{}", table.bytes());
        table.clear();
        assert!(table.bytes() < 1000 * 20, "{}", table.bytes());
    }
}
