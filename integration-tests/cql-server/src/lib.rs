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
//! # Not supported
//! - Lightweight transactions: kassandra would silently ignore `IF NOT EXISTS` / `IF EXISTS` /
//!   `IF col = ?` on writes and apply the write unconditionally. This server instead **rejects**
//!   every `INSERT`/`UPDATE`/`DELETE`/`BEGIN BATCH` statement containing an `IF` condition (in a
//!   QUERY, PREPARE or BATCH frame) with an `Invalid` error whose message is [`LWT_UNSUPPORTED`].
//! - `ALTER`, `DROP`, `TRUNCATE`: kassandra answers a syntax error.
//! - Authentication, compression, events (REGISTER is acknowledged, nothing is ever pushed),
//!   TTL/`USING TIMESTAMP` semantics, secondary indexes, materialized views, real system/schema
//!   tables, persistence (all data is lost when the process stops).
//! - The current keyspace (`USE`) is tracked per connection, but a connection that never issued
//!   `USE` may resolve unqualified table names against another connection's keyspace instead of
//!   getting an error.

use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use futures::{SinkExt, StreamExt};
use kassandra::KassandraSession;
use kassandra::error::DbError;
use kassandra::frame::request::{Request, RequestOpcode};
use kassandra::frame::response::{Response, error::Error as CqlError, result::QueryResult};
use kassandra::frame::{FrameFlags, request_stream, response_sink};
use tokio::net::{TcpListener, TcpStream};

mod lwt;

pub use lwt::{has_lwt_condition, statement_texts};

/// Error message sent for statements with lightweight-transaction conditions.
pub const LWT_UNSUPPORTED: &str = "lightweight transactions are not supported by this test server \
     (kassandra would silently apply the write); run LWT tests against a real Cassandra or ScyllaDB";

/// An in-memory CQL server: one kassandra database shared by every connection.
#[derive(Debug, Clone, Default)]
pub struct CqlServer {
    db: Arc<Mutex<KassandraSession>>,
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
        if statement_texts(opcode, body)
            .iter()
            .any(|cql| has_lwt_condition(cql))
        {
            return error(DbError::Invalid, LWT_UNSUPPORTED);
        }
        let request = match Request::deserialize(opcode, body, flags) {
            Ok(request) => request,
            Err(err) => return Response::Error(err),
        };
        let mut db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ks) = keyspace.as_deref() {
            db.use_keyspace(ks);
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
