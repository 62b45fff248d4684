//! Where a scan of one key pattern stands, as the text of a tern cursor.
//!
//! Text forms (the SCAN cursor is a decimal number):
//! - `<cursor>`: continue the SCAN iteration at `<cursor>`;
//! - `<cursor>+<JSON array of keys>`: first return these keys (what the last
//!   SCAN step returned beyond the page's limit, a few keys), then continue at
//!   `<cursor>`; `0` means the iteration has ended and only these keys remain;
//! - `<cursor>/<count>|<key>`: repeat the SCAN step at `<cursor>` with COUNT
//!   `<count>` and skip its keys up to `<key>` in sorted order (when a step
//!   returned many more keys than the page could take);
//! - `<cursor>|<key>`: the same with COUNT 1000, as earlier versions wrote it
//!   (their checkpoints resume).

use tern_core::store::{Cursor, Error, ErrorKind, Result};

/// The most keys a cursor carries; a step that overflows the page by more is
/// repeated instead (the `|` form).
pub(crate) const MAX_PENDING: usize = 64;

/// Where a scan stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ScanPos {
    /// The SCAN cursor to continue at.
    pub(crate) cursor: u64,
    /// The SCAN iteration has ended (only `pending` keys remain).
    pub(crate) done: bool,
    /// Keys returned by a SCAN step but not yet by a page.
    pub(crate) pending: Vec<String>,
    /// Repeat the step at `cursor`, skipping its keys up to this one.
    pub(crate) after: Option<String>,
    /// The COUNT of the step to repeat (`None`: 1000, the earlier versions' COUNT).
    pub(crate) count: Option<usize>,
}

impl ScanPos {
    /// The position of `cursor` (`None`: the start).
    ///
    /// # Errors
    /// `InvalidCursor` for text this adapter did not write.
    pub(crate) fn parse(cursor: Option<&Cursor>) -> Result<ScanPos> {
        let Some(c) = cursor else {
            return Ok(ScanPos::default());
        };
        let invalid = || {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("cursor {:?} is not a Redis SCAN position", c.0),
            )
        };
        let split =
            c.0.find(|ch: char| !ch.is_ascii_digit())
                .unwrap_or(c.0.len());
        let (number, rest) = c.0.split_at(split);
        let cursor: u64 = number.parse().map_err(|e| invalid().with_source(e))?;
        let mut pos = ScanPos {
            cursor,
            ..ScanPos::default()
        };
        let rest = match rest.strip_prefix('/') {
            Some(counted) => {
                let split = counted
                    .find(|ch: char| !ch.is_ascii_digit())
                    .unwrap_or(counted.len());
                let (count, rest) = counted.split_at(split);
                pos.count = Some(count.parse().map_err(|e| invalid().with_source(e))?);
                if !rest.starts_with('|') {
                    return Err(invalid());
                }
                rest
            }
            None => rest,
        };
        if let Some(after) = rest.strip_prefix('|') {
            pos.after = Some(after.to_owned());
        } else if let Some(keys) = rest.strip_prefix('+') {
            pos.pending = serde_json::from_str(keys).map_err(|e| invalid().with_source(e))?;
            pos.done = cursor == 0;
        } else if !rest.is_empty() {
            return Err(invalid());
        }
        Ok(pos)
    }

    /// The cursor text, or `None` when nothing is left.
    pub(crate) fn to_cursor(&self) -> Option<Cursor> {
        if let Some(after) = &self.after {
            return Some(Cursor(match self.count {
                Some(count) => format!("{}/{count}|{after}", self.cursor),
                None => format!("{}|{after}", self.cursor),
            }));
        }
        let cursor = if self.done { 0 } else { self.cursor };
        if self.pending.is_empty() {
            return (!self.done).then(|| Cursor(cursor.to_string()));
        }
        let keys = serde_json::to_string(&self.pending).unwrap_or_else(|_| "[]".to_owned());
        Some(Cursor(format!("{cursor}+{keys}")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn round_trip(pos: &ScanPos) -> ScanPos {
        ScanPos::parse(pos.to_cursor().as_ref()).unwrap()
    }

    #[test]
    fn every_form_round_trips() {
        let plain = ScanPos {
            cursor: 17,
            ..ScanPos::default()
        };
        assert_eq!(plain.to_cursor(), Some(Cursor("17".into())));
        assert_eq!(round_trip(&plain), plain);
        let pending = ScanPos {
            cursor: 17,
            pending: vec!["ns:k:a+b|c".into(), "ns:k:\"x\"".into()],
            ..ScanPos::default()
        };
        assert_eq!(round_trip(&pending), pending);
        let last = ScanPos {
            cursor: 0,
            done: true,
            pending: vec!["k:1".into()],
            ..ScanPos::default()
        };
        assert_eq!(last.to_cursor(), Some(Cursor("0+[\"k:1\"]".into())));
        assert_eq!(round_trip(&last), last);
        let repeat = ScanPos {
            cursor: 5,
            after: Some("k:+1".into()),
            count: Some(8),
            ..ScanPos::default()
        };
        assert_eq!(repeat.to_cursor(), Some(Cursor("5/8|k:+1".into())));
        assert_eq!(round_trip(&repeat), repeat);
        // The end of the iteration with nothing pending is no cursor at all.
        let end = ScanPos {
            done: true,
            ..ScanPos::default()
        };
        assert_eq!(end.to_cursor(), None);
    }

    #[test]
    fn cursors_of_earlier_versions_still_resume() {
        let pos = ScanPos::parse(Some(&Cursor("1234|ns:k:x".into()))).unwrap();
        assert_eq!(
            (pos.cursor, pos.after.as_deref(), pos.count),
            (1234, Some("ns:k:x"), None)
        );
        assert_eq!(
            ScanPos::parse(Some(&Cursor("99".into()))).unwrap().cursor,
            99
        );
    }

    #[test]
    fn foreign_text_is_an_invalid_cursor() {
        for text in ["x", "", "12x", "3+[1", "+[]", "3/x|k", "3/4k"] {
            let err = ScanPos::parse(Some(&Cursor(text.into()))).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidCursor, "{text}");
        }
    }
}
