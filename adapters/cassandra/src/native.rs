//! The native layout at run time: table schemas read from `system_schema`, reads and writes
//! of native rows, and the DDL of the evolution language (`ALTER TABLE ... ADD` before a
//! stage, `ALTER TABLE ... DROP` of emptied columns after the census).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use scylla::response::PagingState;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};
use tern_core::model::{Entity, Key, Value};
use tern_core::store::{Error, ErrorKind, Result, SchemaChange, Write, WriteOutcome};

use crate::config::NativeTables;
use crate::core::{
    CassStore, JSON_COLUMNS_TABLE, Retry, WriteMode, driver_error, rows_of, table_of,
};
use crate::cql_type::CqlType;
use crate::ddl::{columns_to_add, columns_to_check};
use crate::schema::{SchemaRow, TableSchema, VERSION_COLUMN, ident};
use crate::serial::SerialPut;
use crate::statement::Call;

/// An entity as a native table reads it back: `null` properties are empty cells, i.e. absent.
fn as_stored(entity: &Entity) -> Entity {
    let mut e = entity.clone();
    e.value.retain(|_, v| !matches!(v, Value::Null));
    e
}

fn invalid(schema: &TableSchema, key: &Key, message: String) -> Error {
    Error::new(
        ErrorKind::InvalidData,
        format!(
            "cannot write {key} to table {}: {message}",
            schema.qualified
        ),
    )
    .with_context("kind", key.kind.clone())
}

/// A row of `system_schema.columns`.
struct ColumnRow {
    table: String,
    column: String,
    /// `partition_key`, `clustering`, `regular` or `static`.
    kind: String,
    position: i32,
    /// The type as the server spells it (`frozen<list<int>>`).
    type_text: String,
    /// `clustering_order` (`asc`, `desc` or `none`).
    order: Option<String>,
}

impl CassStore {
    pub(crate) fn cached_schema(&self, table: &str) -> Option<Arc<TableSchema>> {
        self.schemas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(table)
            .cloned()
    }

    /// Every column of every table of the keyspace, from `system_schema.columns`.
    async fn schema_rows(&self) -> Result<Vec<ColumnRow>> {
        let step = "reading system_schema.columns";
        let result = self
            .core
            .execute(
                "SELECT table_name, column_name, kind, position, type, clustering_order \
                 FROM system_schema.columns WHERE keyspace_name = ?",
                (self.ks(),),
                Retry::Idempotent,
                step,
            )
            .await?;
        type Tuple = (String, String, String, i32, String, Option<String>);
        Ok(rows_of::<Tuple>(result, step)?
            .into_iter()
            .map(
                |(table, column, kind, position, type_text, order)| ColumnRow {
                    table,
                    column,
                    kind,
                    position,
                    type_text,
                    order,
                },
            )
            .collect())
    }

