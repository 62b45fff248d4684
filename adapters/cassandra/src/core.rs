//! Driver calls: the session, prepared statements, retries, the entity codec and the one
//! place where driver errors become [`tern_core::store::Error`]s.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{
    DbError, ExecutionError, NewSessionError, PrepareError, RequestAttemptError,
    SchemaAgreementError,
};
use scylla::response::query_result::QueryResult;
use scylla::serialize::row::SerializeRow;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};
use tern_core::model::codec::{decode_entity, encode_entity};
use tern_core::model::json::to_json_string;
use tern_core::model::{Entity, Key, Map, Value, Version};
use tern_core::store::{Error, ErrorKind, Result};

use crate::config::{CassConfig, ConsistencyLevel, SchemaAgreement, SerialLevel};

/// How often a request is retried after a temporary failure.
pub(crate) const RETRIES: u32 = 4;
/// The first back-off; it doubles on each retry.
const BACKOFF: Duration = Duration::from_millis(50);

/// The pause before retry `attempt` (0-based): 50 ms doubling, plus up to 50 % jitter so that
/// many writers retrying together do not collide again.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let base = BACKOFF * 2u32.saturating_pow(attempt.min(10));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base + base.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

/// What a lightweight transaction did.
#[derive(Debug)]
pub(crate) enum LwtOutcome {
    /// The server answered: `[applied]`.
    Applied(bool),
    /// No answer (a timeout, a broken connection): it may or may not have been applied. The
    /// caller resolves it with a serial read (see `crate::resolve`).
    Unknown(Error),
}

/// The connected session and what the adapter caches about it.
pub(crate) struct CassCore {
    pub(crate) session: Session,
    pub(crate) config: CassConfig,
    /// Whether to await schema agreement after DDL (decided at open for `auto`).
    pub(crate) await_agreement: bool,
    prepared: Mutex<HashMap<String, PreparedStatement>>,
}

impl std::fmt::Debug for CassCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CassCore")
            .field("config", &self.config)
            .field("await_agreement", &self.await_agreement)
            .finish_non_exhaustive()
    }
}

