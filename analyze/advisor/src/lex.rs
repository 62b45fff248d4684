//! The tokenizer shared by the model and workload parsers.

use crate::error::{AdvisorError, Result, Span};

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// A name: letters, digits, `_`.
    Ident(String),
    /// A number (integer or decimal).
    Num(f64),
    /// A parameter `?name` (or a bare `?`).
    Param,
    /// Punctuation or an operator: `. , ; ( ) * = < > <= >= : { }`.
    Sym(&'static str),
    /// End of a line (only emitted in line mode).
    Newline,
}

/// A token with its place.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) span: Span,
}

/// Splits `text` into tokens. `#` and `--` start comments. With `lines`, ends of lines are tokens.
pub(crate) fn tokenize(file: &str, text: &str, lines: bool) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    for (li, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        let span = |i: usize| Span {
            file: file.to_string(),
            line: li + 1,
            col: i + 1,
        };
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c == '#' || (c == '-' && chars.get(i + 1) == Some(&'-')) {
                break;
            } else if c.is_ascii_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Ident(chars[start..i].iter().collect()),
                    span: span(start),
                });
            } else if c.is_ascii_digit() {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_')
                {
                    i += 1;
                }
                let text: String = chars[start..i].iter().filter(|c| **c != '_').collect();
                let n: f64 = text.parse().map_err(|_| {
                    AdvisorError::input(&span(start), format!("`{text}` is not a number"))
                })?;
                out.push(Token {
                    tok: Tok::Num(n),
                    span: span(start),
                });
            } else if c == '?' {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Param,
                    span: span(start),
                });
            } else {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                let sym: &'static str = match two.as_str() {
                    "<=" => "<=",
                    ">=" => ">=",
                    "->" => "->",
                    _ => match c {
                        '.' => ".",
                        ',' => ",",
                        ';' => ";",
                        '(' => "(",
                        ')' => ")",
                        '*' => "*",
                        '=' => "=",
                        '<' => "<",
                        '>' => ">",
                        ':' => ":",
                        _ => {
                            return Err(AdvisorError::input(
                                &span(i),
                                format!("unexpected character `{c}`"),
                            ));
                        }
                    },
                };
                out.push(Token {
                    tok: Tok::Sym(sym),
                    span: span(i),
                });
                i += sym.len();
            }
        }
        if lines {
            out.push(Token {
                tok: Tok::Newline,
                span: span(chars.len()),
            });
        }
    }
    Ok(out)
}

/// A cursor over tokens with helpful errors.
pub(crate) struct Cursor {
    toks: Vec<Token>,
    pos: usize,
    end: Span,
}

impl Cursor {
    pub(crate) fn new(file: &str, toks: Vec<Token>) -> Self {
        let end = toks.last().map(|t| t.span.clone()).unwrap_or(Span {
            file: file.to_string(),
            line: 1,
            col: 1,
        });
        Cursor { toks, pos: 0, end }
    }

    pub(crate) fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    pub(crate) fn peek_at(&self, ahead: usize) -> Option<&Tok> {
        self.toks.get(self.pos + ahead).map(|t| &t.tok)
    }

    pub(crate) fn save(&self) -> usize {
        self.pos
    }

    pub(crate) fn restore(&mut self, pos: usize) {
        self.pos = pos;
    }

    pub(crate) fn span(&self) -> Span {
        self.toks
            .get(self.pos)
            .map(|t| t.span.clone())
            .unwrap_or_else(|| self.end.clone())
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub(crate) fn next(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> AdvisorError {
        AdvisorError::input(&self.span(), message)
    }

    /// Whether the next token is the keyword `kw` (case-insensitive).
    pub(crate) fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(s)) if s.eq_ignore_ascii_case(kw))
    }

    /// Steps over the next token when `hit` (a test of it) holds.
    fn eat_if(&mut self, hit: bool) -> bool {
        if hit {
            self.pos += 1;
        }
        hit
    }

    /// Steps over the next token when `hit` holds, else the error "expected `what`".
    fn expect_if(&mut self, hit: bool, what: &str) -> Result<()> {
        if self.eat_if(hit) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{what}`, found {}", self.describe())))
        }
    }

    pub(crate) fn eat_kw(&mut self, kw: &str) -> bool {
        self.eat_if(self.is_kw(kw))
    }

    pub(crate) fn expect_kw(&mut self, kw: &str) -> Result<()> {
        self.expect_if(self.is_kw(kw), kw)
    }

    pub(crate) fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Sym(x)) if *x == s)
    }

    pub(crate) fn eat_sym(&mut self, s: &str) -> bool {
        self.eat_if(self.is_sym(s))
    }

    pub(crate) fn expect_sym(&mut self, s: &str) -> Result<()> {
        self.expect_if(self.is_sym(s), s)
    }

    pub(crate) fn ident(&mut self, what: &str) -> Result<(String, Span)> {
        let span = self.span();
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok((s, span))
            }
            _ => Err(self.error(format!("expected {what}, found {}", self.describe()))),
        }
    }

    pub(crate) fn number(&mut self, what: &str) -> Result<f64> {
        match self.peek() {
            Some(Tok::Num(n)) => {
                let n = *n;
                self.pos += 1;
                Ok(n)
            }
            _ => Err(self.error(format!(
                "expected {what} (a number), found {}",
                self.describe()
            ))),
        }
    }

    pub(crate) fn eat_newline(&mut self) -> bool {
        self.eat_if(matches!(self.peek(), Some(Tok::Newline)))
    }

    pub(crate) fn describe(&self) -> String {
        match self.peek() {
            None => "the end of the file".into(),
            Some(Tok::Ident(s)) => format!("`{s}`"),
            Some(Tok::Num(n)) => format!("`{n}`"),
            Some(Tok::Param) => "a parameter `?`".into(),
            Some(Tok::Sym(s)) => format!("`{s}`"),
            Some(Tok::Newline) => "the end of the line".into(),
        }
    }
}
