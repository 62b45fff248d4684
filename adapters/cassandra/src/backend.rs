//! [`CassStore`]: the [`Store`] implementation, its capability and its tables.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use scylla::response::{PagingState, PagingStateResponse};
use tern_core::model::Entity;
use tern_core::model::Key;
use tern_core::store::{
    Capability, Cursor, Error, ErrorKind, MetaCas, MetaEntry, Result, ScanPage, ScanRequest, Store,
    StoreInfo, Write, WriteOutcome, check_writes, local_now_millis,
};

use crate::config::{CASSANDRA_SCHEME, CassConfig, is_plain_identifier};
use crate::core::{
    CassCore, Retry, decode_doc, encode_doc, execution_error, id_text, is_invalid_request,
};

/// The metadata table (never a kind).
pub(crate) const META_TABLE: &str = "tern_meta";
/// The registry of the kinds tern created tables for (never a kind).
pub(crate) const KINDS_TABLE: &str = "tern_kinds";
/// The prefix of the cursors this adapter makes (format version 1): `c1.<hex of the paging state>`.
const CURSOR_PREFIX: &str = "c1.";
/// The largest page a scan asks for.
const MAX_PAGE: usize = 5000;
/// The most rows one scan call reads while looking for entities that pass its filter.
const MAX_ROWS_PER_CALL: usize = 20_000;

/// A Cassandra or ScyllaDB keyspace as a tern store. See the crate docs for the mapping.
#[derive(Debug, Clone)]
pub struct CassStore {
    core: Arc<CassCore>,
    /// Tables known to exist (created or found in the registry by this process).
    tables: Arc<Mutex<HashSet<String>>>,
    server_clock: bool,
}

/// The table of `kind`.
fn table_of(kind: &str) -> Result<&str> {
    if is_plain_identifier(kind) && kind != META_TABLE && kind != KINDS_TABLE {
        Ok(kind)
    } else {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "kind {kind:?} cannot be a Cassandra table: use a lowercase letter followed by \
                 lowercase letters, digits or _ (at most 48), other than {META_TABLE} and {KINDS_TABLE}"
            ),
        ))
    }
}

fn bad_cursor(cursor: &Cursor) -> Error {
    Error::new(
        ErrorKind::InvalidCursor,
        format!("cursor {:?} is not one this store made", cursor.0),
    )
}

impl CassStore {
    /// Connects, creates the keyspace and tern's own tables when missing, and checks the clock.
    ///
    /// # Errors
    /// An unreachable cluster ([`ErrorKind::Unavailable`]), an invalid URL
    /// ([`ErrorKind::ConfigInvalid`]), or a refused schema change.
    pub async fn open(config: CassConfig) -> Result<CassStore> {
        let core = CassCore::connect(config).await?;
        let ks = core.config.keyspace.clone();
        core.ddl(&format!(
            "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {}",
            core.config.replication
        ))
        .await?;
        core.ddl(&format!(
            "CREATE TABLE IF NOT EXISTS {ks}.{META_TABLE} \
             (name text PRIMARY KEY, revision bigint, value text)"
        ))
        .await?;
        core.ddl(&format!(
            "CREATE TABLE IF NOT EXISTS {ks}.{KINDS_TABLE} (kind text PRIMARY KEY)"
        ))
        .await?;
        let mut store = CassStore {
            core: Arc::new(core),
            tables: Arc::new(Mutex::new(HashSet::new())),
            server_clock: false,
        };
        store.server_clock = store.server_now().await.is_ok();
        Ok(store)
    }

    fn ks(&self) -> &str {
        &self.core.config.keyspace
    }

    fn is_known(&self, table: &str) -> bool {
        self.tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(table)
    }

    fn remember(&self, table: &str) {
        self.tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(table.to_owned());
    }

    /// Whether the table of a kind exists (tern registers a table after creating it).
    async fn table_exists(&self, table: &str) -> Result<bool> {
        if self.is_known(table) {
            return Ok(true);
        }
        let result = self
            .core
            .execute(
                &format!(
                    "SELECT kind FROM {}.{KINDS_TABLE} WHERE kind = ?",
                    self.ks()
                ),
                (table,),
                Retry::Idempotent,
                "reading the kind registry",
            )
            .await?;
        let found = result
            .into_rows_result()
            .map(|r| r.rows_num() > 0)
            .unwrap_or(false);
        if found {
            self.remember(table);
        }
        Ok(found)
    }

