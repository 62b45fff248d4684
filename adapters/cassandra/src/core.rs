//! The store type and its driver calls: the session (the driver's caching session prepares
//! each statement once), the entity codec, the layout of each kind's table, the helpers the store and its feature
//! files share, and the one place where driver errors become
//! [`tern_core::store::Error`]s ([`driver_error`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla::client::caching_session::{CachingSession, CachingSessionBuilder};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{
    DbError, ExecutionError, NewSessionError, PrepareError, RequestAttemptError,
    SchemaAgreementError,
};
use scylla::response::query_result::QueryResult;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::serialize::row::SerializeRow;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::unprepared::Statement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};
use tern_core::model::codec::{decode_entity, encode_entity};
use tern_core::model::json::to_json_string;
use tern_core::model::{Entity, Key, Map, Value, Version};
use tern_core::store::{Error, ErrorKind, MetaChange, MetaEntry, Result, Write, WriteOutcome};

use crate::config::{
    CassConfig, ConsistencyLevel, NativeTables, SchemaAgreement, SerialLevel, is_plain_identifier,
};
use crate::resolve::{self, Resolution};
use crate::schema::TableSchema;

/// What a lightweight transaction did.
#[derive(Debug)]
pub(crate) enum LwtOutcome {
    /// The server answered: `[applied]`.
    Applied(bool),
    /// No answer (a timeout, a broken connection): it may or may not have been applied. The
    /// caller resolves it with a serial read (see `crate::resolve`).
    Unknown(Error),
}

/// How a batch writes its puts and deletes (inserts and replaces are always lightweight
/// transactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteMode {
    /// Plain `INSERT` and `DELETE` ([`Store::write_batch`](tern_core::store::Store::write_batch)).
    Plain,
    /// Through Paxos, ordered against every lightweight transaction of the row
    /// ([`SerialWrites`](tern_core::store::SerialWrites), `crate::serial`).
    Serial,
}

/// The connected session and what the adapter caches about it.
pub(crate) struct CassCore {
    pub(crate) session: Arc<Session>,
    /// The same session, preparing each statement once (the driver's cache, by CQL text).
    statements: CachingSession,
    pub(crate) config: CassConfig,
    /// Whether to await schema agreement after DDL (decided at open for `auto`).
    pub(crate) await_agreement: bool,
}

/// The least time a schema change (`CREATE`, `ALTER`) is given.
const DDL_TIMEOUT: Duration = Duration::from_secs(60);

/// How many prepared statements a store keeps (a handful per kind).
const STATEMENT_CACHE: usize = 1024;

impl std::fmt::Debug for CassCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CassCore")
            .field("config", &self.config)
            .field("await_agreement", &self.await_agreement)
            .finish_non_exhaustive()
    }
}

/// Whether the driver may repeat a request after a failure whose outcome is unknown (its
/// retry policy; tern itself repeats nothing, see "Retries" in the docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads and unconditional writes: repeating them gives the same result.
    Idempotent,
    /// Lightweight transactions: the driver repeats them only when the server says it did not
    /// apply them; a timeout is returned to the caller, which resolves it by a serial read.
    Conditional,
}