    /// The columns of `table` with their types: the driver's, from the result metadata of a
    /// prepared `SELECT` of every column (prepared anew, not from the statement cache, whose
    /// statement would keep the types of its first preparation), made tern's by
    /// [`CqlType::from_driver`].
    ///
    /// # Errors
    /// `Unsupported` naming a column of a type tern does not map; a failed preparation (a
    /// column dropped meanwhile).
    async fn typed_columns(&self, table: &str, rows: Vec<ColumnRow>) -> Result<Vec<SchemaRow>> {
        let names: Vec<String> = rows.iter().map(|r| ident(&r.column)).collect();
        let cql = format!("SELECT {} FROM {}.{table}", names.join(", "), self.ks());
        let prepared = self.core.prepare_fresh(&cql).await?;
        let specs = prepared.get_current_result_set_col_specs();
        let specs = specs.get();
        rows.into_iter()
            .map(|row| {
                let (_, spec) = specs.get_by_name(&row.column).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Unexpected,
                        format!(
                            "cassandra: {cql} was prepared without column {}",
                            row.column
                        ),
                    )
                })?;
                let ty = CqlType::from_driver(spec.typ(), &row.type_text)
                    .map_err(|e| self.unmappable(table, &format!("column {}: {e}", row.column)))?;
                Ok(SchemaRow {
                    descending: row.order.is_some_and(|o| o.eq_ignore_ascii_case("desc")),
                    column: row.column,
                    kind: row.kind,
                    position: row.position,
                    ty,
                })
            })
            .collect()
    }

    /// The JSON text columns (`table.column`) registered in `tern_json_columns`.
    async fn json_columns(&self) -> Result<HashSet<String>> {
        let result = self
            .core
            .execute(
                &format!("SELECT name FROM {}.{JSON_COLUMNS_TABLE}", self.ks()),
                (),
                Retry::Idempotent,
                "reading the JSON column registry",
            )
            .await?;
        Ok(
            rows_of::<(String,)>(result, "reading the JSON column registry")?
                .into_iter()
                .map(|(n,)| n)
                .collect(),
        )
    }

    /// `Unsupported`: `table` cannot be a native kind, for `reason`.
    fn unmappable(&self, table: &str, reason: &str) -> Error {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "table {}.{table} cannot be mapped to entities: {reason}",
                self.ks()
            ),
        )
    }

    /// Reads the schema of a native table from `system_schema` (and caches it); `None` when
    /// the table does not exist.
    pub(crate) async fn load_schema(&self, table: &str) -> Result<Option<Arc<TableSchema>>> {
        let rows: Vec<ColumnRow> = self
            .schema_rows()
            .await?
            .into_iter()
            .filter(|r| r.table == table)
            .collect();
        if rows.is_empty() {
            self.forget_schema(table);
            return Ok(None);
        }
        let rows = self.typed_columns(table, rows).await?;
        let prefix = format!("{table}.");
        let json: HashSet<String> = self
            .json_columns()
            .await?
            .into_iter()
            .filter_map(|n| n.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        let schema = TableSchema::from_rows(self.ks(), table, &rows, &json)
            .map_err(|message| self.unmappable(table, &message))?;
        let schema = Arc::new(schema);
        self.schemas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(table.to_owned(), Arc::clone(&schema));
        Ok(Some(schema))
    }

    fn forget_schema(&self, table: &str) {
        self.schemas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(table);
    }

    /// The native tables that may hold kinds (for `kinds()`): those named by `native=`, or
    /// with `native=*` every table of the keyspace tern did not create for itself.
    pub(crate) async fn native_tables(&self) -> Result<Vec<String>> {
        match &self.core.config.native {
            NativeTables::None => Ok(Vec::new()),
            NativeTables::Tables(tables) => {
                let existing: BTreeSet<String> = self
                    .schema_rows()
                    .await?
                    .into_iter()
                    .map(|r| r.table)
                    .collect();
                Ok(tables
                    .iter()
                    .filter(|t| existing.contains(*t))
                    .cloned()
                    .collect())
            }
            NativeTables::All => Ok(self
                .schema_rows()
                .await?
                .into_iter()
                .map(|r| r.table)
                .filter(|t| table_of(t).is_ok())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()),
        }
    }

    /// The entity with this key in a native table.
    pub(crate) async fn native_get(
        &self,
        schema: &TableSchema,
        key: &Key,
        serial: bool,
    ) -> Result<Option<Entity>> {
        let keys = match schema.key_values(&key.id) {
            Ok(k) => k,
            // An id that cannot be a key of this table names no row.
            Err(_) => return Ok(None),
        };
        let cql = schema.select_one();
        let result = if serial {
            self.core.execute_serial_read(&cql, keys, "get").await?
        } else {
            self.core
                .execute(&cql, keys, Retry::Idempotent, "get")
                .await?
        };
        match rows_of::<Row>(result, "get")?.into_iter().next() {
            Some(row) => schema
                .entity(&key.kind, row.columns)
                .map(Some)
                .map_err(|m| invalid(schema, key, m)),
            None => Ok(None),
        }
    }

    /// The bound values of an entity's row (keys, then regular columns and version), reading
    /// the schema again once when a property has no column (another process may have added it).
    async fn native_row(
        &self,
        schema: &Arc<TableSchema>,
        entity: &Entity,
    ) -> Result<(Arc<TableSchema>, Vec<CqlValue>, Vec<Option<CqlValue>>)> {
        let attempt = |schema: &TableSchema| {
            let keys = schema.key_values(&entity.key.id)?;
            let row = schema.row_values(entity)?;
            Ok::<_, String>((keys, row))
        };
        match attempt(schema) {
            Ok((keys, row)) => Ok((Arc::clone(schema), keys, row)),
            Err(first) => {
                let fresh = self.load_schema(&schema.table).await?;
                match fresh {
                    Some(fresh) if *fresh != **schema => match attempt(&fresh) {
                        Ok((keys, row)) => Ok((fresh, keys, row)),
                        Err(message) => Err(invalid(&fresh, &entity.key, message)),
                    },
                    _ => Err(invalid(schema, &entity.key, first)),
                }
            }
        }
    }

    /// The cells of the row with these key values, as stored (keys, regular columns, version),
    /// read at serial consistency.
    async fn native_cells(
        &self,
        schema: &TableSchema,
        keys: &[CqlValue],
    ) -> Result<Option<Vec<Option<CqlValue>>>> {
        let result = self
            .core
            .execute_serial_read(&schema.select_one(), keys, "replace")
            .await?;
        Ok(rows_of::<Row>(result, "replace")?
            .into_iter()
            .next()
            .map(|row| row.columns))
    }

    /// One write to a native table.
    pub(crate) async fn native_write(
        &self,
        schema: &Arc<TableSchema>,
        write: Write,
        mode: WriteMode,
    ) -> Result<WriteOutcome> {
        match write {
            Write::Put(e) if mode == WriteMode::Serial => {
                let (schema, keys, row) = self.native_row(schema, &e).await?;
                let update = schema.update_if_exists().map(|cql| {
                    let mut values = row.clone();
                    values.extend(keys.iter().cloned().map(Some));
                    Call { cql, values }
                });
                let mut values: Vec<Option<CqlValue>> = keys.into_iter().map(Some).collect();
                values.extend(row);
                let put = SerialPut {
                    update,
                    insert: Call {
                        cql: schema.insert(true),
                        values,
                    },
                    entity: as_stored(&e),
                };
                self.put_serial(put).await
            }
            Write::Delete(key) if mode == WriteMode::Serial => {
                let Ok(keys) = schema.key_values(&key.id) else {
                    // An id that cannot be a key of this table names no row.
                    return Ok(WriteOutcome::Applied);
                };
                let call = Call {
                    cql: schema.delete_if_exists(),
                    values: keys.into_iter().map(Some).collect(),
                };
                self.delete_serial(&key, call).await
            }
            Write::Put(e) => {
                let (schema, keys, row) = self.native_row(schema, &e).await?;
                let mut values: Vec<Option<CqlValue>> = keys.into_iter().map(Some).collect();
                values.extend(row);
                self.core
                    .execute(&schema.insert(false), values, Retry::Idempotent, "put")
                    .await?;
                Ok(WriteOutcome::Applied)
            }
            Write::Insert(e) => {
                let (schema, keys, row) = self.native_row(schema, &e).await?;
                let mut values: Vec<Option<CqlValue>> = keys.into_iter().map(Some).collect();
                values.extend(row);
                let call = Call {
                    cql: schema.insert(true),
                    values,
                };
                self.cas_entity(&call, "insert", None, &as_stored(&e)).await
            }
            Write::Replace { expected, new } => {
                let (schema, keys, row) = self.native_row(schema, &new).await?;
                let (_, _, old_row) = self.native_row(&schema, &expected).await?;
                let cql = schema.update_if().ok_or_else(|| {
                    Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "table {} has no column besides its key: tern needs at least its \
                             {VERSION_COLUMN} column to compare and set",
                            schema.qualified
                        ),
                    )
                })?;
                let (expected, new) = (as_stored(&expected), as_stored(&new));
                let mut values = row.clone();
                values.extend(keys.iter().cloned().map(Some));
                values.extend(old_row);
                let call = Call {
                    cql: cql.clone(),
                    values,
                };
                let outcome = self
                    .cas_entity(&call, "replace", Some(&expected), &new)
                    .await?;
                if outcome == WriteOutcome::Applied || !schema.regular.iter().any(|c| c.json) {
                    return Ok(outcome);
                }
                // A JSON column compares by value: another program may have written the same
                // value with other spacing or member order than tern's encoding. Where the
                // stored row is the expected entity, compare against its own cells.
                let Some(stored) = self.native_cells(&schema, &keys).await? else {
                    return Ok(outcome);
                };
                let entity = schema
                    .entity(&expected.key.kind, stored.clone())
                    .map_err(|m| invalid(&schema, &expected.key, m))?;
                if entity != expected {
                    return Ok(outcome);
                }
                let mut values = row;
                values.extend(keys.into_iter().map(Some));
                values.extend(stored.into_iter().skip(schema.keys().count()));
                self.cas_entity(&Call { cql, values }, "replace", Some(&expected), &new)
                    .await
            }
            Write::Delete(key) => {
                let Ok(keys) = schema.key_values(&key.id) else {
                    // An id that cannot be a key of this table names no row.
                    return Ok(WriteOutcome::Applied);
                };
                self.core
                    .execute(&schema.delete(), keys, Retry::Idempotent, "delete")
                    .await?;
                Ok(WriteOutcome::Applied)
            }
        }
    }

    /// The schema of `kind` if it is a native table (read again from `system_schema`).
    async fn fresh_native(&self, kind: &str) -> Result<Option<Arc<TableSchema>>> {
        let Ok(table) = table_of(kind) else {
            return Ok(None);
        };
        if !self.core.config.native.names(table) || self.document_exists(table).await? {
            return Ok(None);
        }
        self.load_schema(table).await
    }

    /// Adds a column (registering or unregistering it as a JSON column first, so that a crash
    /// between the two steps never leaves a column read with the wrong meaning).
    async fn add_column(
        &self,
        schema: &TableSchema,
        name: &str,
        ty: &CqlType,
        json: bool,
    ) -> Result<()> {
        let registry = format!("{}.{JSON_COLUMNS_TABLE}", self.ks());
        let entry = format!("{}.{name}", schema.table);
        let (registration, step) = if json {
            (
                format!("INSERT INTO {registry} (name) VALUES (?)"),
                "registering a JSON column",
            )
        } else {
            (
                format!("DELETE FROM {registry} WHERE name = ?"),
                "registering a column",
            )
        };
        self.core
            .execute(&registration, (entry.as_str(),), Retry::Idempotent, step)
            .await?;
        let cql = schema.add_column(name, ty);
        tracing::info!(table = %schema.qualified, column = name, %ty, json, "adding a column");
        if let Err(e) = self.core.ddl(&cql).await {
            // Added meanwhile (another process, a stale cache)? Then all is well.
            let fresh = self.load_schema(&schema.table).await?;
            let added = name == VERSION_COLUMN && fresh.as_ref().is_some_and(|s| s.has_version)
                || fresh.as_ref().is_some_and(|s| s.column(name).is_some());
            if !added {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The native tables among the kinds `changes` mention, read again from `system_schema`.
    async fn native_schemas(
        &self,
        changes: &[SchemaChange],
    ) -> Result<BTreeMap<String, Arc<TableSchema>>> {
        let mut kinds = BTreeSet::new();
        for change in changes {
            match change {
                SchemaChange::Versioned { kind }
                | SchemaChange::Add { kind, .. }
                | SchemaChange::Rename { kind, .. }
                | SchemaChange::Remove { kind, .. } => {
                    kinds.insert(kind.clone());
                }
                SchemaChange::Transfer { source, target, .. } => {
                    kinds.insert(source.clone());
                    kinds.insert(target.clone());
                }
            }
        }
        let mut schemas = BTreeMap::new();
        for kind in kinds {
            if let Some(schema) = self.fresh_native(&kind).await? {
                schemas.insert(kind, schema);
            }
        }
        Ok(schemas)
    }

    /// Before a stage: the columns it writes exist (`ALTER TABLE ... ADD`, see
    /// [`columns_to_add`]). Schema agreement is awaited after each change (`CassCore::ddl`).
    pub(crate) async fn native_prepare_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        if self.core.config.native == NativeTables::None {
            return Ok(());
        }
        let schemas = self.native_schemas(changes).await?;
        let adds = columns_to_add(changes, &schemas);
        for add in &adds {
            if let Some(schema) = schemas.get(&add.table) {
                self.add_column(schema, &add.name, &add.ty, add.json)
                    .await?;
            }
        }
        let touched: BTreeSet<&String> = adds.iter().map(|a| &a.table).collect();
        for table in touched {
            self.load_schema(table).await?;
        }
        Ok(())
    }

    /// After the census: drops the columns that `delete`, `rename` and `move` emptied, once a
    /// sweep of the table finds no row still holding a value in them (`drop_columns=false`
    /// keeps them). A column that still holds values is kept and logged.
    pub(crate) async fn native_finish_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        if self.core.config.native == NativeTables::None || !self.core.config.drop_columns {
            return Ok(());
        }
        let schemas = self.native_schemas(changes).await?;
        for (table, candidates) in columns_to_check(changes, &schemas) {
            let Some(schema) = schemas.get(&table) else {
                continue;
            };
            let holding = self.columns_with_values(schema, &candidates).await?;
            for name in &candidates {
                if holding.contains(name) {
                    tracing::info!(table = %schema.qualified, column = %name, "column still holds values; not dropped");
                    continue;
                }
                tracing::info!(table = %schema.qualified, column = %name, "dropping an emptied column");
                self.core.ddl(&schema.drop_column(name)).await?;
                self.core
                    .execute(
                        &format!(
                            "DELETE FROM {}.{JSON_COLUMNS_TABLE} WHERE name = ?",
                            self.ks()
                        ),
                        (format!("{table}.{name}"),),
                        Retry::Idempotent,
                        "unregistering a column",
                    )
                    .await?;
            }
            self.load_schema(&table).await?;
        }
        Ok(())
    }

    /// Which of `names` hold a value in at least one row (a paged sweep of those columns).
    async fn columns_with_values(
        &self,
        schema: &TableSchema,
        names: &[String],
    ) -> Result<HashSet<String>> {
        let mut statement = self.core.prepare(&schema.select_columns(names)).await?;
        statement.set_page_size(5000);
        statement.set_is_idempotent(true);
        let step = "checking emptied columns";
        let mut holding = HashSet::new();
        self.each_page(&statement, step, |result| {
            for row in rows_of::<Row>(result, step)? {
                for (name, cell) in names.iter().zip(row.columns) {
                    if cell.is_some() {
                        holding.insert(name.clone());
                    }
                }
            }
            // Every column holds a value: no need to read further.
            Ok(holding.len() < names.len())
        })
        .await?;
        Ok(holding)
    }

    /// Runs the prepared `statement` (no bound values) page by page, handing
    /// each page to `on_page` until it answers `false` or the pages end.
    async fn each_page(
        &self,
        statement: &PreparedStatement,
        step: &'static str,
        mut on_page: impl FnMut(QueryResult) -> Result<bool>,
    ) -> Result<()> {
        let mut paging = PagingState::start();
        loop {
            let (result, next) = self
                .core
                .execute_page(statement, (), paging)
                .await
                .map_err(|e| driver_error(e, step))?;
            if !on_page(result)? {
                return Ok(());
            }
            match next.into_paging_control_flow() {
                std::ops::ControlFlow::Continue(state) => paging = state,
                std::ops::ControlFlow::Break(()) => return Ok(()),
            }
        }
    }
}
