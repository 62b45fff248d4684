//! Kind renames (`rename kind a to b`, KVolve's prefix change): `RENAMENX`
//! key by key, one Lua call per batch of SCAN keys. On a cluster whose ids are
//! not hash tags, the old and the new key of an id live in different slots (no
//! `RENAME` across slots): there the rename is by copy, by the protocol of
//! [`tern_core::store::rename_copy`] over the primitives of [`SlotCopy`], each
//! a script in one slot, a row being a key's `DUMP`, TTL and version tag.

use async_trait::async_trait;
use tern_core::model::Key;
use tern_core::store::rename_copy::{self, Copied, CopyRename, Side};
use tern_core::store::{Cursor, Error, ErrorKind, RenameKindPage, RenameKindRequest, Result};

use crate::config::KindLayout;
use crate::core::RedisStore;

/// One batch of a kind rename: KEYS are, per key, the old key, the new key,
/// the old version key and the new version key; `ARGV[1]` is the Redis type
/// of the kind's entities. Each key moves with `RENAMENX`, so an existing new
/// key (an entity or any other key) is never overwritten; its version tag (a
/// container's companion key) moves with it in the same call, TTL included.
/// Returns one integer per key: 1 renamed, 0 left in place (the new key
/// exists), -1 gone or not an entity meanwhile.
pub(crate) const RENAME_KIND_SCRIPT: &str = include_str!("../lua/rename_kind.lua");

/// Cluster rename, the read of a row, in the old key's slot: KEYS the old key and its
/// version key; `ARGV[1]` the kind's Redis type. Returns nil when the key is
/// gone or of another type, else `{DUMP, PTTL, version tag or ''}`.
const DUMP_SCRIPT: &str = include_str!("../lua/dump.lua");

/// Cluster rename, the copy, in the new key's slot: KEYS the new key and its
/// version key; ARGV the dump, the PTTL and the version tag of the read.
/// Restores the copy (TTL and tag included) unless the new key exists: 1
/// copied (or already copied by an interrupted run: same dump and tag), 0 a
/// collision.
const COPY_SCRIPT: &str = include_str!("../lua/copy.lua");

/// Cluster rename, the delete-if-same (and its undo), in one key's slot: KEYS a key and
/// its version key; `ARGV[1]` a dump. Deletes both when the key still holds
/// that dump: 1, else 0 (it changed meanwhile).
const DELETE_IF_SAME_SCRIPT: &str = include_str!("../lua/delete_if_same.lua");

/// What the read of one key gives: its `DUMP`, `PTTL` and version tag (`''` for none).
type Dumped = (Vec<u8>, i64, Vec<u8>);

/// A key of the old kind as stored, with its name under the new kind.
pub(crate) struct SlotRow {
    old: String,
    new: String,
    dump: Vec<u8>,
    pttl: i64,
    tag: Vec<u8>,
}

/// The two kinds of a rename across slots, and the Redis type of their keys.
pub(crate) struct SlotPlan {
    from: String,
    to: String,
    type_name: &'static str,
}

/// [`RedisStore`]'s primitives of the rename by copy across cluster slots.
struct SlotCopy<'a>(&'a RedisStore);

impl RedisStore {
    /// Whether `from` can be renamed to `to` on this store: both are kinds, the
    /// renamed keys read as kind `to`, and both kinds have the same layout.
    fn check_rename(&self, from: &str, to: &str) -> Result<()> {
        self.keys.check_kind(from)?;
        self.keys.check_kind(to)?;
        // The renamed keys must read as the new kind (KVolve's `amico:followers`
        // -> `amico:followers:default` needs the new kind declared), or a later
        // scan of the old kind would take them again.
        let probe = format!("{}x", self.keys.kind_prefix(to));
        if self.keys.kind_of(&probe) != Some(to) {
            return Err(Error::new(
                ErrorKind::ConfigInvalid,
                format!(
                    "the keys of kind {to} would read as kind {:?} after the rename: declare \
                     {to} in the store URL (?kinds={to})",
                    self.keys.kind_of(&probe).unwrap_or_default()
                ),
            )
            .with_context("store", self.config.redacted.clone()));
        }
        let (layout_from, layout_to) = (self.config.layout(from), self.config.layout(to));
        if layout_from != layout_to {
            let name = |l: KindLayout| match l {
                KindLayout::Hash => "hash (the default)".to_owned(),
                other => format!("{}=", other.option()),
            };
            return Err(Error::new(
                ErrorKind::ConfigInvalid,
                format!(
                    "kind {from} is stored as {} but kind {to} as {} (options of the store URL): \
                     renamed keys keep their Redis type, so name both kinds in the same option",
                    name(layout_from),
                    name(layout_to)
                ),
            )
            .with_context("store", self.config.redacted.clone()));
        }
        Ok(())
    }

