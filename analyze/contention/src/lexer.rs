//! Tokens of the `.mc` format (see docs/contention.md).

use crate::error::{Error, Span};

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A name: letters, digits, `_`, then any number of primes (`a'`).
    Ident(String),
    /// A quoted constant, `"Alice"`.
    Str(String),
    /// `ε` or `eps`.
    Eps,
    LParen,
    RParen,
    Comma,
    Bar,
    Star,
    Plus,
    Question,
    Define,
    Equals,
    /// The end of a statement (a line break outside parentheses).
    Newline,
    Eof,
}

impl Tok {
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Eps => "`eps`".into(),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Bar => "`|`".into(),
            Tok::Star => "`*`".into(),
            Tok::Plus => "`+`".into(),
            Tok::Question => "`?`".into(),
            Tok::Define => "`::=`".into(),
            Tok::Equals => "`=`".into(),
            Tok::Newline => "the end of the line".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

/// Splits the input into tokens with their places. Line breaks inside
/// parentheses are not statement ends.
pub(crate) fn lex(src: &str) -> Result<Vec<(Tok, Span)>, Error> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut l = Lexer {
        chars: src.chars().peekable(),
        line: 1,
        col: 1,
    };
    while let Some(&c) = l.chars.peek() {
        let span = Span {
            line: l.line,
            col: l.col,
        };
        match c {
            '\n' => {
                l.chars.next();
                if depth == 0 {
                    out.push((Tok::Newline, span));
                }
                l.line += 1;
                l.col = 1;
            }
            '#' => {
                while l.chars.peek().is_some_and(|&c| c != '\n') {
                    l.chars.next();
                }
            }
            c if c.is_whitespace() => l.bump(),
            ':' => out.push((l.define(span)?, span)),
            '"' => out.push((l.string(span)?, span)),
            // `ε` is alphabetic: a token of its own before names.
            c if c != 'ε' && (c.is_alphanumeric() || c == '_') => out.push((l.word(), span)),
            c => {
                let Some(tok) = punctuation(c) else {
                    return Err(Error::new(
                        span,
                        format!(
                            "unexpected character `{c}` (see docs/contention.md for the format)"
                        ),
                    ));
                };
                l.bump();
                match tok {
                    Tok::LParen => depth += 1,
                    Tok::RParen => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push((tok, span));
            }
        }
    }
    let end = Span {
        line: l.line,
        col: l.col,
    };
    out.push((Tok::Newline, end));
    out.push((Tok::Eof, end));
    Ok(out)
}

/// The token of a one-character punctuation mark.
fn punctuation(c: char) -> Option<Tok> {
    Some(match c {
        '(' => Tok::LParen,
        ')' => Tok::RParen,
        ',' => Tok::Comma,
        '|' => Tok::Bar,
        '*' => Tok::Star,
        '+' => Tok::Plus,
        '?' => Tok::Question,
        '=' => Tok::Equals,
        'ε' => Tok::Eps,
        _ => return None,
    })
}

/// The characters left and the place of the next one.
struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: u32,
    col: u32,
}

impl Lexer<'_> {
    /// Takes one character of the line.
    fn bump(&mut self) {
        self.chars.next();
        self.col += 1;
    }

    /// `::=` (at `span`).
    fn define(&mut self, span: Span) -> Result<Tok, Error> {
        self.bump();
        let rest: String = self.chars.clone().take(2).collect();
        if rest != ":=" {
            return Err(Error::new(span, "expected `::=` (a production)"));
        }
        self.bump();
        self.bump();
        Ok(Tok::Define)
    }

    /// A quoted constant (at `span`), on one line.
    fn string(&mut self, span: Span) -> Result<Tok, Error> {
        self.bump();
        let mut s = String::new();
        loop {
            match self.chars.peek() {
                Some('"') => {
                    self.bump();
                    return Ok(Tok::Str(s));
                }
                Some('\n') | None => {
                    return Err(Error::new(
                        span,
                        "unterminated string: close it with `\"` on the same line",
                    ));
                }
                Some(&c) => {
                    s.push(c);
                    self.bump();
                }
            }
        }
    }

    /// A name (letters, digits, `_`, then primes) or `eps`.
    fn word(&mut self) -> Tok {
        let mut s = String::new();
        while let Some(&c) = self.chars.peek() {
            if c.is_alphanumeric() || c == '_' {
                s.push(c);
                self.bump();
            } else {
                break;
            }
        }
        while self.chars.peek() == Some(&'\'') {
            s.push('\'');
            self.bump();
        }
        if s == "eps" { Tok::Eps } else { Tok::Ident(s) }
    }
}
