//! End-to-end check of `tern-cql-server` with the `scylla` 1.x driver (the driver the Cassandra
//! adapter uses): DDL, prepared inserts, paging with a resumed paging state, batch, delete, and
//! the rejection of lightweight transactions.

use std::ops::ControlFlow;

use anyhow::{Context, Result, ensure};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;
use scylla::statement::batch::Batch;
use tern_cql_server::{CqlServer, LWT_UNSUPPORTED};
use tokio::net::TcpListener;

/// Starts a server on an ephemeral loopback port and connects a driver session to it.
async fn start() -> Result<Session> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(CqlServer::new().serve(listener));
    let session = SessionBuilder::new()
        .known_node_addr(addr)
        // kassandra has no system.peers / schema tables: see ENVIRONMENT.md.
        .auto_await_schema_agreement(false)
        .fetch_schema_metadata(false)
        .build()
        .await
        .context("connecting the scylla driver")?;
    Ok(session)
}

async fn count_rows(session: &Session, k: i32) -> Result<usize> {
    let result = session
        .query_unpaged("SELECT c FROM tern_it.items WHERE k = ?", (k,))
        .await?
        .into_rows_result()?;
    Ok(result.rows_num())
}

#[tokio::test]
async fn scylla_driver_round_trip() -> Result<()> {
    let session = start().await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS tern_it WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS tern_it.items \
             (k int, c int, v text, PRIMARY KEY (k, c))",
            &[],
        )
        .await?;

    let insert = session
        .prepare("INSERT INTO tern_it.items (k, c, v) VALUES (?, ?, ?)")
        .await?;
    for c in 0..5 {
        session
            .execute_unpaged(&insert, (1_i32, c, format!("v{c}")))
            .await?;
    }
    session
        .execute_unpaged(&insert, (2_i32, 0_i32, "other"))
        .await?;

    // Paging: page size 2 over 5 rows, resuming from each returned paging state.
    let mut select = session
        .prepare("SELECT c, v FROM tern_it.items WHERE k = ?")
        .await?;
    select.set_page_size(2);
    let mut paging_state = PagingState::start();
    let mut pages = Vec::new();
    loop {
        let (result, next) = session
            .execute_single_page(&select, (1_i32,), paging_state)
            .await?;
        let rows: Vec<(i32, String)> = result
            .into_rows_result()?
            .rows::<(i32, String)>()?
            .collect::<Result<_, _>>()?;
        pages.push(rows);
        match next.into_paging_control_flow() {
            ControlFlow::Break(()) => break,
            ControlFlow::Continue(state) => paging_state = state,
        }
        ensure!(pages.len() <= 5, "paging does not terminate: {pages:?}");
    }
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    ensure!(sizes == [2, 2, 1], "page sizes {sizes:?}: {pages:?}");
    let all: Vec<(i32, String)> = pages.into_iter().flatten().collect();
    let expected: Vec<(i32, String)> = (0..5).map(|c| (c, format!("v{c}"))).collect();
    ensure!(all == expected, "rows {all:?}");

    // Batch of prepared statements.
    let mut batch = Batch::default();
    batch.append_statement(insert.clone());
    batch.append_statement(insert.clone());
    session
        .batch(&batch, ((3_i32, 0_i32, "b0"), (3_i32, 1_i32, "b1")))
        .await?;
    ensure!(count_rows(&session, 3).await? == 2);

    // Delete one row, then a whole partition.
    session
        .query_unpaged(
            "DELETE FROM tern_it.items WHERE k = ? AND c = ?",
            (1_i32, 4_i32),
        )
        .await?;
    ensure!(count_rows(&session, 1).await? == 4);
    let delete = session
        .prepare("DELETE FROM tern_it.items WHERE k = ?")
        .await?;
    session.execute_unpaged(&delete, (2_i32,)).await?;
    ensure!(count_rows(&session, 2).await? == 0);
    ensure!(count_rows(&session, 1).await? == 4);
    Ok(())
}

#[tokio::test]
async fn lightweight_transactions_are_rejected() -> Result<()> {
    let session = start().await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS tern_it WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS tern_it.lwt (k int PRIMARY KEY, v int)",
            &[],
        )
        .await?;

    let simple = session
        .query_unpaged(
            "INSERT INTO tern_it.lwt (k, v) VALUES (1, 1) IF NOT EXISTS",
            &[],
        )
        .await;
    let err = simple.err().context("unprepared LWT insert was accepted")?;
    ensure!(err.to_string().contains(LWT_UNSUPPORTED), "{err}");

    let prepared = session
        .prepare("UPDATE tern_it.lwt SET v = ? WHERE k = ? IF v = ?")
        .await;
    let err = prepared.err().context("LWT update was prepared")?;
    ensure!(err.to_string().contains(LWT_UNSUPPORTED), "{err}");

    let mut batch = Batch::default();
    batch.append_statement("INSERT INTO tern_it.lwt (k, v) VALUES (2, 2) IF NOT EXISTS");
    let err = session
        .batch(&batch, ((),))
        .await
        .err()
        .context("LWT batch was accepted")?;
    ensure!(err.to_string().contains(LWT_UNSUPPORTED), "{err}");

    // Nothing was written by the rejected statements.
    let rows = session
        .query_unpaged("SELECT k FROM tern_it.lwt", &[])
        .await?
        .into_rows_result()?
        .rows_num();
    ensure!(rows == 0, "{rows} rows written by rejected LWT statements");
    Ok(())
}
