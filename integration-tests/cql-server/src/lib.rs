//! A small CQL v4 test server around the [`kassandra`] crate, for tern's integration tests.
//!
//! No registry reachable from the build machines ships Cassandra or ScyllaDB, so the Cassandra
//! adapter's integration tests run against this in-memory, single-node stand-in. It speaks the
//! native protocol v4 (no compression, no authentication) and works with the `scylla` 1.x driver
//! when the session is built with `auto_await_schema_agreement(false)` and
//! `fetch_schema_metadata(false)` (it has no `system.peers` and no real schema tables).
//!
//! # Supported (by kassandra)
//! - `CREATE KEYSPACE` / `CREATE TABLE` / `CREATE TYPE` (with `IF NOT EXISTS`), `USE`.
//! - `INSERT`, `UPDATE`, `DELETE`, `SELECT` (incl. `JSON`, `toJson`, aliases, `LIMIT`),
//!   as simple or prepared statements, and protocol-level `BATCH`.
//! - Paging: page size and paging state (resume from a returned paging state).
//!
//! - Lightweight transactions (kassandra has none: it would silently ignore the condition and
//!   apply the write). This server implements them itself (module `cas`): every request runs under
//!   one server-wide lock; a write with `IF NOT EXISTS`, `IF EXISTS` or `IF c1 = ? [AND c2 = ?]`
//!   reads the addressed row through kassandra, evaluates the condition, applies the write
//!   without its condition only when it holds, and answers Cassandra's result set (`[applied]`,
//!   plus the current values of the condition columns when not applied and the row exists).
//!   Conditions compare scalars and collections (sets and maps regardless of element order).
//!   As QUERY (with bound values) or PREPARE/EXECUTE.
//!
//! # Not supported
//! - Conditions with literals instead of bind markers, other operators (`<`, `IN`, `!=`),
//!   conditions on partitions with several rows, and conditional statements inside a `BATCH`
//!   (answered with an `Invalid` error, [`LWT_IN_BATCH`]).
//! - `ALTER`, `DROP`, `TRUNCATE`: kassandra answers a syntax error.
//! - `token()` (no token-range queries), quoted identifiers, `IN`, ranges in `WHERE`.
//!
//! The server lists what it lacks in the table `tern_cql_server.unsupported` ([`UNSUPPORTED`]),
//! so that tests can name the reason when they skip what needs a real cluster.
//! - Authentication, compression, events (REGISTER is acknowledged, nothing is ever pushed),
//!   TTL/`USING TIMESTAMP` semantics, secondary indexes, materialized views, real system/schema
//!   tables, persistence (all data is lost when the process stops).
//! - The current keyspace (`USE`) is tracked per connection, but a connection that never issued
//!   `USE` may resolve unqualified table names against another connection's keyspace instead of
//!   getting an error.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use futures::{SinkExt, StreamExt};
use kassandra::KassandraSession;
use kassandra::error::DbError;
use kassandra::frame::request::query::Query;
use kassandra::frame::request::{QueryParameters, Request, RequestOpcode};
use kassandra::frame::response::{Response, error::Error as CqlError, result::QueryResult};
use kassandra::frame::{FrameFlags, request_stream, response_sink};
use tokio::net::{TcpListener, TcpStream};

mod cas;
mod lwt;
mod nulls;

pub use cas::Condition;
pub use lwt::{has_lwt_condition, split_condition, statement_texts};

