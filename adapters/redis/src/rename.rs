//! Kind renames (`rename kind a to b`, KVolve's prefix change): `RENAMENX`
//! key by key, one Lua call per batch of SCAN keys.

use tern_core::store::{Error, ErrorKind, RenameKindPage, RenameKindRequest, Result};

use crate::config::KindLayout;
use crate::core::RedisStore;

/// One batch of a kind rename: KEYS are the batch's old keys, then (in the same
/// order) their new keys; `ARGV[1]` is the Redis type of the kind's entities.
/// Each key moves with `RENAMENX`, so an existing new key (an entity or any
/// other key) is never overwritten. Returns one integer per key: 1 renamed,
/// 0 left in place (the new key exists), -1 gone or not an entity meanwhile.
pub(crate) const RENAME_KIND_SCRIPT: &str = r"
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local src = KEYS[i]
  if redis.call('TYPE', src).ok ~= ARGV[1] then
    out[i] = -1
  elseif redis.call('RENAMENX', src, KEYS[n + i]) == 1 then
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
        let script = self.script(RENAME_KIND_SCRIPT);
        let mut invocation = script.prepare_invoke();
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
}
