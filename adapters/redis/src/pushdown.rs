//! Server-side steps (`update_in_place`) for hash kinds: one Lua call per batch
//! of keys, so values never travel.
//!
//! Runs unconditional steps on top-level fields (`add k.p = v`, `delete k.p`,
//! `rename k.p to q` without `where`): exactly the reference semantics of
//! [`tern_core::store::pushdown`] on the hash fields, with the value of a set
//! encoded by the adapter's field codec. Steps with conditions or nested
//! paths, and JSON-string kinds, are declined (`Unsupported`) and the engine
//! runs them on the client.
//!
//! The Lua of a batch is generated from the steps (their fields become Lua
//! locals, so a key costs its three Redis calls and little else) and cached
//! per text by the store: one script per stage, loaded once.

use tern_core::model::Key;
use tern_core::store::{
    Advanced, Cursor, Error, ErrorKind, Filter, PushOp, PushStep, PushdownPage, PushdownRequest,
    Result, StepsFrom, VersionFilter,
};

use crate::codec;
use crate::config::KindLayout;
use crate::core::{
    COUNT_KEYS_PER_CALL, MAX_KEYS_PER_SCRIPT, ReadScript, RedisStore, SCAN_STEPS_PER_PAGE,
};
use crate::scanpos::ScanPos;
use crate::topology::Node;

/// The most distinct fields (or set values) one generated script handles; a
/// stage that touches more runs on the client.
const MAX_FIELDS: usize = 60;

/// How many one-key read scripts [`RedisStore`] keeps (then it starts over).
const READ_SCRIPTS_KEPT: usize = 32;

/// One batch of server-side steps, SCAN included, compiled for one request:
/// the Lua text (a function of the steps' shape only, so one script per
/// stage) and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compiled {
    /// The Lua source.
    pub(crate) script: String,
    /// ARGV after the version field and `from`: field names, then set values.
    pub(crate) args: Vec<String>,
}

/// The SCAN part of every generated script: collects the batch's keys.
///
/// KEYS are keys a previous SCAN step returned beyond the previous batch (the
/// cursor carries them), taken first. Then SCAN steps (COUNT as in
/// `core::scan_count`, no TYPE: keys of other types are skipped when read)
/// until the batch is full, the iteration ends or `max_steps` steps ran. A
/// step that returns far more keys than the batch can take is cut in sorted
/// order (`mode` `repeat`: repeat it at `cur` with COUNT `count`, skipping up to `after`).
const COLLECT: &str = include_str!("../lua/scan_collect.lua");

/// What one step does, on the generated script's field slots (2.., slot 1 is
/// the version field) and set values (1..).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Set { slot: usize, value: usize },
    Unset { slot: usize },
    Rename { from: usize, to: usize },
}

/// The Lua text for steps `ops` over `slots` fields (plus the version) and
/// `values` set values. ARGV: version field, from, the field names (slots
/// 2..), the set values, then SCAN pattern, SCAN cursor, `1` to keep scanning
/// or `0` (the iteration has ended), the batch size and the most SCAN steps.
///
/// Per key: one `HMGET` of the version and every field the steps touch (a key
/// that is not a hash, or vanished, is skipped), the pending steps on Lua
/// locals, then one `HDEL` of the fields that went (if any) and one `HSET` of
/// the version and the fields that changed. Returns `{cursor, mode, count,
/// after, advanced, changed_entities, changed_1, ..., changed_n, pending
/// keys...}`; `mode` is `scan` (continue at `cursor`), `done` (the iteration
/// ended) or `repeat` (see [`COLLECT`]); the pending keys are the few that
/// the last step returned beyond the batch.
fn generate(ops: &[Op], slots: usize, values: usize, shape: Shape) -> String {
    let mut lua = lua_arguments(slots, values);
    if shape == Shape::ReadOneMoving {
        lua.push_str(MOVE_FROM_FORMERS);
    }
    lua.push_str(COLLECT);
    lua_read_key(&mut lua, ops.len(), slots);
    lua_steps(&mut lua, ops);
    lua_write_back(&mut lua, slots);
    lua.push_str(match shape {
        Shape::Batch => ANSWER_BATCH,
        Shape::ReadOne => ANSWER_READ_ONE,
        Shape::ReadOneMoving => ANSWER_READ_ONE_MOVING,
    });
    lua
}

