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

//!
//! The lexer (text to tokens) is in `lexer`, the parser (tokens to a tree) in
//! `parser`; `tests` and `fuzz` hold their tests.

mod lexer;
mod parser;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

use super::ast::Script;
use super::error::ParseError;
use parser::Parser;

/// The keywords of the language, matched case-insensitively.
pub const KEYWORDS: [&str; 12] = [
    "add", "delete", "rename", "move", "copy", "to", "where", "and", "true", "false", "null",
    "kind",
];

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
