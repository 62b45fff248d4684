//! End-to-end check of `tern-cql-server` with the `scylla` 1.x driver (the driver the Cassandra
//! adapter uses): DDL, prepared inserts, paging with a resumed paging state, batch, delete, and
//! the rejection of lightweight transactions.

use std::ops::ControlFlow;

use anyhow::{Context, Result, ensure};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;
use scylla::statement::batch::Batch;
use tern_cql_server::{CqlServer, LWT_IN_BATCH};

/// Starts a server on an ephemeral loopback port and connects a driver session to it.
async fn start() -> Result<Session> {
    let addr = CqlServer::spawn_on_loopback().await?;
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

/// Creates the keyspace `tern_it` if need be, then runs `create` (a table in it).
async fn create_table(session: &Session, create: &str) -> Result<()> {
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS tern_it WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session.query_unpaged(create, &[]).await?;
    Ok(())
}

/// How many rows `select` (no bound values) answers.
async fn row_count(session: &Session, select: &str) -> Result<usize> {
    Ok(session
        .query_unpaged(select, &[])
        .await?
        .into_rows_result()?
        .rows_num())
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
    create_table(
        &session,
        "CREATE TABLE IF NOT EXISTS tern_it.items (k int, c int, v text, PRIMARY KEY (k, c))",
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

async fn lwt_table(session: &Session) -> Result<()> {
    create_table(
        session,
        "CREATE TABLE IF NOT EXISTS tern_it.lwt (k text PRIMARY KEY, r bigint, v text)",
    )
    .await
}

/// `[applied]` of an LWT answer.
fn applied(result: scylla::response::query_result::QueryResult) -> Result<bool> {
    let rows = result.into_rows_result()?;
    let (applied,) = rows.first_row::<(bool,)>().or_else(|_| {
        // Not applied on an existing row: more columns follow.
        let row = rows
            .rows::<scylla::value::Row>()?
            .next()
            .context("no row")??;
        match row.columns.first() {
            Some(Some(scylla::value::CqlValue::Boolean(b))) => Ok::<_, anyhow::Error>((*b,)),
            other => anyhow::bail!("first column is not [applied]: {other:?}"),
        }
    })?;
    Ok(applied)
}

#[tokio::test]
async fn lightweight_transactions_compare_and_set() -> Result<()> {
    let session = start().await?;
    lwt_table(&session).await?;

    // Simple statement, IF NOT EXISTS: applied once, then not (with the current row).
    let insert = "INSERT INTO tern_it.lwt (k, r, v) VALUES (?, ?, ?) IF NOT EXISTS";
    let values = ("a", 1_i64, "x");
    ensure!(applied(session.query_unpaged(insert, values).await?)?);
    let again = session
        .query_unpaged(insert, values)
        .await?
        .into_rows_result()?;
    let names: Vec<&str> = again.column_specs().iter().map(|c| c.name()).collect();
    ensure!(names.first() == Some(&"[applied]"), "{names:?}");
    ensure!(names.contains(&"v"), "current row not returned: {names:?}");

    // Prepared UPDATE ... IF r = ? AND v = ?: compares every column.
    let update = session
        .prepare("UPDATE tern_it.lwt SET r = ?, v = ? WHERE k = ? IF r = ? AND v = ?")
        .await?;
    ensure!(!applied(
        session
            .execute_unpaged(&update, (2_i64, "y", "a", 1_i64, "other"))
            .await?
    )?);
    ensure!(!applied(
        session
            .execute_unpaged(&update, (2_i64, "y", "a", 9_i64, "x"))
            .await?
    )?);
    ensure!(!applied(
        session
            .execute_unpaged(&update, (2_i64, "y", "missing", 1_i64, "x"))
            .await?
    )?);
    ensure!(applied(
        session
            .execute_unpaged(&update, (2_i64, "y", "a", 1_i64, "x"))
            .await?
    )?);
    let (r, v) = session
        .query_unpaged("SELECT r, v FROM tern_it.lwt WHERE k = 'a'", &[])
        .await?
        .into_rows_result()?
        .first_row::<(i64, String)>()?;
    ensure!((r, v.as_str()) == (2, "y"));
    let missing = row_count(&session, "SELECT r FROM tern_it.lwt WHERE k = 'missing'").await?;
    ensure!(missing == 0, "a failed condition wrote a row");

    // DELETE ... IF r = ?, DELETE ... IF EXISTS.
    let delete = session
        .prepare("DELETE FROM tern_it.lwt WHERE k = ? IF r = ?")
        .await?;
    ensure!(!applied(
        session.execute_unpaged(&delete, ("a", 1_i64)).await?
    )?);
    ensure!(applied(
        session.execute_unpaged(&delete, ("a", 2_i64)).await?
    )?);
    let exists = session
        .prepare("DELETE FROM tern_it.lwt WHERE k = ? IF EXISTS")
        .await?;
    ensure!(!applied(session.execute_unpaged(&exists, ("a",)).await?)?);

    // Conditions inside a BATCH are refused, and nothing is written.
    let mut batch = Batch::default();
    batch.append_statement("INSERT INTO tern_it.lwt (k, r) VALUES ('b', 1) IF NOT EXISTS");
    let err = session
        .batch(&batch, ((),))
        .await
        .err()
        .context("LWT batch was accepted")?;
    ensure!(err.to_string().contains(LWT_IN_BATCH), "{err}");
    let rows = row_count(&session, "SELECT k FROM tern_it.lwt").await?;
    ensure!(rows == 0, "{rows} rows left");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_compare_and_set_has_exactly_one_winner() -> Result<()> {
    let session = std::sync::Arc::new(start().await?);
    lwt_table(&session).await?;
    let insert = session
        .prepare("INSERT INTO tern_it.lwt (k, r, v) VALUES (?, ?, ?) IF NOT EXISTS")
        .await?;
    let update = session
        .prepare("UPDATE tern_it.lwt SET r = ?, v = ? WHERE k = ? IF r = ?")
        .await?;
    session
        .execute_unpaged(&insert, ("c", 0_i64, "start"))
        .await?;
    // 8 tasks, 20 rounds: in each round every task tries to move r from n to n + 1.
    for round in 0..20_i64 {
        let mut tasks = Vec::new();
        for t in 0..8 {
            let (session, update) = (session.clone(), update.clone());
            tasks.push(tokio::spawn(async move {
                let result = session
                    .execute_unpaged(&update, (round + 1, format!("task{t}"), "c", round))
                    .await?;
                applied(result)
            }));
        }
        let mut winners = 0;
        for task in tasks {
            winners += usize::from(task.await??);
        }
        ensure!(winners == 1, "round {round}: {winners} winners");
    }
    let winners_of_insert = {
        let mut tasks = Vec::new();
        for t in 0..8_i64 {
            let (session, insert) = (session.clone(), insert.clone());
            tasks.push(tokio::spawn(async move {
                applied(session.execute_unpaged(&insert, ("d", t, "x")).await?)
            }));
        }
        let mut n = 0;
        for task in tasks {
            n += usize::from(task.await??);
        }
        n
    };
    ensure!(winners_of_insert == 1, "{winners_of_insert} inserts won");
    Ok(())
}