/// What a generated script is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A batch of `update_in_place`: answers the counts and the scan position.
    Batch,
    /// `get_advanced`: one key (KEYS[1], no SCAN), answers whether it
    /// advanced (1 or 0) and its `HGETALL`.
    ReadOne,
    /// `get_advanced` with former names: KEYS[2..] are the key under the
    /// kind's former names, newest first; when KEYS[1] holds no hash, the
    /// first of them that does is renamed to it before the steps (TTL kept);
    /// answers as `ReadOne`, the flag 1 also when it moved, or `-1` when
    /// KEYS[1] holds a key of another type while a former key holds a hash.
    ReadOneMoving,
}

/// The move of [`Shape::ReadOneMoving`], before the steps: sets `moved`.
const MOVE_FROM_FORMERS: &str = include_str!("../lua/move_from_formers.lua");

/// The answer of [`Shape::ReadOneMoving`].
const ANSWER_READ_ONE_MOVING: &str =
    "return { math.max(advanced, moved), call('HGETALL', KEYS[1]) }\n";

/// The answer of a batch (see [`generate`]).
const ANSWER_BATCH: &str = "local out = { cur, mode, count, after, advanced, changed_entities }\n\
for s = 1, #ch do out[#out + 1] = ch[s] end\n\
for j = limit + 1, nk do out[#out + 1] = keys[j] end\n\
return out\n";

/// The answer of a one-key read: the key's fields after the steps.
const ANSWER_READ_ONE: &str = "return { advanced, call('HGETALL', KEYS[1]) }\n";

