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
    StoreInfo, VersionFilter, Write, WriteOutcome, url,
};

use crate::codec::{self, Keys};
use crate::config::{KindLayout, REDIS_SCHEME, RedisConfig};
use crate::core::{META_CAS_SCRIPT, RENAME_KIND_SCRIPT, WRITE_SCRIPT, map_redis_error};
use crate::pushdown;
use crate::scanpos::{MAX_PENDING, ScanPos};

mod atomic;

/// Writes per script call: bounds how long one call holds the server.
const WRITES_PER_CALL: usize = 500;

/// The COUNT of every SCAN step: buckets visited per round trip.
const SCAN_COUNT: usize = 1000;

/// The most SCAN steps one page issues before it returns short.
const SCAN_STEPS_PER_PAGE: usize = 64;

/// The most keys one server-side batch script touches: Redis runs a script
/// alone, so a larger `pushdown_batch_size` is split into pages of this size
/// (each checkpointed by the engine) instead of blocking the server longer.
pub const MAX_KEYS_PER_SCRIPT: usize = 1000;

/// The COUNT of a SCAN step of a page with `room` keys left: `room` (so that
/// Redis returns hardly more than the page takes), but [`SCAN_COUNT`] for a
/// small room (tests, tiny batches: a step then visits enough of a big
/// database, and is cut) and at least `floor` (raised after steps that found
/// few keys of the pattern).
fn scan_count(room: usize, floor: usize) -> usize {
    if room < 2 * MAX_PENDING {
        SCAN_COUNT
    } else {
        room.max(floor).min(SCAN_COUNT)
    }
}

/// The most keys one call of the count script examines (a few milliseconds of the server).
const COUNT_KEYS_PER_CALL: usize = 5000;

