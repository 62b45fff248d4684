//! The filter's fast path: a command on one key of a kind with a pending lazy
//! migration runs as it is, without going through `TERN.R`/`TERN.W`, when the
//! entity is known up to date and running the command unwrapped leaves the
//! store and the reply exactly as the module command would: no former copy to
//! move or drop, the version already the kind's, and (for writes) nothing the
//! module would stamp afterwards. Everything else goes through the module
//! command as before. The filter reads keys through its own context
//! (`ffi::peek`: no expiry, no touch, no stats, no notification).

use std::collections::HashSet;
use std::sync::Mutex;

use tern_redis::KindLayout;
use tern_redis::wire::Wire;

use crate::ffi::Peeked;
use crate::loaded::Loaded;

/// A command the fast path knows: its key is its first argument and it names
/// no other key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Reads only (any layout).
    Read,
    /// Writes a hash's fields (`HSET`...): never its version field, which the
    /// arguments are checked for.
    HashWrite,
    /// Writes a plain string: raw only for a kind at version 0 (a tag names the
    /// value's digest, which the module would rewrite).
    TextWrite,
    /// Adds to a container of this layout (never removes: the module drops a
    /// container's tag with its last member).
    Add(KindLayout),
}

/// The fast-path class of command `name` (`None`: always through the module).
pub(crate) fn op_of(name: &[u8]) -> Option<Op> {
    let mut buf = [0u8; 16];
    let lower = buf.get_mut(..name.len())?;
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    Some(match &*lower {
        b"get" | b"strlen" | b"getrange" | b"type" | b"ttl" | b"pttl" | b"exists" | b"hget"
        | b"hmget" | b"hgetall" | b"hkeys" | b"hvals" | b"hlen" | b"hexists" | b"hstrlen"
        | b"smembers" | b"sismember" | b"smismember" | b"scard" | b"zscore" | b"zmscore"
        | b"zcard" | b"zrank" | b"zrevrank" | b"zcount" | b"zrange" | b"zrevrange"
        | b"zrangebyscore" | b"zrevrangebyscore" | b"lrange" | b"lindex" | b"llen" => Op::Read,
        b"hset" | b"hsetnx" | b"hmset" | b"hincrby" | b"hincrbyfloat" => Op::HashWrite,
        b"set" | b"append" | b"incr" | b"incrby" | b"decr" | b"decrby" | b"incrbyfloat"
        | b"setrange" => Op::TextWrite,
        b"sadd" => Op::Add(KindLayout::Set),
        b"zadd" | b"zincrby" => Op::Add(KindLayout::SortedSet),
        b"rpush" | b"lpush" | b"rpushx" | b"lpushx" | b"lset" | b"linsert" => {
            Op::Add(KindLayout::List)
        }
        _ => return None,
    })
}

/// Clients known to be listed by the server (not a script's or a module's own
/// client), not in a transaction, and in the store's database: the filter asks the
/// server once per client (`RM_GetClientInfoById`, which costs a `getpeername`
/// syscall) and keeps the answer until the client sends a command that may change
/// it ([`forget_if_changing`]), disconnects, or a new spec is installed.
static PLAIN: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

fn with_plain<R>(f: impl FnOnce(&mut HashSet<u64>) -> R) -> R {
    let mut g = match PLAIN.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    f(g.get_or_insert_with(HashSet::new))
}

/// Whether `client` is known plain (see [`PLAIN`]).
pub(crate) fn known_plain(client: u64) -> bool {
    client != 0 && with_plain(|s| s.contains(&client))
}

/// Records that the server said `client` is plain.
pub(crate) fn remember_plain(client: u64) {
    if client != 0 {
        with_plain(|s| s.insert(client));
    }
}

/// Forgets `client` (disconnected).
pub(crate) fn forget(client: u64) {
    with_plain(|s| s.remove(&client));
}

/// Forgets every client (a new spec: its state is asked again).
pub(crate) fn forget_all() {
    with_plain(HashSet::clear);
}

/// Before command `name` runs: forgets its client when the command may change what
/// [`PLAIN`] records (`MULTI`, `SELECT`, `RESET`, or another module's command, which
/// may select a database for its caller). `client` is asked only then.
pub(crate) fn forget_if_changing(name: &[u8], client: impl FnOnce() -> u64) {
    let changing = name.eq_ignore_ascii_case(b"multi")
        || name.eq_ignore_ascii_case(b"select")
        || name.eq_ignore_ascii_case(b"reset")
        || (name.contains(&b'.')
            && !name
                .get(..5)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"tern.")));
    if changing {
        forget(client());
    }
}

/// What the fast path reads of the server.
pub(crate) trait Peek {
    /// `key`'s type, TTL and hash field `field` (a hash) or value (a string).
    fn peek(&mut self, key: &[u8], field: Option<&[u8]>) -> Peeked;
}