    /// Each key of kind `from` with its new name under kind `to`.
    fn rename_pairs(&self, keys: &[String], from: &str, to: &str) -> Result<Vec<(String, String)>> {
        let (old_prefix, new_prefix) = (self.keys.kind_prefix(from), self.keys.kind_prefix(to));
        let mut pairs = Vec::with_capacity(keys.len());
        for k in keys {
            let id = k.strip_prefix(old_prefix.as_str()).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidData,
                    "a scanned key lacks its kind prefix",
                )
                .with_context("key", k.clone())
            })?;
            pairs.push((k.clone(), format!("{new_prefix}{id}")));
        }
        Ok(pairs)
    }

    /// Renames each pair (`RENAMENX` with its version key) in one script call
    /// (on a cluster with `id_tag=1`, one call per pair in its slot); returns
    /// each pair's code (1 renamed, 0 the new key exists).
    async fn rename_keys(
        &self,
        type_name: &str,
        pairs: &[(String, String)],
        from: &str,
    ) -> Result<Vec<i64>> {
        let script = self.script(RENAME_KIND_SCRIPT);
        if !self.nodes.is_empty() && self.config.id_tag {
            // The old and the new key of an id share a slot: one script per key.
            let cmds = pairs
                .iter()
                .map(|(old, new)| {
                    let mut cmd = redis::cmd("EVALSHA");
                    cmd.arg(script.get_hash())
                        .arg(4)
                        .arg(old)
                        .arg(new)
                        .arg(self.keys.version_key(old))
                        .arg(self.keys.version_key(new))
                        .arg(type_name);
                    cmd
                })
                .collect();
            let codes: Vec<Vec<i64>> = self
                .conn()
                .many_loading(&script, cmds)
                .await
                .map_err(|e| self.err("renaming a kind", e).with_context("kind", from))?;
            return Ok(codes
                .into_iter()
                .map(|c| c.first().copied().unwrap_or(-1))
                .collect());
        }
        let mut invocation = script.prepare_invoke();
        for (old, new) in pairs {
            invocation
                .key(old)
                .key(new)
                .key(self.keys.version_key(old))
                .key(self.keys.version_key(new));
        }
        invocation.arg(type_name);
        invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.err("renaming a kind", e).with_context("kind", from))
    }

    /// `RENAMENX` key by key (`ns:from:id` -> `ns:to:id`), one script call per
    /// batch of SCAN keys; an existing new key is never overwritten (reported as
    /// a collision). Both kinds must have the same layout (hash or JSON string).
    /// On a cluster without `id_tag=1`, by copy ([`SlotCopy`]).
    pub(crate) async fn rename_kind_page(
        &self,
        request: RenameKindRequest,
    ) -> Result<RenameKindPage> {
        if !self.nodes.is_empty() && !self.config.id_tag {
            return rename_copy::rename_by_copy(&SlotCopy(self), request).await;
        }
        let (from, to) = (request.from.as_str(), request.to.as_str());
        self.check_rename(from, to)?;
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
        // Keys of a longer declared kind (`from:sub:id`, the new kind of an
        // extending rename included) match the pattern but are not `from`'s:
        // nothing is renamed twice.
        let keys: Vec<String> = keys
            .into_iter()
            .filter(|k| self.keys.owns(from, k))
            .collect();
        let mut page = RenameKindPage {
            cursor,
            ..RenameKindPage::default()
        };
        if keys.is_empty() {
            return Ok(page);
        }
        let pairs = self.rename_pairs(&keys, from, to)?;
        let codes = self.rename_keys(type_name, &pairs, from).await?;
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
}

