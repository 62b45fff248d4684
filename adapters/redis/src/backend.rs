//! [`RedisStore`]: the [`Store`] implementation.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tern_core::model::{Entity, Key};
use tern_core::store::{
    Capability, Cursor, Error, ErrorKind, Filter, MetaCas, MetaEntry, PushdownPage,
    PushdownRequest, RenameKindPage, RenameKindRequest, Result, ScanPage, ScanRequest, Store,
    StoreInfo, VersionFilter, Write, WriteOutcome, check_writes,
};

use crate::codec::{self, Keys};
use crate::config::{KindLayout, REDIS_SCHEME, RedisConfig};
use crate::core::{META_CAS_SCRIPT, RENAME_KIND_SCRIPT, WRITE_SCRIPT, map_redis_error};
use crate::pushdown;

/// Writes per script call: bounds how long one call holds the server.
const WRITES_PER_CALL: usize = 500;

/// The COUNT of every SCAN step: buckets visited per round trip.
const SCAN_COUNT: usize = 1000;

/// The most SCAN steps one page issues before it returns short.
const SCAN_STEPS_PER_PAGE: usize = 64;

/// A tern store in a Redis database (see the crate docs for the layout).
#[derive(Clone)]
pub struct RedisStore {
    config: Arc<RedisConfig>,
    keys: Keys,
    conn: ConnectionManager,
    write_script: Arc<redis::Script>,
    meta_script: Arc<redis::Script>,
    pushdown_script: Arc<redis::Script>,
    count_script: Arc<redis::Script>,
    rename_script: Arc<redis::Script>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the server named by `config` and checks that it answers.
    ///
    /// # Errors
    /// [`ErrorKind::ConfigInvalid`] for a URL the driver refuses,
    /// [`ErrorKind::Unavailable`] (temporary) when the server does not answer.
    /// Messages name the URL without its password.
    pub async fn connect(config: RedisConfig) -> Result<RedisStore> {
        let client = redis::Client::open(config.connection.as_str()).map_err(|e| {
            Error::new(ErrorKind::ConfigInvalid, "the Redis URL is not valid")
                .with_context("url", config.redacted.clone())
                .with_source(e)
        })?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let unavailable = |e: redis::RedisError| {
            Error::new(
                ErrorKind::Unavailable,
                format!("cannot connect to Redis at {}", config.redacted),
            )
            .with_source(e)
            .set_temporary()
        };
        let mut conn = ConnectionManager::new_with_config(client, manager_config)
            .await
            .map_err(unavailable)?;
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(RedisStore {
            keys: Keys::new(&config),
            config: Arc::new(config),
            conn,
            write_script: Arc::new(redis::Script::new(WRITE_SCRIPT)),
            meta_script: Arc::new(redis::Script::new(META_CAS_SCRIPT)),
            pushdown_script: Arc::new(redis::Script::new(pushdown::PUSHDOWN_SCRIPT)),
            count_script: Arc::new(redis::Script::new(pushdown::COUNT_SCRIPT)),
            rename_script: Arc::new(redis::Script::new(RENAME_KIND_SCRIPT)),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    fn err(&self, operation: &str, e: redis::RedisError) -> Error {
        map_redis_error(operation, e).with_context("store", self.config.redacted.clone())
    }

    /// One SCAN step over `pattern`: the next cursor and the keys.
    async fn scan_keys(
        &self,
        cursor: u64,
        pattern: &str,
        count: usize,
        type_name: Option<&str>,
    ) -> Result<(u64, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count.max(1));
        if let Some(t) = type_name {
            cmd.arg("TYPE").arg(t);
        }
        cmd.query_async(&mut self.conn())
            .await
            .map_err(|e| self.err("scanning keys", e))
    }

    /// The next keys matching `pattern` (of Redis type `type_name`), at most
    /// `limit`, from `cursor`; and where to continue (`None`: done).
    ///
    /// Issues SCAN steps of [`SCAN_COUNT`] until it has `limit` keys, the
    /// iteration ends, or [`SCAN_STEPS_PER_PAGE`] steps found nothing more (a
    /// page may then be short or empty). The keys of one step are taken in
    /// sorted order, so a step with more keys than the page needs is resumed
    /// by repeating that step and skipping the keys up to the last one returned.
    async fn scan_page(
        &self,
        pattern: &str,
        type_name: Option<&str>,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<String>, Option<Cursor>)> {
        let limit = limit.max(1);
        let mut pos = ScanPos::parse(cursor)?;
        let mut out = Vec::new();
        for _ in 0..SCAN_STEPS_PER_PAGE {
            let (next, mut keys) = self
                .scan_keys(pos.cursor, pattern, SCAN_COUNT, type_name)
                .await?;
            keys.sort_unstable();
            keys.dedup();
            if let Some(after) = &pos.after {
                keys.retain(|k| k > after);
            }
            let room = limit - out.len();
            if keys.len() > room {
                keys.truncate(room);
                pos.after = keys.last().cloned();
                out.extend(keys);
                return Ok((out, Some(pos.to_cursor())));
            }
            out.extend(keys);
            if next == 0 {
                return Ok((out, None));
            }
            pos = ScanPos {
                cursor: next,
                after: None,
            };
            if out.len() == limit {
                break;
            }
        }
        Ok((out, Some(pos.to_cursor())))
    }

    /// Reads the entities at `redis_keys` (all of `kind`); vanished keys are skipped.
    async fn fetch(&self, kind: &str, redis_keys: &[String]) -> Result<Vec<Entity>> {
        if redis_keys.is_empty() {
            return Ok(Vec::new());
        }
        let layout = self.config.layout(kind);
        let vf = self.config.version_field.as_str();
        let mut pipe = redis::pipe();
        for k in redis_keys {
            match layout {
                KindLayout::Hash => pipe.cmd("HGETALL").arg(k),
                KindLayout::Json => pipe.cmd("GET").arg(k),
            };
        }
        let mut out = Vec::with_capacity(redis_keys.len());
        match layout {
            KindLayout::Hash => {
                let rows: Vec<Vec<(String, String)>> = pipe
                    .query_async(&mut self.conn())
                    .await
                    .map_err(|e| self.err("reading entities", e).with_context("kind", kind))?;
                for (k, fields) in redis_keys.iter().zip(rows) {
                    let key = self.keys.parse_entity_key(kind, k)?;
                    if let Some(e) = codec::entity_from_hash(key, fields, vf)? {
                        out.push(e);
                    }
                }
            }
            KindLayout::Json => {
                let rows: Vec<Option<String>> = pipe
                    .query_async(&mut self.conn())
                    .await
                    .map_err(|e| self.err("reading entities", e).with_context("kind", kind))?;
                for (k, text) in redis_keys.iter().zip(rows) {
                    if let Some(text) = text {
                        let key = self.keys.parse_entity_key(kind, k)?;
                        out.push(codec::entity_from_json(key, &text, vf)?);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The payload of an entity for the write script: `[count, items...]`.
    fn payload(&self, entity: &Entity, args: &mut Vec<String>) -> Result<()> {
        let vf = self.config.version_field.as_str();
        match self.config.layout(&entity.key.kind) {
            KindLayout::Hash => {
                let items = codec::entity_to_hash(entity, vf)?;
                args.push(items.len().to_string());
                args.extend(items);
            }
            KindLayout::Json => {
                args.push("1".to_owned());
                args.push(codec::entity_to_json(entity, vf)?);
            }
        }
        Ok(())
    }

    /// The Redis type of the keys of `kind` (for SCAN ... TYPE).
    fn type_name(&self, kind: &str) -> &'static str {
        match self.config.layout(kind) {
            KindLayout::Hash => "hash",
            KindLayout::Json => "string",
        }
    }

    fn layout_code(&self, kind: &str) -> &'static str {
        match self.config.layout(kind) {
            KindLayout::Hash => "h",
            KindLayout::Json => "j",
        }
    }

    async fn write_chunk(&self, writes: &[Write]) -> Result<Vec<WriteOutcome>> {
        let mut keys = Vec::with_capacity(writes.len());
        let mut args = vec![self.config.version_field.clone()];
        for w in writes {
            let (op, key) = match w {
                Write::Put(e) => ("P", &e.key),
                Write::Insert(e) => ("I", &e.key),
                Write::Replace { expected, .. } => ("R", &expected.key),
                Write::Delete(k) => ("D", k),
            };
            keys.push(self.keys.entity_key(key)?);
            args.push(op.to_owned());
            args.push(self.layout_code(&key.kind).to_owned());
            match w {
                Write::Put(e) | Write::Insert(e) => self.payload(e, &mut args)?,
                Write::Replace { expected, new } => {
                    self.payload(expected, &mut args)?;
                    self.payload(new, &mut args)?;
                }
                Write::Delete(_) => {}
            }
        }
        let mut invocation = self.write_script.prepare_invoke();
        for k in &keys {
            invocation.key(k);
        }
        for a in &args {
            invocation.arg(a);
        }
        let codes: Vec<i64> = invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.err("writing entities", e))?;
        if codes.len() != writes.len() {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "the write script answered {} outcomes for {} writes",
                    codes.len(),
                    writes.len()
                ),
            ));
        }
        Ok(codes
            .into_iter()
            .map(|c| {
                if c == 1 {
                    WriteOutcome::Applied
                } else {
                    WriteOutcome::Conflict
                }
            })
            .collect())
    }
}

/// Where a scan stands: a SCAN cursor, and within the keys of that SCAN step,
/// the last one already returned (a step can hold more keys than a page).
///
/// Text form: `<scan cursor>` or `<scan cursor>|<last key>`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ScanPos {
    cursor: u64,
    after: Option<String>,
}

