//! Kind renames (`rename kind a to b`, KVolve's prefix change): `RENAMENX`
//! key by key, one Lua call per batch of SCAN keys.

use tern_core::store::{Error, ErrorKind, RenameKindPage, RenameKindRequest, Result};

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

/// Cluster rename, step 1, in the old key's slot: KEYS the old key and its
/// version key; `ARGV[1]` the kind's Redis type. Returns nil when the key is
/// gone or of another type, else `{DUMP, PTTL, version tag or ''}`.
const DUMP_SCRIPT: &str = include_str!("../lua/dump.lua");

/// Cluster rename, step 2, in the new key's slot: KEYS the new key and its
/// version key; ARGV the dump, the PTTL and the version tag of step 1.
/// Restores the copy (TTL and tag included) unless the new key exists: 1
/// copied (or already copied by an interrupted run: same dump and tag), 0 a
/// collision.
const COPY_SCRIPT: &str = include_str!("../lua/copy.lua");

/// Cluster rename, step 3 (and its undo), in one key's slot: KEYS a key and
/// its version key; `ARGV[1]` a dump. Deletes both when the key still holds
/// that dump: 1, else 0 (it changed meanwhile).
const DELETE_IF_SAME_SCRIPT: &str = include_str!("../lua/delete_if_same.lua");

/// What step 1 read of one key: its `DUMP`, `PTTL` and version tag (`''` for none).
type Dumped = (Vec<u8>, i64, Vec<u8>);

/// One call of `script` with a key and its version key, then `args`.
fn eval(script: &str, key: &str, version_key: &str, args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(2).arg(key).arg(version_key);
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

impl RedisStore {
    /// A batch of a kind rename on a cluster, where the old and the new key
    /// live in different slots (no RENAME across slots): per key, read its
    /// dump, TTL and version tag; restore it under the new name unless that
    /// exists; then delete the old key if it still holds the same dump (else
    /// undo the copy and leave the key to the next census pass). Each step is
    /// one script in one slot, the batch's keys concurrently. An interrupted
    /// run leaves a copy that the next run recognizes as its own. Codes as
    /// [`RENAME_KIND_SCRIPT`]'s.
    async fn rename_across_slots(
        &self,
        type_name: &str,
        pairs: &[(String, String)],
    ) -> Result<Vec<i64>> {
        let failed = |e| self.err("renaming a kind", e);
        let mut conn = self.conn();
        let dumps: Vec<Option<Dumped>> = conn
            .many(
                pairs
                    .iter()
                    .map(|(old, _)| {
                        eval(
                            DUMP_SCRIPT,
                            old,
                            &self.keys.version_key(old),
                            &[type_name.as_bytes()],
                        )
                    })
                    .collect(),
            )
            .await
            .map_err(failed)?;
        let mut codes = vec![-1i64; pairs.len()];
        let live: Vec<usize> = (0..pairs.len()).filter(|&i| dumps[i].is_some()).collect();
        let copy_cmds = live
            .iter()
            .filter_map(|&i| {
                let (dump, ttl, tag) = dumps[i].as_ref()?;
                let new = &pairs[i].1;
                Some(eval(
                    COPY_SCRIPT,
                    new,
                    &self.keys.version_key(new),
                    &[dump, ttl.to_string().as_bytes(), tag],
                ))
            })
            .collect();
        let copied: Vec<i64> = conn.many(copy_cmds).await.map_err(failed)?;
        let mut to_delete = Vec::new();
        for (&i, c) in live.iter().zip(copied) {
            if c == 1 {
                to_delete.push(i);
            } else {
                codes[i] = 0;
            }
        }
        let delete = |i: usize, new: bool| {
            let key = if new { &pairs[i].1 } else { &pairs[i].0 };
            let dump = dumps[i]
                .as_ref()
                .map(|d| d.0.as_slice())
                .unwrap_or_default();
            eval(
                DELETE_IF_SAME_SCRIPT,
                key,
                &self.keys.version_key(key),
                &[dump],
            )
        };
        let deleted: Vec<i64> = conn
            .many(to_delete.iter().map(|&i| delete(i, false)).collect())
            .await
            .map_err(failed)?;
        let mut undo = Vec::new();
        for (&i, d) in to_delete.iter().zip(deleted) {
            if d == 1 {
                codes[i] = 1;
            } else {
                undo.push(i);
            }
        }
        let _: Vec<i64> = conn
            .many(undo.iter().map(|&i| delete(i, true)).collect())
            .await
            .map_err(failed)?;
        Ok(codes)
    }

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
    /// (on a cluster with `id_tag=1`, one call per pair in its slot; without
    /// it, across slots in three steps); returns each pair's code (1 renamed,
    /// 0 the new key exists).
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
        if !self.nodes.is_empty() {
            return self
                .rename_across_slots(type_name, pairs)
                .await
                .map_err(|e| e.with_context("kind", from));
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
    pub(crate) async fn rename_kind_page(
        &self,
        request: RenameKindRequest,
    ) -> Result<RenameKindPage> {
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
