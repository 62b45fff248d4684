//! The native layout: a table's schema (its columns from `system_schema.columns`, their types
//! from the driver, see `CqlType::from_driver`), the mapping of its
//! rows to entities, and the CQL statements tern runs on it. Everything here is pure (no I/O),
//! so the statements are unit-tested.

use std::collections::HashSet;

use scylla::value::CqlValue;
use tern_core::model::{Entity, Key, Map, Value, Version};

use crate::config::is_plain_identifier;
use crate::cql_type::{CqlType, from_cql, to_cql};

/// The column holding an entity's version (`bigint`; an empty cell is version 0).
pub(crate) const VERSION_COLUMN: &str = "tern_version";

/// CQL's reserved words: a column of that name must be quoted.
const RESERVED: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "materialized",
    "mbean",
    "mbeans",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "unset",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// Whether `name` is one of CQL's reserved words (which only a quoted identifier can use).
pub(crate) fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// A column name as CQL text: plain when it is a plain lowercase identifier, else quoted
/// (case-sensitive, `"` doubled).
pub(crate) fn ident(name: &str) -> String {
    if is_plain_identifier(name) && !is_reserved(name) {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// One column of a native table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    /// The column's name (as stored: case-sensitive).
    pub(crate) name: String,
    /// Its type.
    pub(crate) ty: CqlType,
    /// A text column registered as holding tern's lossless JSON (any value).
    pub(crate) json: bool,
    /// A clustering column in descending order (`WITH CLUSTERING ORDER BY (c DESC)`).
    pub(crate) descending: bool,
}

/// One column as read from the server: its row of `system_schema.columns` and its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaRow {
    /// `column_name`
    pub(crate) column: String,
    /// `kind`: `partition_key`, `clustering`, `regular` or `static`.
    pub(crate) kind: String,
    /// `position` (order within the partition key or the clustering columns).
    pub(crate) position: i32,
    /// Its type (the driver's, from a prepared statement's result metadata).
    pub(crate) ty: CqlType,
    /// `clustering_order` is `desc`.
    pub(crate) descending: bool,
}

/// The schema of a native table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableSchema {
    /// `keyspace.table`, for statements.
    pub(crate) qualified: String,
    /// The table.
    pub(crate) table: String,
    /// Partition key columns, in key order.
    pub(crate) partition: Vec<Column>,
    /// Clustering columns, in key order.
    pub(crate) clustering: Vec<Column>,
    /// Regular columns (the properties), by name; without the version column.
    pub(crate) regular: Vec<Column>,
    /// Whether the table has the version column.
    pub(crate) has_version: bool,
}

impl TableSchema {
    /// The schema of `keyspace.table` from its rows of `system_schema.columns`; `json` holds
    /// the names of its JSON text columns.
    ///
    /// # Errors
    /// A message naming the column when the table cannot be mapped (static columns, a version
    /// column that is not a regular `bigint`).
    pub(crate) fn from_rows(
        keyspace: &str,
        table: &str,
        rows: &[SchemaRow],
        json: &HashSet<String>,
    ) -> Result<TableSchema, String> {
        let mut partition: Vec<(i32, Column)> = Vec::new();
        let mut clustering: Vec<(i32, Column)> = Vec::new();
        let mut regular = Vec::new();
        let mut has_version = false;
        for row in rows {
            if row.column == VERSION_COLUMN {
                if row.kind != "regular" || row.ty != CqlType::BigInt {
                    return Err(format!(
                        "column {VERSION_COLUMN} must be a regular bigint column (tern's version), \
                         found a {} {}",
                        row.kind, row.ty
                    ));
                }
                has_version = true;
                continue;
            }
            let column = Column {
                json: row.ty.is_text() && json.contains(&row.column),
                descending: row.kind == "clustering" && row.descending,
                name: row.column.clone(),
                ty: row.ty.clone(),
            };
            match row.kind.as_str() {
                "partition_key" => partition.push((row.position, column)),
                "clustering" => clustering.push((row.position, column)),
                "regular" => regular.push(column),
                other => {
                    return Err(format!(
                        "column {} is a {other} column; tern's native layout maps only key and \
                         regular columns",
                        row.column
                    ));
                }
            }
        }
        if partition.is_empty() {
            return Err("no partition key column found in system_schema.columns".to_owned());
        }
        partition.sort_by_key(|(p, _)| *p);
        clustering.sort_by_key(|(p, _)| *p);
        regular.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(TableSchema {
            qualified: format!("{keyspace}.{table}"),
            table: table.to_owned(),
            partition: partition.into_iter().map(|(_, c)| c).collect(),
            clustering: clustering.into_iter().map(|(_, c)| c).collect(),
            regular,
            has_version,
        })
    }

