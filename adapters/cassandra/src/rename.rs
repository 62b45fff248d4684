//! [`Store::rename_kind`] for Cassandra: CQL cannot rename a table, so the rows of the old
//! kind's table move one by one into the new kind's table, by a copy and then a delete of the
//! source only if it is still exactly the copied row.
//!
//! The protocol (copy, delete-if-same, undo, collision refusal) is
//! [`tern_core::store::rename_copy`]'s; the primitives here keep rows as stored (every CQL
//! column, typed), so values and types carry over exactly:
//!
//! - a page is one page of the old table (`SELECT <key>, <columns> FROM a`, continued from
//!   the cursor's paging state, as a scan reads it);
//! - the copy is `INSERT ... IF NOT EXISTS` per row. Where the new table already holds the
//!   key, its row (which the LWT's answer carries) decides: identical to the source (a move
//!   interrupted after the copy), the move goes on; different, a collision. An unknown
//!   outcome (a timeout) is resolved by a serial read;
//! - a delete-if-same is `DELETE FROM a WHERE <key> IF <every other column> = ?` (`IF
//!   EXISTS` for a table with key columns only); never by range.
//!
//! Both layouts work this way. The new table must have the old one's layout: a document
//! table is created like any kind's; a native table is created with the old table's columns,
//! types, primary key and clustering order, or must already have exactly those.
//!
//! [`Store::rename_kind`]: tern_core::store::Store::rename_kind

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use scylla::value::{CqlValue, Row};
use tern_core::model::Key;
use tern_core::store::rename_copy::{self, Copied, CopyRename, Side};
use tern_core::store::{
    Cursor, Error, ErrorKind, KindRename, RenameKindPage, RenameKindRequest, Result,
};

use crate::core::{
    CassStore, JSON_COLUMNS_TABLE, Layout, LwtOutcome, Retry, decode_doc, rows_of, table_of,
};
use crate::cursor::ScanCursor;
use crate::schema::{TableSchema, VERSION_COLUMN, ident};
use crate::token_range::Queries;

/// How often a row is copied again when the new kind's key was taken by another writer and
/// deleted again in between (a race, not a failure).
const TAKEN_AGAIN: u32 = 4;

/// The columns of the rows a rename moves: the same for both tables.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    /// The key columns (names as stored), partition key first.
    keys: Vec<String>,
    /// How many of them form the partition key.
    partition: usize,
    /// Every other column (names as stored).
    cells: Vec<String>,
}

impl Shape {
    /// The document layout: `(id text PRIMARY KEY, tern_version bigint, doc blob)`.
    fn document() -> Shape {
        Shape {
            keys: vec!["id".to_owned()],
            partition: 1,
            cells: vec![VERSION_COLUMN.to_owned(), "doc".to_owned()],
        }
    }

    /// A native table: its key columns, then its regular columns and version column.
    fn native(schema: &TableSchema) -> Shape {
        let mut cells: Vec<String> = schema.regular.iter().map(|c| c.name.clone()).collect();
        if schema.has_version {
            cells.push(VERSION_COLUMN.to_owned());
        }
        Shape {
            keys: schema.keys().map(|c| c.name.clone()).collect(),
            partition: schema.partition.len(),
            cells,
        }
    }

