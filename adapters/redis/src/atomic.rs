//! [`Store::write_atomic`](tern_core::store::Store::write_atomic) on Redis: one Lua
//! script checks every guard and every write's condition first, then applies
//! all the writes (a script runs alone on the server, so nothing can
//! interleave). Used by lazy kind renames: the entity under the new prefix
//! and the removal of the stale copy under the old one in one step. Every
//! layout is handled as the write script handles it (a container's version
//! key moves with it, TTLs are kept). An entity put under a new key in the
//! same call that deletes the entity of the same id under another kind is a
//! move (a lazy kind rename): it takes the deleted key's TTL. Not offered on
//! a cluster: the keys of two kinds lie in different slots. Puts of hash and
//! JSON-string kinds with the deletes of their former copies (a lazy client's
//! put of a renamed kind) and nothing else go as one run of the smaller
//! [`PUT_SCRIPT`](crate::core::PUT_SCRIPT), with the same outcome.

use tern_core::model::Key;
use tern_core::store::{Error, ErrorKind, Guard, Result, Write, WriteOutcome};

use crate::config::KindLayout;
use crate::core::{PutCall, RedisStore};

/// `KEYS`: per op, the entity's key and its version key. `ARGV[1]`: the
/// version field; then per op its code (`A` absent, `U` unchanged + payload,
/// `P`/`I`/`R`/`D` as the write script), the layout code, the number of the op
/// whose key's TTL a new key takes (0: none) and its payloads.
/// Returns 1 when everything was applied, 0 when a condition failed (nothing
/// written).
const ATOMIC_SCRIPT: &str = concat!(
    include_str!("../lua/replace_hash.lua"),
    include_str!("../lua/text_tag.lua"),
    include_str!("../lua/write_prelude.lua"),
    include_str!("../lua/atomic_write.lua")
);

impl RedisStore {
    /// On a cluster, one script may touch the keys of one id only, with ids
    /// as hash tags (`id_tag=1`): those share a slot whatever their kinds.
    fn one_slot(&self, guards: &[Guard], writes: &[Write]) -> Result<()> {
        let mut keys = guards
            .iter()
            .map(Guard::key)
            .chain(writes.iter().map(Write::key));
        let first = keys.next().map(|k| &k.id);
        if self.config.id_tag && keys.all(|k| Some(&k.id) == first) {
            return Ok(());
        }
        Err(Error::unsupported(
            "redis",
            if self.config.id_tag {
                "write_atomic over several ids on a Redis Cluster (their keys lie in different slots)"
            } else {
                "write_atomic on a Redis Cluster without id_tag=1 (the keys of one id under two \
                 kind names lie in different slots)"
            },
        ))
    }

    /// Guards and writes in one script run: all applied, or none.
    pub(crate) async fn write_atomic_script(
        &self,
        guards: Vec<Guard>,
        writes: Vec<Write>,
    ) -> Result<WriteOutcome> {
        if self.config.cluster {
            self.one_slot(&guards, &writes)?;
        }
        if let Some(puts) = self.moving_puts(&guards, &writes)? {
            self.run_puts(puts, "writing atomically").await?;
            return Ok(WriteOutcome::Applied);
        }
        let mut keys: Vec<String> = Vec::new();
        let mut args: Vec<Vec<u8>> = vec![self.config.version_field.as_bytes().to_vec()];
        for g in &guards {
            let (code, key) = match g {
                Guard::Absent(k) => ("A", k),
                Guard::Unchanged(e) => ("U", &e.key),
            };
            self.op_header(code, key, 0, &mut keys, &mut args)?;
            if let Guard::Unchanged(e) = g {
                self.expected_payload(e, &mut args)?;
            }
        }
        for w in &writes {
            let (code, key) = Self::op_of(w);
            let from = match w {
                Write::Delete(_) => 0,
                _ => moved_from(&writes, key).map_or(0, |j| guards.len() + j + 1),
            };
            self.op_header(code, key, from, &mut keys, &mut args)?;
            self.write_payloads(w, &mut args)?;
        }
        let script = self.script(ATOMIC_SCRIPT);
        let mut invocation = script.prepare_invoke();
        for k in &keys {
            invocation.key(k);
        }
        for a in &args {
            invocation.arg(a);
        }
        let code: i64 = invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.err("writing entities atomically", e))?;
        match code {
            1 => Ok(WriteOutcome::Applied),
            0 => Ok(WriteOutcome::Conflict),
            other => Err(Error::new(
                ErrorKind::Unexpected,
                format!("the atomic write script answered {other}"),
            )),
        }
    }

    /// The two keys of one op (the entity's and its version key), its code,
    /// layout and the op whose TTL it takes.
    fn op_header(
        &self,
        code: &str,
        key: &tern_core::model::Key,
        from: usize,
        keys: &mut Vec<String>,
        args: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        let redis_key = self.keys.entity_key(key)?;
        let version_key = self.keys.version_key(&redis_key);
        keys.push(redis_key);
        keys.push(version_key);
        args.push(code.as_bytes().to_vec());
        args.push(self.config.layout(&key.kind).code().as_bytes().to_vec());
        args.push(from.to_string().into_bytes());
        Ok(())
    }
}

impl RedisStore {
    /// The [`PUT_SCRIPT`](crate::core::PUT_SCRIPT) calls of the writes when
    /// they are puts of hash or JSON-string kinds, each followed by the
    /// deletes of its copies under former names (of those layouts too, same
    /// id), with no guard: a lazy client's put of a kind with a former name
    /// (`None` for anything else, which the atomic script runs). One script
    /// run on one server, so all or nothing, as the atomic script.
    fn moving_puts(&self, guards: &[Guard], writes: &[Write]) -> Result<Option<Vec<PutCall>>> {
        if !guards.is_empty() || writes.is_empty() {
            return Ok(None);
        }
        let simple = |k: &Key| {
            matches!(
                self.config.layout(&k.kind),
                KindLayout::Hash | KindLayout::Json
            )
        };
        let mut puts = Vec::new();
        let mut rest = writes;
        while let Some((first, after)) = rest.split_first() {
            let Write::Put(e) = first else {
                return Ok(None);
            };
            if !simple(&e.key) {
                return Ok(None);
            }
            let formers: Vec<&Key> = after
                .iter()
                .map_while(|w| match w {
                    Write::Delete(d) if d.id == e.key.id && d.kind != e.key.kind && simple(d) => {
                        Some(d)
                    }
                    _ => None,
                })
                .collect();
            puts.push(self.put_call(e, &formers)?);
            rest = after.get(formers.len()..).unwrap_or_default();
        }
        Ok(Some(puts))
    }
}

/// The index among `writes` of the delete of the entity of `key`'s id under
/// another kind: the entity moves there from that key.
fn moved_from(writes: &[Write], key: &tern_core::model::Key) -> Option<usize> {
    writes
        .iter()
        .position(|w| matches!(w, Write::Delete(d) if d.id == key.id && d.kind != key.kind))
}
