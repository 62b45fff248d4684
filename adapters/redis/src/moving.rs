//! Reads that move an entity from a former kind name
//! ([`tern_core::store::Store::get_moving`]): a lazy read of a renamed kind
//! whose entity still lies under the old name, in one script.

use tern_core::model::{Entity, Key};
use tern_core::store::{Error, ErrorKind, Result};

use crate::core::RedisStore;

/// KEYS: the entity's key and its version tag key, then for each former name
/// (newest first) the key there and its tag key. ARGV: the Redis type of the
/// kind's keys, the layout code. When the entity's key holds nothing, the
/// first former key of that type is renamed to it, its tag with it (a tag
/// left under the new name without its key is dropped), TTLs kept. Answers
/// `false` when no entity is there (then), else what a read of the layout
/// answers: a hash's `HGETALL`, a JSON string's `GET`, a container's version
/// tag then its items (as [`crate::containers::READ_SCRIPT`]). A key of another type under the
/// new name while an entity lies under a former one answers `-1` (nothing
/// moved: the names collide).
const MOVING_READ_SCRIPT: &str = concat!(
    r"
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
if lay == 'h' then return redis.call('HGETALL', KEYS[1]) end
if lay == 'j' then return redis.call('GET', KEYS[1]) end
",
    crate::containers::container_answer!()
);

/// The script's answer.
#[derive(Debug)]
enum Moved {
    /// The new name holds a key of another type while an entity lies under a former one.
    Collision,
    /// What a read of the layout answers (nil: no entity under any name).
    Read(redis::Value),
}

impl redis::FromRedisValue for Moved {
    fn from_redis_value(v: redis::Value) -> std::result::Result<Self, redis::ParsingError> {
        Ok(match v {
            redis::Value::Int(-1) => Moved::Collision,
            other => Moved::Read(other),
        })
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
        match answers.pop() {
            None => Ok(None),
            Some(Moved::Collision) => Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "the entity lies under a former kind name, but {redis_key:?} holds a key of \
                     another Redis type, so it cannot move there: delete or rename that key"
                ),
            )
            .with_context("key", key.to_string())),
            Some(Moved::Read(reply)) => self.entity_of_reply(layout, reply, || Ok(key.clone())),
        }
    }
}

/// The script, for [`RedisStore`] to load once.
pub(crate) fn script() -> redis::Script {
    redis::Script::new(MOVING_READ_SCRIPT)
}
