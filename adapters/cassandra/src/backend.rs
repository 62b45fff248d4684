//! [`CassStore`]: the [`Store`] implementation (the store type, its constructor and its
//! driver calls live in `core` and the feature files).

use std::collections::HashMap;

use async_trait::async_trait;
use futures::StreamExt;
use scylla::response::PagingState;
use tern_core::model::{Entity, Key};
use tern_core::store::{
    Error, ErrorKind, Features, MetaCas, MetaChange, MetaEntry, Result, ScanPage, ScanRequest,
    SchemaChange, SchemaHooks, ServerClock, Store, StoreInfo, Write, WriteOutcome,
};

use crate::config::CASSANDRA_SCHEME;
use crate::core::{
    CassStore, KINDS_TABLE, Layout, LwtOutcome, META_TABLE, Retry, WriteMode, driver_error,
    rows_of, table_of,
};
use crate::resolve::{self, Resolution};

#[async_trait]
impl Store for CassStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: CASSANDRA_SCHEME,
            location: self.core.config.shown.clone(),
        }
    }

    /// Scans run in token order: no `scan_ordered`. No server-side update, no
    /// multi-partition transactions (no atomic writes, no batch with its
    /// checkpoint in one step). The server's clock where it answered at open. Puts and
    /// deletes through Paxos on request (`serial_writes`: plain writes are not ordered
    /// against lightweight transactions).
    fn features(&self) -> Features<'_> {
        Features {
            kind_rename: Some(self),
            schema_hooks: Some(self),
            server_clock: self.server_clock.then_some(self),
            partitions: Some(self),
            serial_writes: Some(self),
            ..Features::default()
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
        self.scan_kind(kind, None, &request).await
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        self.get_with(key, false).await
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        self.run_writes(writes, WriteMode::Plain).await
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        self.meta_read(name, false).await
    }

    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        let MetaChange { expected, value } = change;
        if expected.is_none() && value.is_none() {
            // Delete what must not exist: nothing to do unless it does.
            return Ok(match self.meta_get(name).await? {
                None => MetaCas::Applied(0),
                Some(current) => MetaCas::Conflict(Some(current)),
            });
        }
        let ok = match self
            .meta_cas_once(name, MetaChange { expected, value })
            .await?
        {
            LwtOutcome::Applied(ok) => ok,
            LwtOutcome::Unknown(err) => {
                let stored = self.meta_read(name, true).await?;
                match resolve::meta(stored.as_ref(), expected, value) {
                    Resolution::Applied => true,
                    Resolution::Conflict => false,
                    // Surely not applied: the caller decides (the engine resumes).
                    Resolution::Retry => return Err(err),
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
                .execute_page(&statement, (), paging_state)
                .await
                .map_err(|e| driver_error(e, "listing metadata"))?;
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
}

#[async_trait]
impl ServerClock for CassStore {
    /// Offered only where the server answered at open (`server_clock`).
    async fn now(&self) -> Result<i64> {
        self.server_now().await
    }
}

#[async_trait]
impl SchemaHooks for CassStore {
    async fn prepare_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        self.native_prepare_schema(changes).await
    }

    async fn finish_schema(&self, changes: &[SchemaChange]) -> Result<()> {
        self.native_finish_schema(changes).await
    }
}

impl CassStore {
    /// Runs a batch of writes, puts and deletes as `mode` says: writes to one key form a
    /// chain run in order (the contract); chains run `concurrency` at a time, one statement
    /// per write. No multi-partition batches: each write is atomic on its own, which is all
    /// the contract asks.
    pub(crate) async fn run_writes(
        &self,
        writes: Vec<Write>,
        mode: WriteMode,
    ) -> Result<Vec<WriteOutcome>> {
        let total = writes.len();
        let mut chains: Vec<Vec<(usize, Write)>> = Vec::new();
        let mut by_key: HashMap<Key, usize> = HashMap::new();
        for (i, write) in writes.into_iter().enumerate() {
            let key = write.key().clone();
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
                self.write_chain(chain, layout, mode)
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
}