    fn columns(&self) -> String {
        self.keys
            .iter()
            .chain(&self.cells)
            .map(|c| ident(c))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn equal_all(columns: &[String]) -> String {
        columns
            .iter()
            .map(|c| format!("{} = ?", ident(c)))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The statements that page through `qualified` (see `CassStore::scan_rows`).
    fn queries(&self, qualified: &str) -> Queries {
        let partition = &self.keys[..self.partition];
        let names = |cols: &[String]| cols.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ");
        Queries {
            all: format!("SELECT {} FROM {qualified}", self.columns()),
            from_token: format!(
                "SELECT {} FROM {qualified} WHERE token({}) >= ?",
                self.columns(),
                names(partition)
            ),
            lookup: format!(
                "SELECT {} FROM {qualified} WHERE {}",
                names(partition),
                Shape::equal_all(partition)
            ),
            partition_columns: self.partition,
        }
    }

    /// One row by its key. Values: the key.
    fn select_one(&self, qualified: &str) -> String {
        format!(
            "SELECT {} FROM {qualified} WHERE {}",
            self.columns(),
            Shape::equal_all(&self.keys)
        )
    }

    /// The copy. Values: the key, then the other columns.
    fn insert(&self, qualified: &str) -> String {
        format!(
            "INSERT INTO {qualified} ({}) VALUES ({}) IF NOT EXISTS",
            self.columns(),
            vec!["?"; self.keys.len() + self.cells.len()].join(", ")
        )
    }

    /// The delete of exactly one row. Values: the key, then the other columns as expected.
    fn delete_exact(&self, qualified: &str) -> String {
        let condition = if self.cells.is_empty() {
            "EXISTS".to_owned()
        } else {
            Shape::equal_all(&self.cells)
        };
        format!(
            "DELETE FROM {qualified} WHERE {} IF {condition}",
            Shape::equal_all(&self.keys)
        )
    }
}

/// A row as stored: its key cells and its other cells (`None`: empty).
#[derive(Debug, Clone)]
struct StoredRow {
    keys: Vec<CqlValue>,
    cells: Vec<Option<CqlValue>>,
}

impl StoredRow {
    /// `(key, cells)` of a row selected with the shape's columns.
    fn from_row(shape: &Shape, table: &str, row: Row) -> Result<StoredRow> {
        StoredRow::from_cells(shape, table, row.columns)
    }

    /// `(key, cells)` of the shape's columns' values, in order.
    fn from_cells(
        shape: &Shape,
        table: &str,
        mut columns: Vec<Option<CqlValue>>,
    ) -> Result<StoredRow> {
        if columns.len() != shape.keys.len() + shape.cells.len() {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!("cassandra: a row of table {table} has an unexpected number of columns"),
            ));
        }
        let cells = columns.split_off(shape.keys.len());
        let keys = columns
            .into_iter()
            .collect::<Option<Vec<CqlValue>>>()
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidData,
                    format!("cassandra: a row of table {table} has an empty key column"),
                )
            })?;
        Ok(StoredRow { keys, cells })
    }

    /// Bound values: the key, then the other cells.
    fn values(&self) -> Vec<Option<CqlValue>> {
        self.keys
            .iter()
            .cloned()
            .map(Some)
            .chain(self.cells.iter().cloned())
            .collect()
    }

    /// Whether `other` holds exactly the same cells (floats compared bit for bit).
    fn same_cells(&self, other: &StoredRow) -> bool {
        self.cells.len() == other.cells.len()
            && self
                .cells
                .iter()
                .zip(&other.cells)
                .all(|(a, b)| match (a, b) {
                    (None, None) => true,
                    (Some(a), Some(b)) => same_value(a, b),
                    _ => false,
                })
    }
}

/// CQL values equal as stored: floats bit for bit (NaN equals itself), collections element
/// by element in the order the server returned them.
fn same_value(a: &CqlValue, b: &CqlValue) -> bool {
    let all = |x: &[CqlValue], y: &[CqlValue]| {
        x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
    };
    match (a, b) {
        (CqlValue::Double(x), CqlValue::Double(y)) => x.to_bits() == y.to_bits(),
        (CqlValue::Float(x), CqlValue::Float(y)) => x.to_bits() == y.to_bits(),
        (CqlValue::List(x), CqlValue::List(y)) | (CqlValue::Set(x), CqlValue::Set(y)) => all(x, y),
        (CqlValue::Map(x), CqlValue::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| same_value(kx, ky) && same_value(vx, vy))
        }
        _ => a == b,
    }
}

/// What the rename does with the two tables.
#[derive(Debug, Clone)]
enum Tables {
    /// Both are document tables (the new one is created when missing).
    Document,
    /// Both are native tables of the same schema; `to: None` means the new table does not
    /// exist yet and is created like `from`.
    Native {
        from: Arc<TableSchema>,
        to: Option<Arc<TableSchema>>,
    },
}

/// How to address the rows of both kinds.
pub(crate) struct Plan {
    from: String,
    to: String,
    tables: Tables,
    from_table: String,
    to_table: String,
    shape: Shape,
    /// The old table's schema when it is native (to read an entity's key from its row).
    native: Option<Arc<TableSchema>>,
}