impl CassCore {
    /// Connects to the cluster.
    pub(crate) async fn connect(config: CassConfig) -> Result<CassCore> {
        let profile = ExecutionProfile::builder()
            .consistency(match config.consistency {
                ConsistencyLevel::One => Consistency::One,
                ConsistencyLevel::LocalOne => Consistency::LocalOne,
                ConsistencyLevel::Quorum => Consistency::Quorum,
                ConsistencyLevel::LocalQuorum => Consistency::LocalQuorum,
                ConsistencyLevel::All => Consistency::All,
            })
            .serial_consistency(Some(match config.serial {
                SerialLevel::Serial => SerialConsistency::Serial,
                SerialLevel::LocalSerial => SerialConsistency::LocalSerial,
            }))
            .request_timeout(Some(config.timeout))
            .build();
        let mut builder = SessionBuilder::new()
            .known_nodes(&config.nodes)
            .connection_timeout(config.timeout.min(Duration::from_secs(10)))
            .default_execution_profile_handle(profile.into_handle())
            // tern awaits schema agreement itself, after its own DDL (see `ddl`), and needs no
            // schema metadata: both fail on servers without `system.peers` / schema tables.
            .auto_await_schema_agreement(false)
            .fetch_schema_metadata(false);
        if let Some(user) = &config.user {
            builder = builder.user(user, config.password().unwrap_or(""));
        }
        if let Some(tls) = &config.tls {
            builder = builder.tls_context(Some(crate::tls::client_config(tls, &config.shown)?));
        }
        let session = builder
            .build()
            .await
            .map_err(|e| new_session_error(e, &config))?;
        let await_agreement = match config.schema_agreement {
            SchemaAgreement::Wait => true,
            SchemaAgreement::Skip => false,
            SchemaAgreement::Auto => match session.check_schema_agreement().await {
                Ok(_) => true,
                Err(e) => {
                    tracing::info!(
                        store = %config.shown,
                        error = %e,
                        "the server cannot report schema agreement; not awaiting it after DDL"
                    );
                    false
                }
            },
        };
        let session = Arc::new(session);
        let statements = CachingSessionBuilder::new_shared(Arc::clone(&session))
            .max_capacity(STATEMENT_CACHE)
            .build();
        Ok(CassCore {
            session,
            statements,
            config,
            await_agreement,
        })
    }

    /// Runs a DDL statement, then awaits schema agreement where configured.
    pub(crate) async fn ddl(&self, cql: &str) -> Result<()> {
        // A schema change rewrites the schema tables and reaches every node: it takes far
        // longer than a read or write on a busy cluster (seconds on a loaded test node).
        let mut statement = Statement::new(cql);
        statement.set_request_timeout(Some(self.config.timeout.max(DDL_TIMEOUT)));
        self.session
            .query_unpaged(statement, &[])
            .await
            .map_err(|e| driver_error(e, "schema change").with_context("cql", cql))?;
        if self.await_agreement {
            self.session
                .await_schema_agreement()
                .await
                .map_err(|e| agreement_error(e).with_context("cql", cql))?;
        }
        Ok(())
    }

    /// The prepared form of `cql`, prepared once per session (the driver's cache).
    pub(crate) async fn prepare(&self, cql: &str) -> Result<PreparedStatement> {
        self.statements
            .add_prepared_statement(&Statement::new(cql))
            .await
            .map_err(|e| prepare_error(e).with_context("cql", cql))
    }

    /// `cql` prepared now, bypassing the statement cache: its result metadata are the
    /// server's current column types.
    pub(crate) async fn prepare_fresh(&self, cql: &str) -> Result<PreparedStatement> {
        self.session
            .prepare(cql)
            .await
            .map_err(|e| prepare_error(e).with_context("cql", cql))
    }

    /// Executes `cql` (prepared) with `values`; `retry` says whether the driver may repeat it.
    pub(crate) async fn execute(
        &self,
        cql: &str,
        values: impl SerializeRow,
        retry: Retry,
        step: &'static str,
    ) -> Result<QueryResult> {
        let mut prepared = self.prepare(cql).await?;
        prepared.set_is_idempotent(retry == Retry::Idempotent);
        self.execute_prepared(&prepared, values)
            .await
            .map_err(|e| driver_error(e, step))
    }

    /// Executes `prepared` (unpaged), once more when the server answers that it does not know
    /// the statement (see [`is_unprepared`]).
    pub(crate) async fn execute_prepared(
        &self,
        prepared: &PreparedStatement,
        values: impl SerializeRow,
    ) -> std::result::Result<QueryResult, ExecutionError> {
        match self.session.execute_unpaged(prepared, &values).await {
            Err(e) if is_unprepared(&e) => {
                tracing::debug!(cql = prepared.get_statement(), error = %e, "the server evicted a prepared statement twice in a row; repeating once");
                self.session.execute_unpaged(prepared, &values).await
            }
            answer => answer,
        }
    }

