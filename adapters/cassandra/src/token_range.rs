//! Token ranges of the Murmur3 ring, `token(pk) > lo AND token(pk) <= hi`, and the scan
//! statements of a table, whole or restricted to one range: what the scans
//! ([`scan`](crate::scan)) and the partitions ([`partitions`](crate::partitions)) share.

use tern_core::store::{Error, ErrorKind, Partition, Result};

/// The statements of a scan over one table.
pub(crate) struct Queries {
    /// The whole table.
    pub(crate) all: String,
    /// From a token on: `... WHERE token(pk) >= ?`.
    pub(crate) from_token: String,
    /// Bound by the partition key: its prepared metadata computes a row's token.
    pub(crate) lookup: String,
    /// How many leading columns of a row are its partition key.
    pub(crate) partition_columns: usize,
}

/// The token range `(lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenRange {
    lo: i64,
    hi: i64,
}

impl TokenRange {
    pub(crate) fn partition(self) -> Partition {
        Partition {
            label: format!("tokens ({}, {}]", self.lo, self.hi),
            spec: format!("t1.{}.{}", self.lo, self.hi),
        }
    }

    pub(crate) fn parse(partition: &Partition) -> Result<TokenRange> {
        let invalid = || {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("{:?} is not a Cassandra token range", partition.spec),
            )
        };
        let rest = partition.spec.strip_prefix("t1.").ok_or_else(invalid)?;
        // `lo` may be negative: split at the last dot.
        let (lo, hi) = rest.rsplit_once('.').ok_or_else(invalid)?;
        let range = TokenRange {
            lo: lo.parse().map_err(|_| invalid())?,
            hi: hi.parse().map_err(|_| invalid())?,
        };
        if range.lo >= range.hi {
            return Err(invalid());
        }
        Ok(range)
    }

    /// The scan queries of `all` restricted to the range: `token(pk)` is the
    /// expression `from_token` starts at.
    pub(crate) fn restrict(self, all: &Queries) -> Option<Queries> {
        let tok = all
            .from_token
            .rsplit_once(" WHERE ")?
            .1
            .strip_suffix(" >= ?")?
            .to_owned();
        Some(Queries {
            all: format!(
                "{} WHERE {tok} > {} AND {tok} <= {}",
                all.all, self.lo, self.hi
            ),
            from_token: format!("{} AND {tok} <= {}", all.from_token, self.hi),
            lookup: all.lookup.clone(),
            partition_columns: all.partition_columns,
        })
    }
}

/// The whole ring, `(-2^63, 2^63 - 1]`, in `count` equal ranges.
pub(crate) fn cut(count: usize) -> Vec<TokenRange> {
    let count = i128::try_from(count.max(1)).unwrap_or(1);
    let span = i128::from(i64::MAX) - i128::from(i64::MIN);
    let at = |i: i128| -> i64 {
        let t = i128::from(i64::MIN) + span * i / count;
        i64::try_from(t).unwrap_or(i64::MAX)
    };
    (0..count)
        .map(|i| TokenRange {
            lo: at(i),
            hi: at(i + 1),
        })
        .filter(|r| r.lo < r.hi)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_cut_into_adjacent_ranges() {
        for count in 1..=16 {
            let ranges = cut(count);
            assert_eq!(ranges.len(), count);
            assert_eq!(ranges[0].lo, i64::MIN);
            assert_eq!(ranges[count - 1].hi, i64::MAX);
            for w in ranges.windows(2) {
                assert_eq!(w[0].hi, w[1].lo);
            }
        }
    }

    #[test]
    fn specs_round_trip() {
        let r = TokenRange { lo: -5, hi: 7 };
        assert_eq!(TokenRange::parse(&r.partition()).unwrap(), r);
        let bad = Partition {
            label: String::new(),
            spec: "t1.7.-5".into(),
        };
        assert_eq!(
            TokenRange::parse(&bad).unwrap_err().kind(),
            ErrorKind::InvalidCursor
        );
    }

    #[test]
    fn queries_are_restricted_to_the_range() {
        let q = Queries {
            all: "SELECT id, doc FROM ks.t".into(),
            from_token: "SELECT id, doc FROM ks.t WHERE token(id) >= ?".into(),
            lookup: String::new(),
            partition_columns: 1,
        };
        let r = TokenRange { lo: -5, hi: 7 }.restrict(&q).unwrap();
        assert_eq!(
            r.all,
            "SELECT id, doc FROM ks.t WHERE token(id) > -5 AND token(id) <= 7"
        );
        assert_eq!(
            r.from_token,
            "SELECT id, doc FROM ks.t WHERE token(id) >= ? AND token(id) <= 7"
        );
    }
}