/// `{prefix}2, ..., {prefix}{slots + 1}`: the Lua names of the slots.
fn slot_list(prefix: &str, slots: usize) -> String {
    (2..slots + 2)
        .map(|j| format!("{prefix}{j}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Lua locals of the script's arguments (see [`generate`]).
fn lua_arguments(slots: usize, values: usize) -> String {
    use std::fmt::Write as _;
    let mut lua = String::from(
        "local call, pcall_, unpack, tonumber = redis.call, redis.pcall, unpack, tonumber\n\
         local vf, from = ARGV[1], tonumber(ARGV[2])\n",
    );
    for j in 2..slots + 2 {
        let _ = writeln!(lua, "local F{j} = ARGV[{}]", j + 1);
    }
    for m in 1..=values {
        let _ = writeln!(lua, "local V{m} = ARGV[{}]", slots + 2 + m);
    }
    let base = slots + values + 3;
    let _ = writeln!(
        lua,
        "local pattern, cur = ARGV[{base}], ARGV[{}]\n\
         local scanning = ARGV[{}] == '1'\n\
         local limit, max_steps = tonumber(ARGV[{}]), tonumber(ARGV[{}])",
        base + 1,
        base + 2,
        base + 3,
        base + 4
    );
    lua
}

/// The loop over the batch's keys, up to the steps: reads the version and the
/// slots of a key, and opens the block of a key at a pending version.
fn lua_read_key(lua: &mut String, n: usize, slots: usize) {
    use std::fmt::Write as _;
    let list = |prefix: &str| slot_list(prefix, slots);
    let read = if slots > 0 {
        format!(", {}", list("F"))
    } else {
        String::new()
    };
    let _ = writeln!(
        *lua,
        "local target = from + {n}\n\
         local target_text = string.format('%d', target)\n\
         local advanced, changed_entities = 0, 0\n\
         local ch = {{{zeros}}}\n\
         local sets, dels = {{}}, {{}}\n\
         for ki = 1, math.min(nk, limit) do\n  \
           local key = keys[ki]\n  \
           local vals = pcall_('HMGET', key, vf{read})\n  \
           local v = nil\n  \
           if vals.err then\n    \
             v = nil\n  \
           elseif vals[1] then\n    \
             v = tonumber(vals[1])\n  \
           elseif call('EXISTS', key) == 1 then\n    \
             v = 0\n  \
           end\n  \
           if v and v >= from and v < target then",
        zeros = vec!["0"; n].join(", "),
    );
    if slots > 0 {
        let reads: Vec<String> = (2..slots + 2).map(|j| format!("vals[{j}]")).collect();
        let _ = writeln!(
            *lua,
            "    local {} = {}\n    local {} = {}",
            list("o"),
            reads.join(", "),
            list("s"),
            list("o"),
        );
    }
}

/// Each step on the Lua locals of a key, counted where it changes something.
fn lua_steps(lua: &mut String, ops: &[Op]) {
    use std::fmt::Write as _;
    lua.push_str("    local any = false\n");
    for (i, op) in ops.iter().enumerate() {
        let step = i + 1;
        let (test, body) = match *op {
            Op::Set { slot, value } => (
                format!("s{slot} ~= V{value}"),
                format!("s{slot} = V{value}"),
            ),
            Op::Unset { slot } => (format!("s{slot}"), format!("s{slot} = false")),
            Op::Rename { from, to } => (
                format!("s{from}"),
                format!("s{to} = s{from}; s{from} = false"),
            ),
        };
        let _ = writeln!(
            *lua,
            "    if v < from + {step} and {test} then {body}; ch[{step}] = ch[{step}] + 1; any = true end"
        );
    }
}

/// Writes a key back (`HDEL` of the fields that went, `HSET` of the version
/// and the fields that changed) and closes the loop over the keys.
fn lua_write_back(lua: &mut String, slots: usize) {
    use std::fmt::Write as _;
    lua.push_str("    sets[1], sets[2] = vf, target_text\n    local ns, nd = 2, 0\n");
    for j in 2..slots + 2 {
        let _ = writeln!(
            *lua,
            "    if s{j} ~= o{j} then if s{j} then sets[ns + 1], sets[ns + 2] = F{j}, s{j}; ns = ns + 2 else nd = nd + 1; dels[nd] = F{j} end end"
        );
    }
    lua.push_str(
        "    if nd > 0 then call('HDEL', key, unpack(dels, 1, nd)) end\n    \
             call('HSET', key, unpack(sets, 1, ns))\n    \
             advanced = advanced + 1\n    \
             if any then changed_entities = changed_entities + 1 end\n  \
           end\n\
         end\n",
    );
}

fn declined(why: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("the Redis store runs this step on the client: {why}"),
    )
}

/// The script and arguments of a request, or why it must run on the client.
/// The SCAN a batch script continues with after its given keys.
struct BatchScan<'a> {
    /// The kind's key pattern.
    pattern: &'a str,
    /// The SCAN cursor to continue at.
    cursor: u64,
    /// The iteration has ended: no SCAN step at all.
    ended: bool,
    /// The most entities of the page.
    limit: usize,
    /// The most SCAN steps of the page.
    steps: usize,
}

pub(crate) fn compile(request: &PushdownRequest, version_field: &str) -> Result<Compiled> {
    compile_steps(&request.steps, version_field, Shape::Batch)
}

/// The script of `steps` in `shape`, and its arguments, or why the steps
/// must run on the client.
pub(crate) fn compile_steps(
    steps: &[PushStep],
    version_field: &str,
    shape: Shape,
) -> Result<Compiled> {
    let top = |path: &[String]| -> Result<String> {
        match path {
            [name] if name != version_field => Ok(name.clone()),
            [name] => Err(declined(&format!(
                "the property {name:?} is the version field"
            ))),
            _ => Err(declined("a nested property path")),
        }
    };
    let mut names: Vec<String> = Vec::new();
    let mut slot = |name: String| -> usize {
        match names.iter().position(|n| *n == name) {
            Some(i) => i + 2,
            None => {
                names.push(name);
                names.len() + 1
            }
        }
    };
    let mut values: Vec<String> = Vec::new();
    let mut ops = Vec::with_capacity(steps.len());
    for step in steps {
        if !step.conditions.is_empty() {
            return Err(declined("a where-condition"));
        }
        ops.push(match &step.op {
            PushOp::Set { path, value } => {
                let slot = slot(top(path)?);
                values.push(codec::encode_field(value));
                Op::Set {
                    slot,
                    value: values.len(),
                }
            }
            PushOp::Unset { path } => Op::Unset {
                slot: slot(top(path)?),
            },
            PushOp::Rename { from, to } => Op::Rename {
                from: slot(top(std::slice::from_ref(from))?),
                to: slot(top(std::slice::from_ref(to))?),
            },
        });
    }
    if names.len() > MAX_FIELDS || values.len() > MAX_FIELDS {
        return Err(declined(&format!(
            "the stage touches more than {MAX_FIELDS} properties"
        )));
    }
    let script = generate(&ops, names.len(), values.len(), shape);
    names.extend(values);
    Ok(Compiled {
        script,
        args: names,
    })
}

/// Counts the keys of a hash kind whose version passes, SCAN included, so
/// that keys do not travel to be counted.
///
/// ARGV: version field, mode (`any`, `eq`, `below`), version, SCAN pattern,
/// SCAN cursor, the most keys to examine and the most SCAN steps in this call.
/// Runs SCAN steps (COUNT the budget, at most 1000, TYPE hash) until the
/// iteration ends or either bound is reached,
/// and returns `{next cursor, keys that pass...}` (a missing version field is
/// 0): the caller counts distinct keys, since SCAN may return a key twice.
pub(crate) const COUNT_SCRIPT: &str = include_str!("../lua/count.lua");

/// [`COUNT_SCRIPT`], made once (its hash computed once).
static COUNT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(COUNT_SCRIPT));