    /// Creates the table of a kind when missing: `(id text PRIMARY KEY, _v bigint, doc blob)`.
    async fn ensure_table(&self, table: &str) -> Result<()> {
        if self.table_exists(table).await? {
            return Ok(());
        }
        let ks = self.ks();
        self.core
            .ddl(&format!(
                "CREATE TABLE IF NOT EXISTS {ks}.{table} (id text PRIMARY KEY, _v bigint, doc blob)"
            ))
            .await?;
        self.core
            .execute(
                &format!("INSERT INTO {ks}.{KINDS_TABLE} (kind) VALUES (?)"),
                (table,),
                Retry::Idempotent,
                "registering a kind",
            )
            .await?;
        self.remember(table);
        Ok(())
    }

    async fn server_now(&self) -> Result<i64> {
        let result = self
            .core
            .execute(
                "SELECT toUnixTimestamp(now()) FROM system.local",
                (),
                Retry::Idempotent,
                "reading the server clock",
            )
            .await?;
        let rows = result.into_rows_result().map_err(|e| {
            Error::new(ErrorKind::Unexpected, "cassandra: no clock in system.local").with_source(e)
        })?;
        let (ts,) = rows
            .first_row::<(scylla::value::CqlTimestamp,)>()
            .map_err(|e| {
                Error::new(ErrorKind::Unexpected, "cassandra: no clock in system.local")
                    .with_source(e)
            })?;
        Ok(ts.0)
    }

