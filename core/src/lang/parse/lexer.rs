//! The lexer: migration text to tokens.

use super::{is_ident_continue, is_ident_start};
use crate::lang::error::{ParseError, ParseErrorKind};
use crate::model::Value;
use crate::model::json::from_json;

/// A token's kind and value.
#[derive(Debug, Clone)]
pub(super) enum Tok {
    /// A plain identifier, possibly a keyword.
    Word(String),
    /// A backtick-quoted name (never a keyword).
    Quoted(String),
    Str(String),
    Int(i64),
    Float(f64),
    /// A bracketed JSON literal, already converted.
    Json(Value),
    Dot,
    Eq,
    Semi,
    Newline,
    Eof,
}

/// A token and its byte range in the source.
#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Token {
    /// Is this the unquoted keyword `word`?
    pub(super) fn is_word(&self, word: &str) -> bool {
        matches!(&self.tok, Tok::Word(w) if w.eq_ignore_ascii_case(word))
    }

    /// The name, if this token can be one.
    pub(super) fn name(&self) -> Option<&str> {
        match &self.tok {
            Tok::Word(w) | Tok::Quoted(w) => Some(w),
            _ => None,
        }
    }
}

/// The lexer: the source and the position of the next token.
pub(super) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        let pos = if src.starts_with('\u{feff}') {
            '\u{feff}'.len_utf8()
        } else {
            0
        };
        Lexer { src, pos }
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek2(&self) -> Option<char> {
        self.rest().chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn err(&self, kind: ParseErrorKind, start: usize, end: usize) -> ParseError {
        ParseError::new(kind, self.src, start, end)
    }

    /// Skips spaces and comments, but not line breaks.
    fn skip_trivia(&mut self) {
        loop {
            match self.peek() {
                Some('-') if self.peek2() == Some('-') => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.bump();
                    }
                }
                Some(c) if c != '\n' && c.is_whitespace() => {
                    self.bump();
                }
                _ => return,
            }
        }
    }

    /// The next token; `Eof` forever at the end.
    pub(super) fn next_token(&mut self) -> Result<Token, ParseError> {
        self.skip_trivia();
        let start = self.pos;
        let Some(c) = self.bump() else {
            return Ok(Token {
                tok: Tok::Eof,
                start,
                end: start,
            });
        };
        let tok = match c {
            '\n' => Tok::Newline,
            ';' => Tok::Semi,
            '.' => Tok::Dot,
            '=' => Tok::Eq,
            '"' | '\'' => Tok::Str(self.string(c, start)?),
            '`' => Tok::Quoted(self.quoted_name(start)?),
            '[' | '{' => Tok::Json(self.json(c, start)?),
            '0'..='9' => self.number(start)?,
            '-' if matches!(self.peek(), Some('0'..='9')) => self.number(start)?,
            c if is_ident_start(c) => self.word(start),
            c => return Err(self.unexpected(c, start)),
        };
        Ok(Token {
            tok,
            start,
            end: self.pos,
        })
    }

    /// A word (an identifier, perhaps a keyword) whose first character is consumed.
    fn word(&mut self, start: usize) -> Tok {
        while self.peek().is_some_and(is_ident_continue) {
            self.bump();
        }
        Tok::Word(self.src[start..self.pos].to_owned())
    }

    /// The error of a character (at `start`, consumed) that starts no token.
    fn unexpected(&self, c: char, start: usize) -> ParseError {
        let hint = char_hint(c, self.peek());
        self.err(
            ParseErrorKind::UnexpectedChar { ch: c, hint },
            start,
            self.pos,
        )
    }

    /// A string after its opening `quote` (at `start`): JSON escapes, plus `\'`.
    fn string(&mut self, quote: char, start: usize) -> Result<String, ParseError> {
        let mut out = String::new();
        loop {
            let at = self.pos;
            match self.bump() {
                None | Some('\n') => {
                    return Err(self.err(ParseErrorKind::UnterminatedString { quote }, start, at));
                }
                Some(c) if c == quote => return Ok(out),
                Some('\\') => out.push(self.escape(quote, start, at)?),
                Some(c) => out.push(c),
            }
        }
    }

    /// An escape after its backslash (at `at`).
    fn escape(&mut self, quote: char, string_start: usize, at: usize) -> Result<char, ParseError> {
        let c = match self.peek() {
            None | Some('\n') => {
                return Err(self.err(
                    ParseErrorKind::UnterminatedString { quote },
                    string_start,
                    at,
                ));
            }
            Some(c) => c,
        };
        self.bump();
        Ok(match c {
            '"' => '"',
            '\'' => '\'',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => return self.unicode_escape(at),
            other => {
                let escape = format!("\\{}", other.escape_debug());
                return Err(self.err(ParseErrorKind::BadEscape { escape }, at, self.pos));
            }
        })
    }

    /// Four hex digits, if they follow.
    fn hex4(&mut self) -> Option<u32> {
        let digits = self.rest().get(..4)?;
        if !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let value = u32::from_str_radix(digits, 16).ok()?;
        self.pos += 4;
        Some(value)
    }

    /// `\uXXXX` (or a surrogate pair `\uD83D\uDE00`) after its `\u`.
    fn unicode_escape(&mut self, at: usize) -> Result<char, ParseError> {
        let bad = |lexer: &Self, reason: &'static str| {
            let escape = lexer.src[at..lexer.pos].to_owned();
            lexer.err(
                ParseErrorKind::BadUnicodeEscape { escape, reason },
                at,
                lexer.pos,
            )
        };
        let Some(high) = self.hex4() else {
            let tail: String = self
                .rest()
                .chars()
                .take(4)
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            let escape = format!("\\u{tail}");
            let end = self.pos + tail.len();
            let reason = "expected four hex digits after \\u";
            return Err(self.err(ParseErrorKind::BadUnicodeEscape { escape, reason }, at, end));
        };
        let code = match high {
            0xD800..=0xDBFF => {
                if !self.rest().starts_with("\\u") {
                    return Err(bad(
                        self,
                        "a high surrogate must be followed by a low surrogate (\\uDC00 to \\uDFFF)",
                    ));
                }
                self.pos += 2;
                match self.hex4() {
                    Some(low @ 0xDC00..=0xDFFF) => {
                        0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                    }
                    _ => {
                        return Err(bad(
                            self,
                            "a high surrogate must be followed by a low surrogate (\\uDC00 to \\uDFFF)",
                        ));
                    }
                }
            }
            0xDC00..=0xDFFF => {
                return Err(bad(
                    self,
                    "a low surrogate without a high surrogate before it",
                ));
            }
            code => code,
        };
        char::from_u32(code).ok_or_else(|| bad(self, "not a unicode scalar value"))
    }

    /// A backtick-quoted name after its opening backtick; ```` `` ```` is a backtick.
    fn quoted_name(&mut self, start: usize) -> Result<String, ParseError> {
        let mut out = String::new();
        loop {
            match self.bump() {
                None => return Err(self.err(ParseErrorKind::UnterminatedName, start, start + 1)),
                Some('`') if self.peek() == Some('`') => {
                    self.bump();
                    out.push('`');
                }
                Some('`') => return Ok(out),
                Some(c) => out.push(c),
            }
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some('0'..='9')) {
            self.bump();
        }
    }

    /// A number whose first character (a digit or `-`) is consumed.
    fn number(&mut self, start: usize) -> Result<Tok, ParseError> {
        self.digits();
        let mut float = false;
        if self.peek() == Some('.') && matches!(self.peek2(), Some('0'..='9')) {
            self.bump();
            self.digits();
            float = true;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let sign = usize::from(self.rest()[1..].starts_with(['+', '-']));
            if self.rest()[1 + sign..].starts_with(|c: char| c.is_ascii_digit()) {
                self.pos += 1 + sign;
                self.digits();
                float = true;
            }
        }
        if self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
            while self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
                self.bump();
            }
            let text = self.src[start..self.pos].to_owned();
            return Err(self.err(ParseErrorKind::BadNumber { text }, start, self.pos));
        }
        let text = &self.src[start..self.pos];
        if float {
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Tok::Float(f)),
                Ok(_) => Err(self.err(
                    ParseErrorKind::FloatOutOfRange {
                        text: text.to_owned(),
                    },
                    start,
                    self.pos,
                )),
                Err(_) => Err(self.err(
                    ParseErrorKind::BadNumber {
                        text: text.to_owned(),
                    },
                    start,
                    self.pos,
                )),
            }
        } else {
            text.parse::<i64>().map(Tok::Int).map_err(|_| {
                self.err(
                    ParseErrorKind::IntegerOutOfRange {
                        text: text.to_owned(),
                    },
                    start,
                    self.pos,
                )
            })
        }
    }

    /// A bracketed JSON literal after its opening bracket: the balanced text is
    /// handed to serde_json, then to [`from_json`]. `--` comments inside are
    /// blanked out (keeping byte offsets, so serde_json's positions map back).
    fn json(&mut self, open: char, start: usize) -> Result<Value, ParseError> {
        let mut text = String::from(open);
        let mut depth = 1usize;
        loop {
            let at = self.pos;
            let Some(c) = self.bump() else {
                let close = if open == '[' { ']' } else { '}' };
                return Err(self.err(
                    ParseErrorKind::UnterminatedJson { open, close },
                    start,
                    start + 1,
                ));
            };
            match c {
                '"' => self.json_string(&mut text, at)?,
                '-' if self.peek() == Some('-') => self.json_comment(&mut text),
                '[' | '{' => {
                    depth += 1;
                    text.push(c);
                }
                ']' | '}' => {
                    depth -= 1;
                    text.push(c);
                    if depth == 0 {
                        break;
                    }
                }
                c => text.push(c),
            }
        }
        self.json_value(&text, start)
    }

    /// A JSON string inside a JSON literal, after its opening quote (at `at`),
    /// copied to `text` as written (escapes are serde_json's to read).
    fn json_string(&mut self, text: &mut String, at: usize) -> Result<(), ParseError> {
        text.push('"');
        loop {
            let here = self.pos;
            let unterminated = |lexer: &Self| {
                lexer.err(ParseErrorKind::UnterminatedString { quote: '"' }, at, here)
            };
            match self.bump() {
                None | Some('\n') => return Err(unterminated(self)),
                Some('"') => break,
                Some('\\') => {
                    text.push('\\');
                    match self.bump() {
                        None | Some('\n') => return Err(unterminated(self)),
                        Some(e) => text.push(e),
                    }
                }
                Some(c) => text.push(c),
            }
        }
        text.push('"');
        Ok(())
    }

    /// A `--` comment inside a JSON literal, after its first `-`: blanked out in
    /// `text` (keeping byte offsets, so serde_json's positions map back).
    fn json_comment(&mut self, text: &mut String) {
        text.push(' ');
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            self.bump();
            text.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }

    /// The value of the balanced JSON `text` of a literal at `start`.
    fn json_value(&self, text: &str, start: usize) -> Result<Value, ParseError> {
        let json: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            let at = start + json_error_offset(text, e.line(), e.column());
            let mut message = e.to_string();
            if let Some(i) = message.rfind(" at line ") {
                message.truncate(i);
            }
            self.err(ParseErrorKind::BadJson { message }, at, at + 1)
        })?;
        from_json(&json).map_err(|e| {
            self.err(
                ParseErrorKind::BadValue {
                    message: e.to_string(),
                },
                start,
                self.pos,
            )
        })
    }
}

/// The byte offset in `text` of serde_json's 1-based line and column.
fn json_error_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(line - 2)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    (line_start + column.saturating_sub(1)).min(text.len())
}

fn char_hint(c: char, next: Option<char>) -> &'static str {
    match c {
        '#' => " (comments start with `--`)",
        '/' if next == Some('/') => " (comments start with `--`)",
        '<' | '>' | '!' => " (a condition is an equality: `kind.name = value`)",
        ',' | '&' | '|' => " (conditions are combined with `and`)",
        '(' | ')' => " (conditions are a list joined with `and`, without parentheses)",
        ']' | '}' => " (no JSON literal is open here)",
        '-' | '+' => " (a number is written `1`, `-1` or `1.5`; a comment starts with `--`)",
        c if c.is_alphabetic() => " (names with other characters are quoted in backticks)",
        _ => "",
    }
}
