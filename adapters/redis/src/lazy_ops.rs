//! The Redis commands applications run on a container, through the lazy client:
//! each runs only on an up-to-date entity, so no key splits into an old and a
//! new copy.
//!
//! [`RedisLazy::command`] runs one command (`ZADD`, `HINCRBY`, `PEXPIRE`...)
//! on an entity's key in one script that first checks, in the same atomic step,
//! that no copy of the entity is left under a former kind name (a pending lazy
//! kind rename) and that its version tag is the version the client declared;
//! a key the command creates gets that version's tag. When the entity is
//! stale, the client migrates it ([`LazyClient::get`]) and the command runs
//! again: in the common case (an up-to-date entity), one round trip. Typed
//! wrappers cover what [KV]'s table lists and what it missed (exists, TTLs,
//! counters, set, list and sorted-set edits).
//!
//! Hashes keep their version in a field (`version_field`), containers in their
//! companion tag key, which a TTL command also sets, so the tag expires with
//! its key. JSON strings keep their version inside the text, which a command
//! cannot edit: [`RedisLazy::command`] refuses them (use [`LazyClient::modify`]).

use std::sync::Arc;

use tern_core::lazy::{LazyClient, LazyError, Result};
use tern_core::model::Key;
use tern_core::store::{Error, ErrorKind};

use crate::RedisStore;
use crate::config::KindLayout;

/// KEYS: the entity's key, its version tag key, its keys under former kind
/// names. ARGV: the layout code, the version field, the declared version, the
/// command and its arguments. Returns `{0}` when the entity must be migrated
/// first, `{1, reply}` when the command ran.
const EDIT_SCRIPT: &str = concat!(
    include_str!("../lua/text_tag.lua"),
    include_str!("../lua/lazy_edit.lua")
);

/// How often a command is retried after migrating a stale entity before
/// giving up with [`LazyError::Contention`].
const ATTEMPTS: u32 = 8;

/// Redis commands through a [`LazyClient`] on a Redis store.
#[derive(Debug)]
pub struct RedisLazy {
    store: Arc<RedisStore>,
    client: LazyClient,
    script: redis::Script,
}

impl RedisLazy {
    /// Commands on `store` through `client` (a lazy client of the same store).
    pub fn new(store: Arc<RedisStore>, client: LazyClient) -> RedisLazy {
        RedisLazy {
            store,
            client,
            script: redis::Script::new(EDIT_SCRIPT),
        }
    }

    /// The lazy client (reads, puts, deletes, scans).
    pub fn client(&self) -> &LazyClient {
        &self.client
    }

