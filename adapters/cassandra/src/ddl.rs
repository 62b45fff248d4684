//! Which schema changes the language's statements need on native tables (pure: no I/O).
//!
//! Before a stage, [`columns_to_add`] lists the columns to add (`ALTER TABLE ... ADD`): the
//! version column of every table the stage writes, and each new property's column, typed from
//! the `add`'s literal, from the renamed column, or from the transferred column (JSON text when
//! the source is a document table). After the census, [`columns_to_check`] lists the columns
//! that `delete`, `rename` and `move` may have emptied; they are dropped only when a sweep finds
//! no value left in them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tern_core::store::SchemaChange;

use crate::cql_type::CqlType;
use crate::schema::{TableSchema, VERSION_COLUMN};

/// One column to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddColumn {
    /// The table.
    pub(crate) table: String,
    /// The column.
    pub(crate) name: String,
    /// Its type.
    pub(crate) ty: CqlType,
    /// Whether it is a JSON text column.
    pub(crate) json: bool,
}

/// The columns the `changes` of a stage need and `schemas` (the native tables, by name) lack,
/// in order: per table, the version column first, then properties in order of mention.
pub(crate) fn columns_to_add(
    changes: &[SchemaChange],
    schemas: &BTreeMap<String, Arc<TableSchema>>,
) -> Vec<AddColumn> {
    let mut out: Vec<AddColumn> = Vec::new();
    let mut push = |table: &str, name: &str, typed: Option<(CqlType, bool)>| {
        let Some(schema) = schemas.get(table) else {
            return;
        };
        let Some((ty, json)) = typed else {
            return;
        };
        let exists = if name == VERSION_COLUMN {
            schema.has_version
        } else {
            schema.column(name).is_some() || schema.keys().any(|c| c.name == name)
        };
        if exists || out.iter().any(|a| a.table == table && a.name == name) {
            return;
        }
        out.push(AddColumn {
            table: table.to_owned(),
            name: name.to_owned(),
            ty,
            json,
        });
    };
    let typed_like = |table: &str, name: &str| {
        schemas
            .get(table)
            .and_then(|s| s.column(name))
            .map(|c| (c.ty.clone(), c.json))
    };
    for change in changes {
        match change {
            SchemaChange::Versioned { kind } => {
                push(kind, VERSION_COLUMN, Some((CqlType::BigInt, false)));
            }
            SchemaChange::Add { kind, name, value } => {
                push(kind, VERSION_COLUMN, Some((CqlType::BigInt, false)));
                push(kind, name, CqlType::for_value(value));
            }
            SchemaChange::Rename { kind, from, to } => {
                push(kind, VERSION_COLUMN, Some((CqlType::BigInt, false)));
                push(kind, to, typed_like(kind, from));
            }
            SchemaChange::Transfer {
                source,
                target,
                name,
            } => {
                push(target, VERSION_COLUMN, Some((CqlType::BigInt, false)));
                let typed = if schemas.contains_key(source) {
                    typed_like(source, name)
                } else {
                    // From a document table: values of any type, so a JSON text column.
                    Some((CqlType::Text, true))
                };
                push(target, name, typed);
            }
            SchemaChange::Remove { .. } => {}
        }
    }
    // The version columns first, table by table: a stage's writes need them before anything.
    out.sort_by_key(|a| (a.table.clone(), a.name != VERSION_COLUMN));
    out
}