    /// One page of `prepared`, once more when the server answers that it does not know the
    /// statement (see [`is_unprepared`]).
    pub(crate) async fn execute_page(
        &self,
        prepared: &PreparedStatement,
        values: impl SerializeRow,
        paging: PagingState,
    ) -> std::result::Result<(QueryResult, PagingStateResponse), ExecutionError> {
        match self
            .session
            .execute_single_page(prepared, &values, paging.clone())
            .await
        {
            Err(e) if is_unprepared(&e) => {
                tracing::debug!(cql = prepared.get_statement(), error = %e, "the server evicted a prepared statement twice in a row; repeating once");
                self.session
                    .execute_single_page(prepared, &values, paging)
                    .await
            }
            answer => answer,
        }
    }

    /// Executes a lightweight transaction: whether it was applied, or that its outcome is
    /// unknown (a timeout). Retried only while the server surely did not apply it.
    pub(crate) async fn execute_lwt(
        &self,
        cql: &str,
        values: impl SerializeRow,
        step: &'static str,
    ) -> Result<LwtOutcome> {
        let mut prepared = self.prepare(cql).await?;
        prepared.set_is_idempotent(false);
        match self.execute_prepared(&prepared, values).await {
            Ok(result) => lwt_applied(result)
                .map(LwtOutcome::Applied)
                .map_err(|e| e.with_context("cql", cql)),
            // The server ran nothing: not an unknown outcome.
            Err(e) if is_unprepared(&e) => Err(driver_error(e, step).with_context("cql", cql)),
            Err(e) => match driver_error(e, step) {
                e if e.is_temporary() => Ok(LwtOutcome::Unknown(e.with_context("cql", cql))),
                e => Err(e),
            },
        }
    }

    /// Executes a read at serial consistency (it sees every lightweight transaction that
    /// completed, and completes one left in progress): how an unknown outcome is resolved.
    pub(crate) async fn execute_serial_read(
        &self,
        cql: &str,
        values: impl SerializeRow,
        step: &'static str,
    ) -> Result<QueryResult> {
        let mut prepared = self.prepare(cql).await?;
        prepared.set_consistency(match self.config.serial {
            SerialLevel::Serial => Consistency::Serial,
            SerialLevel::LocalSerial => Consistency::LocalSerial,
        });
        prepared.set_is_idempotent(true);
        self.execute_prepared(&prepared, values)
            .await
            .map_err(|e| driver_error(e, step))
    }
}

/// Whether the server answered `UNPREPARED`: its prepared-statement cache no longer holds the
/// statement (evicted, or the node restarted). The driver re-prepares the statement on that
/// connection and repeats the request once by itself; this is the answer to that repeat, so
/// the cache evicted the statement again in between (a cache too small for the statements in
/// use: `prepared_statements_cache_size`). The server ran nothing, so repeating is safe for
/// every statement, lightweight transactions included: tern repeats once more (the driver
/// re-prepares again), then reports it (see "Prepared statements" in the docs).
pub(crate) fn is_unprepared(err: &ExecutionError) -> bool {
    matches!(
        err,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Unprepared { .. },
            _
        ))
    )
}

/// `[applied]` of a lightweight transaction's answer (its first column).
pub(crate) fn lwt_applied(result: QueryResult) -> Result<bool> {
    let rows = result
        .into_rows_result()
        .map_err(|e| unexpected("a conditional write answered no rows").with_driver_error(e))?;
    let mut rows = rows.rows::<Row>().map_err(|e| {
        unexpected("cannot read the answer of a conditional write").with_driver_error(e)
    })?;
    let row = rows
        .next()
        .ok_or_else(|| unexpected("a conditional write answered an empty result"))?
        .map_err(|e| {
            unexpected("cannot read the answer of a conditional write").with_driver_error(e)
        })?;
    match row.columns.first() {
        Some(Some(CqlValue::Boolean(applied))) => Ok(*applied),
        _ => Err(unexpected(
            "the answer of a conditional write has no [applied] column",
        )),
    }
}

