//! Frame-level detection of lightweight-transaction (LWT) conditions.

use kassandra::frame::request::RequestOpcode;

use crate::cas::Condition;

/// The CQL texts carried by a request frame body: the query of a QUERY or PREPARE frame, or the
/// unprepared statements of a BATCH frame (prepared ones were checked when they were prepared).
/// Malformed bodies yield what could be read; kassandra reports the protocol error itself.
pub fn statement_texts(opcode: RequestOpcode, body: &[u8]) -> Vec<&str> {
    let mut reader = Reader(body);
    match opcode {
        RequestOpcode::Query | RequestOpcode::Prepare => reader.long_string().into_iter().collect(),
        RequestOpcode::Batch => batch_texts(&mut reader).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// BATCH body (v4): `<type><n><query_1>...<query_n><consistency><flags>...`, each query being
/// `<kind><string_or_id><n>[<value_1>...<value_n>]`.
fn batch_texts<'a>(reader: &mut Reader<'a>) -> Option<Vec<&'a str>> {
    reader.take(1)?;
    let count = reader.u16()?;
    let mut texts = Vec::new();
    for _ in 0..count {
        match reader.take(1)?.first()? {
            0 => texts.push(reader.long_string()?),
            _ => {
                let len = reader.u16()?;
                reader.take(usize::from(len))?;
            }
        }
        for _ in 0..reader.u16()? {
            let len = i32::from_be_bytes(reader.take(4)?.try_into().ok()?);
            // Negative lengths are null (-1) or unset (-2) values without bytes.
            reader.take(usize::try_from(len).unwrap_or(0))?;
        }
    }
    Some(texts)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn long_string(&mut self) -> Option<&'a str> {
        let len = i32::from_be_bytes(self.take(4)?.try_into().ok()?);
        std::str::from_utf8(self.take(usize::try_from(len).ok()?)?).ok()
    }
}

/// Whether a CQL statement is a write (`INSERT`, `UPDATE`, `DELETE` or `BEGIN ... BATCH`) with an
/// `IF` condition (`IF NOT EXISTS`, `IF EXISTS`, `IF col = ...`).
///
/// `IF` is a reserved word in CQL, so outside string literals, quoted identifiers and comments
/// (which are skipped) it can only start a condition. `CREATE ... IF NOT EXISTS` is not an LWT
/// and is not reported.
pub fn has_lwt_condition(cql: &str) -> bool {
    let words = words(cql);
    let Some(first) = words.first() else {
        return false;
    };
    ["INSERT", "UPDATE", "DELETE", "BEGIN"]
        .iter()
        .any(|kw| first.eq_ignore_ascii_case(kw))
        && words.iter().any(|w| w.eq_ignore_ascii_case("IF"))
}

/// Splits a conditional write into the write without its condition and the condition.
///
/// # Errors
/// A message when the text has no `IF` or the condition is not one this server supports.
pub fn split_condition(cql: &str) -> Result<(&str, Condition), String> {
    let words = words_at(cql);
    let at = words
        .iter()
        .find(|(_, w)| w.eq_ignore_ascii_case("IF"))
        .map(|(at, _)| *at)
        .ok_or_else(|| "not a conditional statement".to_owned())?;
    let base = cql[..at].trim_end();
    let rest: Vec<&str> = words
        .iter()
        .map(|(_, w)| *w)
        .skip_while(|w| !w.eq_ignore_ascii_case("IF"))
        .skip(1)
        .collect();
    let unsupported = || {
        format!(
            "unsupported condition in {cql:?}: this test server supports IF NOT EXISTS, IF EXISTS \
             and IF col = ? [AND col = ? ...]"
        )
    };
    let upper: Vec<String> = rest.iter().map(|w| w.to_ascii_uppercase()).collect();
    let condition = match upper.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["NOT", "EXISTS"] => Condition::NotExists,
        ["EXISTS"] => Condition::Exists,
        _ => {
            // `c1 = ? AND c2 = ?`: words are the column names and ANDs; check the symbols.
            let tail = cql[at + 2..].trim().trim_end_matches(';').trim();
            let mut cols = Vec::new();
            for part in split_and(tail) {
                let (col, value) = part.split_once('=').ok_or_else(unsupported)?;
                let col = col.trim();
                if value.trim() != "?"
                    || col.is_empty()
                    || !col.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err(unsupported());
                }
                cols.push(col.to_owned());
            }
            Condition::Equal(cols)
        }
    };
    Ok((base, condition))
}