impl<F: FnMut(&[u8], Option<&[u8]>) -> Peeked> Peek for F {
    fn peek(&mut self, key: &[u8], field: Option<&[u8]>) -> Peeked {
        self(key, field)
    }
}

/// Whether the command `args` (name first) may run unwrapped. `evicting`: the
/// server may evict keys (a maxmemory policy other than `noeviction`), so a
/// write's entity could vanish between this check and the command.
pub(crate) fn may_pass(
    wire: &Wire,
    l: &Loaded,
    args: &[&[u8]],
    evicting: bool,
    srv: &mut dyn Peek,
) -> bool {
    let [name, key, rest @ ..] = args else {
        return false;
    };
    let Some(op) = op_of(name) else {
        return false;
    };
    // EXISTS names every argument as a key.
    if name.eq_ignore_ascii_case(b"exists") && !rest.is_empty() {
        return false;
    }
    let write = op != Op::Read;
    if l.awaiting_push || (write && evicting) {
        return false;
    }
    let Ok(key_text) = std::str::from_utf8(key) else {
        return false;
    };
    let Some(kind) = wire.kind_of(key_text) else {
        return false;
    };
    if l.spec.renamed_to(kind).is_some() {
        // A former name: the module moves the entity first.
        return false;
    }
    let chain = l.spec.chain(kind);
    if !chain.pending {
        return false;
    }
    let layout = wire.layout(kind);
    let vf = wire.version_field().as_bytes();
    let fits = match op {
        Op::Read => true,
        Op::HashWrite => layout == KindLayout::Hash && !rest.contains(&vf),
        Op::TextWrite => layout == KindLayout::Text && chain.version == 0,
        Op::Add(l) => layout == l,
    };
    if !fits || layout == KindLayout::Json {
        return false;
    }
    let prefix_len = wire.kind_prefix(kind).len();
    let Some(id_part) = key_text.get(prefix_len..) else {
        return false;
    };
    for former in &chain.formers {
        let old = format!("{}{id_part}", wire.kind_prefix(former));
        if srv.peek(old.as_bytes(), None).ty != "none" {
            return false;
        }
    }
    let field = (layout == KindLayout::Hash).then_some(vf);
    let p = srv.peek(key, field);
    if p.ty == "none" || p.ty != layout.type_name() {
        // Absent, or another Redis type: the module migrates nothing. A read runs as
        // it would; a write could create the entity, which the module would stamp.
        return !write && p.ty != "?";
    }
    if write && p.ty != "string" && p.ttl {
        // It could expire between this check and the command, which would then
        // create it unstamped.
        return false;
    }
    let version = if layout == KindLayout::Hash {
        match p.value.as_deref().map(std::str::from_utf8) {
            None => Some(0),
            Some(Ok(v)) => v.trim().parse().ok(),
            Some(Err(_)) => None,
        }
    } else {
        let tag = srv.peek(wire.version_key(key_text).as_bytes(), None);
        match tag.ty {
            "none" => Some(0),
            "string" if !(write && (layout == KindLayout::Text || tag.ttl)) => {
                let value = (layout == KindLayout::Text)
                    .then_some(p.value.as_deref())
                    .flatten();
                wire.tag_version(layout, tag.value.as_deref(), value).ok()
            }
            _ => None,
        }
    };
    version == Some(chain.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_classed_in_any_case() {
        assert_eq!(op_of(b"GET"), Some(Op::Read));
        assert_eq!(op_of(b"hGetAll"), Some(Op::Read));
        assert_eq!(op_of(b"HSET"), Some(Op::HashWrite));
        assert_eq!(op_of(b"set"), Some(Op::TextWrite));
        assert_eq!(op_of(b"ZADD"), Some(Op::Add(KindLayout::SortedSet)));
        for other in [
            &b"DEL"[..],
            b"MGET",
            b"SREM",
            b"EXPIRE",
            b"",
            b"averyveryverylongcommandname",
        ] {
            assert_eq!(op_of(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn nothing_passes_without_a_pending_kind() {
        let wire =
            Wire::from_url("redis://127.0.0.1/?prefix=app").unwrap_or_else(|e| panic!("{e}"));
        let mut never = |_: &[u8], _: Option<&[u8]>| -> Peeked { panic!("no read expected") };
        let waiting = Loaded::awaiting(&wire);
        let none = Loaded::default();
        for (l, args) in [
            (&none, &[&b"GET"[..], b"app:user:1"][..]),
            (&none, &[&b"GET"[..]][..]),
            (&waiting, &[&b"GET"[..], b"app:user:1"][..]),
        ] {
            assert!(!may_pass(&wire, l, args, false, &mut never));
        }
    }
}
