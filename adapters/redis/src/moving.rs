//! Reads that move an entity from a former kind name
//! ([`tern_core::store::Store::get_advanced`] with former names, no steps):
//! a lazy read of a renamed kind
//! whose entity still lies under the old name, in one script.

use tern_core::model::Key;
use tern_core::store::{Advanced, Error, ErrorKind, Result};

use crate::core::RedisStore;

/// KEYS: the entity's key and its version tag key, then for each former name
/// (newest first) the key there and its tag key. ARGV: the Redis type of the
/// kind's keys, the layout code. When the entity's key holds nothing, the
/// first former key of that type is renamed to it, its tag with it (a tag
/// left under the new name without its key is dropped), TTLs kept. Answers
/// `{moved, read}`: 1 when it moved, and what a read of the layout answers
/// (nil when no entity is there): a hash's `HGETALL`, a JSON string's `GET`,
/// a container's version tag then its items (as
/// [`crate::containers::READ_SCRIPT`]). A key of another type under the new
/// name while an entity lies under a former one answers `-1` (nothing moved:
/// the names collide).
const MOVING_READ_SCRIPT: &str = concat!(
    include_str!("../lua/text_tag.lua"),
    include_str!("../lua/moving_read.lua"),
    include_str!("../lua/container_answer.lua"),
    include_str!("../lua/moving_read_end.lua")
);

/// The answer of a read script that moves an entity from a former name.
#[derive(Debug)]
pub(crate) enum Moved {
    /// The new name holds a key of another type while an entity lies under a former one.
    Collision,
    /// Whether the entity moved (or was stepped), and what a read of the
    /// layout answers (nil: no entity under any name).
    Read(bool, redis::Value),
}

impl redis::FromRedisValue for Moved {
    fn from_redis_value(v: redis::Value) -> std::result::Result<Self, redis::ParsingError> {
        match v {
            redis::Value::Int(-1) => Ok(Moved::Collision),
            redis::Value::Array(mut pair) if pair.len() == 2 => {
                let read = pair.pop().unwrap_or(redis::Value::Nil);
                let flag: i64 = redis::from_redis_value(pair.pop().unwrap_or(redis::Value::Nil))?;
                Ok(Moved::Read(flag > 0, read))
            }
            other => Err(format!("expected {{flag, read}} or -1, got {other:?}").into()),
        }
    }
}

impl Moved {
    /// The flag and the read, or the error of a collision under `redis_key`.
    pub(crate) fn into_read(self, key: &Key, redis_key: &str) -> Result<(bool, redis::Value)> {
        match self {
            Moved::Read(moved, read) => Ok((moved, read)),
            Moved::Collision => Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "the entity lies under a former kind name, but {redis_key:?} holds a key of \
                     another Redis type, so it cannot move there: delete or rename that key"
                ),
            )
            .with_context("key", key.to_string())),
        }
    }
}

impl RedisStore {
    /// Whether the keys of `key` under `formers` can move to it in one
    /// script: one server, or a cluster with `id_tag=1` (the keys of one id
    /// share a slot), formers of the same layout and id.
    pub(crate) fn check_formers(&self, key: &Key, formers: &[Key]) -> Result<()> {
        let unsupported = |why: &str| Err(Error::new(ErrorKind::Unsupported, why.to_owned()));
        if formers.is_empty() {
            return Ok(());
        }
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
        Ok(())
    }

    /// [`tern_core::store::Store::get_advanced`] without steps: one script
    /// over the entity's key and its keys under `formers`, all in one slot on
    /// a cluster (which takes `id_tag=1`, as a lazy kind rename does).
    pub(crate) async fn get_moving_script(
        &self,
        key: &Key,
        formers: &[Key],
    ) -> Result<Option<Advanced>> {
        self.check_formers(key, formers)?;
        let layout = self.config.layout(&key.kind);
        let redis_key = self.keys.entity_key(key)?;
        let tag = self.keys.version_key(&redis_key);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(SCRIPT.get_hash())
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
            .many_loading(&SCRIPT, vec![cmd])
            .await
            .map_err(|e| self.err(what, e).with_context("key", key.to_string()))?;
        let Some(answer) = answers.pop() else {
            return Ok(None);
        };
        let (migrated, reply) = answer.into_read(key, &redis_key)?;
        let entity = self.entity_of_reply(layout, reply, || Ok(key.clone()))?;
        Ok(entity.map(|entity| Advanced { entity, migrated }))
    }
}

/// The script, made once (its hash computed once) for every store.
static SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(MOVING_READ_SCRIPT));
