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
pub(crate) const RENAME_KIND_SCRIPT: &str = r"
local out = {}
for i = 1, #KEYS / 4 do
  local src, dst, vsrc, vdst = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  if redis.call('TYPE', src).ok ~= ARGV[1] then
    out[i] = -1
  elseif redis.call('RENAMENX', src, dst) == 1 then
    if redis.call('EXISTS', vsrc) == 1 then
      redis.call('RENAME', vsrc, vdst)
    else
      redis.call('DEL', vdst)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
";

impl RedisStore {
    /// `RENAMENX` key by key (`ns:from:id` -> `ns:to:id`), one script call per
    /// batch of SCAN keys; an existing new key is never overwritten (reported as
    /// a collision). Both kinds must have the same layout (hash or JSON string).
    pub(crate) async fn rename_kind_page(
        &self,
        request: RenameKindRequest,
    ) -> Result<RenameKindPage> {
        let (from, to) = (request.from.as_str(), request.to.as_str());
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
                    "the keys of kind {to} would read as kind {:?} after the rename: declare                      {to} in the store URL (?kinds={to})",
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
        let (old_prefix, new_prefix) = (self.keys.kind_prefix(from), self.keys.kind_prefix(to));
        let script = self.script(RENAME_KIND_SCRIPT);
        let mut invocation = script.prepare_invoke();
        for k in &keys {
            let id = k.strip_prefix(old_prefix.as_str()).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidData,
                    "a scanned key lacks its kind prefix",
                )
                .with_context("key", k.clone())
            })?;
            let new_key = format!("{new_prefix}{id}");
            invocation
                .key(k)
                .key(&new_key)
                .key(self.keys.version_key(k))
                .key(self.keys.version_key(&new_key));
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
}