fn unexpected(message: &str) -> Error {
    Error::new(ErrorKind::Unexpected, format!("cassandra: {message}"))
}

// ---- the entity codec ----

/// The `id` column: the id's lossless JSON text (canonical: equal ids give equal text).
pub(crate) fn id_text(id: &Value) -> String {
    to_json_string(id)
}

/// The `doc` column: tern's canonical binary encoding of id, version and value
/// (`tern_core::model::codec`), so a compare-and-set can compare bytes.
pub(crate) fn encode_doc(entity: &Entity) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_entity(&entity.key.id, entity.version, &entity.value, &mut out).map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("cannot store entity {}", entity.key),
        )
        .with_source(e)
    })?;
    Ok(out)
}

/// The entity stored in a row (`doc` column) of the table of `kind`.
pub(crate) fn decode_doc(kind: &str, id: &str, doc: &[u8]) -> Result<Entity> {
    let bad = |message: String| {
        Error::new(ErrorKind::InvalidData, message)
            .with_context("kind", kind)
            .with_context("id", id)
    };
    let (id_value, version, value): (Value, Version, Map) = decode_entity(doc).map_err(|e| {
        bad(format!(
            "row {id} of table {kind} is not a tern document (doc column)"
        ))
        .with_source(e)
    })?;
    let key = Key::new(kind, id_value)
        .map_err(|e| bad(format!("row {id} of table {kind} has an invalid id")).with_source(e))?;
    Ok(Entity {
        key,
        version,
        value,
    })
}

// ---- errors: the one place where driver errors are mapped ----

/// (kind, temporary) of a driver execution error.
fn classify(err: &ExecutionError) -> (ErrorKind, bool) {
    match err {
        ExecutionError::LastAttemptError(attempt) => classify_attempt(attempt),
        ExecutionError::PrepareError(e) => classify_prepare(e),
        ExecutionError::ConnectionPoolError(_)
        | ExecutionError::EmptyPlan
        | ExecutionError::RequestTimeout(_)
        | ExecutionError::SchemaAgreementError(_) => (ErrorKind::Unavailable, true),
        ExecutionError::BadQuery(_) => (ErrorKind::Rejected, false),
        _ => (ErrorKind::Unexpected, false),
    }
}

fn classify_attempt(err: &RequestAttemptError) -> (ErrorKind, bool) {
    match err {
        RequestAttemptError::DbError(db, _) => classify_db(db),
        RequestAttemptError::BrokenConnectionError(_)
        | RequestAttemptError::UnableToAllocStreamId => (ErrorKind::Unavailable, true),
        _ => (ErrorKind::Unexpected, false),
    }
}

fn classify_prepare(err: &PrepareError) -> (ErrorKind, bool) {
    match err {
        PrepareError::ConnectionPoolError(_) => (ErrorKind::Unavailable, true),
        PrepareError::AllAttemptsFailed { first_attempt } => classify_attempt(first_attempt),
        _ => (ErrorKind::Unexpected, false),
    }
}

fn classify_db(err: &DbError) -> (ErrorKind, bool) {
    match err {
        DbError::Unavailable { .. }
        | DbError::Overloaded
        | DbError::IsBootstrapping
        | DbError::ReadTimeout { .. }
        | DbError::WriteTimeout { .. }
        | DbError::ReadFailure { .. }
        | DbError::WriteFailure { .. }
        // Evicted from the server's cache three times in a row (see `is_unprepared`).
        | DbError::Unprepared { .. } => (ErrorKind::Unavailable, true),
        DbError::Unauthorized
        | DbError::AuthenticationError
        | DbError::SyntaxError
        | DbError::Invalid
        | DbError::ConfigError
        | DbError::AlreadyExists { .. }
        | DbError::FunctionFailure { .. } => (ErrorKind::Rejected, false),
        _ => (ErrorKind::Unexpected, false),
    }
}

