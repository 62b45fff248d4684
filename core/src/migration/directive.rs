//! The `lazy` directive of a migration file.
//!
//! A migration is lazy when the first line of its file that is neither blank
//! nor a comment is the word `lazy` (optionally followed by `;` or a comment).
//! The directive is part of the canonical text, so of the checksum: turning a
//! migration lazy or eager after it was applied is an edit `tern up` refuses.

use crate::lang::{Script, Statement};

/// The directive's keyword.
pub const DIRECTIVE: &str = "lazy";

/// Splits the directive off `text`: whether it is there, and the text with the
/// directive's line blanked (so positions in errors stay those of the file).
pub fn strip(text: &str) -> (bool, std::borrow::Cow<'_, str>) {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let code = line.split("--").next().unwrap_or("").trim();
        if code.is_empty() {
            offset += line.len();
            continue;
        }
        let word = code.strip_suffix(';').unwrap_or(code).trim_end();
        if word.eq_ignore_ascii_case(DIRECTIVE) {
            let body = line.trim_end_matches(['\n', '\r']);
            let mut out = String::with_capacity(text.len());
            out.push_str(&text[..offset]);
            out.push_str(&" ".repeat(body.chars().count()));
            out.push_str(&text[offset + body.len()..]);
            return (true, std::borrow::Cow::Owned(out));
        }
        break;
    }
    (false, std::borrow::Cow::Borrowed(text))
}

/// The canonical text of a migration: the printed statements, after a
/// `lazy` line when it is lazy.
pub fn canonical(lazy: bool, printed: &str) -> String {
    if lazy {
        format!("{DIRECTIVE}\n{printed}")
    } else {
        printed.to_owned()
    }
}

/// Refuses a lazy script whose statements read other entities (`move`,
/// `copy`): a lazy step runs on one entity when it is accessed, and may see
/// nothing else ([KV] requirement 2). The message names the place and the fix.
///
/// # Errors
/// The first offending statement, as `file:line:col: why; fix`.
pub fn check_script(file: &str, script: &Script) -> Result<(), String> {
    for s in &script.statements {
        if let Statement::Move(_) | Statement::Copy(_) = s.statement {
            return Err(format!(
                "{file}:{}:{}: `{}` cannot be lazy: a {} reads other entities, and a lazy step \
                 sees only the entity being accessed (a value another client changed since the \
                 install would be read); put it in a migration without the `lazy` line",
                s.span.line,
                s.span.col,
                s.statement,
                s.statement.operator()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_directive_is_the_first_line_that_is_not_blank_or_a_comment() {
        let (lazy, text) = strip("-- a comment\n\n  lazy ; -- why\nadd a.x = 1\n");
        assert!(lazy);
        assert_eq!(text.lines().nth(2).unwrap().trim(), "");
        assert_eq!(text.lines().nth(3).unwrap(), "add a.x = 1");
        assert!(!strip("add a.x = 1\nlazy\n").0);
        assert!(!strip("add lazy.x = 1\n").0);
        assert!(strip("LAZY\r\nadd a.x = 1").0);
    }

    #[test]
    fn canonical_text_carries_the_directive() {
        assert_eq!(canonical(true, "add a.x = 1\n"), "lazy\nadd a.x = 1\n");
        assert_eq!(canonical(false, "add a.x = 1\n"), "add a.x = 1\n");
    }
}