    /// One server page of a scan, retried on temporary failures. A paging state the server
    /// refuses becomes [`ErrorKind::InvalidCursor`] (the engine then restarts the scan).
    async fn scan_page(
        &self,
        statement: &scylla::statement::prepared::PreparedStatement,
        paging_state: PagingState,
        from_cursor: bool,
        kind: &str,
    ) -> Result<(
        scylla::response::query_result::QueryResult,
        PagingStateResponse,
    )> {
        let mut attempt = 0u32;
        loop {
            match self
                .core
                .session
                .execute_single_page(statement, (), paging_state.clone())
                .await
            {
                Ok(answer) => return Ok(answer),
                Err(e) if from_cursor && is_invalid_request(&e) => {
                    // The cluster no longer accepts this paging state (another driver or
                    // protocol version, a changed topology): the engine restarts the scan.
                    return Err(Error::new(
                        ErrorKind::InvalidCursor,
                        format!(
                            "cassandra: the paging state of this cursor is no longer valid for {kind}"
                        ),
                    )
                    .with_source(e));
                }
                Err(e) => {
                    let err = execution_error(e, "scan").with_context("kind", kind);
                    if !err.is_temporary() || attempt >= 4 {
                        return Err(err);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn write_one(&self, write: Write) -> Result<WriteOutcome> {
        let ks = self.ks();
        let applied = |ok: bool| {
            if ok {
                WriteOutcome::Applied
            } else {
                WriteOutcome::Conflict
            }
        };
        match write {
            Write::Put(e) => {
                let table = table_of(&e.key.kind)?;
                let doc = encode_doc(&e)?;
                self.core
                    .execute(
                        &format!("INSERT INTO {ks}.{table} (id, _v, doc) VALUES (?, ?, ?)"),
                        (id_text(&e.key.id), version(&e)?, doc),
                        Retry::Idempotent,
                        "put",
                    )
                    .await?;
                Ok(WriteOutcome::Applied)
            }
            Write::Insert(e) => {
                let table = table_of(&e.key.kind)?;
                let doc = encode_doc(&e)?;
                let ok = self
                    .core
                    .execute_lwt(
                        &format!(
                            "INSERT INTO {ks}.{table} (id, _v, doc) VALUES (?, ?, ?) IF NOT EXISTS"
                        ),
                        (id_text(&e.key.id), version(&e)?, doc),
                        "insert",
                    )
                    .await?;
                Ok(applied(ok))
            }
            Write::Replace { expected, new } => {
                let table = table_of(&new.key.kind)?;
                let old_doc = encode_doc(&expected)?;
                let doc = encode_doc(&new)?;
                let ok = self
                    .core
                    .execute_lwt(
                        &format!(
                            "UPDATE {ks}.{table} SET _v = ?, doc = ? WHERE id = ? \
                             IF _v = ? AND doc = ?"
                        ),
                        (
                            version(&new)?,
                            doc,
                            id_text(&new.key.id),
                            version(&expected)?,
                            old_doc,
                        ),
                        "replace",
                    )
                    .await?;
                Ok(applied(ok))
            }
            Write::Delete(key) => {
                let table = table_of(&key.kind)?;
                if !self.table_exists(table).await? {
                    return Ok(WriteOutcome::Applied);
                }
                self.core
                    .execute(
                        &format!("DELETE FROM {ks}.{table} WHERE id = ?"),
                        (id_text(&key.id),),
                        Retry::Idempotent,
                        "delete",
                    )
                    .await?;
                Ok(WriteOutcome::Applied)
            }
        }
    }
}

/// The `_v` column of an entity.
fn version(e: &Entity) -> Result<i64> {
    i64::try_from(e.version).map_err(|_| {
        Error::new(
            ErrorKind::InvalidData,
            format!("version {} of {} exceeds a bigint", e.version, e.key),
        )
    })
}

#[async_trait]
impl Store for CassStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: CASSANDRA_SCHEME,
            location: self.core.config.shown.clone(),
        }
    }

    fn capability(&self) -> Capability {
        Capability {
            scan_filter: false,
            scan_ordered: false,
            cas_compares_value: true,
            update_pushdown: false,
            transactions: false,
            server_clock: self.server_clock,
            write_batch_max: None,
            rename_kind: false,
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        let ks = self.ks();
        let result = self
            .core
            .execute(
                &format!("SELECT kind FROM {ks}.{KINDS_TABLE}"),
                (),
                Retry::Idempotent,
                "listing kinds",
            )
            .await?;
        let registered: Vec<String> = rows_of::<(String,)>(result, "listing kinds")?
            .into_iter()
            .map(|(k,)| k)
            .collect();
        let mut kinds = Vec::new();
        for kind in registered {
            let result = self
                .core
                .execute(
                    &format!("SELECT id FROM {ks}.{kind} LIMIT 1"),
                    (),
                    Retry::Idempotent,
                    "listing kinds",
                )
                .await?;
            if result.into_rows_result().is_ok_and(|r| r.rows_num() > 0) {
                kinds.push(kind);
            }
        }
        kinds.sort();
        kinds.dedup();
        Ok(kinds)
    }

    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        let table = table_of(kind)?;
        let mut paging_state = match &request.cursor {
            None => PagingState::start(),
            Some(c) => {
                let bytes =
                    c.0.strip_prefix(CURSOR_PREFIX)
                        .and_then(|h| hex::decode(h).ok())
                        .ok_or_else(|| bad_cursor(c))?;
                PagingState::new_from_raw_bytes(bytes)
            }
        };
        if !self.table_exists(table).await? {
            return Ok(ScanPage::default());
        }
        let mut statement = self
            .core
            .prepare(&format!("SELECT id, doc FROM {}.{table}", self.ks()))
            .await?;
        statement.set_is_idempotent(true);
        let limit = request.limit.clamp(1, MAX_PAGE);
        // Server pages of `limit` rows. While a filter leaves a page empty, the next page is
        // fetched in the same call and grows (x4, up to MAX_PAGE rows), so a sparse filter
        // (a census sweep) costs few round trips; the limit is then a hint that a page may
        // exceed. At most MAX_ROWS_PER_CALL rows are read per call.
        let mut page_size = limit;
        let mut rows_read = 0usize;
        let mut entities = Vec::new();
        loop {
            statement.set_page_size(i32::try_from(page_size).unwrap_or(5000));
            let (result, next) = self
                .scan_page(&statement, paging_state, request.cursor.is_some(), kind)
                .await?;
            let rows = rows_of::<(String, Vec<u8>)>(result, "scan")?;
            rows_read += rows.len();
            for (id, doc) in rows {
                let entity = decode_doc(kind, &id, &doc)?;
                if request.filter.matches(&entity) {
                    entities.push(entity);
                }
            }
            let state = match next {
                PagingStateResponse::HasMorePages { state } => state,
                PagingStateResponse::NoMorePages => {
                    return Ok(ScanPage {
                        entities,
                        cursor: None,
                    });
                }
            };
            if !entities.is_empty() || rows_read >= MAX_ROWS_PER_CALL {
                let cursor = state
                    .as_bytes_slice()
                    .map(|b| Cursor(format!("{CURSOR_PREFIX}{}", hex::encode(b.as_ref()))))
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::Unexpected,
                            "cassandra: the server announced more pages without a paging state",
                        )
                    })?;
                return Ok(ScanPage {
                    entities,
                    cursor: Some(cursor),
                });
            }
            paging_state = state;
            page_size = (page_size * 4).min(MAX_PAGE);
        }
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        let table = table_of(&key.kind)?;
        if !self.table_exists(table).await? {
            return Ok(None);
        }
        let id = id_text(&key.id);
        let result = self
            .core
            .execute(
                &format!("SELECT doc FROM {}.{table} WHERE id = ?", self.ks()),
                (id.as_str(),),
                Retry::Idempotent,
                "get",
            )
            .await?;
        match rows_of::<(Vec<u8>,)>(result, "get")?.into_iter().next() {
            Some((doc,)) => decode_doc(&key.kind, &id, &doc).map(Some),
            None => Ok(None),
        }
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        check_writes(&writes)?;
        let mut tables: Vec<&str> = Vec::new();
        for w in &writes {
            let kind = match w {
                Write::Put(e) | Write::Insert(e) => &e.key.kind,
                Write::Replace { new, .. } => &new.key.kind,
                Write::Delete(_) => continue,
            };
            let table = table_of(kind)?;
            if !tables.contains(&table) {
                tables.push(table);
            }
        }
        for table in tables {
            self.ensure_table(table).await?;
        }
        // One statement per write, `concurrency` at a time, outcomes in order. No multi-partition
        // batches: each write is atomic on its own, which is all the contract asks.
        let outcomes: Vec<Result<WriteOutcome>> = futures::stream::iter(writes)
            .map(|w| self.write_one(w))
            .buffered(self.core.config.concurrency)
            .collect()
            .await;
        outcomes.into_iter().collect()
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        let result = self
            .core
            .execute(
                &format!(
                    "SELECT revision, value FROM {}.{META_TABLE} WHERE name = ?",
                    self.ks()
                ),
                (name,),
                Retry::Idempotent,
                "reading metadata",
            )
            .await?;
        Ok(rows_of::<(i64, String)>(result, "reading metadata")?
            .into_iter()
            .next()
            .map(|(revision, value)| MetaEntry {
                value,
                revision: u64::try_from(revision).unwrap_or(0),
            }))
    }

    async fn meta_cas(
        &self,
        name: &str,
        expected: Option<u64>,
        value: Option<&str>,
    ) -> Result<MetaCas> {
        let ks = self.ks();
        let rev = |r: u64| {
            i64::try_from(r).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidData,
                    format!("revision {r} exceeds a bigint"),
                )
            })
        };
        let applied = match (expected, value) {
            (None, Some(v)) => {
                self.core
                    .execute_lwt(
                        &format!(
                            "INSERT INTO {ks}.{META_TABLE} (name, revision, value) \
                             VALUES (?, ?, ?) IF NOT EXISTS"
                        ),
                        (name, 1_i64, v),
                        "writing metadata",
                    )
                    .await?
            }
            (Some(r), Some(v)) => {
                self.core
                    .execute_lwt(
                        &format!(
                            "UPDATE {ks}.{META_TABLE} SET revision = ?, value = ? \
                             WHERE name = ? IF revision = ?"
                        ),
                        (rev(r + 1)?, v, name, rev(r)?),
                        "writing metadata",
                    )
                    .await?
            }
            (Some(r), None) => {
                self.core
                    .execute_lwt(
                        &format!("DELETE FROM {ks}.{META_TABLE} WHERE name = ? IF revision = ?"),
                        (name, rev(r)?),
                        "deleting metadata",
                    )
                    .await?
            }
            (None, None) => {
                // Delete what must not exist: nothing to do unless it does.
                return Ok(match self.meta_get(name).await? {
                    None => MetaCas::Applied(0),
                    Some(current) => MetaCas::Conflict(Some(current)),
                });
            }
        };
        if applied {
            Ok(MetaCas::Applied(match value {
                Some(_) => expected.unwrap_or(0) + 1,
                None => 0,
            }))
        } else {
            Ok(MetaCas::Conflict(self.meta_get(name).await?))
        }
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut statement = self
            .core
            .prepare(&format!("SELECT name FROM {}.{META_TABLE}", self.ks()))
            .await?;
        statement.set_page_size(1000);
        let mut names = Vec::new();
        let mut paging_state = PagingState::start();
        loop {
            let (result, next) = self
                .core
                .session
                .execute_single_page(&statement, (), paging_state)
                .await
                .map_err(|e| execution_error(e, "listing metadata"))?;
            names.extend(
                rows_of::<(String,)>(result, "listing metadata")?
                    .into_iter()
                    .map(|(n,)| n)
                    .filter(|n| n.starts_with(prefix)),
            );
            match next.into_paging_control_flow() {
                std::ops::ControlFlow::Continue(state) => paging_state = state,
                std::ops::ControlFlow::Break(()) => break,
            }
        }
        names.sort();
        Ok(names)
    }

    async fn now(&self) -> Result<i64> {
        if self.server_clock {
            self.server_now().await
        } else {
            Ok(local_now_millis())
        }
    }
}

/// The rows of a result, typed.
fn rows_of<T>(result: scylla::response::query_result::QueryResult, step: &str) -> Result<Vec<T>>
where
    T: for<'f, 'm> scylla::deserialize::row::DeserializeRow<'f, 'm>,
{
    let rows = result.into_rows_result().map_err(|e| {
        Error::new(ErrorKind::Unexpected, format!("cassandra: {step}: no rows")).with_source(e)
    })?;
    let typed = rows.rows::<T>().map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("cassandra: {step}: the table does not have tern's layout"),
        )
        .with_source(e)
    })?;
    typed
        .collect::<std::result::Result<Vec<T>, _>>()
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidData,
                format!("cassandra: {step}: a row cannot be read"),
            )
            .with_source(e)
        })
}