/// What one `INSERT ... IF NOT EXISTS` did.
enum Insert {
    /// Applied: the row is copied.
    Applied,
    /// The key is taken; the row there, when the answer holds it (as Cassandra's does).
    Exists(Option<StoredRow>),
    /// No answer (a timeout): it may or may not have been applied.
    Unknown(Error),
}

/// The table of a kind named in a rename; a name that cannot be a table is `ConfigInvalid`
/// (the engine then refuses the rename before anything is written).
fn rename_table(kind: &str) -> Result<&str> {
    table_of(kind).map_err(|e| {
        Error::new(
            ErrorKind::ConfigInvalid,
            format!("{}; choose another name for the rename", e.message()),
        )
    })
}

/// [`CassStore`]'s primitives of the rename by copy.
struct Renamer<'a>(&'a CassStore);

/// The rename by copy of the module documentation, with [`Renamer`]'s primitives.
#[async_trait]
impl KindRename for CassStore {
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        rename_copy::rename_by_copy(&Renamer(self), request).await
    }
}

#[async_trait]
impl CopyRename for Renamer<'_> {
    type Row = StoredRow;
    type Plan = Plan;

    fn scheme(&self) -> &'static str {
        crate::config::CASSANDRA_SCHEME
    }

    fn location(&self) -> String {
        self.0.core.config.shown.clone()
    }

    async fn plan(&self, from: &str, to: &str) -> Result<Option<Plan>> {
        let from_table = rename_table(from)?.to_owned();
        let to_table = rename_table(to)?.to_owned();
        if from == to {
            return Ok(None);
        }
        let Some(tables) = self.0.rename_tables(from, to).await? else {
            // No table for the old kind: nothing to move.
            return Ok(None);
        };
        let (shape, native) = match &tables {
            Tables::Document => (Shape::document(), None),
            Tables::Native { from, .. } => (Shape::native(from), Some(Arc::clone(from))),
        };
        Ok(Some(Plan {
            from: from.to_owned(),
            to: to.to_owned(),
            tables,
            from_table,
            to_table,
            shape,
            native,
        }))
    }

    async fn read_page(
        &self,
        plan: &Plan,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<StoredRow>, Option<Cursor>)> {
        let cursor = ScanCursor::of_request(cursor)?;
        let queries = plan.shape.queries(&self.0.qualified(&plan.from_table));
        let mut rows = Vec::new();
        let cursor = self
            .0
            .scan_rows(&plan.from, &queries, cursor, limit, |row| {
                rows.push(StoredRow::from_row(&plan.shape, &plan.from_table, row)?);
                Ok(true)
            })
            .await?;
        Ok((rows, cursor))
    }

    async fn prepare_target(&self, plan: &Plan) -> Result<()> {
        self.0
            .ensure_rename_target(&plan.tables, &plan.to_table)
            .await
    }

    async fn copy(&self, plan: &Plan, rows: &[&StoredRow]) -> Result<Vec<Copied>> {
        // By index: a closure over references trips the compiler inside `async_trait`.
        futures::stream::iter(0..rows.len())
            .map(|i| self.0.copy_row(plan, rows[i]))
            .buffered(self.0.core.config.concurrency)
            .collect::<Vec<Result<Copied>>>()
            .await
            .into_iter()
            .collect()
    }

    async fn delete_if_same(
        &self,
        plan: &Plan,
        side: Side,
        rows: &[&StoredRow],
    ) -> Result<Vec<bool>> {
        let table = match side {
            Side::Old => &plan.from_table,
            Side::New => &plan.to_table,
        };
        futures::stream::iter(0..rows.len())
            .map(|i| self.0.delete_exact(plan, table, rows[i]))
            .buffered(self.0.core.config.concurrency)
            .collect::<Vec<Result<bool>>>()
            .await
            .into_iter()
            .collect()
    }

    async fn reread(&self, plan: &Plan, rows: &[&StoredRow]) -> Result<Vec<StoredRow>> {
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            if let Some(now) = self
                .0
                .read_row(plan, &plan.from_table, &row.keys, false)
                .await?
            {
                out.push(now);
            }
        }
        Ok(out)
    }

    fn key_of(&self, plan: &Plan, row: &StoredRow) -> Result<Key> {
        self.0.key_of(plan, row)
    }

    #[cfg(feature = "fault-injection")]
    fn after_copy_hook(&self) -> Option<rename_copy::AfterCopyHook> {
        self.0.after_copy.as_ref().map(|h| Arc::clone(&h.0))
    }
}

