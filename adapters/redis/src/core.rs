//! The store's connection and the driver calls every feature shares: the
//! single error mapper ([`driver_error`]), SCAN pages, reads and the write script.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tern_core::model::{Entity, Key};
use tern_core::store::{Cursor, Error, ErrorKind, Result, Write, WriteOutcome, url};

use crate::codec::{self, Keys};
use crate::config::{KindLayout, RedisConfig};
use crate::conn::Conn;
use crate::containers;
use crate::scanpos::{MAX_PENDING, ScanPos};
use crate::topology::Node;

/// Writes per script call: bounds how long one call holds the server.
pub(crate) const WRITES_PER_CALL: usize = 500;

/// The COUNT of every SCAN step: buckets visited per round trip.
pub(crate) const SCAN_COUNT: usize = 1000;

/// The most SCAN steps one page issues before it returns short.
pub(crate) const SCAN_STEPS_PER_PAGE: usize = 64;

/// The most keys one server-side batch script touches: Redis runs a script
/// alone, so a larger `pushdown_batch_size` is split into pages of this size
/// (each checkpointed by the engine) instead of blocking the server longer.
pub const MAX_KEYS_PER_SCRIPT: usize = 1000;

/// The COUNT of a SCAN step of a page with `room` keys left, when the page's
/// steps so far asked for `asked` and returned `found` keys of the pattern.
///
/// The first step asks for `room` (Redis returns hardly more than it is asked
/// for), at least `2 * MAX_PENDING` (a tiny page, e.g. a lazy sweep's call of
/// 100 keys or a test's page of 7, then visits enough of a big database; in a
/// dense one its step is cut). Later steps ask for what
/// should fill the room at the share of keys the pattern matched so far
/// (`room * asked / found`; [`SCAN_COUNT`] while nothing matched), at most
/// [`SCAN_COUNT`]. So the last step of a page where the pattern is a fifth of
/// the keys asks for five times its room instead of a full [`SCAN_COUNT`],
/// and rarely overflows the page by more than [`MAX_PENDING`]: such a step is
/// cut and repeated, and a repeated step visits the same part of the keyspace
/// only if no key of it was removed meanwhile (a kind rename removes every key
/// it takes; a key it misses is left to the census pass).
pub(crate) fn scan_count(room: usize, asked: usize, found: usize) -> usize {
    let ask = if asked == 0 {
        room.max(2 * MAX_PENDING)
    } else if found == 0 {
        SCAN_COUNT
    } else {
        room.saturating_mul(asked).div_ceil(found)
    };
    ask.clamp(1, SCAN_COUNT)
}

/// About how many keys one call of the count script examines (one SCAN step
/// of this COUNT): about a millisecond of the server. Redis runs a script
/// alone, so a census (back-to-back calls) lets the application's commands in
/// only between calls: at 5,000 keys a call the census at the end of a sweep
/// brought the application down to ~100 operations/s, at 1,000 to ~800/s
/// (docs/benchmarks.md, "Across the change").
pub(crate) const COUNT_KEYS_PER_CALL: usize = 250;

/// A compiled one-key read script and its arguments after `from`.
pub(crate) type ReadScript = (redis::Script, Vec<String>);

/// A cached one-key read script, the steps it was compiled from and whether
/// it moves the key from former names first (`pushdown::Shape::ReadOneMoving`).
pub(crate) type CachedReadScript = (
    Vec<tern_core::store::PushStep>,
    bool,
    std::sync::Arc<ReadScript>,
);

/// A tern store in a Redis database (see the crate docs for the layout).
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) config: Arc<RedisConfig>,
    pub(crate) keys: Keys,
    conn: Conn,
    /// The connection of tern's state document and the server clock
    /// ([`RedisStore::control`]).
    control: Conn,
    /// The masters of the cluster, in address order (empty: one server).
    pub(crate) nodes: Arc<Vec<Node>>,
    pub(crate) write_script: Arc<redis::Script>,
    /// [`PUT_SCRIPT`].
    pub(crate) put_script: Arc<redis::Script>,
    /// [`containers::READ_SCRIPT`]: reads a container and its version tag.
    read_script: Arc<redis::Script>,
    pub(crate) meta_script: Arc<redis::Script>,
    /// Scripts of the feature files and generated pushdown scripts, by text
    /// (one per stage shape), each made once.
    pub(crate) scripts:
        Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<redis::Script>>>>,
    /// One-key read scripts of `get_advanced`, with their steps.
    pub(crate) read_scripts: Arc<std::sync::Mutex<Vec<CachedReadScript>>>,
    /// tern's server module is loaded (`module.rs`, detected once at connect).
    pub(crate) module: bool,
    /// Run between the copy and the delete of a rename across cluster slots (tests).
    #[cfg(feature = "fault-injection")]
    pub(crate) after_copy: Option<tern_core::store::rename_copy::AfterCopyHook>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What to check after a failed connection, where the driver's error hints at