/// The error mapper: a driver execution error as a store error. The message names the step, the cause is the driver's text.
pub(crate) fn driver_error(err: ExecutionError, step: &str) -> Error {
    let (kind, temporary) = classify(&err);
    let message = if is_unprepared(&err) {
        format!(
            "cassandra: {step} failed: the server evicted the prepared statement from its cache \
             again as soon as it was prepared anew; give the nodes a larger cache \
             (prepared_statements_cache_size in cassandra.yaml)"
        )
    } else {
        format!("cassandra: {step} failed")
    };
    let mapped = Error::new(kind, message).with_driver_error(err);
    if temporary {
        mapped.set_temporary()
    } else {
        mapped
    }
}

/// Whether the server answered "invalid request" (e.g. to a paging state it cannot use).
pub(crate) fn is_invalid_request(err: &ExecutionError) -> bool {
    matches!(
        err,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid | DbError::ProtocolError,
            _
        ))
    )
}

fn prepare_error(err: PrepareError) -> Error {
    let (kind, temporary) = classify_prepare(&err);
    let mapped = Error::new(kind, "cassandra: preparing a statement failed").with_driver_error(err);
    if temporary {
        mapped.set_temporary()
    } else {
        mapped
    }
}

fn agreement_error(err: SchemaAgreementError) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        "cassandra: the cluster did not reach schema agreement after a schema change \
         (use ?schema_agreement=skip only on a single node)",
    )
    .with_driver_error(err)
    .set_temporary()
}

/// The error of connecting to `shown` (the URL without its password); the
/// password, if any, is masked in the driver's text too.
fn new_session_error(err: NewSessionError, config: &CassConfig) -> Error {
    let mut text = err.to_string();
    if let Some(password) = config.password().filter(|p| !p.is_empty()) {
        text = text.replace(password, "***");
    }
    let (kind, hint) = if matches!(
        err,
        NewSessionError::FailedToResolveAnyHostname(_) | NewSessionError::EmptyKnownNodesList
    ) {
        (ErrorKind::ConfigInvalid, "")
    } else if text.contains("invalid peer certificate") {
        (
            ErrorKind::ConfigInvalid,
            ": the node's TLS certificate is not trusted; give the CA that signed it with \
             tls_ca_file (PEM), and check that the certificate names the address in the URL",
        )
    } else if text.contains("Authentication failed") || text.contains("bad credentials") {
        (
            ErrorKind::Rejected,
            ": the cluster refused the user name or password; check both (the password is given \
             in the URL, TERN_STORE_PASSWORD, --store-password-file or password_file)",
        )
    } else if text.contains("Authentication is required") {
        (
            ErrorKind::Rejected,
            ": the cluster requires a user name and password (user:password@ in the URL, or a \
             user with TERN_STORE_PASSWORD, --store-password-file or password_file)",
        )
    } else if config.tls.is_none() {
        (
            ErrorKind::Unavailable,
            " (if the nodes require TLS, client_encryption_options, add tls=true and \
             tls_ca_file to the URL)",
        )
    } else {
        (ErrorKind::Unavailable, "")
    };
    let mapped = Error::new(
        kind,
        format!("cannot connect to cassandra at {}{hint}", config.shown),
    )
    .with_driver_error(text);
    if kind == ErrorKind::Unavailable {
        mapped.set_temporary()
    } else {
        mapped
    }
}

/// A hook run after a batch is copied to the new kind and before the sources are deleted,
/// with the keys (of the old kind) just copied. For tests.
#[cfg(feature = "fault-injection")]
pub(crate) type AfterCopy = tern_core::store::rename_copy::AfterCopyHook;

/// [`AfterCopy`], printable as part of the store.
#[cfg(feature = "fault-injection")]
#[derive(Clone)]
pub(crate) struct AfterCopyHook(pub(crate) AfterCopy);