impl RedisStore {
    /// A version-only count of a hash kind (the census of every migration) runs
    /// inside the server: one script call SCANs up to [`COUNT_KEYS_PER_CALL`]
    /// keys and reads only their version field, returning just the keys that
    /// pass (none, for a census that finds nothing), which are counted once
    /// each. On a cluster the script runs on every master at once, each over
    /// its own keys. Anything else scans and filters on the client.
    pub(crate) async fn count_entities(&self, kind: &str, filter: Filter) -> Result<u64> {
        self.keys.check_kind(kind)?;
        let pattern = self.keys.kind_pattern(kind);
        if filter.conditions.is_empty()
            && self.config.layout(kind) == KindLayout::Hash
            && !self.keys.has_subkinds(kind)
        {
            let (mode, x) = match filter.version {
                VersionFilter::Any => ("any", 0),
                VersionFilter::Exactly(v) => ("eq", v),
                VersionFilter::Below(v) => ("below", v),
            };
            let count = |node| self.count_on_node(node, kind, &pattern, mode, x);
            if self.nodes.is_empty() {
                return count(None).await;
            }
            // A key lives on one master: the masters' counts add up.
            let counts =
                futures::future::try_join_all(self.nodes.iter().map(Some).map(count)).await?;
            return Ok(counts.into_iter().sum());
        }
        self.count_on_client(kind, &pattern, filter).await
    }