    /// Runs `command <entity's key> args...` on an up-to-date entity (migrating
    /// it first when stale) and returns Redis's reply.
    ///
    /// # Errors
    /// The client's errors (an undeclared kind, an entity newer than the
    /// client...), `Unsupported` for a JSON-string kind, Redis's reply to a
    /// bad command (`WRONGTYPE`...), [`LazyError::Contention`] when the
    /// entity keeps changing version.
    pub async fn command(
        &self,
        key: &Key,
        command: &str,
        args: &[Vec<u8>],
    ) -> Result<redis::Value> {
        let chain = self.client.kind_chain(&key.kind).await?;
        let layout = self.store.config.layout(&key.kind);
        if layout == KindLayout::Json {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{command} on an entity of a JSON-string kind would edit the text that holds its \
                     version: use LazyClient::modify"
                ),
            )
            .with_context("key", key.to_string())
            .into());
        }
        let redis_key = self.store.keys.entity_key(key)?;
        if self.store.module {
            return plain_command(&self.store, key, &redis_key, command, args).await;
        }
        let tag = self.store.keys.version_key(&redis_key);
        let mut keys = vec![redis_key, tag];
        for former in &chain.formers {
            keys.push(self.store.keys.entity_key(&Key {
                kind: former.clone(),
                id: key.id.clone(),
            })?);
        }
        for _ in 0..ATTEMPTS {
            let mut call = self.script.prepare_invoke();
            for k in &keys {
                call.key(k);
            }
            call.arg(layout.code())
                .arg(&self.store.config.version_field)
                .arg(chain.version.to_string())
                .arg(command);
            for a in args {
                call.arg(a.as_slice());
            }
            let reply: Vec<redis::Value> = call
                .invoke_async(&mut self.store.conn())
                .await
                .map_err(|e| {
                    self.store
                        .err("running a command through the lazy client", e)
                        .with_context("key", key.to_string())
                        .with_context("command", command.to_owned())
                })?;
            let mut reply = reply.into_iter();
            match (reply.next(), reply.next()) {
                (Some(redis::Value::Int(1)), Some(value)) => return Ok(value),
                (Some(redis::Value::Int(1)), None) => return Ok(redis::Value::Nil),
                _ => {
                    // Stale, or still under a former name: migrate, then again.
                    self.client.get(key).await?;
                }
            }
        }
        Err(LazyError::Contention {
            key: key.clone(),
            attempts: ATTEMPTS,
        })
    }

    async fn typed<T: redis::FromRedisValue>(
        &self,
        key: &Key,
        command: &str,
        args: &[Vec<u8>],
    ) -> Result<T> {
        let value = self.command(key, command, args).await?;
        redis::from_redis_value(value).map_err(|e| {
            LazyError::from(
                Error::new(
                    ErrorKind::InvalidData,
                    format!("unexpected reply to {command}: {e}"),
                )
                .with_context("key", key.to_string()),
            )
        })
    }

    /// Whether the entity exists (under its name or a former one: a stale one
    /// is migrated by the check).
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn exists(&self, key: &Key) -> Result<bool> {
        Ok(self.typed::<i64>(key, "EXISTS", &[]).await? == 1)
    }

    /// `PTTL`: milliseconds to live, -1 without a TTL, -2 when absent.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn pttl(&self, key: &Key) -> Result<i64> {
        self.typed(key, "PTTL", &[]).await
    }

    /// `PEXPIRE`: the entity (and its version tag) expire in `ms` milliseconds.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn pexpire(&self, key: &Key, ms: u64) -> Result<bool> {
        Ok(self.typed::<i64>(key, "PEXPIRE", &[arg(ms)]).await? == 1)
    }

    /// `INCRBY` of a plain-string entity; the new value.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn incr_by(&self, key: &Key, by: i64) -> Result<i64> {
        self.typed(key, "INCRBY", &[arg(by)]).await
    }

    /// `HINCRBY` of a hash entity's field; the new value.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn hincr_by(&self, key: &Key, field: &str, by: i64) -> Result<i64> {
        self.typed(key, "HINCRBY", &[arg(field), arg(by)]).await
    }

    /// `SADD` of one member; whether it was new.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn sadd(&self, key: &Key, member: &[u8]) -> Result<bool> {
        Ok(self.typed::<i64>(key, "SADD", &[member.to_vec()]).await? == 1)
    }

    /// `SREM` of one member; whether it was there.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn srem(&self, key: &Key, member: &[u8]) -> Result<bool> {
        Ok(self.typed::<i64>(key, "SREM", &[member.to_vec()]).await? == 1)
    }

    /// `RPUSH` of one item; the list's new length.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn rpush(&self, key: &Key, item: &[u8]) -> Result<i64> {
        self.typed(key, "RPUSH", &[item.to_vec()]).await
    }

    /// `LPOP` of one item, if any.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn lpop(&self, key: &Key) -> Result<Option<Vec<u8>>> {
        self.typed(key, "LPOP", &[]).await
    }

    /// `ZADD` of one member with its score; whether it was new.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn zadd(&self, key: &Key, member: &[u8], score: f64) -> Result<bool> {
        Ok(self
            .typed::<i64>(key, "ZADD", &[arg(score), member.to_vec()])
            .await?
            == 1)
    }

    /// `ZINCRBY` of one member; its new score.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn zincr_by(&self, key: &Key, member: &[u8], by: f64) -> Result<f64> {
        self.typed(key, "ZINCRBY", &[arg(by), member.to_vec()])
            .await
    }

    /// `ZREM` of one member; whether it was there.
    ///
    /// # Errors
    /// As [`RedisLazy::command`].
    pub async fn zrem(&self, key: &Key, member: &[u8]) -> Result<bool> {
        Ok(self.typed::<i64>(key, "ZREM", &[member.to_vec()]).await? == 1)
    }
}

fn arg(v: impl ToString) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// A command of [`crate::RedisLazy::command`] on a server with the module: sent
/// as it is, one plain command (the module moves the entity from a former name,
/// migrates it, runs the command and stamps a key it created, atomically).
pub(crate) async fn plain_command(
    store: &crate::RedisStore,
    key: &tern_core::model::Key,
    redis_key: &str,
    command: &str,
    args: &[Vec<u8>],
) -> tern_core::lazy::Result<redis::Value> {
    let mut cmd = redis::cmd(command);
    cmd.arg(redis_key);
    for a in args {
        cmd.arg(a.as_slice());
    }
    cmd.query_async(&mut store.conn()).await.map_err(|e| {
        store
            .err("running a command through the lazy client (module)", e)
            .with_context("key", key.to_string())
            .with_context("command", command.to_owned())
            .into()
    })
}