impl CassStore {
    fn qualified(&self, table: &str) -> String {
        format!("{}.{table}", self.ks())
    }

    /// The layouts of the two kinds' tables, checked to be the same (`ConfigInvalid`
    /// otherwise, naming both tables); `None` when the old kind has no table.
    async fn rename_tables(&self, from: &str, to: &str) -> Result<Option<Tables>> {
        let ks = self.ks();
        let from_layout = self.fresh_layout(from).await?;
        let to_layout = self.fresh_layout(to).await?;
        let refuse = |why: String| {
            Err(Error::new(
                ErrorKind::ConfigInvalid,
                format!(
                    "cassandra: cannot rename kind {from} to {to}: {why}; a kind rename copies \
                     rows as they are stored, so both tables need the same layout"
                ),
            ))
        };
        match (from_layout, to_layout) {
            (Layout::Missing { .. }, _) => Ok(None),
            (Layout::Document, Layout::Document | Layout::Missing { native: false }) => {
                Ok(Some(Tables::Document))
            }
            (Layout::Document, Layout::Missing { native: true }) => refuse(format!(
                "{ks}.{from} is a document table and {to} is named in native= (a table of the \
                 native layout); remove {to} from native= to get a document table"
            )),
            (Layout::Document, Layout::Native(_)) => refuse(format!(
                "{ks}.{from} is a document table and {ks}.{to} a native table; rename to a kind \
                 without a table, or drop {ks}.{to} first"
            )),
            (Layout::Native(_), Layout::Document) => refuse(format!(
                "{ks}.{from} is a native table and {ks}.{to} a document table (created by \
                 tern); rename to a kind without a table"
            )),
            (Layout::Native(schema), Layout::Missing { .. }) => {
                if self.core.config.native.names(to) {
                    Ok(Some(Tables::Native {
                        from: schema,
                        to: None,
                    }))
                } else {
                    refuse(format!(
                        "{ks}.{from} is a native table and {to} is not named in native= (tern \
                         would give it a document table); add {to} to native= (or use native=*)"
                    ))
                }
            }
            (Layout::Native(a), Layout::Native(b)) => match a.difference(&b) {
                None => Ok(Some(Tables::Native {
                    from: a,
                    to: Some(b),
                })),
                Some(diff) => refuse(format!(
                    "table {ks}.{to} does not have the columns of {ks}.{from} ({diff}); make \
                     them the same, or drop {ks}.{to} and let the rename create it"
                )),
            },
        }
    }

    /// The layout of `kind`, with a native table's schema read again from `system_schema`
    /// (a rename must copy every column the table has now).
    async fn fresh_layout(&self, kind: &str) -> Result<Layout> {
        match self.layout(kind).await? {
            Layout::Native(schema) => Ok(match self.load_schema(&schema.table).await? {
                Some(fresh) => Layout::Native(fresh),
                None => Layout::Missing {
                    native: matches!(
                        self.core.config.native,
                        crate::config::NativeTables::Tables(_)
                    ),
                },
            }),
            other => Ok(other),
        }
    }

    /// Creates the new kind's table when it does not exist: a document table as for any
    /// kind, or a native table like the old one (its JSON columns registered first, so that
    /// a crash between the two steps never leaves a column read with the wrong meaning).
    async fn ensure_rename_target(&self, tables: &Tables, to: &str) -> Result<()> {
        match tables {
            Tables::Document => {
                if !self.document_exists(to).await? {
                    self.ensure_document_table(to).await?;
                }
                Ok(())
            }
            Tables::Native { to: Some(_), .. } => Ok(()),
            Tables::Native { from, to: None } => {
                let registry = self.qualified(JSON_COLUMNS_TABLE);
                for column in &from.regular {
                    let entry = format!("{to}.{}", column.name);
                    let cql = if column.json {
                        format!("INSERT INTO {registry} (name) VALUES (?)")
                    } else {
                        format!("DELETE FROM {registry} WHERE name = ?")
                    };
                    self.core
                        .execute(
                            &cql,
                            (entry.as_str(),),
                            Retry::Idempotent,
                            "registering the JSON columns of a renamed kind's table",
                        )
                        .await?;
                }
                let cql = from.create_like(&self.qualified(to));
                tracing::info!(from = %from.qualified, cql, "creating the table of a renamed kind");
                self.core.ddl(&cql).await?;
                let created = self.load_schema(to).await?;
                match created.as_ref().and_then(|t| from.difference(t)) {
                    None if created.is_some() => Ok(()),
                    diff => Err(Error::new(
                        ErrorKind::ConfigInvalid,
                        format!(
                            "cassandra: the table {} created for the rename does not have the \
                             columns of {} ({}): another process created it meanwhile; make \
                             them the same and run again",
                            self.qualified(to),
                            from.qualified,
                            diff.unwrap_or_else(|| "it is not in system_schema".to_owned())
                        ),
                    )),
                }
            }
        }
    }