    /// The count script's calls over one master's keys (`node`; `None`: the
    /// server), from the start of its SCAN to its end; each returns the keys
    /// that pass, counted once (SCAN may return a key twice).
    async fn count_on_node(
        &self,
        node: Option<&Node>,
        kind: &str,
        pattern: &str,
        mode: &str,
        x: u64,
    ) -> Result<u64> {
        let mut seen = std::collections::HashSet::new();
        let mut cursor = "0".to_owned();
        loop {
            let mut call = redis::cmd("EVALSHA");
            call.arg(COUNT.get_hash())
                .arg(0)
                .arg(&self.config.version_field)
                .arg(mode)
                .arg(x)
                .arg(pattern)
                .arg(&cursor)
                .arg(COUNT_KEYS_PER_CALL)
                .arg(SCAN_STEPS_PER_PAGE);
            // Routed to `node` on a cluster; loaded there first if it lacks it.
            let reply: Vec<String> = self
                .conn()
                .on_node_loading(node, &COUNT, call)
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

    /// A count that reads the entities (or their version tags) on the client.
    async fn count_on_client(&self, kind: &str, pattern: &str, filter: Filter) -> Result<u64> {
        let mut seen = std::collections::HashSet::new();
        let mut total = 0u64;
        let mut cursor: Option<Cursor> = None;
        loop {
            let (keys, next) = self
                .scan_page(pattern, Some(self.type_name(kind)), cursor.as_ref(), 1000)
                .await?;
            let fresh: Vec<String> = keys
                .into_iter()
                .filter(|k| self.keys.owns(kind, k) && seen.insert(k.clone()))
                .collect();
            let layout = self.config.layout(kind);
            if filter.conditions.is_empty()
                && layout.tag_in_companion()
                && layout != KindLayout::Text
            {
                // A version-only count of containers reads the tags, not the containers
                // (a plain string's tag names its value's digest: counted through the read script).
                let tags: Vec<Option<String>> = self
                    .conn()
                    .many(
                        fresh
                            .iter()
                            .map(|k| {
                                let mut cmd = redis::cmd("GET");
                                cmd.arg(self.keys.version_key(k));
                                cmd
                            })
                            .collect(),
                    )
                    .await
                    .map_err(|e| self.err("counting entities", e).with_context("kind", kind))?;
                for tag in tags {
                    let version = tag.as_deref().unwrap_or("0").parse().map_err(|_| {
                        Error::new(
                            ErrorKind::InvalidData,
                            "the version tag of a container is not a non-negative integer",
                        )
                        .with_context("kind", kind)
                    })?;
                    total += u64::from(filter.version.matches(version));
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
    /// batch, the SCAN steps included (see `pushdown.rs`); anything else is declined.
    pub(crate) async fn pushdown_page(&self, request: PushdownRequest) -> Result<PushdownPage> {
        self.check_pushdown(&request.kind)?;
        tern_core::store::pushdown::target_version(&request)?;
        let compiled = compile(&request, &self.config.version_field)?;
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
        let scan = BatchScan {
            pattern: &pattern,
            cursor: pos.cursor,
            ended: pos.done,
            limit,
            steps: SCAN_STEPS_PER_PAGE,
        };
        let out = self
            .invoke_batch(&request, &compiled, &pos.pending, scan)
            .await?;
        read_answer(&out, n, next_cursor)
    }

    /// One batch of pushed-down steps over `keys` (found by the caller, all
    /// of `request.kind`): the batch script with these keys and no SCAN of
    /// its own; the page's cursor is `next_cursor` (the caller's). For the
    /// partitions of a kind (`partitions.rs`).
    pub(crate) async fn pushdown_keys(
        &self,
        request: &PushdownRequest,
        keys: &[String],
        next_cursor: Option<Cursor>,
    ) -> Result<PushdownPage> {
        self.check_pushdown(&request.kind)?;
        tern_core::store::pushdown::target_version(request)?;
        let compiled = compile(request, &self.config.version_field)?;
        let n = request.steps.len();
        // The keys only: no SCAN (cursor 0, the iteration ended).
        let scan = BatchScan {
            pattern: &self.keys.kind_pattern(&request.kind),
            cursor: 0,
            ended: true,
            limit: keys.len().max(1),
            steps: 0,
        };
        let out = self.invoke_batch(request, &compiled, keys, scan).await?;
        read_answer(&out, n, Some(next_cursor))
    }

    /// Runs `compiled`'s batch script over `keys`, then over what the SCAN
    /// `scan` finds; the script's raw answer.
    async fn invoke_batch(
        &self,
        request: &PushdownRequest,
        compiled: &Compiled,
        keys: &[String],
        scan: BatchScan<'_>,
    ) -> Result<Vec<redis::Value>> {
        let script = self.script(&compiled.script);
        let mut invocation = script.prepare_invoke();
        for k in keys {
            invocation.key(k);
        }
        invocation.arg(&self.config.version_field).arg(request.from);
        for a in &compiled.args {
            invocation.arg(a);
        }
        invocation
            .arg(scan.pattern)
            .arg(scan.cursor)
            .arg(if scan.ended { "0" } else { "1" })
            .arg(scan.limit)
            .arg(scan.steps);
        invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| {
                self.err("updating entities in place", e)
                    .with_context("kind", request.kind.clone())
            })
    }

    /// [`tern_core::store::Store::get_advanced`] with steps, on a hash kind:
    /// the batch script generated for one key (KEYS[1], no SCAN) that answers
    /// the key's `HGETALL` after the steps, first moving the key from the
    /// first of `formers` holding a hash where it holds none
    /// ([`Shape::ReadOneMoving`]). Compiled scripts are kept by their steps.
    pub(crate) async fn get_advanced_hash(
        &self,
        key: &Key,
        formers: &[Key],
        steps: &StepsFrom,
    ) -> Result<Option<Advanced>> {
        self.check_hash_steps(&key.kind)?;
        self.check_formers(key, formers)?;
        let redis_key = self.keys.entity_key(key)?;
        let compiled = self.read_script(&steps.steps, !formers.is_empty())?;
        let mut invocation = compiled.0.prepare_invoke();
        invocation.key(&redis_key);
        for f in formers {
            invocation.key(self.keys.entity_key(f)?);
        }
        invocation.arg(&self.config.version_field).arg(steps.from);
        for a in &compiled.1 {
            invocation.arg(a);
        }
        // No SCAN: pattern, cursor, not scanning, one key, no step.
        invocation.arg("").arg(0).arg("0").arg(1).arg(0);
        let answer: crate::moving::Moved = invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| {
                self.err("reading and migrating an entity", e)
                    .with_context("key", key.to_string())
            })?;
        let (migrated, reply) = answer.into_read(key, &redis_key)?;
        let fields: Vec<(String, String)> = redis::from_redis_value(reply).map_err(|e| {
            Error::new(
                ErrorKind::InvalidData,
                format!("the read script answered {e}"),
            )
            .with_context("key", key.to_string())
        })?;
        let entity = codec::entity_from_hash(key.clone(), fields, &self.config.version_field)?;
        Ok(entity.map(|entity| Advanced { entity, migrated }))
    }

    /// The one-key script of `steps` (moving from former names first or
    /// not) and its arguments, compiled once. The cache is looked up by
    /// comparing steps (a few kinds are pending at a time): no key is built
    /// per read.
    fn read_script(&self, steps: &[PushStep], moving: bool) -> Result<std::sync::Arc<ReadScript>> {
        let mut cache = self
            .read_scripts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, _, s)) = cache
            .iter()
            .find(|(cached, m, _)| *m == moving && cached.as_slice() == steps)
        {
            return Ok(std::sync::Arc::clone(s));
        }
        let shape = if moving {
            Shape::ReadOneMoving
        } else {
            Shape::ReadOne
        };
        let compiled = compile_steps(steps, &self.config.version_field, shape)?;
        if cache.len() >= READ_SCRIPTS_KEPT {
            cache.clear();
        }
        let made = std::sync::Arc::new((redis::Script::new(&compiled.script), compiled.args));
        cache.push((steps.to_vec(), moving, std::sync::Arc::clone(&made)));
        Ok(made)
    }

    /// Whether the steps of `kind` run in the one-key script of
    /// `get_advanced`: a hash kind (on one server or a cluster: the script
    /// touches its one key, in that key's slot).
    fn check_hash_steps(&self, kind: &str) -> Result<()> {
        self.keys.check_kind(kind)?;
        if self.config.layout(kind) != KindLayout::Hash {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the Redis store runs steps of kinds other than hashes on the client",
            ));
        }
        Ok(())
    }

