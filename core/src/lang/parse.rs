//! The parser: migration text to a [`Script`].
//!
//! A hand-written lexer and recursive-descent parser for the grammar of \[SE\]
//! Figure 2 with tern's extensions (see `docs/language.md` for the full
//! grammar). The decisions a reader must know:
//!
//! - A statement ends at `;` or at the end of its line. It continues on the
//!   next line when that line starts with `where` or `and` (blank and comment
//!   lines in between are skipped), when its line ends with `where` or `and`,
//!   and inside a bracketed JSON literal or a backtick-quoted name.
//! - Keywords are case-insensitive and may be used as names wherever the
//!   grammar expects a name (`user.to`); the printer quotes them anyway.
//! - The join atom of a `move`/`copy` may be written anywhere among the
//!   conditions and in either orientation (`user.name = blogpost.author` or
//!   `blogpost.author = user.name`), but at most once. It is normalized so
//!   that [`Join::source`] is on the source kind; the printer writes it first.
//! - Every condition is classified by its kind when parsed: a condition of
//!   add/delete/rename must be on the kind changed, and one of move/copy on
//!   the source or the target kind; anything else is an error at that atom.
//! - An empty script (only blank lines, comments and `;`) is the distinct
//!   error [`ParseErrorKind::EmptyScript`], so a caller may accept it.
//! - Parsing stops at the first error. It never panics, whatever the input.

use std::collections::VecDeque;

use super::ast::{Atom, Join, PropRef, Script, Span, Spanned, Statement, Transfer};
use super::error::{ParseError, ParseErrorKind};
use crate::model::Value;
use crate::model::json::from_json;

/// The keywords of the language, matched case-insensitively.
pub const KEYWORDS: [&str; 12] = [
    "add", "delete", "rename", "move", "copy", "to", "where", "and", "true", "false", "null",
    "kind",
];

const OPERATORS: [&str; 5] = ["add", "delete", "rename", "move", "copy"];

const A_STATEMENT: &str = "a statement (`add`, `delete`, `rename`, `move` or `copy`)";

/// Parses a migration script.
///
/// # Examples
///
/// ```
/// use tern_core::lang::{Statement, parse};
///
/// let script = parse("add blogpost.likes = 0\nrename blogpost.text to content").unwrap();
/// assert_eq!(script.statements.len(), 2);
/// assert!(matches!(script.statements[1].statement, Statement::Rename { .. }));
/// ```
///
/// # Errors
///
/// A [`ParseError`] at the first error, with its line and column. A script
/// without statements is [`ParseErrorKind::EmptyScript`].
pub fn parse(source: &str) -> Result<Script, ParseError> {
    Parser::new(source).script()
}

/// Parses a migration script read from the file `name`, which errors then name.
///
/// # Errors
///
/// As [`parse`], with [`ParseError::file`] set to `name`.
pub fn parse_file(name: &str, source: &str) -> Result<Script, ParseError> {
    parse(source).map_err(|e| e.with_file(name))
}

/// Is `word` a keyword (in any case)?
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
}

/// Is `word` a plain identifier, `[A-Za-z_][A-Za-z0-9_]*`, which needs no backticks?
/// (Keywords are identifiers too.)
pub fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(is_ident_start) && chars.all(is_ident_continue)
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_ascii_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_ascii_alphanumeric()
}

// ---------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone)]
enum Tok {
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

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

impl Token {
    /// Is this the unquoted keyword `word`?
    fn is_word(&self, word: &str) -> bool {
        matches!(&self.tok, Tok::Word(w) if w.eq_ignore_ascii_case(word))
    }

