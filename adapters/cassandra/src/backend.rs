//! [`CassStore`]: the [`Store`] implementation, its capability, and which layout each kind's
//! table has.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use scylla::response::PagingState;
use tern_core::model::{Entity, Key};
use tern_core::store::{
    Capability, Error, ErrorKind, MetaCas, MetaEntry, RenameKindPage, RenameKindRequest, Result,
    ScanPage, ScanRequest, SchemaChange, Store, StoreInfo, Write, WriteOutcome, local_now_millis,
};

use crate::config::{CASSANDRA_SCHEME, CassConfig, NativeTables, is_plain_identifier};
use crate::core::{CassCore, LwtOutcome, RETRIES, Retry, backoff, execution_error};
use crate::resolve::{self, Resolution};
use crate::schema::TableSchema;

/// The metadata table (never a kind).
pub(crate) const META_TABLE: &str = "tern_meta";
/// The registry of the kinds tern created document tables for (never a kind).
pub(crate) const KINDS_TABLE: &str = "tern_kinds";
/// The registry of the JSON text columns of native tables (never a kind).
pub(crate) const JSON_COLUMNS_TABLE: &str = "tern_json_columns";

/// A Cassandra or ScyllaDB keyspace as a tern store. See the crate docs for the mapping.
#[derive(Debug, Clone)]
pub struct CassStore {
    pub(crate) core: Arc<CassCore>,
    /// Document tables known to exist (created or found in the registry by this process).
    pub(crate) tables: Arc<Mutex<HashSet<String>>>,
    /// Schemas of native tables, as last read from `system_schema`.
    pub(crate) schemas: Arc<Mutex<HashMap<String, Arc<TableSchema>>>>,
    server_clock: bool,
    /// Whether the cluster runs `WHERE token(pk) >= ?` (the fallback of refused paging states).
    pub(crate) token_ranges: bool,
    /// Run by a kind rename between the copy and the delete of a batch (tests).
    #[cfg(feature = "fault-injection")]
    pub(crate) after_copy: Option<crate::rename::AfterCopyHook>,
}

/// How the table of a kind stores entities.
#[derive(Debug, Clone)]
pub(crate) enum Layout {
    /// `(id text PRIMARY KEY, tern_version bigint, doc blob)`, created by tern.
    Document,
    /// One column per property.
    Native(Arc<TableSchema>),
    /// No table yet. `native`: the URL names it native, so tern must not create a document
    /// table for it.
    Missing {
        /// Named by `native=`.
        native: bool,
    },
}

/// The table of `kind`.
pub(crate) fn table_of(kind: &str) -> Result<&str> {
    if is_plain_identifier(kind) && ![META_TABLE, KINDS_TABLE, JSON_COLUMNS_TABLE].contains(&kind) {
        Ok(kind)
    } else {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "kind {kind:?} cannot be a Cassandra table: use a lowercase letter followed by \
                 lowercase letters, digits or _ (at most 48), other than {META_TABLE}, \
                 {KINDS_TABLE} and {JSON_COLUMNS_TABLE}"
            ),
        ))
    }
}

fn applied(ok: bool) -> WriteOutcome {
    if ok {
        WriteOutcome::Applied
    } else {
        WriteOutcome::Conflict
    }
}