impl SlotCopy<'_> {
    /// Reads each key of `keys` (of the old kind) with [`DUMP_SCRIPT`]; keys gone
    /// or of another type are left out.
    async fn read(&self, plan: &SlotPlan, pairs: Vec<(String, String)>) -> Result<Vec<SlotRow>> {
        let type_name = plan.type_name.as_bytes();
        let cmds = pairs
            .iter()
            .map(|(old, _)| self.eval(DUMP_SCRIPT, old, &[type_name]))
            .collect();
        let dumps: Vec<Option<Dumped>> = self.send(plan, cmds).await?;
        Ok(pairs
            .into_iter()
            .zip(dumps)
            .filter_map(|((old, new), dumped)| {
                let (dump, pttl, tag) = dumped?;
                Some(SlotRow {
                    old,
                    new,
                    dump,
                    pttl,
                    tag,
                })
            })
            .collect())
    }

    /// One call of `script` with `key` and its version key, then `args`.
    fn eval(&self, script: &str, key: &str, args: &[&[u8]]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script)
            .arg(2)
            .arg(key)
            .arg(self.0.keys.version_key(key));
        for a in args {
            cmd.arg(*a);
        }
        cmd
    }

    /// `cmds` sent at once (each to the node of its key); their answers, in order.
    async fn send<T: redis::FromRedisValue>(
        &self,
        plan: &SlotPlan,
        cmds: Vec<redis::Cmd>,
    ) -> Result<Vec<T>> {
        self.0
            .conn()
            .many(cmds)
            .await
            .map_err(|e| self.failed(plan, e))
    }

    fn failed(&self, plan: &SlotPlan, e: redis::RedisError) -> Error {
        self.0
            .err("renaming a kind", e)
            .with_context("kind", plan.from.clone())
    }
}

#[async_trait]
impl CopyRename for SlotCopy<'_> {
    type Row = SlotRow;
    type Plan = SlotPlan;

    fn scheme(&self) -> &'static str {
        "redis"
    }

    fn location(&self) -> String {
        self.0.config.redacted.clone()
    }

    async fn plan(&self, from: &str, to: &str) -> Result<Option<SlotPlan>> {
        self.0.check_rename(from, to)?;
        Ok(Some(SlotPlan {
            from: from.to_owned(),
            to: to.to_owned(),
            type_name: self.0.type_name(from),
        }))
    }

    async fn read_page(
        &self,
        plan: &SlotPlan,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<SlotRow>, Option<Cursor>)> {
        let store = self.0;
        let (keys, cursor) = store
            .scan_page(
                &store.keys.kind_pattern(&plan.from),
                Some(plan.type_name),
                cursor,
                limit,
            )
            .await?;
        // Keys of a longer declared kind are not `from`'s (see `rename_kind_page`).
        let keys: Vec<String> = keys
            .into_iter()
            .filter(|k| store.keys.owns(&plan.from, k))
            .collect();
        let pairs = store.rename_pairs(&keys, &plan.from, &plan.to)?;
        Ok((self.read(plan, pairs).await?, cursor))
    }

    async fn copy(&self, plan: &SlotPlan, rows: &[&SlotRow]) -> Result<Vec<Copied>> {
        let cmds = rows
            .iter()
            .map(|r| {
                let pttl = r.pttl.to_string();
                self.eval(COPY_SCRIPT, &r.new, &[&r.dump, pttl.as_bytes(), &r.tag])
            })
            .collect();
        let codes: Vec<i64> = self.send(plan, cmds).await?;
        Ok(codes
            .into_iter()
            .map(|c| {
                if c == 1 {
                    Copied::Yes
                } else {
                    Copied::Collision
                }
            })
            .collect())
    }

    async fn delete_if_same(
        &self,
        plan: &SlotPlan,
        side: Side,
        rows: &[&SlotRow],
    ) -> Result<Vec<bool>> {
        let cmds = rows
            .iter()
            .map(|r| {
                let key = match side {
                    Side::Old => &r.old,
                    Side::New => &r.new,
                };
                self.eval(DELETE_IF_SAME_SCRIPT, key, &[&r.dump])
            })
            .collect();
        let codes: Vec<i64> = self.send(plan, cmds).await?;
        Ok(codes.into_iter().map(|c| c == 1).collect())
    }

    async fn reread(&self, plan: &SlotPlan, rows: &[&SlotRow]) -> Result<Vec<SlotRow>> {
        let pairs = rows
            .iter()
            .map(|r| (r.old.clone(), r.new.clone()))
            .collect();
        self.read(plan, pairs).await
    }

    fn key_of(&self, plan: &SlotPlan, row: &SlotRow) -> Result<Key> {
        self.0.keys.parse_entity_key(&plan.from, &row.old)
    }

    #[cfg(feature = "fault-injection")]
    fn after_copy_hook(&self) -> Option<rename_copy::AfterCopyHook> {
        self.0.after_copy.clone()
    }
}