    /// The key (of the old kind) of a source row, for reports.
    fn key_of(&self, plan: &Plan, row: &StoredRow) -> Result<Key> {
        match &plan.native {
            Some(schema) => {
                let entity = schema.entity(&plan.from, row.values()).map_err(|message| {
                    Error::new(
                        ErrorKind::InvalidData,
                        format!(
                            "a row of table {} cannot be read: {message}",
                            schema.qualified
                        ),
                    )
                })?;
                Ok(entity.key)
            }
            None => match (row.keys.first(), row.cells.get(1)) {
                (Some(CqlValue::Text(id)), Some(Some(CqlValue::Blob(doc)))) => {
                    Ok(decode_doc(&plan.from, id, doc)?.key)
                }
                _ => Err(Error::new(
                    ErrorKind::InvalidData,
                    format!(
                        "a row of table {} does not have tern's document layout",
                        self.qualified(&plan.from)
                    ),
                )),
            },
        }
    }

    /// The row of `table` with this key; read at serial consistency when `serial` (which
    /// completes a lightweight transaction left in progress: how an unknown outcome is
    /// resolved).
    async fn read_row(
        &self,
        plan: &Plan,
        table: &str,
        key: &[CqlValue],
        serial: bool,
    ) -> Result<Option<StoredRow>> {
        let cql = plan.shape.select_one(&self.qualified(table));
        let step = "rename kind: reading a row";
        let result = if serial {
            self.core
                .execute_serial_read(&cql, key.to_vec(), step)
                .await?
        } else {
            self.core
                .execute(&cql, key.to_vec(), Retry::Idempotent, step)
                .await?
        };
        rows_of::<Row>(result, "rename kind: reading a row")?
            .into_iter()
            .next()
            .map(|row| StoredRow::from_row(&plan.shape, table, row))
            .transpose()
    }

    /// `INSERT ... IF NOT EXISTS` of one row into the new table. Where the key is taken, the
    /// row there decides: identical to the source, the copy is there; else a collision.
    async fn copy_row(&self, plan: &Plan, row: &StoredRow) -> Result<Copied> {
        let cql = plan.shape.insert(&self.qualified(&plan.to_table));
        let mut attempt = 0;
        loop {
            let (there, unknown) = match self.insert(plan, &cql, row).await? {
                Insert::Applied => return Ok(Copied::Yes),
                Insert::Exists(Some(there)) => (Some(there), None),
                Insert::Exists(None) => (
                    self.read_row(plan, &plan.to_table, &row.keys, false)
                        .await?,
                    None,
                ),
                Insert::Unknown(err) => {
                    let there = self.read_row(plan, &plan.to_table, &row.keys, true).await?;
                    (there, Some(err))
                }
            };
            match (there, unknown) {
                (Some(there), _) if there.same_cells(row) => return Ok(Copied::Yes),
                (Some(_), _) => return Ok(Copied::Collision),
                // Surely not applied after an unknown outcome: the caller decides (the
                // engine resumes); tern repeats no failed request.
                (None, Some(err)) => return Err(err),
                // Taken and deleted again since (another writer): try again.
                (None, None) if attempt < TAKEN_AGAIN => attempt += 1,
                (None, None) => {
                    return Err(Error::new(
                        ErrorKind::Busy,
                        format!(
                            "cassandra: renaming kind {} to {}: a row of {} keeps being \
                             written and deleted under the new kind while it is copied; \
                             nothing was lost, run again",
                            plan.from, plan.to, plan.to
                        ),
                    )
                    .set_temporary());
                }
            }
        }
    }

