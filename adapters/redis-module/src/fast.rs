//! The filter's fast path: a command on one key of a kind with a pending lazy
//! migration runs as it is, without going through `TERN.R`/`TERN.W`, when the
//! entity is known up to date and running the command unwrapped leaves the
//! store and the reply exactly as the module command would: no former copy to
//! move or drop, the version already the kind's. Reads only: see
//! [`reads_one_key`]. Everything else goes through the module
//! command as before. The filter reads keys through its own context
//! (`ffi::peek`: no expiry, no touch, no stats, no notification).

use tern_redis::KindLayout;
use tern_redis::wire::Wire;

use crate::ffi::Peeked;
use crate::loaded::Loaded;

/// Whether command `name` only reads its one key (its first argument) and names
/// no other: the only commands the fast path passes. Writes always go through
/// `TERN.W`: a write that `CLIENT PAUSE WRITE` holds runs after the pause without
/// the filter again, so a check made before the pause could not stand for it.
pub(crate) fn reads_one_key(name: &[u8]) -> bool {
    let mut buf = [0u8; 16];
    let Some(lower) = buf.get_mut(..name.len()) else {
        return false;
    };
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    matches!(
        &*lower,
        b"get"
            | b"strlen"
            | b"getrange"
            | b"type"
            | b"ttl"
            | b"pttl"
            | b"exists"
            | b"hget"
            | b"hmget"
            | b"hgetall"
            | b"hkeys"
            | b"hvals"
            | b"hlen"
            | b"hexists"
            | b"hstrlen"
            | b"smembers"
            | b"sismember"
            | b"smismember"
            | b"scard"
            | b"zscore"
            | b"zmscore"
            | b"zcard"
            | b"zrank"
            | b"zrevrank"
            | b"zcount"
            | b"zrange"
            | b"zrevrange"
            | b"zrangebyscore"
            | b"zrevrangebyscore"
            | b"lrange"
            | b"lindex"
            | b"llen"
    )
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

/// Whether the read `args` (name first) may run unwrapped: its entity is under
/// the kind's name, with no copy under a former name, and at the kind's version
/// (or absent, which a read sees as the module would).
pub(crate) fn may_pass(wire: &Wire, l: &Loaded, args: &[&[u8]], srv: &mut dyn Peek) -> bool {
    let [name, key, rest @ ..] = args else {
        return false;
    };
    // EXISTS names every argument as a key.
    if !reads_one_key(name) || (name.eq_ignore_ascii_case(b"exists") && !rest.is_empty()) {
        return false;
    }
    if l.awaiting_push {
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
    let layout = wire.layout(kind);
    if !chain.pending || layout == KindLayout::Json {
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
    let vf = wire.version_field().as_bytes();
    let field = (layout == KindLayout::Hash).then_some(vf);
    let p = srv.peek(key, field);
    if p.ty == "none" || p.ty != layout.type_name() {
        // Absent, or another Redis type: the module migrates nothing.
        return p.ty != "?";
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
            "string" => {
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
        assert!(reads_one_key(b"GET"));
        assert!(reads_one_key(b"hGetAll"));
        for other in [
            &b"HSET"[..],
            b"set",
            b"ZADD",
            b"DEL",
            b"MGET",
            b"SREM",
            b"EXPIRE",
            b"",
            b"averyveryverylongcommandname",
        ] {
            assert!(!reads_one_key(other), "{}", String::from_utf8_lossy(other));
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
            assert!(!may_pass(&wire, l, args, &mut never));
        }
    }
}
