//! A strict, iterative JSON reader for import files.
//!
//! `serde_json` reads recursively and stops at 128 levels, silently keeps the
//! last of two equal keys, and turns an integer beyond the 64-bit range into a
//! rounded float. An import must refuse all three (a file tern exported must
//! read back exactly; a file that does not say one thing must not be guessed
//! at), so import lines go through this reader instead: an explicit stack (no
//! recursion, whatever the input), a depth bound, an error on a repeated key,
//! and an error on any integer literal outside the 64-bit range. Errors carry
//! the 1-based column (in characters) where the problem starts.

use serde_json::{Map as JsonMap, Number, Value as Json};

/// The deepest nesting of arrays and objects [`parse_strict`] reads. The
/// store keeps 256 levels of arrays and maps; the JSON form of a value can
/// take up to two levels for each (a map whose only key is a tag is wrapped
/// in `{"$map": ...}`), plus the record and its `value` object.
pub const MAX_JSON_DEPTH: usize = 2 * crate::model::codec::MAX_DEPTH + 4;

/// Why a line is not strict JSON, and where (1-based column, in characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct StrictJsonError {
    /// 1-based column of the problem, counted in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

enum Frame {
    Array(Vec<Json>),
    Object(JsonMap<String, Json>, Option<String>),
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn error(&self, at: usize, message: impl Into<String>) -> StrictJsonError {
        let at = at.min(self.text.len());
        let column = self
            .text
            .get(..at)
            .map_or(at, |prefix| prefix.chars().count())
            + 1;
        StrictJsonError {
            column,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn expect_literal(&mut self, word: &str, value: Json) -> Result<Json, StrictJsonError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error(self.pos, "expected a JSON value"))
        }
    }

    /// Steps over ASCII digits; how many.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Json, StrictJsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits_start = self.pos;
        let int_digits = self.digits();
        if int_digits == 0 || (int_digits > 1 && self.bytes.get(digits_start) == Some(&b'0')) {
            return Err(self.error(start, "invalid number"));
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error(start, "invalid number: a digit must follow `.`"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            integer = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error(start, "invalid number: a digit must follow the exponent"));
            }
        }
        let literal = &self.text[start..self.pos];
        if integer {
            // u64 for entity versions; `from_json` refuses values above i64.
            if let Ok(u) = literal.parse::<u64>() {
                return Ok(Json::from(u));
            }
            return literal.parse::<i64>().map(Json::from).map_err(|_| {
                self.error(
                    start,
                    format!(
                        "integer {} is outside the 64-bit signed range; write it as a float ({}.0) or a string",
                        shorten(literal),
                        shorten(literal)
                    ),
                )
            });
        }
        let float: f64 = literal
            .parse()
            .map_err(|_| self.error(start, "invalid number"))?;
        Number::from_f64(float).map(Json::Number).ok_or_else(|| {
            self.error(
                start,
                format!(
                    "number {} is outside the 64-bit float range; write {{\"$float\": \"inf\"}} if infinity is meant",
                    shorten(literal)
                ),
            )
        })
    }

    fn string(&mut self) -> Result<String, StrictJsonError> {
        let start = self.pos;
        self.pos += 1; // the opening quote
        let mut out = String::new();
        loop {
            let run = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run..self.pos]);
            match self.peek() {
                None => return Err(self.error(start, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let at = self.pos;
                    self.pos += 1;
                    let escaped = self.peek();
                    self.pos += 1;
                    match escaped {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{8}'),
                        Some(b'f') => out.push('\u{c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => out.push(self.unicode_escape(at)?),
                        _ => return Err(self.error(at, "invalid escape in string")),
                    }
                }
                Some(_) => return Err(self.error(self.pos, "control character in string")),
            }
        }
    }

    fn hex4(&mut self, at: usize) -> Result<u32, StrictJsonError> {
        let hex = self
            .text
            .get(self.pos..self.pos + 4)
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.error(at, "invalid \\u escape: four hex digits expected"))?;
        self.pos += 4;
        Ok(hex)
    }

    fn unicode_escape(&mut self, at: usize) -> Result<char, StrictJsonError> {
        let first = self.hex4(at)?;
        let code = if (0xD800..0xDC00).contains(&first) {
            if !self.text[self.pos..].starts_with("\\u") {
                return Err(self.error(at, "unpaired surrogate in \\u escape"));
            }
            self.pos += 2;
            let second = self.hex4(at)?;
            if !(0xDC00..0xE000).contains(&second) {
                return Err(self.error(at, "unpaired surrogate in \\u escape"));
            }
            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        } else {
            first
        };
        char::from_u32(code).ok_or_else(|| self.error(at, "unpaired surrogate in \\u escape"))
    }
}

