//! Key-range partitions of the in-process stores (memory, embedded): a kind's
//! encoded keys, in order, cut at split keys.
//!
//! A partition is the keys `k` with `after < k <= upto` (`after` absent: from
//! the kind's first key; `upto` absent: to its last). Its spec is
//! `<after hex>..<upto hex>`, each side empty when absent. An entity's key
//! decides its partition, so a key inserted during the stage falls into
//! exactly one.

use super::{Cursor, Error, ErrorKind, Partition, Result};
use crate::model::keycode::encode_kind_prefix;

/// One range of a kind's encoded keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRange {
    /// The keys are after this one (exclusive).
    pub(crate) after: Option<Vec<u8>>,
    /// The keys are up to this one (inclusive).
    pub(crate) upto: Option<Vec<u8>>,
}

impl KeyRange {
    /// Where a scan of the range continues: the partition's own cursor, else
    /// just after its lower bound (a cursor of these stores is the last key
    /// examined, exclusive), else the kind's start.
    pub(crate) fn start(&self, cursor: Option<&Cursor>) -> Option<Cursor> {
        cursor
            .cloned()
            .or_else(|| self.after.as_ref().map(|k| Cursor(hex::encode(k))))
    }

    /// The first key after the range (exclusive end), or `None`: the kind's end.
    pub(crate) fn end(&self) -> Option<Vec<u8>> {
        self.upto.as_ref().map(|k| {
            let mut end = k.clone();
            end.push(0);
            end
        })
    }

    /// Is `key` past the range?
    #[cfg(test)]
    fn past(&self, key: &[u8]) -> bool {
        self.upto.as_ref().is_some_and(|u| key > u.as_slice())
    }
}

/// Splits the sorted keys of `kind` (`total` of them, handed out by `keys`)
/// into at most `count` ranges of about equal size: one split key every
/// `total / count` keys.
pub(crate) fn split<'k>(
    kind: &str,
    keys: impl Iterator<Item = &'k [u8]>,
    total: usize,
    count: usize,
) -> Vec<Partition> {
    let count = count.max(1);
    let per = total.div_ceil(count).max(1);
    let mut bounds: Vec<Vec<u8>> = Vec::new();
    for (i, key) in keys.enumerate() {
        if (i + 1) % per == 0 && i + 1 < total && bounds.len() + 1 < count {
            bounds.push(key.to_vec());
        }
    }
    let n = bounds.len() + 1;
    let mut out = Vec::with_capacity(n);
    let mut after: Option<Vec<u8>> = None;
    for i in 0..n {
        let upto = bounds.get(i).cloned();
        out.push(Partition {
            label: format!("{kind} keys {}/{n}", i + 1),
            spec: format!(
                "{}..{}",
                after.as_deref().map(hex::encode).unwrap_or_default(),
                upto.as_deref().map(hex::encode).unwrap_or_default()
            ),
        });
        after = upto;
    }
    out
}

/// The range of a partition of `kind` made by [`split`].
///
/// # Errors
/// [`ErrorKind::InvalidData`] when the spec is not one of these stores', or
/// not of `kind`.
pub(crate) fn parse(kind: &str, partition: &Partition) -> Result<KeyRange> {
    let bad = |why: &str| {
        Error::new(
            ErrorKind::InvalidData,
            format!(
                "partition {:?} ({:?}) is not a key range of kind {kind:?} of this store: {why}; \
                 abandon the interrupted run (`tern abandon`) and start it again",
                partition.label, partition.spec
            ),
        )
    };
    let (after, upto) = partition
        .spec
        .split_once("..")
        .ok_or_else(|| bad("no `..`"))?;
    let prefix = encode_kind_prefix(kind);
    let side = |s: &str| -> Result<Option<Vec<u8>>> {
        if s.is_empty() {
            return Ok(None);
        }
        let k = hex::decode(s).map_err(|_| bad("not hex"))?;
        if !k.starts_with(&prefix) {
            return Err(bad("a key of another kind"));
        }
        Ok(Some(k))
    };
    Ok(KeyRange {
        after: side(after)?,
        upto: side(upto)?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_the_keys_once_and_parse_back() {
        let prefix = encode_kind_prefix("k");
        let keys: Vec<Vec<u8>> = (0u8..10)
            .map(|i| {
                let mut k = prefix.clone();
                k.push(i);
                k
            })
            .collect();
        for count in [1, 3, 4, 10, 50] {
            let parts = split("k", keys.iter().map(Vec::as_slice), keys.len(), count);
            assert!(parts.len() <= count.max(1));
            let mut seen = 0;
            for key in &keys {
                let owners = parts
                    .iter()
                    .filter(|p| {
                        let r = parse("k", p).unwrap();
                        r.after.as_ref().is_none_or(|a| key > a) && !r.past(key)
                    })
                    .count();
                assert_eq!(owners, 1, "key {key:?} in exactly one of {count}");
                seen += 1;
            }
            assert_eq!(seen, 10);
        }
        assert!(
            parse(
                "other",
                &split("k", keys.iter().map(Vec::as_slice), 10, 2)[1]
            )
            .is_err()
        );
    }
}
