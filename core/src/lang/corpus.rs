//! The parser's regression corpus: every `core/tests/parse_corpus/NAME.tern`
//! has a `NAME.expected` beside it holding either `ok` and the canonical
//! printed form, or `error` and the rendered error (with the file name
//! `NAME.tern`). Run with `TERN_BLESS=1` to rewrite the expected files, then
//! review the diff.

use std::fs;
use std::path::{Path, PathBuf};

use super::{parse, parse_file, print};

fn outcome(name: &str, source: &str) -> Result<String, String> {
    Ok(match parse_file(name, source) {
        Ok(script) => {
            let printed = print(&script);
            match parse(&printed) {
                Ok(back) if back == script => format!("ok\n{printed}"),
                Ok(back) => {
                    return Err(format!(
                        "{name}: the printed form parses differently: {back:?}"
                    ));
                }
                Err(e) => return Err(format!("{name}: the printed form does not parse:\n{e}")),
            }
        }
        Err(e) => format!("error\n{e}\n"),
    })
}

#[test]
fn parse_corpus() -> Result<(), String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parse_corpus");
    let mut inputs: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "tern"))
        .collect();
    inputs.sort();
    if inputs.len() < 10 {
        return Err(format!(
            "{} holds only {} inputs",
            dir.display(),
            inputs.len()
        ));
    }
    let bless = std::env::var_os("TERN_BLESS").is_some();
    let mut failures = Vec::new();
    for path in &inputs {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let source = fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
        let actual = outcome(&name, &source)?;
        let expected_path = path.with_extension("expected");
        if bless {
            fs::write(&expected_path, &actual).map_err(|e| format!("{name}: {e}"))?;
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{name}\n--- expected\n{expected}--- actual\n{actual}"
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} corpus files differ (TERN_BLESS=1 rewrites them):\n\n{}",
            failures.len(),
            inputs.len(),
            failures.join("\n")
        ))
    }
}

/// Strips the delimiters (and their padding spaces) of a markdown code span
/// delimited by at least `min_ticks` backticks.
fn unquote_code(cell: &str, min_ticks: usize) -> &str {
    let ticks = cell.len() - cell.trim_start_matches('`').len();
    if ticks < min_ticks.max(1) {
        return cell;
    }
    let inner = &cell[ticks..cell.len().saturating_sub(ticks).max(ticks)];
    if ticks > 1 {
        inner
            .strip_prefix(' ')
            .and_then(|s| s.strip_suffix(' '))
            .unwrap_or(inner)
    } else {
        inner
    }
}

/// The error table of `docs/language.md` shows the messages the parser gives.
#[test]
fn documented_error_messages_are_accurate() -> Result<(), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/language.md");
    let doc = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let errors = doc.split("\n## Errors").nth(1).ok_or("no Errors section")?;
    // The section ends where the next part of the reference begins.
    let table = errors.split("\n# ").next().unwrap_or(errors);
    let mut checked = 0;
    for row in table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| error") && !l.starts_with("|---"))
    {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let [_, input, message] = cells[..] else {
            return Err(format!("a row without three cells: {row}"));
        };
        let input = unquote_code(input, 1);
        if input.contains("...") || input.contains(" then ") {
            continue;
        }
        // Messages holding a backslash are code spans with two or more backticks.
        let message = unquote_code(message, 2);
        let source = if input.starts_with('-') {
            input.to_owned()
        } else {
            format!("{input}\n")
        };
        let actual = match parse(&source) {
            Ok(_) => return Err(format!("{input:?} parses, but the table lists an error")),
            Err(e) => e.message(),
        };
        if !message.starts_with(&actual) {
            return Err(format!(
                "{input:?}:\n  documented: {message}\n  actual:     {actual}"
            ));
        }
        checked += 1;
    }
    if checked < 20 {
        return Err(format!("only {checked} rows checked"));
    }
    Ok(())
}
