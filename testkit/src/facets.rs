//! Each store's table of facets, in its `docs.md`, checked against what the
//! store hands out ([`Store::features`](tern_core::store::Store::features)).
//!
//! The table is the one markdown table of the file whose first header cell is
//! `facet`: one row per facet of [`Features::rows`] (its name in backticks),
//! one column per configuration the docs describe (e.g. `one server`,
//! `cluster`), each cell `yes` or `no` (bold allowed), and any other columns
//! (`how`) free text. A test opens the store in each configuration and calls
//! [`check`] with the column's name: a facet the code hands out and the table
//! denies (or the reverse), a missing or unknown row, fails the test.
//!
//! ```text
//! | facet | one server | cluster | how |
//! |---|---|---|---|
//! | `pushdown` | yes | no | one Lua call per batch |
//! ```

use tern_core::store::Features;

/// The table of `docs`: its header cells and, per row, its cells.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim().trim_start_matches('|').trim_end_matches('|');
    line.split('|').map(|c| c.trim().to_owned()).collect()
}

fn table(docs: &str) -> Result<Table, String> {
    let mut lines = docs.lines().skip_while(|l| {
        cells(l)
            .first()
            .is_none_or(|c| !(l.trim_start().starts_with('|') && c == "facet"))
    });
    let header = cells(
        lines
            .next()
            .ok_or("no table whose first header cell is `facet` in the docs")?,
    );
    let rows = lines
        .skip(1)
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(cells)
        .collect();
    Ok(Table { header, rows })
}

/// `yes` → true, `no` → false (with or without `**`).
fn yes_no(cell: &str) -> Option<bool> {
    match cell.trim_matches('*') {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// Checks the column `column` of the facet table of `docs` against `features`
/// (backticks in the column's name do not matter).
///
/// # Errors
/// Every disagreement, one per line, and the rows the table should have.
pub fn check(docs: &str, column: &str, features: &Features<'_>) -> Result<(), String> {
    let table = table(docs)?;
    let col = table
        .header
        .iter()
        .position(|h| h.replace('`', "") == column.replace('`', ""))
        .ok_or_else(|| {
            format!(
                "the facet table has no column {column:?}: {:?}",
                table.header
            )
        })?;
    let mut problems = Vec::new();
    let expected = features.rows();
    for (name, has) in expected {
        let row = table
            .rows
            .iter()
            .find(|r| r.first().map(|c| c.trim_matches('`')) == Some(name));
        match row.map(|r| r.get(col).map(|c| yes_no(c))) {
            None => problems.push(format!("no row for `{name}`")),
            Some(None) => problems.push(format!("`{name}`: no cell in column {column:?}")),
            Some(Some(None)) => problems.push(format!("`{name}`: the cell is not `yes` or `no`")),
            Some(Some(Some(documented))) if documented != has => problems.push(format!(
                "`{name}`: the docs say {}, the store {} it",
                if documented { "yes" } else { "no" },
                if has { "has" } else { "lacks" }
            )),
            Some(Some(Some(_))) => {}
        }
    }
    for r in &table.rows {
        let name = r.first().map(|c| c.trim_matches('`')).unwrap_or_default();
        if !expected.iter().any(|(n, _)| *n == name) {
            problems.push(format!("`{name}` is not a facet"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the facet table (column {column:?}) disagrees with Store::features:\n{}\n\
             the store's column:\n{}",
            problems.join("\n"),
            render(features)
        ))
    }
}

/// The rows of a one-column facet table for `features` (`| `name` | yes |`).
pub fn render(features: &Features<'_>) -> String {
    features
        .rows()
        .iter()
        .map(|(name, has)| format!("| `{name}` | {} |", if *has { "yes" } else { "no" }))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_core::store::Store;
    use tern_core::store::memory::MemoryStore;

    const DOCS: &str = "# A store\n\ntext | with a bar\n\n\
        | facet | here | there | how |\n|---|---|---|---|\n\
        | `scan_ordered` | yes | no | ids |\n| `pushdown` | **yes** | no | |\n\
        | `atomic_writes` | yes | no | |\n| `atomic_batch_with_meta` | yes | no | |\n\
        | `kind_rename` | yes | no | |\n| `schema_hooks` | no | no | |\n\
        | `projected_scan` | no | no | |\n| `former_name_reads` | yes | no | |\n\
        | `server_clock` | no | no | |\n| `count_estimate` | yes | no | |\n\
        | `partitions` | yes | no | |\n| `serial_writes` | no | no | |\n\nafter\n";

    #[test]
    fn a_table_that_matches_passes_and_one_that_does_not_fails() {
        let store = MemoryStore::new();
        assert_eq!(check(DOCS, "here", &store.features()), Ok(()));
        let err = check(DOCS, "there", &store.features()).unwrap_err();
        assert!(
            err.contains("`pushdown`: the docs say no, the store has it"),
            "{err}"
        );
        assert!(check(DOCS, "elsewhere", &store.features()).is_err());
    }

    #[test]
    fn a_missing_or_unknown_row_fails() {
        let store = MemoryStore::new();
        let missing = DOCS.replace("| `pushdown` | **yes** | no | |\n", "");
        let err = check(&missing, "here", &store.features()).unwrap_err();
        assert!(err.contains("no row for `pushdown`"), "{err}");
        let unknown = DOCS.replace("`pushdown`", "`push_down`");
        let err = check(&unknown, "here", &store.features()).unwrap_err();
        assert!(err.contains("`push_down` is not a facet"), "{err}");
        assert!(check("no table", "here", &store.features()).is_err());
    }
}
