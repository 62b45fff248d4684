//! [`ParseError`]: what went wrong in a migration script, and where.
//!
//! An error carries the file name (set by the caller), the 1-based line and
//! column (in characters) of the offending text, its width, a
//! [`ParseErrorKind`] saying what was expected and what was found, and the
//! source line, so that [`Display`](fmt::Display) can render it the way rustc
//! and ripgrep do:
//!
//! ```text
//! migrations/0002_blog.tern:3:22: expected `to` after the property, found `=`
//!   |
//! 3 | rename blogpost.text = content
//!   |                      ^
//! ```

use std::fmt;

use thiserror::Error;

/// A migration script that does not parse.
///
/// Boxed, so that a `Result<_, ParseError>` stays small.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct ParseError(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    file: Option<String>,
    line: usize,
    col: usize,
    width: usize,
    kind: ParseErrorKind,
    source_line: String,
}

impl ParseError {
    /// An error about the text `source[start..end]`.
    ///
    /// Offsets past the end are clamped, and offsets inside a character are
    /// moved to its start, so this never panics.
    pub(crate) fn new(kind: ParseErrorKind, source: &str, start: usize, end: usize) -> ParseError {
        let start = floor_char_boundary(source, start);
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        let line = source.as_bytes()[..line_start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        let col = source[line_start..start].chars().count() + 1;
        let end = floor_char_boundary(source, end.clamp(start, line_end));
        let width = source[start..end].chars().count().max(1);
        let source_line = source[line_start..line_end]
            .trim_end_matches('\r')
            .to_owned();
        ParseError(Box::new(Inner {
            file: None,
            line,
            col,
            width,
            kind,
            source_line,
        }))
    }

    /// Sets the file name shown in front of the position (e.g. `migrations/0002_blog.tern`).
    #[must_use]
    pub fn with_file(mut self, name: impl Into<String>) -> ParseError {
        self.0.file = Some(name.into());
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &ParseErrorKind {
        &self.0.kind
    }

    /// The file name, when the caller set one.
    pub fn file(&self) -> Option<&str> {
        self.0.file.as_deref()
    }

    /// The 1-based line of the offending text.
    pub fn line(&self) -> usize {
        self.0.line
    }

    /// The 1-based column, in characters, of the offending text.
    pub fn col(&self) -> usize {
        self.0.col
    }

    /// How many characters of the line the offending text covers (at least 1).
    pub fn width(&self) -> usize {
        self.0.width
    }

    /// The source line holding the offending text, without its line break.
    pub fn source_line(&self) -> &str {
        &self.0.source_line
    }

    /// The one-line message, without position or source excerpt.
    pub fn message(&self) -> String {
        self.0.kind.to_string()
    }

    /// Is this the error for a script without statements ([`ParseErrorKind::EmptyScript`])?
    ///
    /// A caller that accepts empty migrations can treat it as an empty script.
    pub fn is_empty_script(&self) -> bool {
        matches!(self.0.kind, ParseErrorKind::EmptyScript)
    }
}

impl fmt::Display for ParseError {
    /// `file:line:col: message`, then the source line with a caret under the
    /// offending text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner {
            file,
            line,
            col,
            width,
            kind,
            source_line,
        } = &*self.0;
        if let Some(file) = file {
            write!(f, "{file}:")?;
        }
        writeln!(f, "{line}:{col}: {kind}")?;
        let number = line.to_string();
        let pad = " ".repeat(number.len());
        writeln!(f, "{pad} |")?;
        writeln!(f, "{number} | {source_line}")?;
        // Keep tabs so that the caret lines up with the text in a terminal.
        let indent: String = source_line
            .chars()
            .take(col.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{pad} | {indent}{}", "^".repeat(*width))
    }
}

/// What went wrong, with what was expected and what was found.
///
/// Its `Display` is the one-line message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The script holds no statement (only blank lines, comments or `;`).
    ///
    /// A distinct kind so that a caller that accepts empty migrations can.
    #[error("the migration has no statements")]
    EmptyScript,
    /// A statement starts with a word that is no operator.
    #[error(
        "unknown operator `{found}`, expected `add`, `delete`, `rename`, `move`, `copy` or `build`{}",
        did_you_mean(*.suggestion)
    )]
    UnknownOperator {
        /// The word written.
        found: String,
        /// The operator probably meant.
        suggestion: Option<&'static str>,
    },
    /// A `build` statement that names its kinds or columns inconsistently.
    #[error("invalid `build`: {message}")]
    InvalidBuild {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The generic syntax error.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the grammar allows here, e.g. "`to` after the property".
        expected: String,
        /// What is written there, e.g. "`=`" or "end of line".
        found: String,
    },
    /// A kind without `.name`.
    #[error(
        "expected `.` after the kind `{kind}` (a property is written `kind.name`), found {found}"
    )]
    MissingDot {
        /// The kind written.
        kind: String,
        /// What follows it.
        found: String,
    },
    /// `add kind.name` without `= value`.
    #[error(
        "expected `=` and a value after the property, found {found}: `add` requires a value (`add kind.name = value`)"
    )]
    MissingValue {
        /// What follows the property.
        found: String,
    },
    /// A condition of add, delete or rename on another kind than the one changed.
    #[error(
        "a condition of `{operator}` must be on the kind it changes, `{allowed}`, found `{found}`"
    )]
    ConditionOnOtherKind {
        /// `add`, `delete` or `rename`.
        operator: &'static str,
        /// The kind changed.
        allowed: String,
        /// The property tested.
        found: String,
    },
    /// A property-to-property condition in add, delete or rename.
    #[error(
        "a condition of `{operator}` compares a property with a value, found the property `{found}`; a join of two properties is only allowed in `move` and `copy`"
    )]
    JoinOutsideTransfer {
        /// `add`, `delete` or `rename`.
        operator: &'static str,
        /// The property on the right-hand side.
        found: String,
    },
    /// A move/copy condition on a kind that is neither the source nor the target.
    #[error(
        "a condition of `{operator}` must be on the source kind `{source_kind}` or the target kind `{target_kind}`, found `{found}`"
    )]
    ConditionKindNotInTransfer {
        /// `move` or `copy`.
        operator: &'static str,
        /// The kind the property comes from.
        source_kind: String,
        /// The kind the property goes to.
        target_kind: String,
        /// The property tested.
        found: String,
    },
    /// A join atom whose two sides are on the same kind.
    #[error(
        "a join compares a property of the source kind with one of the target kind, but both sides are on `{kind}`"
    )]
    JoinSameKind {
        /// The kind of both sides.
        kind: String,
    },
    /// A second join atom in a move or copy.
    #[error(
        "a `{operator}` has at most one join condition (`source.a = target.b`), found a second one: `{found}`"
    )]
    SecondJoin {
        /// `move` or `copy`.
        operator: &'static str,
        /// The second join, as written.
        found: String,
    },
    /// A move or copy whose target kind is its source kind.
    #[error(
        "cannot {operator} a property to its own kind `{kind}`: the target must be another kind (`rename` renames a property within its kind)"
    )]
    TransferToSameKind {
        /// `move` or `copy`.
        operator: &'static str,
        /// The kind.
        kind: String,
    },
    /// A move or copy of a nested property.
    #[error("`{operator}` transfers a top-level property, found the nested property `{found}`")]
    NestedTransfer {
        /// `move` or `copy`.
        operator: &'static str,
        /// The property written.
        found: String,
    },
    /// A move or copy whose target is written as a property.
    #[error(
        "the target of `{operator}` is a kind, found the property `{found}` (the property keeps its name in the target kind)"
    )]
    TargetIsProperty {
        /// `move` or `copy`.
        operator: &'static str,
        /// The target written.
        found: String,
    },
    /// A property rename whose new name is written as a property.
    #[error(
        "the new name of a renamed property is a plain name in the same kind (`rename kind.old to new`), found `{found}`"
    )]
    RenameTargetNotPlain {
        /// The new name written.
        found: String,
    },
    /// A rename (of a property or a kind) to its own name.
    #[error("renaming `{name}` to the same name changes nothing")]
    RenameToSameName {
        /// The name.
        name: String,
    },
    /// `rename kind a to b where ...`.
    #[error("a kind rename takes no `where` condition: it renames the whole kind")]
    KindRenameWithCondition,
    /// An empty kind name, or one with control characters.
    #[error("invalid kind name {name:?}: a kind is a non-empty name without control characters")]
    InvalidKind {
        /// The name written.
        name: String,
    },
    /// A string literal without its closing quote on the same line.
    #[error("unterminated string: expected a closing `{quote}` before the end of the line")]
    UnterminatedString {
        /// `"` or `'`.
        quote: char,
    },
    /// A backtick-quoted name without its closing backtick.
    #[error("unterminated quoted name: expected a closing backtick")]
    UnterminatedName,
    /// An unknown escape sequence in a string.
    #[error(
        "unknown escape `{escape}` in a string; the escapes are \\\" \\' \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX"
    )]
    BadEscape {
        /// The escape written, e.g. `\q`.
        escape: String,
    },
    /// A malformed `\uXXXX` escape.
    #[error("invalid unicode escape `{escape}`: {reason}")]
    BadUnicodeEscape {
        /// The escape written.
        escape: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A JSON array or object whose opening bracket is never closed.
    #[error("unterminated JSON literal: this `{open}` is never closed by a `{close}`")]
    UnterminatedJson {
        /// `[` or `{`.
        open: char,
        /// `]` or `}`.
        close: char,
    },
    /// A bracketed literal that is not valid JSON.
    #[error("malformed JSON literal: {message}")]
    BadJson {
        /// serde_json's description.
        message: String,
    },
    /// Valid JSON that is no tern value (e.g. `{"$bytes": 5}`).
    #[error("malformed value: {message}")]
    BadValue {
        /// What is wrong.
        message: String,
    },
    /// An integer literal outside the i64 range.
    #[error(
        "integer `{text}` is outside the 64-bit signed range (-9223372036854775808 to 9223372036854775807); write it as a float (with a `.0`) or a string"
    )]
    IntegerOutOfRange {
        /// The literal.
        text: String,
    },
    /// A float literal too large for a 64-bit float.
    #[error(
        "float `{text}` is outside the 64-bit float range; write infinity as {{\"$float\": \"inf\"}}"
    )]
    FloatOutOfRange {
        /// The literal.
        text: String,
    },
    /// A number run into letters, such as `12abc` or `1e`.
    #[error("malformed number `{text}`")]
    BadNumber {
        /// The text.
        text: String,
    },
    /// A character that starts no token.
    #[error("unexpected character `{}`{hint}", .ch.escape_debug())]
    UnexpectedChar {
        /// The character.
        ch: char,
        /// A hint, starting with a space, or empty.
        hint: &'static str,
    },
}