/// A tern store in a Redis database (see the crate docs for the layout).
#[derive(Clone)]
pub struct RedisStore {
    config: Arc<RedisConfig>,
    keys: Keys,
    conn: ConnectionManager,
    write_script: Arc<redis::Script>,
    meta_script: Arc<redis::Script>,
    /// Generated pushdown scripts, by text (one per stage shape).
    pushdown_scripts: Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<redis::Script>>>>,
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
                .with_driver_error(url::scrub(&e.to_string(), &config.connection))
        })?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let unavailable = |e: redis::RedisError| {
            Error::new(
                ErrorKind::Unavailable,
                format!("cannot connect to Redis at {}", config.redacted),
            )
            .with_driver_error(url::scrub(&e.to_string(), &config.connection))
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
            pushdown_scripts: Arc::default(),
            count_script: Arc::new(redis::Script::new(pushdown::COUNT_SCRIPT)),
            rename_script: Arc::new(redis::Script::new(RENAME_KIND_SCRIPT)),
        })
    }

    /// The script of a generated pushdown text, made once per text.
    fn pushdown_script(&self, text: &str) -> Arc<redis::Script> {
        let mut cache = self
            .pushdown_scripts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(
            cache
                .entry(text.to_owned())
                .or_insert_with(|| Arc::new(redis::Script::new(text))),
        )
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
    /// Returns the keys the cursor carries first, then issues SCAN steps until
    /// it has `limit` keys, the iteration ends, or [`SCAN_STEPS_PER_PAGE`] steps
    /// were issued (a page may then be short or empty). A step asks for about
    /// as many keys as the page has room for ([`scan_count`]), and Redis
    /// returns at most a few more: those ride in the cursor to the next page,
    /// so no step is issued twice. A step that overflows the page by more than
    /// [`MAX_PENDING`] keys (a small page) is cut in sorted order and repeated,
    /// with the same COUNT, by the next page.
    async fn scan_page(
        &self,
        pattern: &str,
        type_name: Option<&str>,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<String>, Option<Cursor>)> {
        let limit = limit.max(1);
        let mut pos = ScanPos::parse(cursor)?;
        if let Some(after) = pos.after.take() {
            // Repeat the step that was cut, with the COUNT it had.
            let count = pos.count.take().unwrap_or(SCAN_COUNT);
            let (next, mut keys) = self
                .scan_keys(pos.cursor, pattern, count, type_name)
                .await?;
            keys.sort_unstable();
            keys.dedup();
            keys.retain(|k| *k > after);
            pos.pending = keys;
            pos.cursor = next;
            pos.done = next == 0;
        }
        let mut out = std::mem::take(&mut pos.pending);
        let mut floor = 1;
        let mut steps = 0;
        while out.len() < limit && !pos.done && steps < SCAN_STEPS_PER_PAGE {
            let room = limit - out.len();
            let ask = scan_count(room, floor);
            let step_cursor = pos.cursor;
            let (next, mut keys) = self.scan_keys(step_cursor, pattern, ask, type_name).await?;
            steps += 1;
            if keys.len() < ask / 2 {
                // Few keys of the pattern here: visit more per step.
                floor = (ask * 2).min(SCAN_COUNT);
            }
            if keys.len() > room + MAX_PENDING {
                keys.sort_unstable();
                keys.dedup();
                if keys.len() > room + MAX_PENDING {
                    keys.truncate(room);
                    pos.after = keys.last().cloned();
                    pos.count = Some(ask);
                    pos.cursor = step_cursor;
                    out.extend(keys);
                    return Ok((out, pos.to_cursor()));
                }
            }
            out.extend(keys);
            pos.cursor = next;
            pos.done = next == 0;
        }
        if out.len() > limit {
            pos.pending = out.split_off(limit);
        }
        Ok((out, pos.to_cursor()))
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
            scan_ordered: false,
            // Hash kinds run unconditional steps in the server; with every kind a
            // JSON string (`json=*`) there is nothing to push down.
            update_pushdown: !self.config.json_all,
            server_clock: true,
            atomic_batch_with_meta: false,
            rename_kind: true,
            atomic_writes: true,
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
        let mut outcomes = Vec::with_capacity(writes.len());
        for chunk in writes.chunks(WRITES_PER_CALL) {
            outcomes.extend(self.write_chunk(chunk).await?);
        }
        Ok(outcomes)
    }

    /// One Lua script: every condition checked, then every write applied.
    async fn write_atomic(
        &self,
        guards: Vec<tern_core::store::Guard>,
        writes: Vec<Write>,
    ) -> Result<WriteOutcome> {
        self.write_atomic_script(guards, writes).await
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

    /// A version-only count of a hash kind (the census of every migration) runs
    /// inside the server: one script call SCANs up to [`COUNT_KEYS_PER_CALL`]
    /// keys and reads only their version field, returning just the keys that
    /// pass (none, for a census that finds nothing), which are counted once
    /// each. Anything else scans and filters on the client.
    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        self.keys.check_kind(kind)?;
        let pattern = self.keys.kind_pattern(kind);
        let mut seen = std::collections::HashSet::new();
        if filter.conditions.is_empty() && self.config.layout(kind) == KindLayout::Hash {
            let (mode, x) = match filter.version {
                VersionFilter::Any => ("any", 0),
                VersionFilter::Exactly(v) => ("eq", v),
                VersionFilter::Below(v) => ("below", v),
            };
            let mut cursor = "0".to_owned();
            loop {
                let reply: Vec<String> = self
                    .count_script
                    .arg(&self.config.version_field)
                    .arg(mode)
                    .arg(x)
                    .arg(&pattern)
                    .arg(&cursor)
                    .arg(COUNT_KEYS_PER_CALL)
                    .arg(SCAN_STEPS_PER_PAGE)
                    .invoke_async(&mut self.conn())
                    .await
                    .map_err(|e| self.err("counting entities", e).with_context("kind", kind))?;
                let mut reply = reply.into_iter();
                cursor = reply.next().unwrap_or_default();
                seen.extend(reply);
                if cursor == "0" || cursor.is_empty() {
                    return Ok(seen.len() as u64);
                }
            }
        }
        let mut total = 0u64;
        let mut cursor: Option<Cursor> = None;
        loop {
            let (keys, next) = self
                .scan_page(&pattern, Some(self.type_name(kind)), cursor.as_ref(), 1000)
                .await?;
            let fresh: Vec<String> = keys
                .into_iter()
                .filter(|k| seen.insert(k.clone()))
                .collect();
            let entities = self.fetch(kind, &fresh).await?;
            total += entities.iter().filter(|e| filter.matches(e)).count() as u64;
            match next {
                Some(c) => cursor = Some(c),
                None => return Ok(total),
            }
        }
    }

    /// Unconditional top-level steps on hash kinds run in one Lua call per
    /// batch, the SCAN steps included (see `pushdown.rs`); anything else is declined.
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
        let pattern = self.keys.kind_pattern(&request.kind);
        // Redis runs a script alone: cap the keys one call touches so that a large
        // `pushdown_batch_size` never blocks the server for long.
        let limit = request.limit.clamp(1, MAX_KEYS_PER_SCRIPT);
        let mut pos = ScanPos::parse(request.cursor.as_ref())?;
        // A step to repeat (a cut step): its keys are found on the client first.
        let mut next_cursor = None;
        if pos.after.is_some() {
            let (keys, cursor) = self
                .scan_page(&pattern, Some("hash"), request.cursor.as_ref(), limit)
                .await?;
            pos = ScanPos {
                pending: keys,
                done: true,
                ..ScanPos::default()
            };
            next_cursor = Some(cursor);
        }
        let script = self.pushdown_script(&compiled.script);
        let mut invocation = script.prepare_invoke();
        for k in &pos.pending {
            invocation.key(k);
        }
        invocation.arg(&self.config.version_field).arg(request.from);
        for a in &compiled.args {
            invocation.arg(a);
        }
        invocation
            .arg(&pattern)
            .arg(pos.cursor)
            .arg(if pos.done { "0" } else { "1" })
            .arg(limit)
            .arg(SCAN_STEPS_PER_PAGE);
        let out: Vec<redis::Value> =
            invocation
                .invoke_async(&mut self.conn())
                .await
                .map_err(|e| {
                    self.err("updating entities in place", e)
                        .with_context("kind", request.kind.clone())
                })?;
        let unexpected = || {
            Error::new(
                ErrorKind::Unexpected,
                format!(
                    "the pushdown script answered {} values for {n} steps",
                    out.len()
                ),
            )
        };
        if out.len() < n + 6 {
            return Err(unexpected());
        }
        let text = |v: &redis::Value| -> Result<String> {
            redis::from_redis_value_ref::<String>(v).map_err(|_| unexpected())
        };
        let number = |v: &redis::Value| -> Result<u64> {
            redis::from_redis_value_ref::<u64>(v).map_err(|_| unexpected())
        };
        let cursor: u64 = text(&out[0])?.parse().map_err(|_| unexpected())?;
        let mode = text(&out[1])?;
        let page_cursor = match next_cursor {
            Some(c) => c,
            None => ScanPos {
                cursor,
                done: mode == "done",
                pending: out[n + 6..].iter().map(text).collect::<Result<_>>()?,
                after: (mode == "repeat").then(|| text(&out[3])).transpose()?,
                count: (mode == "repeat")
                    .then(|| number(&out[2]).map(|c| c as usize))
                    .transpose()?,
            }
            .to_cursor(),
        };
        Ok(PushdownPage {
            advanced: number(&out[4])?,
            changed_entities: number(&out[5])?,
            changed: out[6..n + 6].iter().map(number).collect::<Result<_>>()?,
            cursor: page_cursor,
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