impl CassStore {
    /// Connects, creates the keyspace and tern's own tables when missing, and checks what the
    /// cluster supports (its clock, token-range queries).
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
        if core.config.native != NativeTables::None {
            core.ddl(&format!(
                "CREATE TABLE IF NOT EXISTS {ks}.{JSON_COLUMNS_TABLE} (name text PRIMARY KEY)"
            ))
            .await?;
        }
        let mut store = CassStore {
            core: Arc::new(core),
            tables: Arc::new(Mutex::new(HashSet::new())),
            schemas: Arc::new(Mutex::new(HashMap::new())),
            server_clock: false,
            token_ranges: false,
            #[cfg(feature = "fault-injection")]
            after_copy: None,
        };
        store.server_clock = store.server_now().await.is_ok();
        store.token_ranges = store.probe_token_ranges().await;
        Ok(store)
    }

    /// Whether the cluster answers token-range queries (`WHERE token(pk) >= ?`), with which a
    /// scan resumes when the cluster refuses a cursor's paging state. Real Cassandra and
    /// ScyllaDB do; the test server does not.
    pub fn token_ranges(&self) -> bool {
        self.token_ranges
    }

    /// This store, running `hook` in every [`Store::rename_kind`] batch after the rows are
    /// copied to the new kind and before the old ones are deleted, with the keys (of the old
    /// kind) just copied. For tests of what a writer that acts in between does to a rename;
    /// not for production use (feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    #[must_use]
    pub fn with_after_copy_hook(
        mut self,
        hook: impl Fn(Vec<Key>) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> CassStore {
        self.after_copy = Some(crate::rename::AfterCopyHook(Arc::new(hook)));
        self
    }

    pub(crate) fn ks(&self) -> &str {
        &self.core.config.keyspace
    }

    async fn probe_token_ranges(&self) -> bool {
        let cql = format!(
            "SELECT name FROM {}.{META_TABLE} WHERE token(name) >= ? LIMIT 1",
            self.ks()
        );
        match self
            .core
            .execute(
                &cql,
                (i64::MIN + 1,),
                Retry::Idempotent,
                "probing token ranges",
            )
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::info!(store = %self.core.config.shown, error = %e, "the cluster cannot run token-range queries: a refused paging state restarts the scan");
                false
            }
        }
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

    /// Whether tern created a document table for `table` (it registers each one).
    pub(crate) async fn document_exists(&self, table: &str) -> Result<bool> {
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

    /// How the table of `kind` stores entities.
    pub(crate) async fn layout(&self, kind: &str) -> Result<Layout> {
        let table = table_of(kind)?;
        if let Some(schema) = self.cached_schema(table) {
            return Ok(Layout::Native(schema));
        }
        if self.document_exists(table).await? {
            return Ok(Layout::Document);
        }
        let native = &self.core.config.native;
        if native.names(table) {
            if let Some(schema) = self.load_schema(table).await? {
                return Ok(Layout::Native(schema));
            }
            return Ok(Layout::Missing {
                native: matches!(native, NativeTables::Tables(_)),
            });
        }
        Ok(Layout::Missing { native: false })
    }

    /// Creates the document table of a kind: `(id text PRIMARY KEY, tern_version bigint, doc blob)`.
    pub(crate) async fn ensure_document_table(&self, table: &str) -> Result<()> {
        let ks = self.ks();
        self.core
            .ddl(&format!(
                "CREATE TABLE IF NOT EXISTS {ks}.{table} \
                 (id text PRIMARY KEY, tern_version bigint, doc blob)"
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

    /// The layout a write to `kind` uses, creating a document table when the kind has none.
    async fn layout_for_write(&self, kind: &str) -> Result<Layout> {
        match self.layout(kind).await? {
            Layout::Missing { native: false } => {
                self.ensure_document_table(table_of(kind)?).await?;
                Ok(Layout::Document)
            }
            Layout::Missing { native: true } => Err(Error::new(
                ErrorKind::Rejected,
                format!(
                    "table {}.{kind} does not exist; a native table has a fixed schema: create \
                     it with its key and columns (and {} bigint), or remove it from native=",
                    self.ks(),
                    crate::schema::VERSION_COLUMN
                ),
            )),
            layout => Ok(layout),
        }
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
            Error::new(ErrorKind::Unexpected, "cassandra: no clock in system.local")
                .with_driver_error(e)
        })?;
        let (ts,) = rows
            .first_row::<(scylla::value::CqlTimestamp,)>()
            .map_err(|e| {
                Error::new(ErrorKind::Unexpected, "cassandra: no clock in system.local")
                    .with_driver_error(e)
            })?;
        Ok(ts.0)
    }

    /// The entity with this key, read at serial consistency when `serial` (see `resolve`).
    async fn get_with(&self, key: &Key, serial: bool) -> Result<Option<Entity>> {
        match self.layout(&key.kind).await? {
            Layout::Missing { .. } => Ok(None),
            Layout::Document => self.document_get(key, serial).await,
            Layout::Native(schema) => self.native_get(&schema, key, serial).await,
        }
    }

    /// Runs one entity write whose outcome may be unknown (a lightweight transaction),
    /// resolving an unknown outcome by a serial read: applied, retried, or a conflict.
    /// `expected` is `None` for `IF NOT EXISTS`; both entities as the layout reads them back.
    pub(crate) async fn cas_entity(
        &self,
        call: &crate::statement::Call,
        step: &'static str,
        expected: Option<&Entity>,
        new: &Entity,
    ) -> Result<WriteOutcome> {
        let mut attempt = 0;
        loop {
            match self
                .core
                .execute_lwt(&call.cql, call.values.clone(), step)
                .await?
            {
                LwtOutcome::Applied(ok) => return Ok(applied(ok)),
                LwtOutcome::Unknown(err) => {
                    tokio::time::sleep(backoff(attempt)).await;
                    let stored = self.get_with(&new.key, true).await?;
                    match resolve::entity(stored.as_ref(), expected, new) {
                        Resolution::Applied => return Ok(WriteOutcome::Applied),
                        Resolution::Conflict => return Ok(WriteOutcome::Conflict),
                        Resolution::Retry if attempt < RETRIES => {
                            tracing::debug!(error = %err, attempt, step, "conditional write not applied after a timeout; retrying");
                            attempt += 1;
                        }
                        Resolution::Retry => return Err(err),
                    }
                }
            }
        }
    }

    async fn write_one(&self, write: Write, layout: &Layout) -> Result<WriteOutcome> {
        match layout {
            Layout::Document => self.document_write(write).await,
            Layout::Native(schema) => self.native_write(schema, write).await,
            Layout::Missing { .. } => match write {
                // Nothing to delete in a table that does not exist.
                Write::Delete(_) => Ok(WriteOutcome::Applied),
                other => {
                    let kind = match &other {
                        Write::Put(e) | Write::Insert(e) => &e.key.kind,
                        Write::Replace { new, .. } => &new.key.kind,
                        Write::Delete(k) => &k.kind,
                    };
                    let layout = self.layout_for_write(kind).await?;
                    Box::pin(self.write_one(other, &layout)).await
                }
            },
        }
    }

    /// Runs the writes to one key in order.
    async fn write_chain(
        &self,
        chain: Vec<(usize, Write)>,
        layout: Layout,
    ) -> Vec<(usize, Result<WriteOutcome>)> {
        let mut out = Vec::with_capacity(chain.len());
        for (i, write) in chain {
            out.push((i, self.write_one(write, &layout).await));
        }
        out
    }

    async fn meta_cas_once(
        &self,
        name: &str,
        expected: Option<u64>,
        value: Option<&str>,
    ) -> Result<LwtOutcome> {
        let ks = self.ks();
        let rev = |r: u64| {
            i64::try_from(r).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidData,
                    format!("revision {r} exceeds a bigint"),
                )
            })
        };
        match (expected, value) {
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
                    .await
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
                    .await
            }
            (Some(r), None) => {
                self.core
                    .execute_lwt(
                        &format!("DELETE FROM {ks}.{META_TABLE} WHERE name = ? IF revision = ?"),
                        (name, rev(r)?),
                        "deleting metadata",
                    )
                    .await
            }
            (None, None) => Ok(LwtOutcome::Applied(true)),
        }
    }

    async fn meta_read(&self, name: &str, serial: bool) -> Result<Option<MetaEntry>> {
        let cql = format!(
            "SELECT revision, value FROM {}.{META_TABLE} WHERE name = ?",
            self.ks()
        );
        let result = if serial {
            self.core
                .execute_serial_read(&cql, (name,), "reading metadata")
                .await?
        } else {
            self.core
                .execute(&cql, (name,), Retry::Idempotent, "reading metadata")
                .await?
        };
        Ok(rows_of::<(i64, String)>(result, "reading metadata")?
            .into_iter()
            .next()
            .map(|(revision, value)| MetaEntry {
                value,
                revision: u64::try_from(revision).unwrap_or(0),
            }))
    }
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
            scan_ordered: false,
            update_pushdown: false,
            server_clock: self.server_clock,
            atomic_batch_with_meta: false,
            rename_kind: true,
            atomic_writes: false,
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
        let mut candidates: Vec<String> = rows_of::<(String,)>(result, "listing kinds")?
            .into_iter()
            .map(|(k,)| k)
            .collect();
        candidates.extend(self.native_tables().await?);
        candidates.sort();
        candidates.dedup();
        let mut kinds = Vec::new();
        for kind in candidates {
            let table = table_of(&kind)?;
            let result = self
                .core
                .execute(
                    &format!("SELECT * FROM {ks}.{table} LIMIT 1"),
                    (),
                    Retry::Idempotent,
                    "listing kinds",
                )
                .await?;
            if result.into_rows_result().is_ok_and(|r| r.rows_num() > 0) {
                kinds.push(kind);
            }
        }
        Ok(kinds)
    }

    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        let cursor = match &request.cursor {
            None => None,
            Some(c) => Some(crate::cursor::ScanCursor::decode(c).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidCursor,
                    format!("cursor {:?} is not one this store made", c.0),
                )
            })?),
        };
        let layout = self.layout(kind).await?;
        if matches!(layout, Layout::Missing { .. }) {
            return Ok(ScanPage::default());
        }
        self.scan_pages(kind, &layout, cursor, &request).await
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        self.get_with(key, false).await
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        let total = writes.len();
        // Writes to one key form a chain run in order (the contract); chains run
        // `concurrency` at a time, one statement per write. No multi-partition batches: each
        // write is atomic on its own, which is all the contract asks.
        let mut chains: Vec<Vec<(usize, Write)>> = Vec::new();
        let mut by_key: HashMap<Key, usize> = HashMap::new();
        for (i, write) in writes.into_iter().enumerate() {
            let key = match &write {
                Write::Put(e) | Write::Insert(e) => e.key.clone(),
                Write::Replace { new, .. } => new.key.clone(),
                Write::Delete(k) => k.clone(),
            };
            match by_key.get(&key) {
                Some(&c) => chains[c].push((i, write)),
                None => {
                    by_key.insert(key, chains.len());
                    chains.push(vec![(i, write)]);
                }
            }
        }
        let mut layouts: HashMap<String, Layout> = HashMap::new();
        for chain in &chains {
            let (_, first) = &chain[0];
            let (kind, creates) = match first {
                Write::Put(e) | Write::Insert(e) => (&e.key.kind, true),
                Write::Replace { new, .. } => (&new.key.kind, true),
                Write::Delete(k) => (&k.kind, chain.len() > 1),
            };
            if !layouts.contains_key(kind) {
                let layout = if creates {
                    self.layout_for_write(kind).await?
                } else {
                    self.layout(kind).await?
                };
                layouts.insert(kind.clone(), layout);
            }
        }
        let concurrency = self.core.config.concurrency;
        let results: Vec<Vec<(usize, Result<WriteOutcome>)>> = futures::stream::iter(chains)
            .map(|chain| {
                let kind = match &chain[0].1 {
                    Write::Put(e) | Write::Insert(e) => e.key.kind.clone(),
                    Write::Replace { new, .. } => new.key.kind.clone(),
                    Write::Delete(k) => k.kind.clone(),
                };
                let layout = layouts
                    .get(&kind)
                    .cloned()
                    .unwrap_or(Layout::Missing { native: false });
                self.write_chain(chain, layout)
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        let mut outcomes: Vec<Option<WriteOutcome>> = vec![None; total];
        for (i, outcome) in results.into_iter().flatten() {
            outcomes[i] = Some(outcome?);
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.ok_or_else(|| Error::new(ErrorKind::Unexpected, "cassandra: a write was lost"))
            })
            .collect()
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        self.meta_read(name, false).await
    }

    async fn meta_cas(
        &self,
        name: &str,
        expected: Option<u64>,
        value: Option<&str>,
    ) -> Result<MetaCas> {
        if expected.is_none() && value.is_none() {
            // Delete what must not exist: nothing to do unless it does.
            return Ok(match self.meta_get(name).await? {
                None => MetaCas::Applied(0),
                Some(current) => MetaCas::Conflict(Some(current)),
            });
        }
        let mut attempt = 0;
        let ok = loop {
            match self.meta_cas_once(name, expected, value).await? {
                LwtOutcome::Applied(ok) => break ok,
                LwtOutcome::Unknown(err) => {
                    tokio::time::sleep(backoff(attempt)).await;
                    let stored = self.meta_read(name, true).await?;
                    match resolve::meta(stored.as_ref(), expected, value) {
                        Resolution::Applied => break true,
                        Resolution::Conflict => break false,
                        Resolution::Retry if attempt < RETRIES => attempt += 1,
                        Resolution::Retry => return Err(err),
                    }
                }
            }
        };
        if ok {
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
        statement.set_is_idempotent(true);
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

    async fn prepare_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        self.native_prepare_schema(changes).await
    }

    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        self.rename_kind_inner(request).await
    }

    async fn finish_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        self.native_finish_schema(changes).await
    }
}

/// The rows of a result, typed.
pub(crate) fn rows_of<T>(
    result: scylla::response::query_result::QueryResult,
    step: &str,
) -> Result<Vec<T>>
where
    T: for<'f, 'm> scylla::deserialize::row::DeserializeRow<'f, 'm>,
{
    let rows = result.into_rows_result().map_err(|e| {
        Error::new(ErrorKind::Unexpected, format!("cassandra: {step}: no rows"))
            .with_driver_error(e)
    })?;
    let typed = rows.rows::<T>().map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("cassandra: {step}: the table does not have the expected columns"),
        )
        .with_driver_error(e)
    })?;
    typed
        .collect::<std::result::Result<Vec<T>, _>>()
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidData,
                format!("cassandra: {step}: a row cannot be read"),
            )
            .with_driver_error(e)
        })
}