/// `k1 = ? AND k2 = ?`: a WHERE clause binding each of `keys` to a marker.
fn keys_bound(keys: &[impl std::fmt::Display]) -> String {
    keys.iter()
        .map(|k| format!("{k} = ?"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// Error message sent for conditional statements inside a BATCH.
pub const LWT_IN_BATCH: &str = "conditional statements (IF ...) inside a BATCH are not supported \
     by this test server; send them one by one";

/// The keyspace where the server describes itself.
pub const SELF_KEYSPACE: &str = "tern_cql_server";

/// What this server does not support, as seeded into `tern_cql_server.unsupported
/// (feature text PRIMARY KEY, reason text)`: a client (the integration tests) can tell that
/// it talks to this stand-in and skip what needs a real cluster, naming the reason. Real
/// Cassandra and ScyllaDB have no such table.
pub const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "alter",
        "tern-cql-server (kassandra) cannot run ALTER TABLE (no schema changes after CREATE)",
    ),
    ("drop", "tern-cql-server (kassandra) cannot run DROP"),
    (
        "truncate",
        "tern-cql-server (kassandra) cannot run TRUNCATE",
    ),
    (
        "token",
        "tern-cql-server (kassandra) has no token() function (no token-range queries)",
    ),
    (
        "lwt_clustering",
        "tern-cql-server evaluates conditions only on partitions of one row",
    ),
];

/// An in-memory CQL server: one kassandra database shared by every connection.
#[derive(Debug, Clone, Default)]
pub struct CqlServer {
    state: Arc<Mutex<State>>,
}

/// Everything behind the server-wide lock.
#[derive(Debug)]
struct State {
    db: KassandraSession,
    /// Conditional statements prepared by this server (kassandra prepared their parts).
    lwt: HashMap<u128, cas::LwtPrepared>,
    /// The last id given to a conditional statement.
    next_id: u128,
    /// Prepared INSERTs and UPDATEs (by kassandra's id), for their null cells.
    writes: HashMap<u128, nulls::WriteInfo>,
    /// The key columns of each table.
    keys: nulls::Keys,
}

impl Default for State {
    fn default() -> Self {
        let mut db = KassandraSession::new();
        let mut seed = vec![
            format!(
                "CREATE KEYSPACE IF NOT EXISTS {SELF_KEYSPACE} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {SELF_KEYSPACE}.unsupported \
                 (feature text PRIMARY KEY, reason text)"
            ),
        ];
        for (feature, reason) in UNSUPPORTED {
            seed.push(format!(
                "INSERT INTO {SELF_KEYSPACE}.unsupported (feature, reason) VALUES ('{feature}', '{}')",
                reason.replace('\'', "''")
            ));
        }
        for cql in &seed {
            if let Err(err) = Query::simple(cql).and_then(|q| db.process(q)) {
                eprintln!("tern-cql-server: cannot describe itself ({cql}): {err:?}");
            }
        }
        State {
            db,
            lwt: HashMap::new(),
            next_id: 0,
            writes: HashMap::new(),
            keys: nulls::Keys::default(),
        }
    }
}

impl CqlServer {
    /// A server whose database holds only its self-description (see [`UNSUPPORTED`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a fresh server on an ephemeral port of 127.0.0.1, serving in a task of its own
    /// (for tests); its address.
    ///
    /// # Errors
    /// The port cannot be bound.
    pub async fn spawn_on_loopback() -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(CqlServer::new().serve(listener));
        Ok(addr)
    }

    /// Accepts connections on `listener` forever, one task per connection.
    pub async fn serve(self, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    tokio::spawn(self.clone().connection(stream, peer));
                }
                Err(err) => {
                    eprintln!("tern-cql-server: accept failed: {err}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    async fn connection(self, mut stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let (mut read, mut write) = stream.split();
        let mut requests = request_stream(&mut read);
        let mut responses = response_sink(&mut write);
        // The keyspace chosen with `USE` on this connection.
        let mut keyspace: Option<String> = None;
        while let Some(frame) = requests.next().await {
            let (params, opcode, body) = match frame {
                Ok(frame) => frame,
                Err(err) => {
                    eprintln!("tern-cql-server: {peer}: bad frame, closing: {err}");
                    break;
                }
            };
            let response = if params.version.is_unsupported() {
                Response::unsupported_version()
            } else {
                catch_unwind(AssertUnwindSafe(|| {
                    self.handle(opcode, &body, params.flags, &mut keyspace)
                }))
                .unwrap_or_else(|_| {
                    error(
                        DbError::ServerError,
                        "kassandra panicked on this request (see server log)",
                    )
                })
            };
            if let Err(err) = responses.send((response, params.stream)).await {
                eprintln!("tern-cql-server: {peer}: write failed, closing: {err}");
                break;
            }
        }
    }

    /// Answers one request frame.
    fn handle(
        &self,
        opcode: RequestOpcode,
        body: &[u8],
        flags: FrameFlags,
        keyspace: &mut Option<String>,
    ) -> Response {
        if opcode == RequestOpcode::AuthResponse {
            return error(DbError::ProtocolError, "authentication is not supported");
        }
        // Checked on the raw frame, before kassandra parses (and drops) the condition.
        let texts = statement_texts(opcode, body);
        let lwt_text = texts.iter().copied().find(|cql| has_lwt_condition(cql));
        if lwt_text.is_some() && opcode == RequestOpcode::Batch {
            return error(DbError::Invalid, LWT_IN_BATCH);
        }
        // One lock for every request: a conditional write reads, checks and writes atomically.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State {
            db,
            lwt,
            next_id,
            writes,
            keys,
        } = &mut *state;
        if let Some(ks) = keyspace.as_deref() {
            db.use_keyspace(ks);
        }
        let mut result = if let Some(cql) = lwt_text {
            // Handled from the raw frame: kassandra's parser would drop the condition.
            match opcode {
                RequestOpcode::Prepare => cas::prepare(db, cql).map(|prepared| {
                    *next_id += 1;
                    // kassandra's ids are ULIDs (time in the high bits): these never collide.
                    let id = *next_id;
                    let answer = prepared.prepared(id);
                    lwt.insert(id, prepared);
                    answer
                }),
                _ => {
                    // QUERY body: <long string><query parameters>.
                    let params = body
                        .get(4 + cql.len()..)
                        .ok_or_else(|| CqlError::new(DbError::ProtocolError, "short frame"))
                        .and_then(|rest| QueryParameters::parse(rest, flags));
                    params.and_then(|params| {
                        cas::prepare(db, cql).and_then(|p| p.execute(db, keys, &params))
                    })
                }
            }
        } else {
            match Request::deserialize(opcode, body, flags) {
                Err(err) => Err(err),
                Ok(Request::Execute(execute)) => {
                    let id = <[u8; 16]>::try_from(execute.id)
                        .map(u128::from_be_bytes)
                        .ok();
                    match id.and_then(|id| lwt.get(&id)) {
                        Some(prepared) => prepared.execute(db, keys, &execute.parameters),
                        None => {
                            let values = execute.parameters.data.clone();
                            let params = execute.parameters.clone();
                            let write = id.and_then(|id| writes.get(&id)).cloned();
                            db.execute(execute).and_then(|result| match write {
                                Some(write) => {
                                    nulls::clear_nulls(db, keys, &write, &values, &params)
                                        .map(|()| result)
                                }
                                None => Ok(result),
                            })
                        }
                    }
                }
                Ok(Request::StartUp(_) | Request::Register { .. }) => return Response::Ready,
                Ok(Request::Options) => return Response::options(),
                Ok(Request::AuthResponse) => {
                    return error(DbError::ProtocolError, "authentication is not supported");
                }
                Ok(Request::Query(query)) => db.process(query),
                Ok(Request::Prepare(query)) => db.prepare(query).inspect(|result| {
                    if let (Some(cql), QueryResult::Prepared(p)) = (texts.first(), result)
                        && let Some(write) = nulls::write_info(cql, result)
                    {
                        writes.insert(p.id, write);
                    }
                }),
                Ok(Request::Batch(batch)) => db.process_batch(batch),
            }
        };
        if let Ok(result) = &mut result {
            if let QueryResult::SetKeyspace(set) = result {
                *keyspace = Some(set.keyspace_name.clone());
            }
            nulls::empty_cells_are_null(result);
        }
        result.map_or_else(Response::Error, Response::Result)
    }
}

fn error(kind: DbError, message: &str) -> Response {
    Response::Error(CqlError::new(kind, message))
}
