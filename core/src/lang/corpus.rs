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