impl ScanPos {
    fn parse(cursor: Option<&Cursor>) -> Result<ScanPos> {
        let Some(c) = cursor else {
            return Ok(ScanPos {
                cursor: 0,
                after: None,
            });
        };
        let (number, after) = match c.0.split_once('|') {
            Some((n, a)) => (n, Some(a.to_owned())),
            None => (c.0.as_str(), None),
        };
        let cursor = number.parse().map_err(|e| {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("cursor {:?} is not a Redis SCAN position", c.0),
            )
            .with_source(e)
        })?;
        Ok(ScanPos { cursor, after })
    }

    fn to_cursor(&self) -> Cursor {
        match &self.after {
            None => Cursor(self.cursor.to_string()),
            Some(a) => Cursor(format!("{}|{a}", self.cursor)),
        }
    }
}

#[async_trait]
impl Store for RedisStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: REDIS_SCHEME,
            location: self.config.redacted.clone(),
        }
    }

    fn capability(&self) -> Capability {
        Capability {
            scan_filter: false,
            scan_ordered: false,
            cas_compares_value: true,
            // Hash kinds run unconditional steps in the server; with every kind a
            // JSON string (`json=*`) there is nothing to push down.
            update_pushdown: !self.config.json_all,
            transactions: false,
            server_clock: true,
            write_batch_max: None,
            rename_kind: true,
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        let pattern = format!("{}*", codec::glob_escape(self.keys.namespace()));
        let mut kinds = BTreeSet::new();
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan_keys(cursor, &pattern, 1000, None).await?;
            for k in &keys {
                if let Some(kind) = self.keys.kind_of(k) {
                    if !kinds.contains(kind) {
                        kinds.insert(kind.to_owned());
                    }
                }
            }
            if next == 0 {
                return Ok(kinds.into_iter().collect());
            }
            cursor = next;
        }
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
            .await?;
        let mut entities = self.fetch(kind, &keys).await?;
        entities.retain(|e| request.filter.matches(e));
        Ok(ScanPage { entities, cursor })
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        let redis_key = self.keys.entity_key(key)?;
        let vf = self.config.version_field.as_str();
        match self.config.layout(&key.kind) {
            KindLayout::Hash => {
                let fields: Vec<(String, String)> = redis::cmd("HGETALL")
                    .arg(&redis_key)
                    .query_async(&mut self.conn())
                    .await
                    .map_err(|e| {
                        self.err("reading an entity", e)
                            .with_context("key", key.to_string())
                    })?;
                codec::entity_from_hash(key.clone(), fields, vf)
            }
            KindLayout::Json => {
                let text: Option<String> = redis::cmd("GET")
                    .arg(&redis_key)
                    .query_async(&mut self.conn())
                    .await
                    .map_err(|e| {
                        self.err("reading an entity", e)
                            .with_context("key", key.to_string())
                    })?;
                text.map(|t| codec::entity_from_json(key.clone(), &t, vf))
                    .transpose()
            }
        }
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        check_writes(&writes)?;
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
            .query_async(&mut self.conn())
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

    async fn meta_cas(
        &self,
        name: &str,
        expected: Option<u64>,
        value: Option<&str>,
    ) -> Result<MetaCas> {
        let reply: Vec<String> = self
            .meta_script
            .key(self.keys.meta_key(name))
            .arg(expected.map(|r| r.to_string()).unwrap_or_default())
            .arg(if value.is_some() { "set" } else { "del" })
            .arg(value.unwrap_or(""))
            .invoke_async(&mut self.conn())
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
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan_keys(cursor, &pattern, 1000, None).await?;
            names.extend(
                keys.iter()
                    .filter_map(|k| k.strip_prefix(meta_prefix.as_str()))
                    .map(str::to_owned),
            );
            if next == 0 {
                return Ok(names.into_iter().collect());
            }
            cursor = next;
        }
    }

    /// A version-only count of a hash kind reads just the version field of each
    /// key inside the server (the census of every migration); anything else
    /// scans and filters on the client.
    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        self.keys.check_kind(kind)?;
        let pattern = self.keys.kind_pattern(kind);
        let mut seen = std::collections::HashSet::new();
        let mut total = 0u64;
        let mut cursor: Option<Cursor> = None;
        let hash_only =
            filter.conditions.is_empty() && self.config.layout(kind) == KindLayout::Hash;
        loop {
            let (keys, next) = self
                .scan_page(&pattern, Some(self.type_name(kind)), cursor.as_ref(), 1000)
                .await?;
            let fresh: Vec<String> = keys
                .into_iter()
                .filter(|k| seen.insert(k.clone()))
                .collect();
            if hash_only {
                if !fresh.is_empty() {
                    let (mode, x) = match filter.version {
                        VersionFilter::Any => ("any", 0),
                        VersionFilter::Exactly(v) => ("eq", v),
                        VersionFilter::Below(v) => ("below", v),
                    };
                    let mut invocation = self.count_script.prepare_invoke();
                    for k in &fresh {
                        invocation.key(k);
                    }
                    invocation.arg(&self.config.version_field).arg(mode).arg(x);
                    let n: u64 = invocation
                        .invoke_async(&mut self.conn())
                        .await
                        .map_err(|e| self.err("counting entities", e).with_context("kind", kind))?;
                    total += n;
                }
            } else {
                let entities = self.fetch(kind, &fresh).await?;
                total += entities.iter().filter(|e| filter.matches(e)).count() as u64;
            }
            match next {
                Some(c) => cursor = Some(c),
                None => return Ok(total),
            }
        }
    }

    /// Unconditional top-level steps on hash kinds run in one Lua call per
    /// batch of keys; anything else is declined (see `pushdown.rs`).
    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage> {
        self.keys.check_kind(&request.kind)?;
        if self.config.layout(&request.kind) != KindLayout::Hash {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the Redis store runs steps of JSON-string kinds on the client",
            ));
        }
        tern_core::store::pushdown::target_version(&request)?;
        let compiled = pushdown::compile(&request, &self.config.version_field)?;
        let n = request.steps.len();
        let (keys, cursor) = self
            .scan_page(
                &self.keys.kind_pattern(&request.kind),
                Some("hash"),
                request.cursor.as_ref(),
                request.limit,
            )
            .await?;
        if keys.is_empty() {
            return Ok(PushdownPage {
                advanced: 0,
                changed: vec![0; n],
                changed_entities: 0,
                cursor,
            });
        }
        let mut invocation = self.pushdown_script.prepare_invoke();
        for k in &keys {
            invocation.key(k);
        }
        invocation.arg(&self.config.version_field).arg(request.from);
        for a in &compiled {
            invocation.arg(a);
        }
        let out: Vec<i64> = invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| {
                self.err("updating entities in place", e)
                    .with_context("kind", request.kind.clone())
            })?;
        let count = |i: usize| out.get(i).and_then(|v| u64::try_from(*v).ok()).unwrap_or(0);
        if out.len() != n + 2 {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "the pushdown script answered {} numbers for {n} steps",
                    out.len()
                ),
            ));
        }
        Ok(PushdownPage {
            advanced: count(0),
            changed_entities: count(1),
            changed: (0..n).map(|i| count(i + 2)).collect(),
            cursor,
        })
    }

    /// `RENAMENX` key by key (`ns:from:id` -> `ns:to:id`), one script call per
    /// batch of SCAN keys; an existing new key is never overwritten (reported as
    /// a collision). Both kinds must have the same layout (hash or JSON string).
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        let (from, to) = (request.from.as_str(), request.to.as_str());
        self.keys.check_kind(from)?;
        self.keys.check_kind(to)?;
        let (layout_from, layout_to) = (self.config.layout(from), self.config.layout(to));
        if layout_from != layout_to {
            let name = |l: KindLayout| match l {
                KindLayout::Hash => "a hash",
                KindLayout::Json => "a JSON string",
            };
            return Err(Error::new(
                ErrorKind::ConfigInvalid,
                format!(
                    "kind {from} is stored as {} but kind {to} as {} (the json= option of the store \
                     URL): renamed keys keep their Redis type, so list both kinds in json= or neither",
                    name(layout_from),
                    name(layout_to)
                ),
            )
            .with_context("store", self.config.redacted.clone()));
        }
        if request.limit == 0 || from == to {
            return Ok(RenameKindPage::default());
        }
        let type_name = self.type_name(from);
        let (keys, cursor) = self
            .scan_page(
                &self.keys.kind_pattern(from),
                Some(type_name),
                request.cursor.as_ref(),
                request.limit,
            )
            .await?;
        let mut page = RenameKindPage {
            cursor,
            ..RenameKindPage::default()
        };
        if keys.is_empty() {
            return Ok(page);
        }
        let (old_prefix, new_prefix) = (self.keys.kind_prefix(from), self.keys.kind_prefix(to));
        let mut invocation = self.rename_script.prepare_invoke();
        for k in &keys {
            invocation.key(k);
        }
        for k in &keys {
            let id = k.strip_prefix(old_prefix.as_str()).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidData,
                    "a scanned key lacks its kind prefix",
                )
                .with_context("key", k.clone())
            })?;
            invocation.key(format!("{new_prefix}{id}"));
        }
        invocation.arg(type_name);
        let codes: Vec<i64> = invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.err("renaming a kind", e).with_context("kind", from))?;
        if codes.len() != keys.len() {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "the rename script answered {} outcomes for {} keys",
                    codes.len(),
                    keys.len()
                ),
            ));
        }
        for (k, code) in keys.iter().zip(codes) {
            match code {
                1 => page.renamed += 1,
                0 => page.collisions.push(self.keys.parse_entity_key(from, k)?),
                _ => {}
            }
        }
        Ok(page)
    }

    async fn now(&self) -> Result<i64> {
        let (secs, micros): (i64, i64) = redis::cmd("TIME")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.err("reading the server clock", e))?;
        Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
    }
}

fn parse_revision(name: &str, text: &str) -> Result<u64> {
    text.parse().map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("metadata revision {text:?} is not an integer"),
        )
        .with_context("name", name)
        .with_source(e)
    })
}