    /// Runs the copy's `INSERT ... IF NOT EXISTS`, reading the row that took the key from the
    /// answer (Cassandra returns it with `[applied] = false`).
    async fn insert(&self, plan: &Plan, cql: &str, row: &StoredRow) -> Result<Insert> {
        let step = "rename kind: copying a row";
        let result = match self
            .core
            .execute(cql, row.values(), Retry::Conditional, step)
            .await
        {
            Ok(result) => result,
            Err(e) if e.is_temporary() => return Ok(Insert::Unknown(e.with_context("cql", cql))),
            Err(e) => return Err(e),
        };
        let bad = |message: &str| {
            Error::new(
                ErrorKind::Unexpected,
                format!("cassandra: {step}: {message}"),
            )
        };
        let rows = result
            .into_rows_result()
            .map_err(|e| bad("a conditional write answered no rows").with_driver_error(e))?;
        let answer = rows
            .maybe_first_row::<Row>()
            .map_err(|e| bad("cannot read the answer of a conditional write").with_driver_error(e))?
            .ok_or_else(|| bad("a conditional write answered an empty result"))?;
        match answer.columns.first() {
            Some(Some(CqlValue::Boolean(true))) => return Ok(Insert::Applied),
            Some(Some(CqlValue::Boolean(false))) => {}
            _ => {
                return Err(bad(
                    "the answer of a conditional write has no [applied] column",
                ));
            }
        }
        let specs = rows.column_specs();
        let mut cells = Vec::with_capacity(plan.shape.keys.len() + plan.shape.cells.len());
        for name in plan.shape.keys.iter().chain(&plan.shape.cells) {
            match specs.get_by_name(name) {
                Some((i, _)) => cells.push(answer.columns.get(i).cloned().flatten()),
                None => return Ok(Insert::Exists(None)),
            }
        }
        Ok(Insert::Exists(
            StoredRow::from_cells(&plan.shape, &plan.to_table, cells).ok(),
        ))
    }