/// Splits `a = ? AND b = ?` on the word `AND` (any case).
fn split_and(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, w) in words_at(text) {
        if w.eq_ignore_ascii_case("AND") {
            parts.push(&text[start..at]);
            start = at + 3;
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The unquoted words of a CQL text, skipping literals, quoted identifiers and comments.
fn words(cql: &str) -> Vec<&str> {
    words_at(cql).into_iter().map(|(_, w)| w).collect()
}

/// The unquoted words of a CQL text with their byte offsets.
fn words_at(cql: &str) -> Vec<(usize, &str)> {
    let bytes = cql.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    // Index just past the first occurrence of `end` at or after `from` (or the end of the text).
    let skip_to = |from: usize, end: &str| {
        cql.get(from..)
            .and_then(|rest| rest.find(end))
            .map_or(bytes.len(), |at| from + at + end.len())
    };
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        i = match (c, next) {
            (b'\'' | b'"', _) => {
                // Quoted: a doubled quote is an escaped quote.
                let mut j = i + 1;
                while j < bytes.len() {
                    if bytes[j] == c {
                        if bytes.get(j + 1) == Some(&c) {
                            j += 1;
                        } else {
                            break;
                        }
                    }
                    j += 1;
                }
                j + 1
            }
            (b'$', Some(b'$')) => skip_to(i + 2, "$$"),
            (b'-', Some(b'-')) | (b'/', Some(b'/')) => skip_to(i, "\n"),
            (b'/', Some(b'*')) => skip_to(i + 2, "*/"),
            _ if c.is_ascii_alphanumeric() || c == b'_' => {
                let len = bytes[i..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
                words.push((i, &cql[i..i + len]));
                i + len
            }
            _ => i + 1,
        };
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_conditions_on_writes() {
        for cql in [
            "INSERT INTO ks.t (k, v) VALUES (?, ?) IF NOT EXISTS",
            "insert into t (k) values (1) if not exists;",
            "UPDATE t SET v = 1 WHERE k = 1 IF v = 0",
            "update t set v = ? where k = ? if exists",
            "DELETE FROM t WHERE k = 1 IF EXISTS",
            "  /* c */ DELETE v FROM t WHERE k = 1\nIF v != null",
            "BEGIN BATCH INSERT INTO t (k) VALUES (1) IF NOT EXISTS; APPLY BATCH",
        ] {
            assert!(has_lwt_condition(cql), "{cql}");
        }
    }

    #[test]
    fn ignores_non_conditions() {
        for cql in [
            "CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY)",
            "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {}",
            "SELECT * FROM t WHERE k = 'IF'",
            "INSERT INTO t (k, v) VALUES (1, 'x IF NOT EXISTS')",
            "INSERT INTO t (k, v) VALUES (1, 'it''s IF')",
            "INSERT INTO t (\"if\", v) VALUES (1, 2)",
            "INSERT INTO t (k, v) VALUES (1, $$ IF $$)",
            "UPDATE t SET v = 1 WHERE k = 1 -- IF v = 0",
            "UPDATE t SET v = 1 WHERE k = 1 // IF v = 0",
            "UPDATE t SET v = 1 WHERE k = 1 /* IF v = 0 */",
            "INSERT INTO t (k, iffy, v_if) VALUES (1, 2, 3)",
            "",
        ] {
            assert!(!has_lwt_condition(cql), "{cql}");
        }
    }

    fn long_string(s: &str) -> Vec<u8> {
        let mut out = i32::try_from(s.len())
            .unwrap_or(i32::MAX)
            .to_be_bytes()
            .to_vec();
        out.extend_from_slice(s.as_bytes());
        out
    }

    #[test]
    fn reads_frame_bodies() {
        let q = "INSERT INTO t (k) VALUES (1) IF NOT EXISTS";
        let mut body = long_string(q);
        body.extend_from_slice(&[0, 1, 0]); // consistency + flags
        assert_eq!(statement_texts(RequestOpcode::Query, &body), vec![q]);
        assert_eq!(
            statement_texts(RequestOpcode::Prepare, &long_string(q)),
            vec![q]
        );

        // Batch: logged, 3 statements: prepared id with a null value, query with one value,
        // query without values; then consistency + flags.
        let mut batch = vec![0, 0, 3];
        batch.extend_from_slice(&[1, 0, 2, 0xAB, 0xCD, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF]);
        batch.push(0);
        batch.extend(long_string("INSERT INTO t (k) VALUES (?)"));
        batch.extend_from_slice(&[0, 1, 0, 0, 0, 4, 0, 0, 0, 7]);
        batch.push(0);
        batch.extend(long_string(q));
        batch.extend_from_slice(&[0, 0, 0, 1, 0]);
        assert_eq!(
            statement_texts(RequestOpcode::Batch, &batch),
            vec!["INSERT INTO t (k) VALUES (?)", q]
        );
        assert!(statement_texts(RequestOpcode::Batch, &[0, 0]).is_empty());
        assert!(statement_texts(RequestOpcode::Options, &[]).is_empty());
    }

    #[test]
    fn splits_conditions() {
        assert_eq!(
            split_condition("INSERT INTO ks.t (k, v) VALUES (?, ?) IF NOT EXISTS").unwrap(),
            (
                "INSERT INTO ks.t (k, v) VALUES (?, ?)",
                Condition::NotExists
            )
        );
        assert_eq!(
            split_condition("DELETE FROM t WHERE k = ? if exists;").unwrap(),
            ("DELETE FROM t WHERE k = ?", Condition::Exists)
        );
        assert_eq!(
            split_condition("UPDATE t SET a = ?, b = ? WHERE k = ? IF _v = ? and doc=?").unwrap(),
            (
                "UPDATE t SET a = ?, b = ? WHERE k = ?",
                Condition::Equal(vec!["_v".to_owned(), "doc".to_owned()])
            )
        );
        for bad in [
            "UPDATE t SET a = 1 WHERE k = 1 IF a = 1",
            "UPDATE t SET a = 1 WHERE k = 1 IF a > ?",
            "UPDATE t SET a = 1 WHERE k = 1 IF a = ? OR b = ?",
            "UPDATE t SET a = 1 WHERE k = 1",
        ] {
            assert!(split_condition(bad).is_err(), "{bad}");
        }
    }
}