#[cfg(feature = "fault-injection")]
impl std::fmt::Debug for AfterCopyHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AfterCopyHook")
    }
}

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
    pub(crate) server_clock: bool,
    /// Whether the cluster runs `WHERE token(pk) >= ?` (the fallback of refused paging states).
    pub(crate) token_ranges: bool,
    /// Run by a kind rename between the copy and the delete of a batch (tests).
    #[cfg(feature = "fault-injection")]
    pub(crate) after_copy: Option<AfterCopyHook>,
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
    if crate::schema::is_reserved(kind) {
        // Unquoted, CQL reads it as a keyword (a raw "no viable alternative" syntax error);
        // quoted, it would be a table every application query has to quote too.
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "kind {kind:?} cannot be a Cassandra table: {kind} is a CQL reserved word; \
                 rename the kind (e.g. {kind}s or {kind}_) in the schema and the data"
            ),
        ));
    }
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

pub(crate) fn applied(ok: bool) -> WriteOutcome {
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
    pub async fn connect(config: CassConfig) -> Result<CassStore> {
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
    /// ScyllaDB do.
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
        self.after_copy = Some(AfterCopyHook(Arc::new(hook)));
        self
    }

    pub(crate) fn ks(&self) -> &str {
        &self.core.config.keyspace
    }

    pub(crate) async fn probe_token_ranges(&self) -> bool {
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

    pub(crate) fn is_known(&self, table: &str) -> bool {
        self.tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(table)
    }

    pub(crate) fn remember(&self, table: &str) {
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
    pub(crate) async fn layout_for_write(&self, kind: &str) -> Result<Layout> {
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

    pub(crate) async fn server_now(&self) -> Result<i64> {
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
        // `toUnixTimestamp` answers a bigint (milliseconds), not a timestamp.
        let (ms,) = rows.first_row::<(i64,)>().map_err(|e| {
            Error::new(ErrorKind::Unexpected, "cassandra: no clock in system.local")
                .with_driver_error(e)
        })?;
        Ok(ms)
    }

    /// The entity with this key, read at serial consistency when `serial` (see `resolve`).
    pub(crate) async fn get_with(&self, key: &Key, serial: bool) -> Result<Option<Entity>> {
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
        match self
            .core
            .execute_lwt(&call.cql, call.values.clone(), step)
            .await?
        {
            LwtOutcome::Applied(ok) => Ok(applied(ok)),
            LwtOutcome::Unknown(err) => {
                // The serial read completes a Paxos round left in progress, so what it sees
                // is final for this attempt.
                let stored = self.get_with(&new.key, true).await?;
                match resolve::entity(stored.as_ref(), expected, new) {
                    Resolution::Applied => Ok(WriteOutcome::Applied),
                    Resolution::Conflict => Ok(WriteOutcome::Conflict),
                    // Surely not applied: the caller decides (the engine resumes).
                    Resolution::Retry => Err(err),
                }
            }
        }
    }

    pub(crate) async fn write_one(
        &self,
        write: Write,
        layout: &Layout,
        mode: WriteMode,
    ) -> Result<WriteOutcome> {
        match layout {
            Layout::Document => self.document_write(write, mode).await,
            Layout::Native(schema) => self.native_write(schema, write, mode).await,
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
                    Box::pin(self.write_one(other, &layout, mode)).await
                }
            },
        }
    }

    /// Runs the writes to one key in order.
    pub(crate) async fn write_chain(
        &self,
        chain: Vec<(usize, Write)>,
        layout: Layout,
        mode: WriteMode,
    ) -> Vec<(usize, Result<WriteOutcome>)> {
        let mut out = Vec::with_capacity(chain.len());
        for (i, write) in chain {
            out.push((i, self.write_one(write, &layout, mode).await));
        }
        out
    }

    pub(crate) async fn meta_cas_once(
        &self,
        name: &str,
        change: MetaChange<'_>,
    ) -> Result<LwtOutcome> {
        let MetaChange { expected, value } = change;
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

    pub(crate) async fn meta_read(&self, name: &str, serial: bool) -> Result<Option<MetaEntry>> {
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
