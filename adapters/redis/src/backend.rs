//! The [`Store`] implementation of [`RedisStore`]: each method delegates to
//! `core` or to the feature file that implements it.

use std::collections::BTreeSet;

use async_trait::async_trait;
use tern_core::model::{Entity, Key};
use tern_core::store::{
    Advanced, AtomicScope, AtomicWrites, Error, ErrorKind, Features, Filter, FormerNameReads,
    Guard, KindRename, MetaCas, MetaChange, MetaEntry, Pushdown, PushdownPage, PushdownRequest,
    RenameKindPage, RenameKindRequest, Result, ScanPage, ScanRequest, ServerClock, StepsFrom,
    Store, StoreInfo, Write, WriteOutcome,
};
use tracing::Instrument;

use crate::codec;
use crate::config::{KindLayout, REDIS_SCHEME};
use crate::core::{RedisStore, WRITES_PER_CALL, parse_revision};

#[async_trait]
impl Store for RedisStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: REDIS_SCHEME,
            location: self.config.redacted.clone(),
        }
    }

    /// SCAN may return a key twice: no `scan_ordered`. No batch with its
    /// checkpoint in one step (a batch, then its checkpoint).
    fn features(&self) -> Features<'_> {
        Features {
            // Hash kinds run unconditional steps in the server; with every kind a
            // JSON string (`json=*`) there is nothing to push down, and a
            // cluster would need a script per master.
            pushdown: (!self.config.json_all && !self.config.cluster).then_some(self),
            // One script over keys of several kinds: on a cluster they lie in
            // different slots, which one script cannot touch, unless each id
            // is the keys' hash tag (`id_tag=1`): then the keys of one id do.
            atomic_writes: (!self.config.cluster || self.config.id_tag).then_some(self),
            atomic_writes_hint: (self.config.cluster && !self.config.id_tag).then_some(
                "a Redis Cluster has it with `id_tag=1` in its URL, which keeps the keys of \
                 one id in one slot",
            ),
            kind_rename: Some(self),
            former_name_reads: Some(self),
            server_clock: Some(self),
            lazy_in_server: self
                .has_module()
                .then_some("tern's server module (tern-redis-module) is loaded there"),
            partitions: Some(self),
            ..Features::default()
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        let pattern = format!("{}*", codec::glob_escape(self.keys.namespace()));
        let mut kinds = BTreeSet::new();
        for node in self.each_node() {
            let mut cursor = 0;
            loop {
                let (next, keys) = self.scan_keys(node, cursor, &pattern, 1000, None).await?;
                for k in &keys {
                    if let Some(kind) = self.keys.kind_of(k)
                        && !kinds.contains(kind)
                    {
                        kinds.insert(kind.to_owned());
                    }
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(kinds.into_iter().collect())
    }

    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        self.keys.check_kind(kind)?;
        let (keys, cursor) = self
            .scan_page(
                &self.keys.kind_pattern(kind),
                Some(self.type_name(kind)),
                request.cursor.as_ref(),
                request.limit,
            )
            .instrument(tracing::debug_span!("page_keys"))
            .await?;
        // Keys of a longer declared kind match the pattern too: not ours.
        let keys: Vec<String> = keys
            .into_iter()
            .filter(|k| self.keys.owns(kind, k))
            .collect();
        let mut entities = self
            .fetch(kind, &keys)
            .instrument(tracing::debug_span!("fetch"))
            .await?;
        entities.retain(|e| request.filter.matches(e));
        Ok(ScanPage { entities, cursor })
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Entity>>> {
        let Some(first) = keys.first() else {
            return Ok(Vec::new());
        };
        if keys.iter().any(|k| k.kind != first.kind) {
            return tern_core::store::get_each(self, keys).await;
        }
        // One pipelined round trip for keys of one kind, answered in order.
        let redis_keys = keys
            .iter()
            .map(|k| self.keys.entity_key(k))
            .collect::<Result<Vec<_>>>()?;
        self.fetch_at(&first.kind, &redis_keys, |i| {
            keys.get(i)
                .cloned()
                .ok_or_else(|| Error::new(ErrorKind::Unexpected, "more replies than keys read"))
        })
        .await
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        let redis_key = self.keys.entity_key(key)?;
        let vf = self.config.version_field.as_str();
        let read_failed = |e| {
            self.err("reading an entity", e)
                .with_context("key", key.to_string())
        };
        match self.config.layout(&key.kind) {
            KindLayout::Hash => {
                let fields: Vec<(String, String)> = redis::cmd("HGETALL")
                    .arg(&redis_key)
                    .query_async(&mut self.conn())
                    .await
                    .map_err(read_failed)?;
                codec::entity_from_hash(key.clone(), fields, vf)
            }
            KindLayout::Json => {
                let text: Option<String> = redis::cmd("GET")
                    .arg(&redis_key)
                    .query_async(&mut self.conn())
                    .await
                    .map_err(read_failed)?;
                text.map(|t| codec::entity_from_json(key.clone(), &t, vf))
                    .transpose()
            }
            _ => Ok(self
                .fetch(&key.kind, std::slice::from_ref(&redis_key))
                .await?
                .pop()),
        }
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        let mut outcomes = Vec::with_capacity(writes.len());
        for chunk in writes.chunks(WRITES_PER_CALL) {
            outcomes.extend(self.write_chunk(chunk).await?);
        }
        Ok(outcomes)
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        let (rev, doc): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(self.keys.meta_key(name))
            .arg("rev")
            .arg("doc")
            .query_async(&mut self.control())
            .await
            .map_err(|e| self.err("reading metadata", e).with_context("name", name))?;
        match (rev, doc) {
            (Some(rev), Some(value)) => Ok(Some(MetaEntry {
                value,
                revision: parse_revision(name, &rev)?,
            })),
            _ => Ok(None),
        }
    }

    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        let MetaChange { expected, value } = change;
        let reply: Vec<String> = self
            .meta_script
            .key(self.keys.meta_key(name))
            .arg(expected.map(|r| r.to_string()).unwrap_or_default())
            .arg(if value.is_some() { "set" } else { "del" })
            .arg(value.unwrap_or(""))
            .invoke_async(&mut self.control())
            .await
            .map_err(|e| self.err("writing metadata", e).with_context("name", name))?;
        match reply.as_slice() {
            [status, rev] if status == "applied" => {
                Ok(MetaCas::Applied(parse_revision(name, rev)?))
            }
            [status] if status == "conflict" => Ok(MetaCas::Conflict(None)),
            [status, rev, doc] if status == "conflict" => Ok(MetaCas::Conflict(Some(MetaEntry {
                value: doc.clone(),
                revision: parse_revision(name, rev)?,
            }))),
            other => Err(Error::new(
                ErrorKind::Unexpected,
                format!("the metadata script answered {other:?}"),
            )
            .with_context("name", name)),
        }
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        let meta_prefix = self.keys.meta_prefix();
        let pattern = format!("{}*", codec::glob_escape(&format!("{meta_prefix}{prefix}")));
        let mut names = BTreeSet::new();
        for node in self.each_node() {
            let mut cursor = 0;
            loop {
                let (next, keys) = self.scan_keys(node, cursor, &pattern, 1000, None).await?;
                names.extend(
                    keys.iter()
                        .filter_map(|k| k.strip_prefix(meta_prefix.as_str()))
                        .map(str::to_owned),
                );
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(names.into_iter().collect())
    }

    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        self.count_entities(kind, filter).await
    }
}

#[async_trait]
impl AtomicWrites for RedisStore {
    fn scope(&self) -> AtomicScope {
        if self.config.cluster {
            AtomicScope::OneId
        } else {
            AtomicScope::AnyKeys
        }
    }

    /// One Lua script: every condition checked, then every write applied.
    async fn write_atomic(&self, guards: Vec<Guard>, writes: Vec<Write>) -> Result<WriteOutcome> {
        self.write_atomic_script(guards, writes).await
    }
}

#[async_trait]
impl Pushdown for RedisStore {
    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage> {
        self.pushdown_page(request).await
    }
}

#[async_trait]
impl FormerNameReads for RedisStore {
    async fn get_advanced(
        &self,
        key: &Key,
        formers: &[Key],
        steps: Option<&StepsFrom>,
    ) -> Result<Option<Advanced>> {
        if self.module {
            // The server's module migrates what a plain read names: no script.
            return Err(crate::module::declined());
        }
        match steps {
            Some(steps) => self.get_advanced_hash(key, formers, steps).await,
            None => self.get_moving_script(key, formers).await,
        }
    }
}

#[async_trait]
impl KindRename for RedisStore {
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        self.rename_kind_page(request).await
    }
}

#[async_trait]
impl ServerClock for RedisStore {
    async fn now(&self) -> Result<i64> {
        let (secs, micros): (i64, i64) = redis::cmd("TIME")
            .query_async(&mut self.control())
            .await
            .map_err(|e| self.err("reading the server clock", e))?;
        Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
    }
}
