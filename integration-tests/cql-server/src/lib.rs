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
//!   As QUERY (with bound values) or PREPARE/EXECUTE.
//!
//! # Not supported
//! - Conditions with literals instead of bind markers, other operators (`<`, `IN`, `!=`),
//!   conditions on partitions with several rows, and conditional statements inside a `BATCH`
//!   (answered with an `Invalid` error, [`LWT_IN_BATCH`]).
//! - `ALTER`, `DROP`, `TRUNCATE`: kassandra answers a syntax error.
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
use kassandra::frame::request::{QueryParameters, Request, RequestOpcode};
use kassandra::frame::response::{Response, error::Error as CqlError, result::QueryResult};
use kassandra::frame::{FrameFlags, request_stream, response_sink};
use tokio::net::{TcpListener, TcpStream};

mod cas;
mod lwt;

pub use cas::Condition;
pub use lwt::{has_lwt_condition, split_condition, statement_texts};

/// Error message sent for conditional statements inside a BATCH.
pub const LWT_IN_BATCH: &str = "conditional statements (IF ...) inside a BATCH are not supported \
     by this test server; send them one by one";

/// An in-memory CQL server: one kassandra database shared by every connection.
#[derive(Debug, Clone, Default)]
pub struct CqlServer {
    state: Arc<Mutex<State>>,
}

/// Everything behind the server-wide lock.
#[derive(Debug, Default)]
struct State {
    db: KassandraSession,
    /// Conditional statements prepared by this server (kassandra prepared their parts).
    lwt: HashMap<u128, cas::LwtPrepared>,
    /// The last id given to a conditional statement.
    next_id: u128,
}

impl CqlServer {
    /// A server with an empty database.
    pub fn new() -> Self {
        Self::default()
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
        let lwt_text = statement_texts(opcode, body)
            .into_iter()
            .find(|cql| has_lwt_condition(cql));
        if lwt_text.is_some() && opcode == RequestOpcode::Batch {
            return error(DbError::Invalid, LWT_IN_BATCH);
        }
        // One lock for every request: a conditional write reads, checks and writes atomically.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { db, lwt, next_id } = &mut *state;
        if let Some(ks) = keyspace.as_deref() {
            db.use_keyspace(ks);
        }
        if let Some(cql) = lwt_text {
            // Handled from the raw frame: kassandra's parser would drop the condition.
            let result = match opcode {
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
                        cas::prepare(db, cql).and_then(|p| p.execute(db, &params))
                    })
                }
            };
            return result.map_or_else(Response::Error, Response::Result);
        }
        let request = match Request::deserialize(opcode, body, flags) {
            Ok(request) => request,
            Err(err) => return Response::Error(err),
        };
        if let Request::Execute(execute) = &request {
            let id = <[u8; 16]>::try_from(execute.id).map(u128::from_be_bytes);
            if let Some(prepared) = id.ok().and_then(|id| lwt.get(&id)) {
                return prepared
                    .execute(db, &execute.parameters)
                    .map_or_else(Response::Error, Response::Result);
            }
        }
        let result = match request {
            Request::StartUp(_) | Request::Register { .. } => return Response::Ready,
            Request::Options => return Response::options(),
            Request::AuthResponse => {
                return error(DbError::ProtocolError, "authentication is not supported");
            }
            Request::Query(query) => db.process(query),
            Request::Prepare(query) => db.prepare(query),
            Request::Execute(execute) => db.execute(execute),
            Request::Batch(batch) => db.process_batch(batch),
        };
        match result {
            Ok(result) => {
                if let QueryResult::SetKeyspace(set) = &result {
                    *keyspace = Some(set.keyspace_name.clone());
                }
                Response::Result(result)
            }
            Err(err) => Response::Error(err),
        }
    }
}

fn error(kind: DbError, message: &str) -> Response {
    Response::Error(CqlError::new(kind, message))
}