/// TLS: a certificate the client refused, or a plain connection the server
/// dropped (its port may expect TLS).
fn connect_hint(config: &RedisConfig, e: &redis::RedisError) -> &'static str {
    let text = e.to_string();
    if text.contains("certificate") || text.contains("Certificate") {
        if config.tls.as_ref().is_some_and(|t| t.ca_file.is_some()) {
            " (the server's certificate was refused: check that tls_ca_file is the CA that \
             signed it, that it is not expired, and that it names this host)"
        } else {
            " (the server's certificate was refused: give its CA with tls_ca_file, and check \
             that it is not expired and names this host)"
        }
    } else if config.tls.is_none() && e.is_io_error() && !e.is_connection_refusal() {
        " (the connection was dropped: if the server's port expects TLS, use rediss://)"
    } else {
        ""
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
        let certificates = crate::tls::certificates(&config)?;
        let invalid_url = |e: redis::RedisError| {
            Error::new(ErrorKind::ConfigInvalid, "the Redis URL is not valid")
                .with_context("url", config.redacted.clone())
                .with_driver_error(url::scrub(&e.to_string(), &config.connection))
        };
        let client = match &certificates {
            Some(certs) => redis::Client::build_with_tls(config.connection.as_str(), certs.clone()),
            None => redis::Client::open(config.connection.as_str()),
        }
        .map_err(invalid_url)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(config.response_timeout)
            .set_number_of_retries(2);
        let unavailable = |e: redis::RedisError| {
            Error::new(
                ErrorKind::Unavailable,
                format!(
                    "cannot connect to Redis at {}{}",
                    config.redacted,
                    connect_hint(&config, &e)
                ),
            )
            .with_driver_error(url::scrub(&e.to_string(), &config.connection))
            .set_temporary()
        };
        // Two connections: one for the data, one for tern's state document and
        // the server clock (checkpoints, leases), so that a checkpoint or a
        // lease renewal does not queue behind a batch's pipelines.
        let (mut conn, control) = if config.cluster {
            let mut builder =
                redis::cluster::ClusterClientBuilder::new(vec![config.connection.as_str()])
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(config.response_timeout.unwrap_or(Duration::MAX));
            if let Some(certs) = &certificates {
                builder = builder.certs(certs.clone());
            }
            let cluster = builder.build().map_err(|e| {
                Error::new(
                    ErrorKind::ConfigInvalid,
                    "the Redis cluster URL is not valid",
                )
                .with_context("url", config.redacted.clone())
                .with_driver_error(url::scrub(&e.to_string(), &config.connection))
            })?;
            let (data, control) = futures::try_join!(
                cluster.get_async_connection(),
                cluster.get_async_connection()
            )
            .map_err(unavailable)?;
            (
                Conn::Cluster(data, crate::per_master::Slots::default()),
                Conn::Cluster(control, crate::per_master::Slots::default()),
            )
        } else {
            let (data, control) = futures::try_join!(
                ConnectionManager::new_with_config(client.clone(), manager_config.clone()),
                ConnectionManager::new_with_config(client, manager_config)
            )
            .map_err(unavailable)?;
            (Conn::Single(data), Conn::Single(control))
        };
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        let nodes = conn.masters().await.map_err(unavailable)?;
        let module = crate::module::detect(&mut conn).await;
        Ok(RedisStore {
            keys: Keys::new(&config),
            config: Arc::new(config),
            conn,
            control,
            nodes: Arc::new(nodes),
            write_script: Arc::new(redis::Script::new(WRITE_SCRIPT)),
            put_script: Arc::new(redis::Script::new(PUT_SCRIPT)),
            read_script: Arc::new(redis::Script::new(containers::READ_SCRIPT)),
            meta_script: Arc::new(redis::Script::new(META_CAS_SCRIPT)),
            scripts: Arc::default(),
            read_scripts: Arc::default(),
            module,
            #[cfg(feature = "fault-injection")]
            after_copy: None,
        })
    }

    /// This store, running `hook` in every batch of a kind rename across
    /// cluster slots (a cluster without `id_tag=1`: the rename by copy) after
    /// the keys are copied to the new kind and before the old ones are deleted,
    /// with the keys (of the old kind) just copied. For tests of what a crash or
    /// a writer in between does to a rename; not for production use (feature
    /// `fault-injection`).
    #[cfg(feature = "fault-injection")]
    #[must_use]
    pub fn with_after_copy_hook(
        mut self,
        hook: impl tern_core::store::rename_copy::AfterCopyFn,
    ) -> RedisStore {
        self.after_copy = Some(Arc::new(hook));
        self
    }

    /// Whether the server has tern's module loaded (it migrates entities itself:
    /// docs/module.md), as detected at connect.
    pub fn has_module(&self) -> bool {
        self.module
    }

    /// The script of a Lua text, made once per text.
    pub(crate) fn script(&self, text: &str) -> Arc<redis::Script> {
        let mut cache = self
            .scripts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Found without copying the text (a script is kilobytes; this runs per call).
        if let Some(script) = cache.get(text) {
            return Arc::clone(script);
        }
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

    /// Where a full SCAN goes: the server, or every master of the cluster.
    pub(crate) fn each_node(&self) -> Vec<Option<&Node>> {
        if self.nodes.is_empty() {
            vec![None]
        } else {
            self.nodes.iter().map(Some).collect()
        }
    }

    pub(crate) fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// The connection of tern's state document (checkpoints, leases) and the
    /// server clock: its own, so that these small requests are answered
    /// between a batch's pipelines instead of after them (the server serves
    /// its clients in turn).
    pub(crate) fn control(&self) -> Conn {
        self.control.clone()
    }

    pub(crate) fn err(&self, operation: &str, e: redis::RedisError) -> Error {
        let timeout = e.is_timeout();
        let err = driver_error(operation, e).with_context("store", self.config.redacted.clone());
        if timeout {
            err.with_context("timeout", self.config.response_timeout_text())
        } else {
            err
        }
    }

    /// One SCAN step over `pattern`: the next cursor and the keys.
    pub(crate) async fn scan_keys(
        &self,
        node: Option<&Node>,
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
        self.conn()
            .on_node(node, cmd)
            .instrument(tracing::debug_span!("scan_step"))
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
    pub(crate) async fn scan_page(
        &self,
        pattern: &str,
        type_name: Option<&str>,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<String>, Option<Cursor>)> {
        if self.nodes.is_empty() {
            return self
                .scan_node_page(None, pattern, type_name, cursor, limit)
                .await;
        }
        // A cluster: the masters one after the other, `@<node>/<its cursor>`.
        let invalid = |text: &str| {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("cursor {text:?} is not a Redis Cluster SCAN position"),
            )
        };
        let (mut node, mut inner) = match cursor {
            None => (0, None),
            Some(c) => {
                let (n, rest) =
                    c.0.strip_prefix('@')
                        .and_then(|t| t.split_once('/'))
                        .ok_or_else(|| invalid(&c.0))?;
                let n: usize = n.parse().map_err(|_| invalid(&c.0))?;
                if n >= self.nodes.len() {
                    return Err(invalid(&c.0));
                }
                (n, (!rest.is_empty()).then(|| Cursor(rest.to_owned())))
            }
        };
        // Fill the page from the masters in turn: a short page only where one
        // master's SCAN steps returned short, never at a master's end.
        let mut out = Vec::new();
        loop {
            let room = limit.max(1) - out.len();
            let (keys, next) = self
                .scan_node_page(
                    Some(&self.nodes[node]),
                    pattern,
                    type_name,
                    inner.as_ref(),
                    room,
                )
                .await?;
            out.extend(keys);
            match next {
                Some(c) => return Ok((out, Some(Cursor(format!("@{node}/{}", c.0))))),
                None if node + 1 == self.nodes.len() => return Ok((out, None)),
                None => {
                    node += 1;
                    inner = None;
                    if out.len() >= limit.max(1) {
                        return Ok((out, Some(Cursor(format!("@{node}/")))));
                    }
                }
            }
        }
    }

    /// [`Self::scan_page`] on one server, or one master of a cluster.
    pub(crate) async fn scan_node_page(
        &self,
        node: Option<&Node>,
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
                .scan_keys(node, pos.cursor, pattern, count, type_name)
                .await?;
            keys.sort_unstable();
            keys.dedup();
            keys.retain(|k| *k > after);
            pos.pending = keys;
            pos.cursor = next;
            pos.done = next == 0;
        }
        let mut out = std::mem::take(&mut pos.pending);
        let (mut asked, mut found) = (0, 0);
        let mut steps = 0;
        while out.len() < limit && !pos.done && steps < SCAN_STEPS_PER_PAGE {
            let room = limit - out.len();
            let ask = scan_count(room, asked, found);
            let step_cursor = pos.cursor;
            let (next, mut keys) = self
                .scan_keys(node, step_cursor, pattern, ask, type_name)
                .await?;
            steps += 1;
            asked += ask;
            found += keys.len();
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

    /// Reads the entities at `redis_keys` (all of `kind`, found by a scan);
    /// vanished keys, and keys of another Redis type, are skipped.
    pub(crate) async fn fetch(&self, kind: &str, redis_keys: &[String]) -> Result<Vec<Entity>> {
        let found = self
            .fetch_at(kind, redis_keys, |i| {
                let k = redis_keys.get(i).map_or("", String::as_str);
                self.keys.parse_entity_key(kind, k)
            })
            .await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// The entity at each of `redis_keys` (all of `kind`), in their order:
    /// `None` for a missing key or a key of another Redis type. `key_of(i)`
    /// gives the entity key of the `i`-th (parsed from a scanned name, or the
    /// key asked for). One pipeline: `HGETALL` or `GET` per key, or for
    /// containers one call of the read script per key (the container and its
    /// version tag, atomically).
    pub(crate) async fn fetch_at(
        &self,
        kind: &str,
        redis_keys: &[String],
        key_of: impl Fn(usize) -> Result<Key>,
    ) -> Result<Vec<Option<Entity>>> {
        if redis_keys.is_empty() {
            return Ok(Vec::new());
        }
        let layout = self.config.layout(kind);
        let mut cmds = Vec::with_capacity(redis_keys.len());
        for k in redis_keys {
            let mut cmd;
            match layout {
                KindLayout::Hash => {
                    cmd = redis::cmd("HGETALL");
                    cmd.arg(k);
                }
                KindLayout::Json => {
                    cmd = redis::cmd("GET");
                    cmd.arg(k);
                }
                _ => {
                    // By hash: the script's text is not sent (nor hashed by the server) per key.
                    cmd = redis::cmd("EVALSHA");
                    cmd.arg(self.read_script.get_hash())
                        .arg(2)
                        .arg(k)
                        .arg(self.keys.version_key(k))
                        .arg(layout.code());
                }
            }
            cmds.push(cmd);
        }
        let failed = |e| self.err("reading entities", e).with_context("kind", kind);
        let rows: Vec<redis::Value> = if layout.tag_in_companion() {
            self.many_loading(&self.read_script, cmds, "reading entities")
                .await
                .map_err(|e| e.with_context("kind", kind))?
        } else {
            self.conn().many(cmds).await.map_err(failed)?
        };
        let mut out = Vec::with_capacity(rows.len());
        for (i, row) in rows.into_iter().enumerate() {
            out.push(self.entity_of_reply(layout, row, || key_of(i))?);
        }
        Ok(out)
    }

    /// The entity in one reply of a read of `layout`: a hash's `HGETALL`, a
    /// JSON string's `GET`, or the container read script's answer (its
    /// version tag, then its items). `None` for no key there or a key of
    /// another Redis type (not an entity of the kind); `key` is asked for
    /// only when there is an entity.
    pub(crate) fn entity_of_reply(
        &self,
        layout: KindLayout,
        reply: redis::Value,
        key: impl FnOnce() -> Result<Key>,
    ) -> Result<Option<Entity>> {
        let vf = self.config.version_field.as_str();
        match layout {
            KindLayout::Hash => {
                // A key of another type (WRONGTYPE) is not an entity of the kind.
                match redis::from_redis_value::<Vec<(String, String)>>(reply) {
                    Ok(fields) if !fields.is_empty() => codec::entity_from_hash(key()?, fields, vf),
                    _ => Ok(None),
                }
            }
            KindLayout::Json => match redis::from_redis_value::<Option<String>>(reply) {
                Ok(Some(text)) => codec::entity_from_json(key()?, &text, vf).map(Some),
                _ => Ok(None),
            },
            _ => match redis::from_redis_value::<Option<Vec<Vec<u8>>>>(reply) {
                Ok(None) => Ok(None),
                Ok(items) => containers::from_items(key()?, layout, items),
                Err(e) => Err(Error::new(
                    ErrorKind::InvalidData,
                    format!("the container read script answered {e}"),
                )
                .with_context("key", key()?.to_string())),
            },
        }
    }

    /// The payload of an entity for the write script: `[count, items...]`.
    pub(crate) fn payload(&self, entity: &Entity, args: &mut Vec<Vec<u8>>) -> Result<()> {
        let vf = self.config.version_field.as_str();
        let items = match self.config.layout(&entity.key.kind) {
            KindLayout::Hash => codec::entity_to_hash(entity, vf)?
                .into_iter()
                .map(String::into_bytes)
                .collect(),
            KindLayout::Json => vec![codec::entity_to_json(entity, vf)?.into_bytes()],
            layout => containers::to_items(entity, layout)?,
        };
        args.push(items.len().to_string().into_bytes());
        args.extend(items);
        Ok(())
    }

    /// The write scripts' letter for `write` (`P`ut, `I`nsert, `R`eplace,
    /// `D`elete) and the key it writes.
    pub(crate) fn op_of(write: &Write) -> (&'static str, &Key) {
        match write {
            Write::Put(e) => ("P", &e.key),
            Write::Insert(e) => ("I", &e.key),
            Write::Replace { expected, .. } => ("R", &expected.key),
            Write::Delete(k) => ("D", k),
        }
    }

    /// The payloads of `write` for the write scripts: the entity written
    /// ([`Self::payload`]), after the one a replace expects
    /// ([`Self::expected_payload`]); none for a delete.
    pub(crate) fn write_payloads(&self, write: &Write, args: &mut Vec<Vec<u8>>) -> Result<()> {
        match write {
            Write::Put(e) | Write::Insert(e) => self.payload(e, args),
            Write::Replace { expected, new } => {
                self.expected_payload(expected, args)?;
                self.payload(new, args)
            }
            Write::Delete(_) => Ok(()),
        }
    }

    /// The payload of an entity a compare-and-set expects to find
    /// ([`Self::payload`]), for a hash followed by one more item: a letter per
    /// field, in order, saying how the script compares the stored text with
    /// the expected one: `j` as the JSON value tern reads (other spacing,
    /// member order or digits of the same exact number are no change), `t`
    /// byte for byte, for a field tern reads as text although Redis's `cjson`
    /// may read it as JSON (a malformed typed-JSON tag, a number tern cannot
    /// hold): an application's reformatting of such a text is a change.
    pub(crate) fn expected_payload(&self, entity: &Entity, args: &mut Vec<Vec<u8>>) -> Result<()> {
        if self.config.layout(&entity.key.kind) != KindLayout::Hash {
            return self.payload(entity, args);
        }
        let vf = self.config.version_field.as_str();
        let items = codec::entity_to_hash(entity, vf)?;
        let modes: Vec<u8> = items
            .chunks(2)
            .map(|pair| match pair {
                [_, text] if codec::reads_as_text(text) => b't',
                _ => b'j',
            })
            .collect();
        args.push((items.len() + 1).to_string().into_bytes());
        args.extend(items.into_iter().map(String::into_bytes));
        args.push(modes);
        Ok(())
    }

    /// The Redis type of the keys of `kind` (for SCAN ... TYPE).
    pub(crate) fn type_name(&self, kind: &str) -> &'static str {
        self.config.layout(kind).type_name()
    }

    /// The `SET key json KEEPTTL` of each write when every write of the chunk
    /// is a put of a JSON-string kind (`None` otherwise). Such a put needs no
    /// script: the whole entity, its version inside, replaces the key in one
    /// command that keeps its TTL, as the write script's put does.
    fn json_sets(&self, writes: &[Write]) -> Result<Option<Vec<redis::Cmd>>> {
        let vf = self.config.version_field.as_str();
        let mut cmds = Vec::with_capacity(writes.len());
        for w in writes {
            match w {
                Write::Put(e) if self.config.layout(&e.key.kind) == KindLayout::Json => {
                    let mut cmd = redis::cmd("SET");
                    cmd.arg(self.keys.entity_key(&e.key)?)
                        .arg(codec::entity_to_json(e, vf)?)
                        .arg("KEEPTTL");
                    cmds.push(cmd);
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(cmds))
    }

    /// The [`PUT_SCRIPT`] arguments of each write when every write of the
    /// chunk is a put of a hash kind (`None` otherwise).
    fn hash_puts(&self, writes: &[Write]) -> Result<Option<Vec<PutCall>>> {
        let mut puts = Vec::with_capacity(writes.len());
        for w in writes {
            match w {
                Write::Put(e) if self.config.layout(&e.key.kind) == KindLayout::Hash => {
                    puts.push(self.put_call(e, &[])?);
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(puts))
    }

    /// The [`PUT_SCRIPT`] keys and arguments of the put of `e` (of a hash or
    /// JSON-string kind) with the deletes of its copies under `formers`.
    pub(crate) fn put_call(&self, e: &Entity, formers: &[&Key]) -> Result<PutCall> {
        let vf = self.config.version_field.as_str();
        let mut keys = Vec::with_capacity(1 + formers.len());
        keys.push(self.keys.entity_key(&e.key)?);
        for d in formers {
            keys.push(self.keys.entity_key(d)?);
        }
        let (code, items) = match self.config.layout(&e.key.kind) {
            KindLayout::Json => ("j", vec![codec::entity_to_json(e, vf)?]),
            _ => ("h", codec::entity_to_hash(e, vf)?),
        };
        let mut args = Vec::with_capacity(3 + items.len());
        args.push(code.to_owned());
        args.push(formers.len().to_string());
        args.push(items.len().to_string());
        args.extend(items);
        Ok(PutCall { keys, args })
    }

    /// Runs [`PUT_SCRIPT`] for `puts`: one call for all of them on one server,
    /// one per put on a cluster (each in its key's slot).
    pub(crate) async fn run_puts(&self, puts: Vec<PutCall>, what: &str) -> Result<()> {
        let call = |puts: &[PutCall]| {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.put_script.get_hash())
                .arg(puts.iter().map(|p| p.keys.len()).sum::<usize>());
            for p in puts {
                cmd.arg(&p.keys);
            }
            for p in puts {
                cmd.arg(&p.args);
            }
            cmd
        };
        let cmds = if self.nodes.is_empty() {
            vec![call(&puts)]
        } else {
            puts.chunks(1).map(call).collect()
        };
        let _: Vec<redis::Value> = self.many_loading(&self.put_script, cmds, what).await?;
        Ok(())
    }

    /// [`Conn::many_loading`](crate::conn::Conn::many_loading), its error
    /// naming `what` and the store.
    async fn many_loading<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        cmds: Vec<redis::Cmd>,
        what: &str,
    ) -> Result<Vec<T>> {
        self.conn()
            .many_loading(script, cmds)
            .await
            .map_err(|e| self.err(what, e))
    }

    /// Writes one chunk ([`Self::write_chunk_once`]). When Redis gives no
    /// answer in time, the writes may have been applied (a script runs to its
    /// end): the keys are read again, and each write is reported for what the
    /// store holds, never as a failed connection. The re-read runs after the
    /// timed-out call on the server (one connection, one thread), so it sees
    /// its outcome. A write the store holds is `Applied`; a compare-and-set
    /// or insert it does not hold is a `Conflict` (the caller reads again and
    /// retries, as after any conflict); a put or delete it does not hold is an
    /// error saying so.
    pub(crate) async fn write_chunk(&self, writes: &[Write]) -> Result<Vec<WriteOutcome>> {
        match self.write_chunk_once(writes).await {
            // Superseded by what the re-read finds.
            Err(e) if e.context().iter().any(|(k, _)| *k == "timeout") => {}
            other => return other,
        }
        let keys: Vec<Key> = writes.iter().map(|w| w.key().clone()).collect();
        let mut outcomes = Vec::with_capacity(writes.len());
        for (w, key) in writes.iter().zip(&keys) {
            // The read may time out as well (a big entity): it is a read, so
            // it is tried again, a few times.
            let mut attempt = 0;
            let stored = loop {
                match tern_core::store::Store::get_many(self, std::slice::from_ref(key)).await {
                    Ok(mut found) => break found.pop().flatten(),
                    Err(e) if attempt < 8 && e.context().iter().any(|(k, _)| *k == "timeout") => {
                        attempt += 1;
                    }
                    Err(e) => return Err(e),
                }
            };
            let held = match (w, &stored) {
                (Write::Delete(_), None) => true,
                (Write::Put(e) | Write::Insert(e) | Write::Replace { new: e, .. }, Some(s)) => {
                    s.version == e.version && s.value == e.value
                }
                _ => false,
            };
            outcomes.push(match (held, w) {
                (true, _) => WriteOutcome::Applied,
                (false, Write::Replace { .. } | Write::Insert(_)) => WriteOutcome::Conflict,
                (false, _) => {
                    return Err(Error::new(
                        ErrorKind::Unavailable,
                        format!(
                            "writing entities: Redis gave no answer within the response timeout \
                             and a read afterwards shows the write was not applied; retry, or \
                             raise response_timeout= in the store URL ({})",
                            self.config.response_timeout_text()
                        ),
                    )
                    .with_context("key", key.to_string())
                    .with_context("store", self.config.redacted.clone())
                    .set_temporary());
                }
            });
        }
        Ok(outcomes)
    }

    /// Writes one chunk in one call of the write script: KEYS are each
    /// write's key and its version key (see [`WRITE_SCRIPT`]).
    async fn write_chunk_once(&self, writes: &[Write]) -> Result<Vec<WriteOutcome>> {
        if let Some(sets) = self.json_sets(writes)? {
            let _: Vec<redis::Value> = self
                .conn()
                .many(sets)
                .await
                .map_err(|e| self.err("writing entities", e))?;
            return Ok(vec![WriteOutcome::Applied; writes.len()]);
        }
        if let Some(puts) = self.hash_puts(writes)? {
            self.run_puts(puts, "writing entities").await?;
            return Ok(vec![WriteOutcome::Applied; writes.len()]);
        }
        // Per write: its two keys and its arguments.
        let mut each = Vec::with_capacity(writes.len());
        for w in writes {
            let (op, key) = Self::op_of(w);
            let redis_key = self.keys.entity_key(key)?;
            let version_key = self.keys.version_key(&redis_key);
            let mut args = vec![
                op.as_bytes().to_vec(),
                self.config.layout(&key.kind).code().as_bytes().to_vec(),
            ];
            self.write_payloads(w, &mut args)?;
            each.push(([redis_key, version_key], args));
        }
        let vf = self.config.version_field.as_bytes();
        let failed = |e| self.err("writing entities", e);
        let codes: Vec<i64> = if self.nodes.is_empty() {
            let mut invocation = self.write_script.prepare_invoke();
            for (keys, _) in &each {
                invocation.key(&keys[0]).key(&keys[1]);
            }
            invocation.arg(vf);
            for (_, args) in &each {
                for a in args {
                    invocation.arg(a);
                }
            }
            invocation
                .invoke_async(&mut self.conn())
                .await
                .map_err(failed)?
        } else {
            // A cluster: one call per write, each in its key's slot.
            let cmds: Vec<redis::Cmd> = each
                .iter()
                .map(|(keys, args)| {
                    let mut cmd = redis::cmd("EVALSHA");
                    cmd.arg(self.write_script.get_hash())
                        .arg(2)
                        .arg(&keys[0])
                        .arg(&keys[1])
                        .arg(vf)
                        .arg(args);
                    cmd
                })
                .collect();
            let replies: Vec<Vec<i64>> = self
                .many_loading(&self.write_script, cmds, "writing entities")
                .await?;
            replies.into_iter().flatten().collect()
        };
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

/// Maps a driver error to a store error naming `operation`; connection
/// failures are `Unavailable` and temporary. The driver's text is the cause
/// (its own chain repeats that text, so it is not chained).
pub(crate) fn driver_error(operation: &str, e: redis::RedisError) -> Error {
    if e.is_timeout() {
        // No answer in time is not a failed connection: the command may have
        // run (a script always runs to its end), so the caller re-reads where
        // it wrote (`write_chunk`).
        return Error::new(
            ErrorKind::Unavailable,
            format!(
                "{operation}: Redis gave no answer within the response timeout (the command \
                 may still have run; raise response_timeout= in the store URL for big entities)"
            ),
        )
        .with_driver_error(e)
        .set_temporary();
    }
    let temporary = e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal();
    if temporary {
        return Error::new(
            ErrorKind::Unavailable,
            format!("{operation}: the Redis connection failed"),
        )
        .with_driver_error(e)
        .set_temporary();
    }
    let kind = match e.code() {
        Some("WRONGTYPE") => ErrorKind::InvalidData,
        Some("BUSY" | "LOADING" | "TRYAGAIN") => {
            return Error::new(
                ErrorKind::Unavailable,
                format!("{operation}: the Redis server is busy"),
            )
            .with_driver_error(e)
            .set_temporary();
        }
        Some(_) => ErrorKind::Rejected,
        None => ErrorKind::Unexpected,
    };
    Error::new(kind, operation.to_owned()).with_driver_error(e)
}

/// The keys and arguments of one put in a call of [`PUT_SCRIPT`].
pub(crate) struct PutCall {
    keys: Vec<String>,
    args: Vec<String>,
}

/// Puts of hash and JSON-string entities, each whole, keeping its TTL, each
/// with the deletes of its stale copies under former kind names in the same
/// run. `KEYS`: for each put its key, then its former copies; `ARGV`: for
/// each put its layout code (`h` hash, `j` JSON string), the count of its
/// former copies, the count of its items, then the items (a hash's
/// field/value pairs, the version field among them; a JSON string's text). A
/// put that creates its key takes the TTL of its first former copy (the copy
/// it replaces). What [`WRITE_SCRIPT`] and the atomic script do for such
/// writes, without their set-up (tables and functions made on every call).
pub(crate) const PUT_SCRIPT: &str = concat!(
    include_str!("../lua/replace_hash.lua"),
    include_str!("../lua/put.lua")
);

/// One batch of writes, each atomic (the whole call is, in fact).
///
/// KEYS: per write, the entity's key and its version key (used by containers
/// only; it shares the key's cluster slot). `ARGV[1]` is the version field;
/// then per write: op (`P`ut, `I`nsert, `R`eplace, `D`elete), layout code
/// (`h` hash, `j` JSON string, `t` plain string, `s` set, `l` list, `z`
/// sorted set), and payloads, each a count followed by that many strings
/// (field/value pairs for a hash; the JSON text; for containers the version,
/// then the value, members, items or score/member pairs). `R` has two
/// payloads: the expected entity, then the new one. A replaced key keeps its
/// TTL (and the version key gets it). Returns one integer per write: 1
/// applied, 0 conflict.
pub(crate) const WRITE_SCRIPT: &str = concat!(
    include_str!("../lua/replace_hash.lua"),
    include_str!("../lua/text_tag.lua"),
    include_str!("../lua/write_prelude.lua"),
    include_str!("../lua/write.lua")
);

/// Compare-and-set of one metadata document (a hash with fields `rev` and `doc`).
///
/// `ARGV`: expected revision (empty: must not exist), `set` or `del`, the JSON.
/// Returns `{"applied", rev}` or `{"conflict"[, rev, doc]}`.
pub(crate) const META_CAS_SCRIPT: &str = include_str!("../lua/meta_cas.lua");

pub(crate) fn parse_revision(name: &str, text: &str) -> Result<u64> {
    text.parse().map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("metadata revision {text:?} is not an integer"),
        )
        .with_context("name", name)
        .with_source(e)
    })
}