/// Whether a request may be repeated after a failure whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads and unconditional writes: repeating them gives the same result.
    Idempotent,
    /// Lightweight transactions: repeated only when the server says it did not apply them
    /// (unavailable, overloaded, bootstrapping); a timeout is returned to the caller.
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
        let session = builder
            .build()
            .await
            .map_err(|e| new_session_error(e, &config.shown, config.password()))?;
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
        Ok(CassCore {
            session,
            config,
            await_agreement,
            prepared: Mutex::new(HashMap::new()),
        })
    }

    /// Runs a DDL statement, then awaits schema agreement where configured.
    pub(crate) async fn ddl(&self, cql: &str) -> Result<()> {
        self.session
            .query_unpaged(cql, &[])
            .await
            .map_err(|e| execution_error(e, "schema change").with_context("cql", cql))?;
        if self.await_agreement {
            self.session
                .await_schema_agreement()
                .await
                .map_err(|e| agreement_error(e).with_context("cql", cql))?;
        }
        Ok(())
    }

    /// The prepared form of `cql`, prepared once per session.
    pub(crate) async fn prepare(&self, cql: &str) -> Result<PreparedStatement> {
        if let Some(p) = self.lock().get(cql) {
            return Ok(p.clone());
        }
        let mut attempt = 0;
        let prepared = loop {
            match self.session.prepare(cql).await {
                Ok(p) => break p,
                Err(e) => {
                    let err = prepare_error(e).with_context("cql", cql);
                    if !err.is_temporary() || attempt >= RETRIES {
                        return Err(err);
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
            }
        };
        self.lock().insert(cql.to_owned(), prepared.clone());
        Ok(prepared)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PreparedStatement>> {
        self.prepared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Executes `cql` (prepared) with `values`, retrying temporary failures as `retry` allows.
    pub(crate) async fn execute(
        &self,
        cql: &str,
        values: impl SerializeRow + Clone,
        retry: Retry,
        step: &'static str,
    ) -> Result<QueryResult> {
        let prepared = self.prepare(cql).await?;
        let mut attempt = 0;
        loop {
            match self
                .session
                .execute_unpaged(&prepared, values.clone())
                .await
            {
                Ok(result) => return Ok(result),
                Err(e) => {
                    let retryable = match retry {
                        Retry::Idempotent => classify(&e).1,
                        Retry::Conditional => surely_not_applied(&e),
                    };
                    if !retryable || attempt >= RETRIES {
                        return Err(execution_error(e, step));
                    }
                    tracing::debug!(error = %e, attempt, step, "retrying");
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
            }
        }
    }

    /// Executes a lightweight transaction: whether it was applied, or that its outcome is
    /// unknown (a timeout). Retried only while the server surely did not apply it.
    pub(crate) async fn execute_lwt(
        &self,
        cql: &str,
        values: impl SerializeRow + Clone,
        step: &'static str,
    ) -> Result<LwtOutcome> {
        match self.execute(cql, values, Retry::Conditional, step).await {
            Ok(result) => lwt_applied(result)
                .map(LwtOutcome::Applied)
                .map_err(|e| e.with_context("cql", cql)),
            Err(e) if e.is_temporary() => Ok(LwtOutcome::Unknown(e.with_context("cql", cql))),
            Err(e) => Err(e),
        }
    }

    /// Executes a read at serial consistency (it sees every lightweight transaction that
    /// completed, and completes one left in progress): how an unknown outcome is resolved.
    pub(crate) async fn execute_serial_read(
        &self,
        cql: &str,
        values: impl SerializeRow + Clone,
        step: &'static str,
    ) -> Result<QueryResult> {
        let mut prepared = self.prepare(cql).await?;
        prepared.set_consistency(match self.config.serial {
            SerialLevel::Serial => Consistency::Serial,
            SerialLevel::LocalSerial => Consistency::LocalSerial,
        });
        prepared.set_is_idempotent(true);
        let mut attempt = 0;
        loop {
            match self
                .session
                .execute_unpaged(&prepared, values.clone())
                .await
            {
                Ok(result) => return Ok(result),
                Err(e) => {
                    if !classify(&e).1 || attempt >= RETRIES {
                        return Err(execution_error(e, step));
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
            }
        }
    }
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
        | DbError::WriteFailure { .. } => (ErrorKind::Unavailable, true),
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

/// Errors after which the server certainly did not apply the request (safe to repeat an LWT).
fn surely_not_applied(err: &ExecutionError) -> bool {
    let attempt = match err {
        ExecutionError::LastAttemptError(a) => a,
        ExecutionError::ConnectionPoolError(_) | ExecutionError::EmptyPlan => return true,
        _ => return false,
    };
    matches!(
        attempt,
        RequestAttemptError::DbError(
            DbError::Unavailable { .. } | DbError::Overloaded | DbError::IsBootstrapping,
            _
        ) | RequestAttemptError::UnableToAllocStreamId
    )
}

/// Maps a driver execution error: the message names the step, the cause is the driver's text.
pub(crate) fn execution_error(err: ExecutionError, step: &str) -> Error {
    let (kind, temporary) = classify(&err);
    let mapped = Error::new(kind, format!("cassandra: {step} failed")).with_driver_error(err);
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
fn new_session_error(err: NewSessionError, shown: &str, password: Option<&str>) -> Error {
    let kind = match &err {
        NewSessionError::FailedToResolveAnyHostname(_) | NewSessionError::EmptyKnownNodesList => {
            ErrorKind::ConfigInvalid
        }
        _ => ErrorKind::Unavailable,
    };
    let mut text = err.to_string();
    if let Some(password) = password.filter(|p| !p.is_empty()) {
        text = text.replace(password, "***");
    }
    let mapped =
        Error::new(kind, format!("cannot connect to cassandra at {shown}")).with_driver_error(text);
    if kind == ErrorKind::Unavailable {
        mapped.set_temporary()
    } else {
        mapped
    }
}