    /// Whether the steps of `kind` run in the server's batch script: a hash
    /// kind, on one server, that no longer declared kind extends.
    fn check_pushdown(&self, kind: &str) -> Result<()> {
        self.check_hash_steps(kind)?;
        if !self.nodes.is_empty() {
            // The script's SCAN would see one master only.
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the Redis store runs steps on the client on a Redis Cluster",
            ));
        }
        if self.keys.has_subkinds(kind) {
            // The script's SCAN would also take the keys of the longer kinds.
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the Redis store runs steps of a kind that longer declared kinds extend on the client",
            ));
        }
        Ok(())
    }
}

/// The page of the pushdown script's answer `out` for `n` steps (see
/// [`generate`]); `next_cursor` is the page's cursor when it is already known
/// (a repeated step).
fn read_answer(
    out: &[redis::Value],
    n: usize,
    next_cursor: Option<Option<tern_core::store::Cursor>>,
) -> Result<PushdownPage> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_depends_on_the_shape_only() {
        let a = generate(
            &[Op::Set { slot: 2, value: 1 }, Op::Rename { from: 3, to: 4 }],
            3,
            1,
            Shape::Batch,
        );
        assert!(a.contains("if v < from + 2 and s3 then s4 = s3; s3 = false;"));
        assert!(a.contains("pcall_('HMGET', key, vf, F2, F3, F4)"));
        assert!(a.contains("local pattern, cur = ARGV[7], ARGV[8]"));
        let none = generate(&[], 0, 0, Shape::Batch);
        assert!(none.contains("pcall_('HMGET', key, vf)\n"));
    }
}