/// `literal` cut to 40 characters, for messages (a line may be megabytes long).
fn shorten(literal: &str) -> String {
    if literal.chars().count() <= 40 {
        literal.to_owned()
    } else {
        let head: String = literal.chars().take(40).collect();
        format!("{head}...")
    }
}

/// Reads one JSON document from `text`, strictly (see the module docs).
///
/// # Errors
/// Malformed JSON, nesting deeper than [`MAX_JSON_DEPTH`], a key repeated in
/// one object, an integer outside both the `i64` and `u64` ranges (values
/// above `i64` are refused by [`from_json`](super::json::from_json), entity
/// versions are `u64`), a float outside `f64`.
pub fn parse_strict(text: &str) -> Result<Json, StrictJsonError> {
    let mut r = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        // Read a value (or open a container), then attach it to its container,
        // closing containers as far as they end.
        if let Some(value) = read_value(&mut r, &mut stack)?
            && let Some(done) = attach(&mut r, &mut stack, value)?
        {
            return Ok(done);
        }
    }
}

/// Reads a value at `r` (or closes an empty container). `None` when it opened
/// a container (pushed on `stack`) whose first value comes next.
fn read_value(r: &mut Reader<'_>, stack: &mut Vec<Frame>) -> Result<Option<Json>, StrictJsonError> {
    r.skip_ws();
    let start = r.pos;
    let value = match r.peek() {
        None => return Err(r.error(start, "unexpected end of line: a JSON value expected")),
        Some(b'{') | Some(b'[') => {
            if stack.len() >= MAX_JSON_DEPTH {
                return Err(r.error(
                    start,
                    format!(
                        "nested deeper than {} levels of arrays and maps (the store keeps {})",
                        MAX_JSON_DEPTH,
                        crate::model::codec::MAX_DEPTH
                    ),
                ));
            }
            let open = r.peek();
            r.pos += 1;
            r.skip_ws();
            if open == Some(b'[') {
                if r.peek() == Some(b']') {
                    r.pos += 1;
                    Json::Array(Vec::new())
                } else {
                    stack.push(Frame::Array(Vec::new()));
                    return Ok(None);
                }
            } else if r.peek() == Some(b'}') {
                r.pos += 1;
                Json::Object(JsonMap::new())
            } else {
                let key = read_key(r, &JsonMap::new())?;
                stack.push(Frame::Object(JsonMap::new(), Some(key)));
                return Ok(None);
            }
        }
        Some(b'"') => Json::String(r.string()?),
        Some(b't') => r.expect_literal("true", Json::Bool(true))?,
        Some(b'f') => r.expect_literal("false", Json::Bool(false))?,
        Some(b'n') => r.expect_literal("null", Json::Null)?,
        Some(b'-' | b'0'..=b'9') => r.number()?,
        Some(_) => return Err(r.error(start, "expected a JSON value")),
    };
    Ok(Some(value))
}

