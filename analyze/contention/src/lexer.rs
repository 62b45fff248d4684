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
    let mut line = 1u32;
    let mut col = 1u32;
    let mut chars = src.chars().peekable();
    while let Some(&c) = chars.peek() {
        let span = Span { line, col };
        let mut bump = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
            chars.next();
            col += 1;
        };
        match c {
            '\n' => {
                chars.next();
                if depth == 0 {
                    out.push((Tok::Newline, span));
                }
                line += 1;
                col = 1;
            }
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            c if c.is_whitespace() => bump(&mut chars),
            '(' => {
                bump(&mut chars);
                depth += 1;
                out.push((Tok::LParen, span));
            }
            ')' => {
                bump(&mut chars);
                depth = depth.saturating_sub(1);
                out.push((Tok::RParen, span));
            }
            ',' => {
                bump(&mut chars);
                out.push((Tok::Comma, span));
            }
            '|' => {
                bump(&mut chars);
                out.push((Tok::Bar, span));
            }
            '*' => {
                bump(&mut chars);
                out.push((Tok::Star, span));
            }
            '+' => {
                bump(&mut chars);
                out.push((Tok::Plus, span));
            }
            '?' => {
                bump(&mut chars);
                out.push((Tok::Question, span));
            }
            '=' => {
                bump(&mut chars);
                out.push((Tok::Equals, span));
            }
            'ε' => {
                bump(&mut chars);
                out.push((Tok::Eps, span));
            }
            ':' => {
                bump(&mut chars);
                let rest: String = chars.clone().take(2).collect();
                if rest != ":=" {
                    return Err(Error::new(span, "expected `::=` (a production)"));
                }
                bump(&mut chars);
                bump(&mut chars);
                out.push((Tok::Define, span));
            }
            '"' => {
                bump(&mut chars);
                let mut s = String::new();
                loop {
                    match chars.peek() {
                        Some('"') => {
                            bump(&mut chars);
                            break;
                        }
                        Some('\n') | None => {
                            return Err(Error::new(
                                span,
                                "unterminated string: close it with `\"` on the same line",
                            ));
                        }
                        Some(&c) => {
                            s.push(c);
                            bump(&mut chars);
                        }
                    }
                }
                out.push((Tok::Str(s), span));
            }
            c if c.is_alphanumeric() || c == '_' => {
                let mut s = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_alphanumeric() || c == '_' {
                        s.push(c);
                        bump(&mut chars);
                    } else {
                        break;
                    }
                }
                while chars.peek() == Some(&'\'') {
                    s.push('\'');
                    bump(&mut chars);
                }
                if s == "eps" {
                    out.push((Tok::Eps, span));
                } else {
                    out.push((Tok::Ident(s), span));
                }
            }
            other => {
                return Err(Error::new(
                    span,
                    format!(
                        "unexpected character `{other}` (see docs/contention.md for the format)"
                    ),
                ));
            }
        }
    }
    out.push((Tok::Newline, Span { line, col }));
    out.push((Tok::Eof, Span { line, col }));
    Ok(out)
}
