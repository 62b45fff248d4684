//! Scan cursors: the driver's paging state, plus the token where a token-range scan can
//! resume when the cluster no longer accepts that paging state.
//!
//! Text form (format 2): `c2.<from>.<last>.<hex paging state>`, where `<from>` is the token the
//! scan's query starts at (`-` for a scan of the whole table) and `<last>` the token of the
//! partition of the last row read (`-` when none was read yet). Format 1 (`c1.<hex>`, a bare
//! paging state of a whole-table scan) is still read.

use tern_core::store::{Cursor, Error, ErrorKind, Result};

/// Where a scan continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanCursor {
    /// The query the paging state belongs to: `None` for the whole table, `Some(t)` for
    /// `token(pk) >= t`.
    pub(crate) from: Option<i64>,
    /// The token of the partition of the last row read, if any.
    pub(crate) last: Option<i64>,
    /// The driver's paging state for that query.
    pub(crate) paging: Vec<u8>,
}

/// How to continue a scan whose paging state the cluster refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Scan `token(pk) >= t` from its start. Rows of the partition at `t` may be returned
    /// again (the store contract allows repeats when scans are not ordered).
    FromToken(i64),
    /// No position survives: the engine must restart the scan (`InvalidCursor`).
    Restart,
}

fn token_text(token: Option<i64>) -> String {
    token.map_or_else(|| "-".to_owned(), |t| t.to_string())
}

fn parse_token(text: &str) -> Option<Option<i64>> {
    if text == "-" {
        Some(None)
    } else {
        text.parse().ok().map(Some)
    }
}

impl ScanCursor {
    /// The cursor as text.
    pub(crate) fn encode(&self) -> Cursor {
        Cursor(format!(
            "c2.{}.{}.{}",
            token_text(self.from),
            token_text(self.last),
            hex::encode(&self.paging)
        ))
    }

    /// The cursor of a scan request: `None` at the start, `InvalidCursor` for a cursor this
    /// adapter did not make.
    pub(crate) fn of_request(cursor: Option<&Cursor>) -> Result<Option<ScanCursor>> {
        cursor
            .map(|c| {
                ScanCursor::decode(c).ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidCursor,
                        format!("cursor {:?} is not one this store made", c.0),
                    )
                })
            })
            .transpose()
    }

    /// Reads a cursor this adapter made; `None` for anything else.
    pub(crate) fn decode(cursor: &Cursor) -> Option<ScanCursor> {
        if let Some(h) = cursor.0.strip_prefix("c1.") {
            return Some(ScanCursor {
                from: None,
                last: None,
                paging: hex::decode(h).ok()?,
            });
        }
        let mut parts = cursor.0.strip_prefix("c2.")?.splitn(3, '.');
        let from = parse_token(parts.next()?)?;
        let last = parse_token(parts.next()?)?;
        let paging = hex::decode(parts.next()?).ok()?;
        Some(ScanCursor { from, last, paging })
    }

    /// Where to go on when the paging state is refused: from the last row's token when one
    /// was read (the rows before it were returned already), else from the start of this
    /// cursor's query (a token scan's start survives; a whole-table scan restarts).
    pub(crate) fn fallback(&self) -> Fallback {
        match (self.last, self.from) {
            (Some(t), _) | (None, Some(t)) => Fallback::FromToken(t),
            (None, None) => Fallback::Restart,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_format_1() {
        for c in [
            ScanCursor {
                from: None,
                last: None,
                paging: vec![],
            },
            ScanCursor {
                from: None,
                last: Some(-5),
                paging: vec![0, 255],
            },
            ScanCursor {
                from: Some(i64::MIN + 1),
                last: Some(i64::MAX),
                paging: vec![1],
            },
        ] {
            assert_eq!(ScanCursor::decode(&c.encode()), Some(c.clone()), "{c:?}");
        }
        assert_eq!(
            ScanCursor::decode(&Cursor("c1.00ff".into())),
            Some(ScanCursor {
                from: None,
                last: None,
                paging: vec![0, 255]
            })
        );
        assert_eq!(
            ScanCursor {
                from: Some(3),
                last: None,
                paging: vec![171]
            }
            .encode()
            .0,
            "c2.3.-.ab"
        );
        for bad in [
            "",
            "nonsense",
            "c1.zz",
            "c2.x.-.00",
            "c2.-.-",
            "c2.-.1.0g",
            "c3.-.-.00",
        ] {
            assert_eq!(ScanCursor::decode(&Cursor(bad.into())), None, "{bad}");
        }
    }

    #[test]
    fn a_refused_paging_state_falls_back_to_the_last_token() {
        let c = |from, last| ScanCursor {
            from,
            last,
            paging: vec![9],
        };
        assert_eq!(c(None, Some(42)).fallback(), Fallback::FromToken(42));
        assert_eq!(c(Some(7), Some(42)).fallback(), Fallback::FromToken(42));
        assert_eq!(c(Some(7), None).fallback(), Fallback::FromToken(7));
        assert_eq!(c(None, None).fallback(), Fallback::Restart);
    }
}