fn did_you_mean(suggestion: Option<&'static str>) -> String {
    suggestion.map_or_else(String::new, |s| format!(" (did you mean `{s}`?)"))
}

/// The largest character boundary of `s` at or before `i`.
fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn expected(expected: &str, found: &str) -> ParseErrorKind {
        ParseErrorKind::Expected {
            expected: expected.into(),
            found: found.into(),
        }
    }

    #[test]
    fn renders_like_rustc() {
        let source = "add a.b = 1\n\nrename blogpost.text = content\n";
        let start = source.rfind('=').unwrap();
        let err = ParseError::new(
            expected("`to` after the property", "`=`"),
            source,
            start,
            start + 1,
        )
        .with_file("migrations/0002_blog.tern");
        assert_eq!((err.line(), err.col(), err.width()), (3, 22, 1));
        assert_eq!(
            err.to_string(),
            "migrations/0002_blog.tern:3:22: expected `to` after the property, found `=`\n  \
             |\n\
             3 | rename blogpost.text = content\n  \
             |                      ^"
        );
    }

    #[test]
    fn carets_span_the_token_and_keep_tabs() {
        let source = "\tdelete  blogpost";
        let err = ParseError::new(expected("x", "y"), source, 9, 17);
        assert_eq!((err.line(), err.col(), err.width()), (1, 10, 8));
        assert!(
            err.to_string()
                .ends_with("1 | \tdelete  blogpost\n  | \t        ^^^^^^^^"),
            "{err}"
        );
    }

    #[test]
    fn columns_count_characters_and_offsets_are_clamped() {
        let source = "add é.x = 1\r\nnext";
        let at = source.find('x').unwrap();
        let err = ParseError::new(expected("x", "y"), source, at, at + 1);
        assert_eq!((err.line(), err.col()), (1, 7));
        assert_eq!(err.source_line(), "add é.x = 1");
        // Inside `é`, and past the end: no panic.
        let err = ParseError::new(expected("x", "y"), source, 5, 999);
        assert_eq!((err.line(), err.col()), (1, 5));
        let err = ParseError::new(expected("x", "y"), source, 999, 999);
        assert_eq!((err.line(), err.col(), err.width()), (2, 5, 1));
        let err = ParseError::new(expected("x", "y"), "", 0, 0);
        assert_eq!((err.line(), err.col(), err.width()), (1, 1, 1));
    }

    #[test]
    fn errors_and_scripts_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<ParseError>();
        assert_send_sync::<crate::lang::Script>();
    }

    #[test]
    fn empty_script_is_a_distinct_kind() {
        let err = ParseError::new(ParseErrorKind::EmptyScript, "", 0, 0);
        assert!(err.is_empty_script());
        assert_eq!(err.message(), "the migration has no statements");
        assert_eq!(err.file(), None);
    }
}