    /// The name, if this token can be one.
    fn name(&self) -> Option<&str> {
        match &self.tok {
            Tok::Word(w) | Tok::Quoted(w) => Some(w),
            _ => None,
        }
    }
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str) -> Self {
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
    fn next_token(&mut self) -> Result<Token, ParseError> {
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
            c if is_ident_start(c) => {
                while self.peek().is_some_and(is_ident_continue) {
                    self.bump();
                }
                Tok::Word(self.src[start..self.pos].to_owned())
            }
            c => {
                let hint = char_hint(c, self.peek());
                return Err(self.err(
                    ParseErrorKind::UnexpectedChar { ch: c, hint },
                    start,
                    self.pos,
                ));
            }
        };
        Ok(Token {
            tok,
            start,
            end: self.pos,
        })
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
                '"' => {
                    text.push('"');
                    loop {
                        let here = self.pos;
                        match self.bump() {
                            None | Some('\n') => {
                                return Err(self.err(
                                    ParseErrorKind::UnterminatedString { quote: '"' },
                                    at,
                                    here,
                                ));
                            }
                            Some('"') => break,
                            Some('\\') => {
                                text.push('\\');
                                match self.bump() {
                                    None | Some('\n') => {
                                        return Err(self.err(
                                            ParseErrorKind::UnterminatedString { quote: '"' },
                                            at,
                                            here,
                                        ));
                                    }
                                    Some(e) => text.push(e),
                                }
                            }
                            Some(c) => text.push(c),
                        }
                    }
                    text.push('"');
                }
                '-' if self.peek() == Some('-') => {
                    text.push(' ');
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.bump();
                        text.extend(std::iter::repeat_n(' ', c.len_utf8()));
                    }
                }
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
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            let at = start + json_error_offset(&text, e.line(), e.column());
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

// ---------------------------------------------------------------------------
// Parser

/// A condition as written: an atom, or a join of two properties.
enum Cond {
    Atom(Atom),
    Join(PropRef, PropRef),
}

struct Parser<'a> {
    src: &'a str,
    lexer: Lexer<'a>,
    ahead: VecDeque<Token>,
    /// End of the last token consumed.
    last_end: usize,
    /// Byte offsets of line starts.
    lines: Vec<usize>,
    /// What may follow the statement parsed so far, for the trailing-garbage error.
    follow: &'static str,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        let lines = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Parser {
            src,
            lexer: Lexer::new(src),
            ahead: VecDeque::new(),
            last_end: 0,
            lines,
            follow: "",
        }
    }

    // -- tokens --

    fn peek_at(&mut self, n: usize) -> Result<&Token, ParseError> {
        while self.ahead.len() <= n {
            let token = self.lexer.next_token()?;
            self.ahead.push_back(token);
        }
        let eof = self.ahead.len() - 1;
        Ok(&self.ahead[n.min(eof)])
    }

    fn peek(&mut self) -> Result<&Token, ParseError> {
        self.peek_at(0)
    }

    fn bump(&mut self) -> Result<Token, ParseError> {
        self.peek_at(0)?;
        let token = match self.ahead.pop_front() {
            Some(token) => token,
            None => Token {
                tok: Tok::Eof,
                start: self.src.len(),
                end: self.src.len(),
            },
        };
        self.last_end = token.end;
        Ok(token)
    }

    /// If the statement continues with the keyword `word`, possibly on a later
    /// line, skips the line breaks before it and says yes.
    fn continues_with(&mut self, word: &str) -> Result<bool, ParseError> {
        let mut n = 0;
        loop {
            let token = self.peek_at(n)?;
            if matches!(token.tok, Tok::Newline) {
                n += 1;
                continue;
            }
            let yes = token.is_word(word);
            if yes {
                for _ in 0..n {
                    self.bump()?;
                }
            }
            return Ok(yes);
        }
    }

    /// Skips line breaks, unless only the end of the input follows them (so
    /// that an error points at the end of the last line, not past it).
    fn skip_newlines(&mut self) -> Result<(), ParseError> {
        let mut n = 0;
        while matches!(self.peek_at(n)?.tok, Tok::Newline) {
            n += 1;
        }
        if !matches!(self.peek_at(n)?.tok, Tok::Eof) {
            for _ in 0..n {
                self.bump()?;
            }
        }
        Ok(())
    }

    // -- errors and positions --

    fn err(&self, kind: ParseErrorKind, start: usize, end: usize) -> ParseError {
        ParseError::new(kind, self.src, start, end)
    }

    fn err_at(&self, kind: ParseErrorKind, token: &Token) -> ParseError {
        self.err(kind, token.start, token.end)
    }

    fn expected(&self, token: &Token, expected: impl Into<String>) -> ParseError {
        let kind = ParseErrorKind::Expected {
            expected: expected.into(),
            found: self.describe(token),
        };
        self.err_at(kind, token)
    }

    /// The source text of `start..end`, on one line, shortened when long.
    fn excerpt(&self, start: usize, end: usize) -> String {
        let text = self.src.get(start..end).unwrap_or("");
        let line = text.split('\n').next().unwrap_or("");
        if line.chars().count() > 40 {
            let mut short: String = line.chars().take(37).collect();
            short.push('…');
            short
        } else {
            line.to_owned()
        }
    }

    /// How an error names what it found.
    fn describe(&self, token: &Token) -> String {
        let text = self.excerpt(token.start, token.end);
        match &token.tok {
            Tok::Newline => "end of line".to_owned(),
            Tok::Eof => "end of input".to_owned(),
            Tok::Str(_) => format!("the string {text}"),
            Tok::Int(_) | Tok::Float(_) => format!("the number `{text}`"),
            Tok::Json(Value::Array(_)) => "a JSON array".to_owned(),
            Tok::Json(_) => "a JSON object".to_owned(),
            Tok::Quoted(_) => format!("the name {text}"),
            Tok::Word(w) if w.eq_ignore_ascii_case("or") => {
                format!("`{text}` (conditions are combined only with `and`)")
            }
            _ => format!("`{text}`"),
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        let line = self.lines.partition_point(|&s| s <= start).max(1);
        let line_start = self.lines.get(line - 1).copied().unwrap_or(0);
        let col = self
            .src
            .get(line_start..start)
            .map_or(0, |s| s.chars().count())
            + 1;
        Span {
            start,
            end,
            line,
            col,
        }
    }

    // -- grammar --

    fn script(mut self) -> Result<Script, ParseError> {
        let mut statements = Vec::new();
        loop {
            match self.peek()?.tok {
                Tok::Newline | Tok::Semi => {
                    self.bump()?;
                }
                Tok::Eof => break,
                _ => {
                    statements.push(self.statement()?);
                    let next = self.peek()?.clone();
                    if !matches!(next.tok, Tok::Newline | Tok::Semi | Tok::Eof) {
                        return Err(self.expected(&next, self.follow));
                    }
                }
            }
        }
        if statements.is_empty() {
            return Err(self.err(ParseErrorKind::EmptyScript, 0, 0));
        }
        Ok(Script { statements })
    }

    fn statement(&mut self) -> Result<Spanned, ParseError> {
        let op = self.bump()?;
        let Tok::Word(word) = &op.tok else {
            return Err(self.expected(&op, A_STATEMENT));
        };
        let statement = match word.to_ascii_lowercase().as_str() {
            "add" => self.add()?,
            "delete" => self.delete()?,
            "rename" => self.rename()?,
            "move" => Statement::Move(self.transfer("move")?),
            "copy" => Statement::Copy(self.transfer("copy")?),
            "where" | "and" => {
                let found = format!(
                    "`{word}` (a line starting with `{word}` continues the statement above only when no `;` ends it)"
                );
                let kind = ParseErrorKind::Expected {
                    expected: A_STATEMENT.to_owned(),
                    found,
                };
                return Err(self.err_at(kind, &op));
            }
            _ => {
                let kind = ParseErrorKind::UnknownOperator {
                    found: word.clone(),
                    suggestion: suggest(word),
                };
                return Err(self.err_at(kind, &op));
            }
        };
        Ok(Spanned {
            statement,
            span: self.span(op.start, self.last_end),
        })
    }

    /// `add kind.path = value [where conds]`
    fn add(&mut self) -> Result<Statement, ParseError> {
        let prop = self.prop("after `add`")?;
        let eq = self.bump()?;
        if !matches!(eq.tok, Tok::Eq) {
            return Err(self.err_at(
                ParseErrorKind::MissingValue {
                    found: self.describe(&eq),
                },
                &eq,
            ));
        }
        let value = self.value("a value after `=`")?;
        self.follow = "`where`, `;` or the end of the line after the value";
        let conditions = self.selection("add", &prop.kind)?;
        Ok(Statement::Add {
            prop,
            value,
            conditions,
        })
    }

    /// `delete kind.path [where conds]`
    fn delete(&mut self) -> Result<Statement, ParseError> {
        let prop = self.prop("after `delete`")?;
        self.follow = "`where`, `;` or the end of the line after the property";
        let conditions = self.selection("delete", &prop.kind)?;
        Ok(Statement::Delete { prop, conditions })
    }

    /// `rename kind.path to name [where conds]` or `rename kind a to b`
    fn rename(&mut self) -> Result<Statement, ParseError> {
        if self.peek()?.is_word("kind") && !matches!(self.peek_at(1)?.tok, Tok::Dot) {
            self.bump()?;
            let (from, from_token) = self.name("the kind to rename after `rename kind`")?;
            self.check_kind(&from, &from_token)?;
            self.keyword("to", "`to` after the kind")?;
            let (to, to_token) = self.name("the new kind name after `to`")?;
            self.check_kind(&to, &to_token)?;
            if from == to {
                return Err(self.err_at(ParseErrorKind::RenameToSameName { name: to }, &to_token));
            }
            if self.continues_with("where")? {
                let token = self.bump()?;
                return Err(self.err_at(ParseErrorKind::KindRenameWithCondition, &token));
            }
            self.follow = "`;` or the end of the line after the kind rename";
            return Ok(Statement::RenameKind { from, to });
        }
        let prop = self.prop("after `rename`")?;
        self.keyword("to", "`to` after the property")?;
        let (to, to_token) = self.name("the new property name after `to`")?;
        if matches!(self.peek()?.tok, Tok::Dot) {
            self.rest_of_path()?;
            let found = self.excerpt(to_token.start, self.last_end);
            return Err(self.err(
                ParseErrorKind::RenameTargetNotPlain { found },
                to_token.start,
                self.last_end,
            ));
        }
        if prop.path.last() == Some(&to) {
            return Err(self.err_at(ParseErrorKind::RenameToSameName { name: to }, &to_token));
        }
        self.follow = "`where`, `;` or the end of the line after the new name";
        let conditions = self.selection("rename", &prop.kind)?;
        Ok(Statement::Rename {
            prop,
            to,
            conditions,
        })
    }

    /// `move|copy kind.name to kind2 [where cond {and cond}]`
    fn transfer(&mut self, operator: &'static str) -> Result<Transfer, ParseError> {
        let prop = self.prop(if operator == "move" {
            "after `move`"
        } else {
            "after `copy`"
        })?;
        if !prop.is_top_level() {
            let found = self.excerpt(prop.span.start, prop.span.end);
            return Err(self.err(
                ParseErrorKind::NestedTransfer { operator, found },
                prop.span.start,
                prop.span.end,
            ));
        }
        self.keyword("to", "`to` after the property")?;
        let (to_kind, to_token) = self.name("the target kind after `to`")?;
        self.check_kind(&to_kind, &to_token)?;
        if matches!(self.peek()?.tok, Tok::Dot) {
            self.rest_of_path()?;
            let found = self.excerpt(to_token.start, self.last_end);
            let kind = ParseErrorKind::TargetIsProperty { operator, found };
            return Err(self.err(kind, to_token.start, self.last_end));
        }
        if to_kind == prop.kind {
            return Err(self.err_at(
                ParseErrorKind::TransferToSameKind {
                    operator,
                    kind: to_kind,
                },
                &to_token,
            ));
        }
        self.follow = "`where`, `;` or the end of the line after the target kind";
        let mut transfer = Transfer {
            prop,
            to_kind,
            join: None,
            source_conditions: Vec::new(),
            target_conditions: Vec::new(),
        };
        if !self.continues_with("where")? {
            return Ok(transfer);
        }
        let mut keyword = self.bump()?;
        loop {
            match self.condition(&keyword)? {
                Cond::Atom(atom) => {
                    if atom.prop.kind == transfer.prop.kind {
                        transfer.source_conditions.push(atom);
                    } else if atom.prop.kind == transfer.to_kind {
                        transfer.target_conditions.push(atom);
                    } else {
                        return Err(self.not_in_transfer(operator, &transfer, &atom.prop));
                    }
                }
                Cond::Join(left, right) => {
                    for side in [&left, &right] {
                        if side.kind != transfer.prop.kind && side.kind != transfer.to_kind {
                            return Err(self.not_in_transfer(operator, &transfer, side));
                        }
                    }
                    let (start, end) = (left.span.start, right.span.end);
                    if left.kind == right.kind {
                        return Err(self.err(
                            ParseErrorKind::JoinSameKind { kind: left.kind },
                            start,
                            end,
                        ));
                    }
                    if transfer.join.is_some() {
                        let found = self.excerpt(start, end);
                        return Err(self.err(
                            ParseErrorKind::SecondJoin { operator, found },
                            start,
                            end,
                        ));
                    }
                    transfer.join = Some(if left.kind == transfer.prop.kind {
                        Join {
                            source: left,
                            target: right,
                        }
                    } else {
                        Join {
                            source: right,
                            target: left,
                        }
                    });
                }
            }
            self.follow = "`and`, `;` or the end of the line after the condition";
            if !self.continues_with("and")? {
                return Ok(transfer);
            }
            keyword = self.bump()?;
        }
    }

    fn not_in_transfer(
        &self,
        operator: &'static str,
        transfer: &Transfer,
        prop: &PropRef,
    ) -> ParseError {
        let kind = ParseErrorKind::ConditionKindNotInTransfer {
            operator,
            source_kind: transfer.prop.kind.clone(),
            target_kind: transfer.to_kind.clone(),
            found: self.excerpt(prop.span.start, prop.span.end),
        };
        self.err(kind, prop.span.start, prop.span.end)
    }

    /// `[where cond {and cond}]` of add, delete and rename: literal atoms on `kind`.
    fn selection(&mut self, operator: &'static str, kind: &str) -> Result<Vec<Atom>, ParseError> {
        let mut atoms = Vec::new();
        if !self.continues_with("where")? {
            return Ok(atoms);
        }
        let mut keyword = self.bump()?;
        loop {
            match self.condition(&keyword)? {
                Cond::Join(_, right) => {
                    let found = self.excerpt(right.span.start, right.span.end);
                    let kind = ParseErrorKind::JoinOutsideTransfer { operator, found };
                    return Err(self.err(kind, right.span.start, right.span.end));
                }
                Cond::Atom(atom) => {
                    if atom.prop.kind != kind {
                        let (start, end) = (atom.prop.span.start, atom.prop.span.end);
                        let found = self.excerpt(start, end);
                        let kind = ParseErrorKind::ConditionOnOtherKind {
                            operator,
                            allowed: kind.to_owned(),
                            found,
                        };
                        return Err(self.err(kind, start, end));
                    }
                    atoms.push(atom);
                }
            }
            self.follow = "`and`, `;` or the end of the line after the condition";
            if !self.continues_with("and")? {
                return Ok(atoms);
            }
            keyword = self.bump()?;
        }
    }

    /// `kind.path = value` or `kind.path = kind2.path2`, after `keyword` (`where`/`and`).
    fn condition(&mut self, keyword: &Token) -> Result<Cond, ParseError> {
        self.skip_newlines()?;
        let context = format!("after `{}`", self.excerpt(keyword.start, keyword.end));
        let prop = self.prop(&context)?;
        let eq = self.bump()?;
        if !matches!(eq.tok, Tok::Eq) {
            return Err(self.expected(
                &eq,
                "`=` after the property (a condition is `kind.name = value`)",
            ));
        }
        let is_property = self.peek()?.name().is_some() && matches!(self.peek_at(1)?.tok, Tok::Dot);
        if is_property {
            let other = self.prop("after `=`")?;
            return Ok(Cond::Join(prop, other));
        }
        let value = self.value("a value after `=`")?;
        Ok(Cond::Atom(Atom { prop, value }))
    }

    /// `kind.name{.name}`.
    fn prop(&mut self, context: &str) -> Result<PropRef, ParseError> {
        let first = self.bump()?;
        let Some(kind) = first.name().map(str::to_owned) else {
            return Err(self.expected(&first, format!("a property (`kind.name`) {context}")));
        };
        self.check_kind(&kind, &first)?;
        let dot = self.bump()?;
        if !matches!(dot.tok, Tok::Dot) {
            return Err(self.err_at(
                ParseErrorKind::MissingDot {
                    kind,
                    found: self.describe(&dot),
                },
                &dot,
            ));
        }
        let (name, _) = self.name("a property name after `.`")?;
        let mut path = vec![name];
        path.extend(self.rest_of_path()?);
        Ok(PropRef {
            kind,
            path,
            span: self.span(first.start, self.last_end),
        })
    }

    /// `{.name}`.
    fn rest_of_path(&mut self) -> Result<Vec<String>, ParseError> {
        let mut path = Vec::new();
        while matches!(self.peek()?.tok, Tok::Dot) {
            self.bump()?;
            path.push(self.name("a property name after `.`")?.0);
        }
        Ok(path)
    }

    /// A name: an identifier (keywords included) or a backtick-quoted name.
    fn name(&mut self, expected: &str) -> Result<(String, Token), ParseError> {
        let token = self.bump()?;
        if let Some(name) = token.name() {
            return Ok((name.to_owned(), token));
        }
        let mut found = self.describe(&token);
        if matches!(token.tok, Tok::Str(_) | Tok::Int(_) | Tok::Float(_)) {
            found.push_str(" (names other than identifiers are quoted in backticks)");
        }
        let kind = ParseErrorKind::Expected {
            expected: expected.to_owned(),
            found,
        };
        Err(self.err_at(kind, &token))
    }

    fn check_kind(&self, kind: &str, token: &Token) -> Result<(), ParseError> {
        if kind.is_empty() || kind.chars().any(char::is_control) {
            return Err(self.err_at(
                ParseErrorKind::InvalidKind {
                    name: kind.to_owned(),
                },
                token,
            ));
        }
        Ok(())
    }

    fn keyword(&mut self, word: &str, expected: &str) -> Result<(), ParseError> {
        let token = self.bump()?;
        if token.is_word(word) {
            Ok(())
        } else {
            Err(self.expected(&token, expected))
        }
    }

    /// A literal.
    fn value(&mut self, expected: &str) -> Result<Value, ParseError> {
        let token = self.bump()?;
        let literals = "(a string, number, `true`, `false`, `null`, or a JSON array or object)";
        Ok(match &token.tok {
            Tok::Str(s) => Value::String(s.clone()),
            Tok::Int(i) => Value::Int(*i),
            Tok::Float(f) => Value::Float(*f),
            Tok::Json(v) => v.clone(),
            Tok::Word(w) if w.eq_ignore_ascii_case("true") => Value::Bool(true),
            Tok::Word(w) if w.eq_ignore_ascii_case("false") => Value::Bool(false),
            Tok::Word(w) if w.eq_ignore_ascii_case("null") => Value::Null,
            Tok::Word(w) => {
                let found = format!("`{w}` (a string is written in quotes: \"{w}\")");
                let kind = ParseErrorKind::Expected {
                    expected: format!("{expected} {literals}"),
                    found,
                };
                return Err(self.err_at(kind, &token));
            }
            _ => return Err(self.expected(&token, format!("{expected} {literals}"))),
        })
    }
}

