//! Fuzzing by proptest: no input makes the parser panic, every error points
//! inside the source, and whatever parses prints to text that parses back to
//! the same script.
#![allow(clippy::unwrap_used)]

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