    /// Key columns: the partition key, then the clustering columns.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &Column> {
        self.partition.iter().chain(&self.clustering)
    }

    /// The regular column `name`, if any.
    pub(crate) fn column(&self, name: &str) -> Option<&Column> {
        self.regular.iter().find(|c| c.name == name)
    }

    fn key_count(&self) -> usize {
        self.partition.len() + self.clustering.len()
    }

    /// Every column, in the order the `SELECT`s return them: keys, regular columns, version.
    fn selected(&self) -> String {
        let mut names: Vec<String> = self
            .keys()
            .chain(&self.regular)
            .map(|c| ident(&c.name))
            .collect();
        if self.has_version {
            names.push(VERSION_COLUMN.to_owned());
        }
        names.join(", ")
    }

    fn key_condition(&self) -> String {
        self.keys()
            .map(|c| format!("{} = ?", ident(&c.name)))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    fn partition_list(&self) -> String {
        self.partition
            .iter()
            .map(|c| ident(&c.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `SELECT <all> FROM t`: a full scan.
    pub(crate) fn select_all(&self) -> String {
        format!("SELECT {} FROM {}", self.selected(), self.qualified)
    }

    /// `SELECT <all> FROM t WHERE token(pk) >= ?`: a scan from a token on.
    pub(crate) fn select_from_token(&self) -> String {
        format!(
            "SELECT {} FROM {} WHERE token({}) >= ?",
            self.selected(),
            self.qualified,
            self.partition_list()
        )
    }

    /// `SELECT <all> FROM t WHERE <key> = ?...`: one entity.
    pub(crate) fn select_one(&self) -> String {
        format!(
            "SELECT {} FROM {} WHERE {}",
            self.selected(),
            self.qualified,
            self.key_condition()
        )
    }

    /// A statement bound by the partition key only, whose prepared metadata gives the token
    /// of a partition key (see `PreparedStatement::calculate_token`).
    pub(crate) fn partition_lookup(&self) -> String {
        format!(
            "SELECT {} FROM {} WHERE {}",
            self.partition_list(),
            self.qualified,
            self.partition
                .iter()
                .map(|c| format!("{} = ?", ident(&c.name)))
                .collect::<Vec<_>>()
                .join(" AND ")
        )
    }

    /// `INSERT INTO t (<all>) VALUES (...)`, with `IF NOT EXISTS` for a conditional insert.
    /// Values: keys, regular columns, version.
    pub(crate) fn insert(&self, if_not_exists: bool) -> String {
        let count = self.key_count() + self.regular.len() + usize::from(self.has_version);
        format!(
            "INSERT INTO {} ({}) VALUES ({}){}",
            self.qualified,
            self.selected(),
            vec!["?"; count].join(", "),
            if if_not_exists { " IF NOT EXISTS" } else { "" }
        )
    }

    /// The compare-and-set: `UPDATE t SET <every column> = ? WHERE <key> IF <every column> = ?`.
    /// Values: regular columns and version (new), keys, regular columns and version (expected).
    /// `None` when the table has no non-key column (nothing to set or compare).
    pub(crate) fn update_if(&self) -> Option<String> {
        self.update(|assign| assign(" AND "))
    }

    /// The put of a serial write: `UPDATE t SET <every column> = ? WHERE <key> IF EXISTS`.
    /// Values: regular columns and version, keys. `None` when the table has no non-key column.
    pub(crate) fn update_if_exists(&self) -> Option<String> {
        self.update(|_| "EXISTS".to_owned())
    }

    /// `UPDATE t SET <every column> = ? WHERE <key> IF <condition>`, the condition made from
    /// the `<column> = ?` list joined by its argument; `None` without a non-key column.
    fn update(&self, condition: impl Fn(&dyn Fn(&str) -> String) -> String) -> Option<String> {
        let mut columns: Vec<String> = self.regular.iter().map(|c| ident(&c.name)).collect();
        if self.has_version {
            columns.push(VERSION_COLUMN.to_owned());
        }
        if columns.is_empty() {
            return None;
        }
        let assign = |sep: &str| {
            columns
                .iter()
                .map(|c| format!("{c} = ?"))
                .collect::<Vec<_>>()
                .join(sep)
        };
        Some(format!(
            "UPDATE {} SET {} WHERE {} IF {}",
            self.qualified,
            assign(", "),
            self.key_condition(),
            condition(&assign)
        ))
    }

    /// `DELETE FROM t WHERE <key>`.
    pub(crate) fn delete(&self) -> String {
        format!(
            "DELETE FROM {} WHERE {}",
            self.qualified,
            self.key_condition()
        )
    }

    /// The delete of a serial write: `DELETE FROM t WHERE <key> IF EXISTS`.
    pub(crate) fn delete_if_exists(&self) -> String {
        format!("{} IF EXISTS", self.delete())
    }

    /// `ALTER TABLE t ADD <column> <type>`.
    pub(crate) fn add_column(&self, name: &str, ty: &CqlType) -> String {
        format!("ALTER TABLE {} ADD {} {ty}", self.qualified, ident(name))
    }

    /// `ALTER TABLE t DROP <column>`.
    pub(crate) fn drop_column(&self, name: &str) -> String {
        format!("ALTER TABLE {} DROP {}", self.qualified, ident(name))
    }

    /// `CREATE TABLE IF NOT EXISTS <qualified>` with this table's columns, types, primary key
    /// and clustering order (the new table of a kind rename). Table options, secondary
    /// indexes and JSON registrations are not part of it.
    pub(crate) fn create_like(&self, qualified: &str) -> String {
        let mut columns: Vec<String> = self
            .keys()
            .chain(&self.regular)
            .map(|c| format!("{} {}", ident(&c.name), c.ty))
            .collect();
        if self.has_version {
            columns.push(format!("{VERSION_COLUMN} bigint"));
        }
        let names = |cols: &[Column]| {
            cols.iter()
                .map(|c| ident(&c.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let partition = if self.partition.len() == 1 {
            names(&self.partition)
        } else {
            format!("({})", names(&self.partition))
        };
        let key = if self.clustering.is_empty() {
            partition
        } else {
            format!("{partition}, {}", names(&self.clustering))
        };
        let order = if self.clustering.iter().any(|c| c.descending) {
            format!(
                " WITH CLUSTERING ORDER BY ({})",
                self.clustering
                    .iter()
                    .map(|c| format!(
                        "{} {}",
                        ident(&c.name),
                        if c.descending { "DESC" } else { "ASC" }
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        };
        format!(
            "CREATE TABLE IF NOT EXISTS {qualified} ({}, PRIMARY KEY ({key})){order}",
            columns.join(", ")
        )
    }

    /// How `other` differs from this table in what a row holds (key columns in order, their
    /// types and clustering order, regular columns, their types and JSON registration, the
    /// version column), or `None` when a row of one is a row of the other.
    pub(crate) fn difference(&self, other: &TableSchema) -> Option<String> {
        let describe = |c: &Column| {
            let mut text = format!("{} {}", c.name, c.ty);
            if c.json {
                text.push_str(" (JSON)");
            }
            if c.descending {
                text.push_str(" DESC");
            }
            text
        };
        let list = |cols: &[Column]| {
            let names: Vec<String> = cols.iter().map(describe).collect();
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        if self.partition != other.partition {
            return Some(format!(
                "partition key ({}) vs ({})",
                list(&self.partition),
                list(&other.partition)
            ));
        }
        if self.clustering != other.clustering {
            return Some(format!(
                "clustering columns ({}) vs ({})",
                list(&self.clustering),
                list(&other.clustering)
            ));
        }
        for c in &self.regular {
            match other.column(&c.name) {
                None => return Some(format!("column {} is missing", describe(c))),
                Some(o) if o != c => {
                    return Some(format!("column {} vs {}", describe(c), describe(o)));
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = other
            .regular
            .iter()
            .find(|o| self.column(&o.name).is_none())
        {
            return Some(format!("extra column {}", describe(extra)));
        }
        match (self.has_version, other.has_version) {
            (true, false) => Some(format!("column {VERSION_COLUMN} bigint is missing")),
            (false, true) => Some(format!("extra column {VERSION_COLUMN} bigint")),
            _ => None,
        }
    }

    /// `SELECT <columns> FROM t`: the sweep that checks columns are empty before a drop.
    pub(crate) fn select_columns(&self, names: &[String]) -> String {
        format!(
            "SELECT {} FROM {}",
            names
                .iter()
                .map(|n| ident(n))
                .collect::<Vec<_>>()
                .join(", "),
            self.qualified
        )
    }

    /// The key columns' values of an id: the id itself for a one-column key, else an array
    /// with one value per key column (partition key, then clustering columns).
    ///
    /// # Errors
    /// A message saying how the id must look.
    pub(crate) fn key_values(&self, id: &Value) -> Result<Vec<CqlValue>, String> {
        let keys: Vec<&Column> = self.keys().collect();
        let parts: Vec<&Value> = match (keys.len(), id) {
            (1, id) => vec![id],
            (n, Value::Array(parts)) if parts.len() == n => parts.iter().collect(),
            (n, _) => {
                return Err(format!(
                    "an id of table {} is an array of {n} values ({})",
                    self.table,
                    keys.iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        };
        keys.iter()
            .zip(parts)
            .map(|(column, value)| {
                to_cql(value, &column.ty, false)
                    .map_err(|e| format!("key column {}: {e}", column.name))?
                    .ok_or_else(|| format!("key column {} cannot be null", column.name))
            })
            .collect()
    }

    /// The regular columns' values of an entity (in column order; `None`: empty cell) and its
    /// version's (an empty cell for version 0; only when the table has the version column).
    ///
    /// # Errors
    /// A message naming the properties without a column, a value its column cannot hold, or a
    /// version the table cannot record.
    pub(crate) fn row_values(&self, entity: &Entity) -> Result<Vec<Option<CqlValue>>, String> {
        let missing: Vec<&str> = entity
            .value
            .iter()
            .filter(|(name, value)| self.column(name).is_none() && !matches!(value, Value::Null))
            .map(|(name, _)| name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "table {} has no column for propert{} {} (a native table has a fixed schema: add \
                 the column with ALTER TABLE, or let a tern `add` statement create it)",
                self.qualified,
                if missing.len() == 1 { "y" } else { "ies" },
                missing.join(", ")
            ));
        }
        let mut values = Vec::with_capacity(self.regular.len() + 1);
        for column in &self.regular {
            let value = match entity.value.get(&column.name) {
                Some(v) => to_cql(v, &column.ty, column.json)
                    .map_err(|e| format!("property {}: {e}", column.name))?,
                None => None,
            };
            values.push(value);
        }
        if self.has_version {
            values.push(version_value(entity.version)?);
        } else if entity.version != 0 {
            return Err(format!(
                "table {} has no {VERSION_COLUMN} column for version {} (tern adds it before \
                 a migration writes the table: ALTER TABLE {} ADD {VERSION_COLUMN} bigint)",
                self.qualified, entity.version, self.qualified
            ));
        }
        Ok(values)
    }

    /// The entity of a row selected by [`Self::select_all`] / [`Self::select_one`].
    ///
    /// # Errors
    /// A message when a value cannot be a tern value or the version is negative.
    pub(crate) fn entity(&self, kind: &str, row: Vec<Option<CqlValue>>) -> Result<Entity, String> {
        let mut cells = row.into_iter();
        let mut id_parts = Vec::with_capacity(self.key_count());
        for column in self.keys() {
            let cell = cells
                .next()
                .flatten()
                .ok_or_else(|| format!("key column {} is missing", column.name))?;
            id_parts.push(
                from_cql(cell, false).map_err(|e| format!("key column {}: {e}", column.name))?,
            );
        }
        let id = if id_parts.len() == 1 {
            id_parts.pop().unwrap_or(Value::Null)
        } else {
            Value::Array(id_parts)
        };
        let mut value = Map::new();
        for column in &self.regular {
            if let Some(cell) = cells.next().flatten() {
                value.insert(
                    column.name.clone(),
                    from_cql(cell, column.json)
                        .map_err(|e| format!("column {}: {e}", column.name))?,
                );
            }
        }
        let version = if self.has_version {
            match cells.next().flatten() {
                None => 0,
                Some(CqlValue::BigInt(v)) => Version::try_from(v)
                    .map_err(|_| format!("{VERSION_COLUMN} is negative ({v})"))?,
                Some(other) => return Err(format!("{VERSION_COLUMN} holds {other:?}")),
            }
        } else {
            0
        };
        let key = Key::new(kind, id).map_err(|e| format!("invalid id: {e}"))?;
        Ok(Entity {
            key,
            version,
            value,
        })
    }
}

/// The version column's value: an empty cell for version 0 (so that rows written before tern
/// managed the table, which have no version, and rows at version 0 look the same).
pub(crate) fn version_value(version: Version) -> Result<Option<CqlValue>, String> {
    if version == 0 {
        return Ok(None);
    }
    i64::try_from(version)
        .map(|v| Some(CqlValue::BigInt(v)))
        .map_err(|_| format!("version {version} exceeds a bigint"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn row(column: &str, kind: &str, position: i32, ty: CqlType) -> SchemaRow {
        SchemaRow {
            column: column.to_owned(),
            kind: kind.to_owned(),
            position,
            ty,
            descending: false,
        }
    }

    fn posts() -> TableSchema {
        let json: HashSet<String> = ["meta".to_owned()].into();
        TableSchema::from_rows(
            "ks",
            "posts",
            &[
                row("title", "regular", -1, CqlType::Text),
                row("day", "clustering", 1, CqlType::Timestamp),
                row("author", "partition_key", 0, CqlType::Text),
                row("seq", "clustering", 0, CqlType::BigInt),
                row("tern_version", "regular", -1, CqlType::BigInt),
                row(
                    "tags",
                    "regular",
                    -1,
                    CqlType::List(Box::new(CqlType::Text)),
                ),
                row("meta", "regular", -1, CqlType::Text),
                row("Order", "regular", -1, CqlType::Int),
            ],
            &json,
        )
        .unwrap()
    }

    #[test]
    fn reads_the_schema_in_key_order() {
        let t = posts();
        let names = |cols: &[Column]| cols.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&t.partition), ["author"]);
        assert_eq!(names(&t.clustering), ["seq", "day"]);
        assert_eq!(names(&t.regular), ["Order", "meta", "tags", "title"]);
        assert!(t.has_version);
        assert!(t.column("meta").unwrap().json);
        assert!(!t.column("title").unwrap().json);
    }

    #[test]
    fn refuses_tables_it_cannot_map() {
        let none = HashSet::new();
        let err = |rows: &[SchemaRow]| TableSchema::from_rows("ks", "t", rows, &none).unwrap_err();
        assert!(
            err(&[
                row("id", "partition_key", 0, CqlType::Text),
                row("s", "static", -1, CqlType::Int)
            ])
            .contains("static")
        );
        assert!(
            err(&[
                row("id", "partition_key", 0, CqlType::Text),
                row("tern_version", "regular", -1, CqlType::Text)
            ])
            .contains("regular bigint")
        );
        assert!(err(&[row("x", "regular", -1, CqlType::Text)]).contains("no partition key"));
    }

    #[test]
    fn generates_the_statements() {
        let t = posts();
        assert_eq!(
            t.select_all(),
            "SELECT author, seq, day, \"Order\", meta, tags, title, tern_version FROM ks.posts"
        );
        assert_eq!(
            t.select_from_token(),
            "SELECT author, seq, day, \"Order\", meta, tags, title, tern_version FROM ks.posts \
             WHERE token(author) >= ?"
        );
        assert_eq!(
            t.select_one(),
            "SELECT author, seq, day, \"Order\", meta, tags, title, tern_version FROM ks.posts \
             WHERE author = ? AND seq = ? AND day = ?"
        );
        assert_eq!(
            t.partition_lookup(),
            "SELECT author FROM ks.posts WHERE author = ?"
        );
        assert_eq!(
            t.insert(true),
            "INSERT INTO ks.posts (author, seq, day, \"Order\", meta, tags, title, tern_version) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS"
        );
        assert_eq!(
            t.update_if().unwrap(),
            "UPDATE ks.posts SET \"Order\" = ?, meta = ?, tags = ?, title = ?, tern_version = ? \
             WHERE author = ? AND seq = ? AND day = ? \
             IF \"Order\" = ? AND meta = ? AND tags = ? AND title = ? AND tern_version = ?"
        );
        assert_eq!(
            t.delete(),
            "DELETE FROM ks.posts WHERE author = ? AND seq = ? AND day = ?"
        );
        assert_eq!(
            t.add_column("likes", &CqlType::BigInt),
            "ALTER TABLE ks.posts ADD likes bigint"
        );
        assert_eq!(
            t.add_column(
                "Tags2",
                &CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::Double))
            ),
            "ALTER TABLE ks.posts ADD \"Tags2\" map<text, double>"
        );
        assert_eq!(t.drop_column("text"), "ALTER TABLE ks.posts DROP text");
        assert_eq!(
            t.drop_column("select"),
            "ALTER TABLE ks.posts DROP \"select\""
        );
        assert_eq!(
            t.select_columns(&["title".into(), "a\"b".into()]),
            "SELECT title, \"a\"\"b\" FROM ks.posts"
        );
        let keyonly = TableSchema::from_rows(
            "ks",
            "k",
            &[row("id", "partition_key", 0, CqlType::Text)],
            &HashSet::new(),
        )
        .unwrap();
        assert_eq!(keyonly.update_if(), None);
        assert_eq!(keyonly.insert(false), "INSERT INTO ks.k (id) VALUES (?)");
    }

    #[test]
    fn maps_rows_and_entities() {
        let t = posts();
        let id = Value::Array(vec![
            Value::from("ann"),
            Value::Int(7),
            Value::Timestamp(1000),
        ]);
        assert_eq!(
            t.key_values(&id).unwrap(),
            vec![
                CqlValue::Text("ann".into()),
                CqlValue::BigInt(7),
                CqlValue::Timestamp(scylla::value::CqlTimestamp(1000))
            ]
        );
        assert!(
            t.key_values(&Value::from("ann"))
                .unwrap_err()
                .contains("array of 3 values (author, seq, day)")
        );
        assert!(
            t.key_values(&Value::Array(vec![
                Value::from("a"),
                Value::from("x"),
                Value::Timestamp(0)
            ]))
            .unwrap_err()
            .contains("key column seq")
        );

        let mut value = Map::new();
        value.insert("title".into(), Value::from("hello"));
        value.insert(
            "meta".into(),
            Value::Array(vec![Value::Null, Value::Int(1)]),
        );
        value.insert("tags".into(), Value::Array(vec![Value::from("a")]));
        let mut entity = Entity::new(Key::new("posts", id.clone()).unwrap(), value);
        entity.version = 3;
        let cells = t.row_values(&entity).unwrap();
        assert_eq!(cells.len(), 5);
        assert_eq!(cells[0], None);
        assert_eq!(cells[1], Some(CqlValue::Text("[null,1]".into())));
        assert_eq!(cells[4], Some(CqlValue::BigInt(3)));

        // Back from a row: keys, regular columns, version.
        let mut row: Vec<Option<CqlValue>> =
            t.key_values(&id).unwrap().into_iter().map(Some).collect();
        row.extend(cells);
        assert_eq!(t.entity("posts", row).unwrap(), entity);

        // Version 0 is an empty cell, and an empty cell is version 0.
        entity.version = 0;
        assert_eq!(t.row_values(&entity).unwrap()[4], None);

        // A property without a column, a value its column cannot hold.
        entity.value.insert("likes".into(), Value::Int(1));
        entity.value.insert("other".into(), Value::Int(1));
        let err = t.row_values(&entity).unwrap_err();
        assert!(
            err.contains("no column for properties likes, other"),
            "{err}"
        );
        entity.value.remove("likes");
        entity.value.remove("other");
        entity.value.insert("Order".into(), Value::from("x"));
        assert!(
            t.row_values(&entity)
                .unwrap_err()
                .contains("property Order: a string cannot be stored in a int column")
        );
        // Null properties are empty cells (CQL has no null distinct from absent).
        entity.value.insert("Order".into(), Value::Null);
        entity.value.insert("nocolumn".into(), Value::Null);
        assert_eq!(t.row_values(&entity).unwrap()[0], None);
    }

    #[test]
    fn a_table_without_the_version_column_holds_version_0_only() {
        let t = TableSchema::from_rows(
            "ks",
            "u",
            &[
                row("id", "partition_key", 0, CqlType::BigInt),
                row("name", "regular", -1, CqlType::Text),
            ],
            &HashSet::new(),
        )
        .unwrap();
        assert_eq!(t.select_all(), "SELECT id, name FROM ks.u");
        let mut e = Entity::new(Key::new("u", 5).unwrap(), Map::new());
        assert_eq!(t.row_values(&e).unwrap(), vec![None]);
        e.version = 1;
        assert!(
            t.row_values(&e)
                .unwrap_err()
                .contains("ALTER TABLE ks.u ADD tern_version bigint")
        );
        let got = t
            .entity("u", vec![Some(CqlValue::BigInt(5)), None])
            .unwrap();
        assert_eq!(
            (got.key.id, got.version, got.value.len()),
            (Value::Int(5), 0, 0)
        );
    }
}