/// The operator probably meant by an unknown word.
fn suggest(word: &str) -> Option<&'static str> {
    const SYNONYMS: [(&str, &str); 10] = [
        ("remove", "delete"),
        ("drop", "delete"),
        ("del", "delete"),
        ("unset", "delete"),
        ("set", "add"),
        ("insert", "add"),
        ("mv", "move"),
        ("cp", "copy"),
        ("ren", "rename"),
        ("alter", "rename"),
    ];
    let word = word.to_ascii_lowercase();
    if let Some((_, op)) = SYNONYMS.iter().find(|(w, _)| *w == word) {
        return Some(op);
    }
    let limit = if word.len() <= 4 { 1 } else { 2 };
    OPERATORS
        .iter()
        .map(|op| (levenshtein(&word, op), *op))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, op)| op)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Map;

    fn prop(kind: &str, path: &[&str]) -> PropRef {
        PropRef {
            kind: kind.into(),
            path: path.iter().map(|p| (*p).to_owned()).collect(),
            span: Span::default(),
        }
    }

    fn atom(kind: &str, path: &[&str], value: impl Into<Value>) -> Atom {
        Atom {
            prop: prop(kind, path),
            value: value.into(),
        }
    }

    fn one(source: &str) -> Statement {
        let script = parse(source).unwrap_or_else(|e| panic!("{source:?} should parse:\n{e}"));
        assert_eq!(script.statements.len(), 1, "{source:?}");
        script.statements.into_iter().next().unwrap().statement
    }

    fn error(source: &str) -> ParseError {
        match parse(source) {
            Ok(script) => panic!("{source:?} should not parse, got {script:?}"),
            Err(e) => e,
        }
    }

    /// Asserts the position and message of the error for `source`.
    #[track_caller]
    fn fails(source: &str, line: usize, col: usize, message: &str) {
        let e = error(source);
        assert_eq!(
            (e.line(), e.col(), e.message().as_str()),
            (line, col, message),
            "{source:?}"
        );
    }

    // -- the paper's statements ([SE] Examples 2 to 6) --

    #[test]
    fn paper_add() {
        assert_eq!(
            one("add blogpost.likes = 0"),
            Statement::Add {
                prop: prop("blogpost", &["likes"]),
                value: Value::Int(0),
                conditions: vec![]
            }
        );
    }

    #[test]
    fn paper_delete_with_selection() {
        assert_eq!(
            one("delete blogpost.url where blogpost.version = 1"),
            Statement::Delete {
                prop: prop("blogpost", &["url"]),
                conditions: vec![atom("blogpost", &["version"], 1i64)]
            }
        );
    }

    #[test]
    fn paper_rename() {
        assert_eq!(
            one("rename blogpost.text to content"),
            Statement::Rename {
                prop: prop("blogpost", &["text"]),
                to: "content".into(),
                conditions: vec![]
            }
        );
    }

    fn author_join() -> Transfer {
        Transfer {
            prop: prop("user", &["url"]),
            to_kind: "blogpost".into(),
            join: Some(Join {
                source: prop("user", &["name"]),
                target: prop("blogpost", &["author"]),
            }),
            source_conditions: vec![],
            target_conditions: vec![],
        }
    }

    #[test]
    fn paper_move() {
        assert_eq!(
            one("move user.url to blogpost where user.name = blogpost.author"),
            Statement::Move(author_join())
        );
    }

    #[test]
    fn paper_copy() {
        let mut expected = author_join();
        expected.prop = prop("user", &["email"]);
        assert_eq!(
            one("copy user.email to blogpost where user.name = blogpost.author"),
            Statement::Copy(expected)
        );
    }

    // -- move/copy conditions --

    #[test]
    fn join_is_normalized_in_either_orientation_and_position() {
        let mut expected = author_join();
        expected.source_conditions = vec![atom("user", &["active"], true)];
        expected.target_conditions = vec![atom("blogpost", &["version"], 1i64)];
        for source in [
            "move user.url to blogpost where user.name = blogpost.author and user.active = true and blogpost.version = 1",
            "move user.url to blogpost where blogpost.author = user.name and blogpost.version = 1 and user.active = true",
            "move user.url to blogpost where blogpost.version = 1 and user.active = true and blogpost.author = user.name",
        ] {
            assert_eq!(one(source), Statement::Move(expected.clone()), "{source}");
        }
    }

    #[test]
    fn transfer_without_join() {
        let Statement::Copy(t) = one("copy user.email to blogpost where user.id = 7") else {
            panic!()
        };
        assert_eq!(t.join, None);
        assert_eq!(t.source_conditions, vec![atom("user", &["id"], 7i64)]);
        let Statement::Copy(t) = one("copy user.email to blogpost") else {
            panic!()
        };
        assert_eq!(
            (t.join, t.source_conditions.len(), t.target_conditions.len()),
            (None, 0, 0)
        );
    }

    #[test]
    fn joins_may_use_nested_paths() {
        let Statement::Move(t) =
            one("move user.url to blogpost where blogpost.meta.author = user.profile.name")
        else {
            panic!()
        };
        assert_eq!(
            t.join,
            Some(Join {
                source: prop("user", &["profile", "name"]),
                target: prop("blogpost", &["meta", "author"])
            })
        );
    }

    // -- lexical rules --

    #[test]
    fn separators_comments_and_continuations() {
        let source = "-- the blog migration\n\
                      \n\
                      add blogpost.likes = 0; delete blogpost.url -- no longer used\n\
                      rename blogpost.text to content\n\
                      \x20 where blogpost.version = 1\n\
                      \n\
                      \x20 -- only old posts\n\
                      \x20 AND blogpost.draft = false;;\n\
                      move user.url to blogpost where\n\
                      \x20 user.name = blogpost.author and\n\
                      \n\
                      \x20 blogpost.version = 2\n";
        let script = parse(source).unwrap();
        let ops: Vec<_> = script.statements().map(Statement::operator).collect();
        assert_eq!(ops, ["add", "delete", "rename", "move"]);
        let Statement::Rename { conditions, .. } = &script.statements[2].statement else {
            panic!()
        };
        assert_eq!(conditions.len(), 2);
        let Statement::Move(t) = &script.statements[3].statement else {
            panic!()
        };
        assert_eq!(
            t.target_conditions,
            vec![atom("blogpost", &["version"], 2i64)]
        );
        let spans: Vec<_> = script
            .statements
            .iter()
            .map(|s| (s.span.line, s.span.col))
            .collect();
        assert_eq!(spans, [(3, 1), (3, 25), (4, 1), (9, 1)]);
        assert_eq!(
            script.statements[1].span.end - script.statements[1].span.start,
            "delete blogpost.url".len()
        );
    }

    #[test]
    fn crlf_and_bom_are_fine() {
        let script = parse("\u{feff}add a.b = 1\r\ndelete a.b\r\n  where a.c = 'x'\r\n").unwrap();
        assert_eq!(script.statements.len(), 2);
        assert_eq!(
            script.statements[1].statement,
            Statement::Delete {
                prop: prop("a", &["b"]),
                conditions: vec![atom("a", &["c"], "x")]
            }
        );
    }

    #[test]
    fn keywords_are_case_insensitive_and_usable_as_names() {
        assert_eq!(
            one("RENAME To.Where TO and WHERE To.kind = Null"),
            Statement::Rename {
                prop: prop("To", &["Where"]),
                to: "and".into(),
                conditions: vec![atom("To", &["kind"], Value::Null)]
            }
        );
        assert_eq!(
            one("delete where.and"),
            Statement::Delete {
                prop: prop("where", &["and"]),
                conditions: vec![]
            }
        );
        // `kind` followed by `.` is a property of the kind named `kind`.
        assert_eq!(
            one("rename kind.a to b"),
            Statement::Rename {
                prop: prop("kind", &["a"]),
                to: "b".into(),
                conditions: vec![]
            }
        );
        // `true.x` on the right of a condition is a property, not a literal.
        let Statement::Copy(t) = one("copy a.x to true where a.y = true.z") else {
            panic!()
        };
        assert_eq!(
            t.join,
            Some(Join {
                source: prop("a", &["y"]),
                target: prop("true", &["z"])
            })
        );
    }

    #[test]
    fn backtick_names() {
        assert_eq!(
            one("delete blogpost.`comment-likes`.`a``b`.`` where blogpost.`$oid` = 1"),
            Statement::Delete {
                prop: prop("blogpost", &["comment-likes", "a`b", ""]),
                conditions: vec![atom("blogpost", &["$oid"], 1i64)]
            }
        );
        assert_eq!(one("delete `kind`.````").to_string(), "delete `kind`.````");
        // A quoted name may hold a line break.
        assert_eq!(
            one("delete a.`x\ny`"),
            Statement::Delete {
                prop: prop("a", &["x\ny"]),
                conditions: vec![]
            }
        );
    }

    #[test]
    fn rename_kind() {
        assert_eq!(
            one("rename kind user to member"),
            Statement::RenameKind {
                from: "user".into(),
                to: "member".into()
            }
        );
        assert_eq!(
            one("Rename KIND `user-v1` to kind"),
            Statement::RenameKind {
                from: "user-v1".into(),
                to: "kind".into()
            }
        );
    }

    #[test]
    fn nested_paths() {
        assert_eq!(
            one("add blogpost.author.name = 'x' where blogpost.meta.v = 1"),
            Statement::Add {
                prop: prop("blogpost", &["author", "name"]),
                value: "x".into(),
                conditions: vec![atom("blogpost", &["meta", "v"], 1i64)]
            }
        );
        assert_eq!(
            one("rename blogpost.author.name to fullname"),
            Statement::Rename {
                prop: prop("blogpost", &["author", "name"]),
                to: "fullname".into(),
                conditions: vec![]
            }
        );
    }

    // -- literals --

    fn literal(text: &str) -> Value {
        match one(&format!("add k.p = {text}")) {
            Statement::Add { value, .. } => value,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn scalar_literals() {
        assert_eq!(literal("0"), Value::Int(0));
        assert_eq!(literal("-42"), Value::Int(-42));
        assert_eq!(literal("9223372036854775807"), Value::Int(i64::MAX));
        assert_eq!(literal("-9223372036854775808"), Value::Int(i64::MIN));
        assert_eq!(literal("1.5"), Value::Float(1.5));
        assert_eq!(literal("-2.0"), Value::Float(-2.0));
        assert_eq!(literal("1e3"), Value::Float(1000.0));
        assert_eq!(literal("2.5E-1"), Value::Float(0.25));
        assert_eq!(literal("1e+2"), Value::Float(100.0));
        assert_eq!(literal("-0.0"), Value::Float(-0.0));
        assert_eq!(literal("TRUE"), Value::Bool(true));
        assert_eq!(literal("false"), Value::Bool(false));
        assert_eq!(literal("null"), Value::Null);
    }

    #[test]
    fn string_literals() {
        assert_eq!(literal(r#""Gerhard""#), Value::from("Gerhard"));
        assert_eq!(literal(r#"'say "hi"\''"#), Value::from("say \"hi\"'"));
        assert_eq!(
            literal(r#""a\"b\\c\/d\b\f\n\r\t""#),
            Value::from("a\"b\\c/d\u{8}\u{c}\n\r\t")
        );
        assert_eq!(literal(r#""\u00e9\uD83D\uDE00""#), Value::from("é😀"));
        assert_eq!(
            literal(r#""-- not a comment""#),
            Value::from("-- not a comment")
        );
        assert_eq!(literal("''"), Value::from(""));
    }

    #[test]
    fn json_literals() {
        let mut map = Map::new();
        map.insert(
            "a".into(),
            Value::Array(vec![Value::Int(1), Value::Float(2.0), Value::Null]),
        );
        map.insert("b".into(), Value::from("x]}"));
        assert_eq!(
            literal(r#"{"a": [1, 2.0, null], "b": "x]}"}"#),
            Value::Map(map)
        );
        assert_eq!(literal("[]"), Value::Array(vec![]));
        assert_eq!(literal(r#"{"$bytes": "AAE="}"#), Value::Bytes(vec![0, 1]));
        assert_eq!(
            literal(r#"{"$date": 1700000000000}"#),
            Value::Timestamp(1_700_000_000_000)
        );
        assert_eq!(literal(r#"{"$float": "NaN"}"#), Value::Float(f64::NAN));
        // A JSON literal spans lines and may hold comments.
        let script = parse("add k.p = [\n  1, -- one\n  2\n]\ndelete k.q").unwrap();
        assert_eq!(script.statements.len(), 2);
        let Statement::Add { value, .. } = &script.statements[0].statement else {
            panic!()
        };
        assert_eq!(value, &Value::Array(vec![Value::Int(1), Value::Int(2)]));
    }

    // -- errors --

    #[test]
    fn empty_scripts() {
        for source in ["", "\n\n", "  -- only a comment\n", ";;\n;", "\u{feff}"] {
            let e = error(source);
            assert!(e.is_empty_script(), "{source:?}: {e}");
            assert_eq!((e.line(), e.col()), (1, 1));
        }
        assert_eq!(error("").message(), "the migration has no statements");
    }

    #[test]
    fn unknown_operators() {
        fails(
            "add a.b = 1\nupdate blogpost.x = 1",
            2,
            1,
            "unknown operator `update`, expected `add`, `delete`, `rename`, `move` or `copy`",
        );
        fails(
            "renam blogpost.text to content",
            1,
            1,
            "unknown operator `renam`, expected `add`, `delete`, `rename`, `move` or `copy` (did you mean `rename`?)",
        );
        fails(
            "remove blogpost.url",
            1,
            1,
            "unknown operator `remove`, expected `add`, `delete`, `rename`, `move` or `copy` (did you mean `delete`?)",
        );
        fails(
            "= 1",
            1,
            1,
            "expected a statement (`add`, `delete`, `rename`, `move` or `copy`), found `=`",
        );
        fails(
            "delete a.b;\nwhere a.c = 1",
            2,
            1,
            "expected a statement (`add`, `delete`, `rename`, `move` or `copy`), found `where` (a line starting with `where` continues the statement above only when no `;` ends it)",
        );
    }

    #[test]
    fn missing_dot() {
        fails(
            "delete blogpost",
            1,
            16,
            "expected `.` after the kind `blogpost` (a property is written `kind.name`), found end of input",
        );
        fails(
            "delete blogpost where blogpost.v = 1",
            1,
            17,
            "expected `.` after the kind `blogpost` (a property is written `kind.name`), found `where`",
        );
        fails(
            "delete a.b where c = 1",
            1,
            20,
            "expected `.` after the kind `c` (a property is written `kind.name`), found `=`",
        );
        fails(
            "delete a.",
            1,
            10,
            "expected a property name after `.`, found end of input",
        );
        fails(
            "delete a.1",
            1,
            10,
            "expected a property name after `.`, found the number `1` (names other than identifiers are quoted in backticks)",
        );
    }

    #[test]
    fn add_requires_a_value() {
        fails(
            "add blogpost.likes\n",
            1,
            19,
            "expected `=` and a value after the property, found end of line: `add` requires a value (`add kind.name = value`)",
        );
        fails(
            "add blogpost.likes =",
            1,
            21,
            "expected a value after `=` (a string, number, `true`, `false`, `null`, or a JSON array or object), found end of input",
        );
        fails(
            "delete a.b where a.c = gerhard",
            1,
            24,
            "expected a value after `=` (a string, number, `true`, `false`, `null`, or a JSON array or object), found `gerhard` (a string is written in quotes: \"gerhard\")",
        );
    }

    #[test]
    fn expected_to() {
        fails(
            "add a.b = 1\n\nrename blogpost.text = content",
            3,
            22,
            "expected `to` after the property, found `=`",
        );
        fails(
            "move user.url blogpost",
            1,
            15,
            "expected `to` after the property, found `blogpost`",
        );
        fails(
            "rename kind user member",
            1,
            18,
            "expected `to` after the kind, found `member`",
        );
    }

    #[test]
    fn conditions_of_add_delete_rename_are_on_the_changed_kind() {
        fails(
            "delete blogpost.url where user.name = 'x'",
            1,
            27,
            "a condition of `delete` must be on the kind it changes, `blogpost`, found `user.name`",
        );
        fails(
            "add blogpost.likes = 0 where blogpost.v = 1 and user.v = 1",
            1,
            49,
            "a condition of `add` must be on the kind it changes, `blogpost`, found `user.v`",
        );
        fails(
            "rename blogpost.text to content where blogpost.a = blogpost.b",
            1,
            52,
            "a condition of `rename` compares a property with a value, found the property `blogpost.b`; a join of two properties is only allowed in `move` and `copy`",
        );
    }

    #[test]
    fn transfer_conditions() {
        fails(
            "move user.url to blogpost where post.author = user.name",
            1,
            33,
            "a condition of `move` must be on the source kind `user` or the target kind `blogpost`, found `post.author`",
        );
        fails(
            "copy user.url to blogpost where user.name = blogpost.author and comment.x = 1",
            1,
            65,
            "a condition of `copy` must be on the source kind `user` or the target kind `blogpost`, found `comment.x`",
        );
        fails(
            "move user.url to blogpost where user.name = user.alias",
            1,
            33,
            "a join compares a property of the source kind with one of the target kind, but both sides are on `user`",
        );
        fails(
            "move user.url to blogpost where user.name = blogpost.author\n  and blogpost.id = user.post",
            2,
            7,
            "a `move` has at most one join condition (`source.a = target.b`), found a second one: `blogpost.id = user.post`",
        );
    }

    #[test]
    fn transfer_shape() {
        fails(
            "move user.url to user",
            1,
            18,
            "cannot move a property to its own kind `user`: the target must be another kind (`rename` renames a property within its kind)",
        );
        fails(
            "copy user.address.city to blogpost",
            1,
            6,
            "`copy` transfers a top-level property, found the nested property `user.address.city`",
        );
        let e = error("copy user.address.city to blogpost");
        assert_eq!(e.width(), "user.address.city".len());
        fails(
            "move user.url to blogpost.url",
            1,
            18,
            "the target of `move` is a kind, found the property `blogpost.url` (the property keeps its name in the target kind)",
        );
    }

    #[test]
    fn rename_shape() {
        fails(
            "rename blogpost.text to text",
            1,
            25,
            "renaming `text` to the same name changes nothing",
        );
        fails(
            "rename blogpost.a.text to text",
            1,
            27,
            "renaming `text` to the same name changes nothing",
        );
        fails(
            "rename kind user to user",
            1,
            21,
            "renaming `user` to the same name changes nothing",
        );
        fails(
            "rename blogpost.text to blogpost.content",
            1,
            25,
            "the new name of a renamed property is a plain name in the same kind (`rename kind.old to new`), found `blogpost.content`",
        );
        fails(
            "rename kind user to member\n where user.x = 1",
            2,
            2,
            "a kind rename takes no `where` condition: it renames the whole kind",
        );
        fails(
            "rename kind `` to member",
            1,
            13,
            "invalid kind name \"\": a kind is a non-empty name without control characters",
        );
        fails(
            "delete `a\nb`.c",
            1,
            8,
            "invalid kind name \"a\\nb\": a kind is a non-empty name without control characters",
        );
    }

    #[test]
    fn strings() {
        fails(
            "add a.b = \"abc\nadd a.c = 1",
            1,
            11,
            "unterminated string: expected a closing `\"` before the end of the line",
        );
        fails(
            "add a.b = 'abc",
            1,
            11,
            "unterminated string: expected a closing `'` before the end of the line",
        );
        fails(
            "add a.b = \"abc\\",
            1,
            11,
            "unterminated string: expected a closing `\"` before the end of the line",
        );
        fails(
            r#"add a.b = "a\qb""#,
            1,
            13,
            r#"unknown escape `\q` in a string; the escapes are \" \' \\ \/ \b \f \n \r \t and \uXXXX"#,
        );
        fails(
            r#"add a.b = "\u12""#,
            1,
            12,
            r"invalid unicode escape `\u12`: expected four hex digits after \u",
        );
        fails(
            r#"add a.b = "\uD83Dx""#,
            1,
            12,
            r"invalid unicode escape `\uD83D`: a high surrogate must be followed by a low surrogate (\uDC00 to \uDFFF)",
        );
        fails(
            r#"add a.b = "\uDE00""#,
            1,
            12,
            r"invalid unicode escape `\uDE00`: a low surrogate without a high surrogate before it",
        );
        fails(
            "delete a.`b",
            1,
            10,
            "unterminated quoted name: expected a closing backtick",
        );
    }

    #[test]
    fn numbers() {
        fails(
            "add a.b = 9223372036854775808",
            1,
            11,
            "integer `9223372036854775808` is outside the 64-bit signed range (-9223372036854775808 to 9223372036854775807); write it as a float (with a `.0`) or a string",
        );
        fails(
            "add a.b = -1e999",
            1,
            11,
            "float `-1e999` is outside the 64-bit float range; write infinity as {\"$float\": \"inf\"}",
        );
        fails("add a.b = 12abc", 1, 11, "malformed number `12abc`");
        fails("add a.b = 1e", 1, 11, "malformed number `1e`");
        let e = error("add a.b = 12abc");
        assert_eq!(e.width(), 5);
    }

    #[test]
    fn json_errors() {
        fails(
            "add a.b = [1, 2,]",
            1,
            17,
            "malformed JSON literal: trailing comma",
        );
        fails(
            "add a.b = {\n  \"x\": 1\n  \"y\": 2\n}",
            3,
            3,
            "malformed JSON literal: expected `,` or `}`",
        );
        fails(
            "add a.b = {'x': 1}",
            1,
            12,
            "malformed JSON literal: key must be a string",
        );
        fails(
            "add a.b = [1, 2\ndelete a.c",
            1,
            11,
            "unterminated JSON literal: this `[` is never closed by a `]`",
        );
        fails(
            "add a.b = [\"x\n\"]",
            1,
            12,
            "unterminated string: expected a closing `\"` before the end of the line",
        );
        fails(
            "add a.b = {\"$bytes\": 5}",
            1,
            11,
            "malformed value: \"$bytes\" must hold a base64 string",
        );
        fails(
            "add a.b = [18446744073709551615]",
            1,
            11,
            "malformed value: integer 18446744073709551615 is outside the 64-bit signed range; write it as a float (18446744073709551615.0) or a string",
        );
        let e = error("add a.b = {\"$date\": \"x\"}");
        assert_eq!(e.width(), "{\"$date\": \"x\"}".len());
    }

    #[test]
    fn trailing_garbage() {
        fails(
            "add a.b = 1 2",
            1,
            13,
            "expected `where`, `;` or the end of the line after the value, found the number `2`",
        );
        fails(
            "delete a.b where a.c = 1 or a.c = 2",
            1,
            26,
            "expected `and`, `;` or the end of the line after the condition, found `or` (conditions are combined only with `and`)",
        );
        fails(
            "rename kind a to b c",
            1,
            20,
            "expected `;` or the end of the line after the kind rename, found `c`",
        );
        fails(
            "move user.url to blogpost blogpost.x = 1",
            1,
            27,
            "expected `where`, `;` or the end of the line after the target kind, found `blogpost`",
        );
        fails(
            "delete a.b where a.c == 1",
            1,
            23,
            "expected a value after `=` (a string, number, `true`, `false`, `null`, or a JSON array or object), found `=`",
        );
        fails(
            "delete a.b where a.c < 1",
            1,
            22,
            "unexpected character `<` (a condition is an equality: `kind.name = value`)",
        );
        fails(
            "delete a.b # note",
            1,
            12,
            "unexpected character `#` (comments start with `--`)",
        );
        fails("delete a.b\u{0}", 1, 11, "unexpected character `\\0`");
    }

    #[test]
    fn errors_name_the_file() {
        let e = parse_file(
            "migrations/0002_blog.tern",
            "rename blogpost.text = content",
        )
        .unwrap_err();
        assert_eq!(e.file(), Some("migrations/0002_blog.tern"));
        assert!(
            e.to_string()
                .starts_with("migrations/0002_blog.tern:1:22: expected `to`"),
            "{e}"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("ad"), Some("add"));
        assert_eq!(suggest("Mvoe"), None);
        assert_eq!(suggest("cpy"), Some("copy"));
        assert_eq!(suggest("delte"), Some("delete"));
        assert_eq!(suggest("x"), None);
        assert_eq!(suggest("select"), None);
    }
}

/// Fuzzing by proptest: no input makes the parser panic, every error points
/// inside the source, and whatever parses prints to text that parses back to
/// the same script.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;
    use crate::lang::arb::arb_script;
    use crate::lang::print::print;

    /// Checks the contract of [`parse`] on any input.
    fn check(source: &str) -> Result<(), TestCaseError> {
        let lines: Vec<&str> = source.split('\n').collect();
        match parse(source) {
            Err(e) => {
                prop_assert!(
                    e.line() >= 1 && e.line() <= lines.len(),
                    "line {} of {}: {e}",
                    e.line(),
                    lines.len()
                );
                let line = lines[e.line() - 1];
                prop_assert!(
                    e.col() >= 1 && e.col() <= line.chars().count() + 1,
                    "col {}: {e}",
                    e.col()
                );
                prop_assert!(e.width() >= 1);
                prop_assert_eq!(e.source_line(), line.trim_end_matches('\r'));
                prop_assert!(!e.message().is_empty());
                let _ = e.to_string();
            }
            Ok(script) => {
                prop_assert!(!script.statements.is_empty());
                for s in &script.statements {
                    prop_assert!(s.span.start < s.span.end && s.span.end <= source.len());
                    prop_assert!(s.span.line >= 1 && s.span.line <= lines.len());
                }
                let text = print(&script);
                let back = parse(&text)
                    .map_err(|e| TestCaseError::fail(format!("{text:?} does not parse:\n{e}")))?;
                prop_assert_eq!(back, script);
            }
        }
        Ok(())
    }

    /// Characters and fragments that matter to the lexer and parser.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "\"",
                "'",
                "`",
                "\\",
                "\\u",
                "\\uD800",
                "[",
                "]",
                "{",
                "}",
                ".",
                "=",
                ";",
                "\n",
                "\r\n",
                "--",
                "-",
                " ",
                "\t",
                "0",
                "1e",
                "1.5",
                "9223372036854775808",
                "where",
                "and",
                "to",
                "kind",
                "true",
                "null",
                "add",
                "delete",
                "rename",
                "move",
                "copy",
                "é",
                "\u{0}",
                "\u{feff}",
                "a",
            ])
            .prop_map(str::to_owned),
            any::<char>().prop_map(String::from),
        ]
    }

    /// Edits of a text: at a relative position, insert a fragment or delete some characters.
    fn edits() -> impl Strategy<Value = Vec<(f64, Option<String>, usize)>> {
        prop::collection::vec((0.0..1.0f64, prop::option::of(fragment()), 1usize..4), 1..5)
    }

    fn apply(text: &str, edits: &[(f64, Option<String>, usize)]) -> String {
        let mut chars: Vec<char> = text.chars().collect();
        for (at, insert, len) in edits {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let i = ((chars.len() as f64) * at) as usize;
            let i = i.min(chars.len());
            match insert {
                Some(s) => {
                    let tail = chars.split_off(i);
                    chars.extend(s.chars());
                    chars.extend(tail);
                }
                None => {
                    let end = (i + len).min(chars.len());
                    chars.drain(i..end);
                }
            }
        }
        chars.into_iter().collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn any_string(source in "\\PC{0,60}") {
            check(&source)?;
        }

        #[test]
        fn any_fragments(parts in prop::collection::vec(fragment(), 0..30)) {
            check(&parts.concat())?;
        }

        #[test]
        fn mutated_scripts(script in arb_script(), edits in edits()) {
            check(&apply(&print(&script), &edits))?;
        }
    }

    #[test]
    fn regressions() {
        for source in [
            "",
            "\n",
            "`",
            "``",
            "```",
            "add a.b = [",
            "add a.b = \"\\u",
            "-",
            "1",
            "\u{feff}\u{feff}",
        ] {
            check(source).unwrap();
        }
    }
}