/// The columns of native tables that the `changes` of a migration may have emptied (to drop
/// once a sweep finds them empty), by table.
pub(crate) fn columns_to_check(
    changes: &[SchemaChange],
    schemas: &BTreeMap<String, Arc<TableSchema>>,
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for change in changes {
        if let SchemaChange::Remove { kind, name } = change
            && schemas.get(kind).is_some_and(|s| s.column(name).is_some())
        {
            out.entry(kind.clone()).or_default().insert(name.clone());
        }
    }
    out.into_iter()
        .map(|(t, names)| (t, names.into_iter().collect()))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashSet;

    use tern_core::migrate::Migration;
    use tern_core::migrate::plan::{plan, schema_changes};

    use super::*;
    use crate::schema::SchemaRow;

    fn schema(table: &str, columns: &[(&str, &str, CqlType)], json: &[&str]) -> Arc<TableSchema> {
        let rows: Vec<SchemaRow> = columns
            .iter()
            .map(|(c, kind, ty)| SchemaRow {
                column: (*c).to_owned(),
                kind: (*kind).to_owned(),
                position: if *kind == "regular" { -1 } else { 0 },
                ty: ty.clone(),
                descending: false,
            })
            .collect();
        let json: HashSet<String> = json.iter().map(|s| (*s).to_owned()).collect();
        Arc::new(TableSchema::from_rows("ks", table, &rows, &json).unwrap())
    }

    /// The blog's tables as an application created them (no version column).
    fn blog() -> BTreeMap<String, Arc<TableSchema>> {
        let key = || ("id", "partition_key", CqlType::Text);
        let text = |c| (c, "regular", CqlType::Text);
        [
            (
                "user",
                vec![
                    key(),
                    text("name"),
                    text("email"),
                    text("url"),
                    text("prefs"),
                ],
                &["prefs"][..],
            ),
            (
                "blogpost",
                vec![
                    key(),
                    text("title"),
                    text("text"),
                    text("author"),
                    ("stars", "regular", CqlType::Int),
                ],
                &[],
            ),
        ]
        .into_iter()
        .map(|(table, columns, json)| (table.to_owned(), schema(table, &columns, json)))
        .collect()
    }

    /// Every stage's changes of one migration script.
    fn changes(script: &str) -> Vec<Vec<SchemaChange>> {
        let m = Migration::from_script(1, "m", "m.tern", script).unwrap();
        plan(&m, &BTreeMap::new())
            .stages
            .iter()
            .map(schema_changes)
            .collect()
    }

    /// The DDL a stage runs, as CQL.
    fn ddl(stage: &[SchemaChange], schemas: &BTreeMap<String, Arc<TableSchema>>) -> Vec<String> {
        columns_to_add(stage, schemas)
            .into_iter()
            .map(|a| {
                let cql = schemas[&a.table].add_column(&a.name, &a.ty);
                if a.json { format!("{cql} (json)") } else { cql }
            })
            .collect()
    }

    #[test]
    fn add_and_rename_add_typed_columns_and_the_version_column() {
        let schemas = blog();
        let stages = changes(
            "add blogpost.likes = 0\nrename blogpost.text to content\nrename blogpost.stars to rating\n\
             add blogpost.tags = [\"a\"]\nadd blogpost.meta = {\"a\": 1, \"b\": \"x\"}\n\
             add blogpost.weights = {\"a\": 0.5}\nadd blogpost.nothing = null\nadd blogpost.title = \"t\"\n\
             add blogpost.info.source = \"feed\"",
        );
        assert_eq!(stages.len(), 1);
        assert_eq!(
            ddl(&stages[0], &schemas),
            [
                "ALTER TABLE ks.blogpost ADD tern_version bigint",
                "ALTER TABLE ks.blogpost ADD likes bigint",
                "ALTER TABLE ks.blogpost ADD content text",
                "ALTER TABLE ks.blogpost ADD rating int",
                "ALTER TABLE ks.blogpost ADD tags list<text>",
                "ALTER TABLE ks.blogpost ADD meta text (json)",
                "ALTER TABLE ks.blogpost ADD weights map<text, double>",
                "ALTER TABLE ks.blogpost ADD info map<text, text>",
            ]
        );
    }

    #[test]
    fn transfers_take_the_source_column_type_or_json_text() {
        let schemas = blog();
        let stages = changes(
            "copy user.email to blogpost where user.name = blogpost.author\n\
             move user.prefs to blogpost where user.name = blogpost.author\n\
             copy doc.anything to blogpost",
        );
        assert_eq!(
            ddl(&stages[0], &schemas),
            [
                "ALTER TABLE ks.blogpost ADD tern_version bigint",
                "ALTER TABLE ks.blogpost ADD email text",
            ]
        );
        // A move also writes (versions) its source kind.
        assert_eq!(
            ddl(&stages[1], &schemas),
            [
                "ALTER TABLE ks.blogpost ADD tern_version bigint",
                "ALTER TABLE ks.blogpost ADD prefs text (json)",
                "ALTER TABLE ks.user ADD tern_version bigint",
            ]
        );
        // `doc` is not a native table: its values may be of any type.
        assert_eq!(
            ddl(&stages[2], &schemas),
            [
                "ALTER TABLE ks.blogpost ADD tern_version bigint",
                "ALTER TABLE ks.blogpost ADD anything text (json)",
            ]
        );
    }

    #[test]
    fn nothing_to_add_when_the_columns_exist_or_the_kind_is_no_native_table() {
        let mut schemas = blog();
        let full = schema(
            "blogpost",
            &[
                ("id", "partition_key", CqlType::Text),
                ("tern_version", "regular", CqlType::BigInt),
                ("likes", "regular", CqlType::BigInt),
                ("content", "regular", CqlType::Text),
                ("text", "regular", CqlType::Text),
            ],
            &[],
        );
        schemas.insert("blogpost".to_owned(), full);
        let stages =
            changes("add blogpost.likes = 0\nrename blogpost.text to content\nadd other.x = 1");
        assert!(columns_to_add(&stages[0], &schemas).is_empty());
        assert!(columns_to_add(&stages[1], &schemas).is_empty());
        // Renaming onto a key column adds nothing (the write fails with a clear error instead).
        let stages = changes("rename blogpost.text to id");
        assert!(columns_to_add(&stages[0], &schemas).is_empty());
    }

    #[test]
    fn delete_rename_and_move_name_the_columns_to_check_before_a_drop() {
        let schemas = blog();
        let all: Vec<SchemaChange> = changes(
            "rename blogpost.text to content\ndelete blogpost.stars where blogpost.author = \"x\"\n\
             delete blogpost.missing\ndelete blogpost.author.nested\n\
             move user.url to blogpost where user.name = blogpost.author\ndelete other.x",
        )
        .into_iter()
        .flatten()
        .collect();
        let check = columns_to_check(&all, &schemas);
        assert_eq!(
            check,
            [
                (
                    "blogpost".to_owned(),
                    vec!["stars".to_owned(), "text".to_owned()]
                ),
                ("user".to_owned(), vec!["url".to_owned()]),
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(
            schemas["blogpost"].drop_column("text"),
            "ALTER TABLE ks.blogpost DROP text"
        );
    }
}