    /// Deletes `row` from `table` if it still holds exactly these cells: whether it did. An
    /// unknown outcome is resolved by a serial read: gone, deleted; changed, not deleted;
    /// unchanged, the error (tern repeats no failed request: the engine resumes).
    async fn delete_exact(&self, plan: &Plan, table: &str, row: &StoredRow) -> Result<bool> {
        let cql = plan.shape.delete_exact(&self.qualified(table));
        let values: Vec<Option<CqlValue>> = if plan.shape.cells.is_empty() {
            row.keys.iter().cloned().map(Some).collect()
        } else {
            row.values()
        };
        match self
            .core
            .execute_lwt(&cql, values, "rename kind: deleting a moved row")
            .await?
        {
            LwtOutcome::Applied(deleted) => Ok(deleted),
            LwtOutcome::Unknown(err) => match self.read_row(plan, table, &row.keys, true).await? {
                None => Ok(true),
                Some(now) if now.same_cells(row) => Err(err),
                Some(_) => Ok(false),
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::cql_type::CqlType;
    use crate::schema::SchemaRow;

    fn schema(rows: &[(&str, &str, &CqlType)]) -> TableSchema {
        let rows: Vec<SchemaRow> = rows
            .iter()
            .enumerate()
            .map(|(i, (c, kind, ty))| SchemaRow {
                column: (*c).to_owned(),
                kind: (*kind).to_owned(),
                position: i32::try_from(i).unwrap(),
                ty: (*ty).clone(),
                descending: *kind == "clustering" && *c == "seq",
            })
            .collect();
        TableSchema::from_rows("ks", "ev", &rows, &HashSet::new()).unwrap()
    }

    #[test]
    fn the_statements_of_the_document_layout() {
        let s = Shape::document();
        assert_eq!(
            s.insert("ks.b"),
            "INSERT INTO ks.b (id, tern_version, doc) VALUES (?, ?, ?) IF NOT EXISTS"
        );
        assert_eq!(
            s.delete_exact("ks.a"),
            "DELETE FROM ks.a WHERE id = ? IF tern_version = ? AND doc = ?"
        );
        assert_eq!(
            s.select_one("ks.a"),
            "SELECT id, tern_version, doc FROM ks.a WHERE id = ?"
        );
        let q = s.queries("ks.a");
        assert_eq!(q.all, "SELECT id, tern_version, doc FROM ks.a");
        assert_eq!(
            q.from_token,
            "SELECT id, tern_version, doc FROM ks.a WHERE token(id) >= ?"
        );
        assert_eq!(q.lookup, "SELECT id FROM ks.a WHERE id = ?");
    }

    #[test]
    fn the_statements_of_a_native_table() {
        let t = schema(&[
            ("device", "partition_key", &CqlType::Text),
            ("day", "partition_key", &CqlType::BigInt),
            ("seq", "clustering", &CqlType::BigInt),
            ("v", "regular", &CqlType::Text),
            ("Order", "regular", &CqlType::Int),
            ("tern_version", "regular", &CqlType::BigInt),
        ]);
        let s = Shape::native(&t);
        assert_eq!(
            s.delete_exact("ks.b"),
            "DELETE FROM ks.b WHERE device = ? AND day = ? AND seq = ? \
             IF \"Order\" = ? AND v = ? AND tern_version = ?"
        );
        assert_eq!(
            s.queries("ks.a").from_token,
            "SELECT device, day, seq, \"Order\", v, tern_version FROM ks.a \
             WHERE token(device, day) >= ?"
        );
        assert_eq!(
            t.create_like("ks.b"),
            "CREATE TABLE IF NOT EXISTS ks.b (device text, day bigint, seq bigint, \
             \"Order\" int, v text, tern_version bigint, PRIMARY KEY ((device, day), seq)) \
             WITH CLUSTERING ORDER BY (seq DESC)"
        );
        let keyonly = schema(&[("id", "partition_key", &CqlType::Text)]);
        let s = Shape::native(&keyonly);
        assert_eq!(
            s.delete_exact("ks.a"),
            "DELETE FROM ks.a WHERE id = ? IF EXISTS"
        );
        assert_eq!(
            keyonly.create_like("ks.b"),
            "CREATE TABLE IF NOT EXISTS ks.b (id text, PRIMARY KEY (id))"
        );
    }

    #[test]
    fn schemas_must_match_column_for_column() {
        let id = ("id", "partition_key", &CqlType::Text);
        let v = ("v", "regular", &CqlType::Text);
        let version = ("tern_version", "regular", &CqlType::BigInt);
        let a = schema(&[id, v, version]);
        assert_eq!(a.difference(&a.clone()), None);
        for (columns, difference) in [
            (
                vec![id, ("v", "regular", &CqlType::BigInt), version],
                "column v text vs v bigint",
            ),
            (vec![id, v], "column tern_version bigint is missing"),
            (
                vec![id, v, ("w", "regular", &CqlType::Text), version],
                "extra column w text",
            ),
            (
                vec![("id", "partition_key", &CqlType::BigInt), v, version],
                "partition key (id text) vs (id bigint)",
            ),
        ] {
            assert_eq!(a.difference(&schema(&columns)).unwrap(), difference);
        }
    }

    #[test]
    fn cells_compare_as_stored() {
        let row = |cells: Vec<Option<CqlValue>>| StoredRow {
            keys: vec![CqlValue::Text("k".into())],
            cells,
        };
        let nan = f64::from_bits(0x7ff8_0000_0000_0001);
        let a = row(vec![
            Some(CqlValue::Double(nan)),
            None,
            Some(CqlValue::List(vec![CqlValue::Float(-0.0)])),
        ]);
        assert!(a.same_cells(&a.clone()), "NaN equals itself, bit for bit");
        let b = row(vec![
            Some(CqlValue::Double(nan)),
            None,
            Some(CqlValue::List(vec![CqlValue::Float(0.0)])),
        ]);
        assert!(!a.same_cells(&b), "-0.0 is not 0.0");
        let c = row(vec![
            Some(CqlValue::Double(nan)),
            Some(CqlValue::Int(1)),
            None,
        ]);
        assert!(!a.same_cells(&c), "an empty cell is not a value");
    }

    #[test]
    fn names_that_cannot_be_tables_are_config_errors() {
        for bad in ["", "Bad-Kind", "tern_meta", "tern_kinds"] {
            assert_eq!(
                rename_table(bad).unwrap_err().kind(),
                ErrorKind::ConfigInvalid,
                "{bad:?}"
            );
        }
        assert_eq!(rename_table("post").unwrap(), "post");
    }
}
