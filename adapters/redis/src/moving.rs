//! Reads that move an entity from a former kind name
//! ([`tern_core::store::Store::get_moving`]): a lazy read of a renamed kind
//! whose entity still lies under the old name, in one script.

use tern_core::model::{Entity, Key};
use tern_core::store::{Error, ErrorKind, Result};

use crate::codec;
use crate::config::KindLayout;
use crate::containers;
use crate::core::RedisStore;

/// KEYS: the entity's key and its version tag key, then for each former name
/// (newest first) the key there and its tag key. ARGV: the Redis type of the
/// kind's keys, the layout code. When the entity's key holds nothing, the
/// first former key of that type is renamed to it, its tag with it (a tag
/// left under the new name without its key is dropped), TTLs kept. Answers
/// `false` when no entity is there (then), else the items as the read script
/// answers them: a hash's fields and values, a JSON or plain string's text,
/// a container's version tag then its items. A key of another type under the
/// new name while an entity lies under a former one answers `-1` (nothing
/// moved: the names collide).
const MOVING_READ_SCRIPT: &str = r"
local want, lay = ARGV[1], ARGV[2]
local here = redis.call('TYPE', KEYS[1]).ok
if here ~= want then
  for i = 3, #KEYS, 2 do
    if redis.call('TYPE', KEYS[i]).ok == want then
      if here ~= 'none' then return -1 end
      redis.call('RENAME', KEYS[i], KEYS[1])
      if redis.call('EXISTS', KEYS[i + 1]) == 1 then
        redis.call('RENAME', KEYS[i + 1], KEYS[2])
      else
        redis.call('DEL', KEYS[2])
      end
      here = want
      break
    end
  end
  if here ~= want then return false end
end
local items
if lay == 'h' then items = redis.call('HGETALL', KEYS[1])
elseif lay == 'j' or lay == 't' then items = { redis.call('GET', KEYS[1]) }
elseif lay == 's' then items = redis.call('SMEMBERS', KEYS[1])
elseif lay == 'l' then items = redis.call('LRANGE', KEYS[1], 0, -1)
else items = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') end
if lay ~= 'h' and lay ~= 'j' then table.insert(items, 1, redis.call('GET', KEYS[2]) or '0') end
return items
";

/// The script's answer.
#[derive(Debug)]
enum Moved {
    /// No entity under any name.
    Absent,
    /// The new name holds a key of another type while an entity lies under a former one.
    Collision,
    /// The entity's items (see [`MOVING_READ_SCRIPT`]).
    Items(Vec<Vec<u8>>),
}

impl redis::FromRedisValue for Moved {
    fn from_redis_value(v: redis::Value) -> std::result::Result<Self, redis::ParsingError> {
        match v {
            redis::Value::Nil => Ok(Moved::Absent),
            redis::Value::Int(-1) => Ok(Moved::Collision),
            other => redis::from_redis_value::<Vec<Vec<u8>>>(other).map(Moved::Items),
        }
    }
}

impl RedisStore {
    /// [`tern_core::store::Store::get_moving`]: one script over the entity's
    /// key and its keys under `formers`, all in one slot on a cluster (which
    /// takes `id_tag=1`, as a lazy kind rename does).
    pub(crate) async fn get_moving_script(
        &self,
        key: &Key,
        formers: &[Key],
    ) -> Result<Option<Entity>> {
        let unsupported = |why: &str| Err(Error::new(ErrorKind::Unsupported, why.to_owned()));
        if self.config.cluster && !self.config.id_tag {
            return unsupported("a move across kind names on a Redis Cluster without id_tag=1");
        }
        let layout = self.config.layout(&key.kind);
        if formers
            .iter()
            .any(|f| self.config.layout(&f.kind) != layout || f.id != key.id)
        {
            return unsupported("a move between kinds of different layouts or ids");
        }
        let redis_key = self.keys.entity_key(key)?;
        let tag = self.keys.version_key(&redis_key);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.moving_script.get_hash())
            .arg(2 + 2 * formers.len())
            .arg(&redis_key)
            .arg(&tag);
        for f in formers {
            let former = self.keys.entity_key(f)?;
            let former_tag = self.keys.version_key(&former);
            cmd.arg(former).arg(former_tag);
        }
        cmd.arg(layout.type_name()).arg(layout.code());
        let what = "reading an entity under its kind's former names";
        let mut answers: Vec<Moved> = self
            .conn()
            .many_loading(&self.moving_script, vec![cmd])
            .await
            .map_err(|e| self.err(what, e).with_context("key", key.to_string()))?;
        let vf = self.config.version_field.as_str();
        match answers.pop() {
            None | Some(Moved::Absent) => Ok(None),
            Some(Moved::Collision) => Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "the entity lies under a former kind name, but {redis_key:?} holds a key of \
                     another Redis type, so it cannot move there: delete or rename that key"
                ),
            )
            .with_context("key", key.to_string())),
            Some(Moved::Items(items)) => match layout {
                KindLayout::Hash => {
                    let mut fields = Vec::with_capacity(items.len() / 2);
                    let mut it = items.into_iter();
                    while let (Some(f), Some(v)) = (it.next(), it.next()) {
                        fields.push((text(f, key)?, text(v, key)?));
                    }
                    codec::entity_from_hash(key.clone(), fields, vf)
                }
                KindLayout::Json => {
                    let json = items.into_iter().next().unwrap_or_default();
                    codec::entity_from_json(key.clone(), &text(json, key)?, vf).map(Some)
                }
                _ => containers::from_items(key.clone(), layout, Some(items)),
            },
        }
    }
}

/// A hash field or JSON text as UTF-8.
fn text(bytes: Vec<u8>, key: &Key) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| {
        Error::new(
            ErrorKind::InvalidData,
            "a hash field or JSON text is not UTF-8",
        )
        .with_context("key", key.to_string())
    })
}

/// The script, for [`RedisStore`] to load once.
pub(crate) fn script() -> redis::Script {
    redis::Script::new(MOVING_READ_SCRIPT)
}