/// Attaches `value` to the container on top of `stack`, closing containers as
/// far as they end. Returns the document once the outermost value is complete
/// (and nothing but whitespace follows), `None` when another value follows.
fn attach(
    r: &mut Reader<'_>,
    stack: &mut Vec<Frame>,
    mut value: Json,
) -> Result<Option<Json>, StrictJsonError> {
    loop {
        let Some(frame) = stack.last_mut() else {
            r.skip_ws();
            if r.pos < r.bytes.len() {
                return Err(r.error(r.pos, "trailing characters after the JSON value"));
            }
            return Ok(Some(value));
        };
        r.skip_ws();
        match frame {
            Frame::Array(items) => {
                items.push(value);
                match r.peek() {
                    Some(b',') => {
                        r.pos += 1;
                        return Ok(None);
                    }
                    Some(b']') => {
                        r.pos += 1;
                        let Some(Frame::Array(items)) = stack.pop() else {
                            unreachable!("the top frame is an array");
                        };
                        value = Json::Array(items);
                    }
                    _ => return Err(r.error(r.pos, "expected `,` or `]`")),
                }
            }
            Frame::Object(map, key) => {
                if let Some(k) = key.take() {
                    map.insert(k, value);
                }
                match r.peek() {
                    Some(b',') => {
                        r.pos += 1;
                        r.skip_ws();
                        let k = read_key(r, map)?;
                        *key = Some(k);
                        return Ok(None);
                    }
                    Some(b'}') => {
                        r.pos += 1;
                        let Some(Frame::Object(map, _)) = stack.pop() else {
                            unreachable!("the top frame is an object");
                        };
                        value = Json::Object(map);
                    }
                    _ => return Err(r.error(r.pos, "expected `,` or `}`")),
                }
            }
        }
    }
}

/// Reads `"key" :` (after whitespace), refusing a key already in `map`.
fn read_key(r: &mut Reader<'_>, map: &JsonMap<String, Json>) -> Result<String, StrictJsonError> {
    r.skip_ws();
    let start = r.pos;
    if r.peek() != Some(b'"') {
        return Err(r.error(start, "expected a quoted key"));
    }
    let key = r.string()?;
    if map.contains_key(&key) {
        return Err(r.error(
            start,
            format!("key \"{}\" appears twice in one object", shorten(&key)),
        ));
    }
    r.skip_ws();
    if r.peek() != Some(b':') {
        return Err(r.error(r.pos, "expected `:` after the key"));
    }
    r.pos += 1;
    Ok(key)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn agrees_with_serde_json_on_ordinary_documents() {
        for text in [
            r#"{"a":[1,-2,3.5,1e3,-0.0,true,false,null,"x\n\u00e9\ud83d\ude00"],"b":{}}"#,
            " [ ] ",
            r#"{"k":{"$float":"NaN"},"e":[[],[{}]]}"#,
        ] {
            let ours = parse_strict(text).unwrap();
            let theirs: Json = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
    }

    #[test]
    fn import_rejects_integers_beyond_64_bits_and_repeated_keys() {
        for big in ["18446744073709551616", "-9223372036854775809"] {
            let err = parse_strict(&format!("{{\"n\":{big}}}")).unwrap_err();
            assert!(
                err.message.contains("outside the 64-bit signed range"),
                "{err}"
            );
            assert_eq!(err.column, 6);
        }
        assert!(parse_strict("-9223372036854775808").is_ok());
        let err = parse_strict(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(err.message.contains("appears twice"), "{err}");
        assert_eq!(err.column, 8);
        assert!(parse_strict(r#"{"a":1} x"#).is_err());
        assert!(parse_strict("1e400").is_err());
        assert!(parse_strict("01").is_err());
        assert!(parse_strict(r#""\ud800""#).is_err());
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let deep = "[".repeat(1_000_000);
        let err = parse_strict(&deep).unwrap_err();
        assert!(err.message.contains("nested deeper"), "{err}");
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH),
            "]".repeat(MAX_JSON_DEPTH)
        );
        assert!(parse_strict(&ok).is_ok());
    }

    proptest! {
        #[test]
        fn reads_what_serde_json_writes(v in crate::model::arb::arb_value()) {
            let text = crate::model::json::to_json_string(&v);
            let theirs: Json = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(parse_strict(&text).unwrap(), theirs);
        }
    }
}
