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

use crate::ffi::{Peeked, Want};
use crate::loaded::{FastKind, Loaded};

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
    /// `key`'s type, and what `want` names of it.
    fn peek(&mut self, key: &[u8], want: Want<'_>) -> Peeked;
}

impl<F: FnMut(&[u8], Want<'_>) -> Peeked> Peek for F {
    fn peek(&mut self, key: &[u8], want: Want<'_>) -> Peeked {
        self(key, want)
    }
}

/// Whether the read `name key ...` (`argc` arguments, the name included) may run
/// unwrapped: the command reads only `key`, and the module command would leave
/// the reply as it is: the entity is at the kind's version, or another Redis type,
/// or absent with no copy under a former name (which the module would move).
///
/// Former names are looked up only when the key is absent: where the key holds
/// the entity, the module command would only drop a stale copy under a former
/// name (the copy under the name now supersedes it; test
/// `up_to_date_entities_are_served_without_the_module_command`), which changes no
/// reply: every command naming the former key, and every write naming the key,
/// still goes through the module and drops it first, and `tern sweep` does.
pub(crate) fn may_pass(
    wire: &Wire,
    l: &Loaded,
    name: &[u8],
    key: &[u8],
    argc: usize,
    srv: &mut dyn Peek,
) -> bool {
    // EXISTS names every argument as a key.
    if argc < 2
        || !reads_one_key(name)
        || (argc > 2 && name.eq_ignore_ascii_case(b"exists"))
        || l.awaiting_push
    {
        return false;
    }
    let Ok(key_text) = std::str::from_utf8(key) else {
        return false;
    };
    let Some(kind) = wire.kind_of(key_text) else {
        return false;
    };
    // Former names, JSON strings and kinds with nothing pending are not in `fast`.
    let Some(fk) = l.fast.iter().find(|f| f.kind == kind) else {
        return false;
    };
    let layout = fk.layout;
    let want = match layout {
        KindLayout::Hash => Want::Field(wire.version_field().as_bytes()),
        KindLayout::Text => Want::Value,
        _ => Want::Type,
    };
    let p = srv.peek(key, want);
    match p.ty {
        "?" => return false,
        "none" => return no_former_copy(fk, key, srv),
        // Another Redis type: the module migrates nothing.
        ty if ty != layout.type_name() => return true,
        _ => {}
    }
    let version = if layout == KindLayout::Hash {
        match p.value.as_deref().map(std::str::from_utf8) {
            None => Some(0),
            Some(Ok(v)) => v.trim().parse().ok(),
            Some(Err(_)) => None,
        }
    } else {
        let tag = srv.peek(wire.version_key(key_text).as_bytes(), Want::Value);
        match tag.ty {
            "none" => Some(0),
            "string" => wire
                .tag_version(layout, tag.value.as_deref(), p.value.as_deref())
                .ok(),
            _ => None,
        }
    };
    version == Some(fk.version)
}

/// Whether no former name of `fk` holds a copy of the entity `key` names.
fn no_former_copy(fk: &FastKind, key: &[u8], srv: &mut dyn Peek) -> bool {
    let Some(id_part) = key.get(fk.prefix_len..) else {
        return false;
    };
    let mut old = Vec::new();
    fk.former_prefixes.iter().all(|prefix| {
        old.clear();
        old.extend_from_slice(prefix);
        old.extend_from_slice(id_part);
        srv.peek(&old, Want::Type).ty == "none"
    })
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

    /// A server of fixed keys that records what was read.
    fn server<'a>(
        keys: &'a [(&'a str, &'static str, &'a [u8])],
        read: &'a mut Vec<Vec<u8>>,
    ) -> impl FnMut(&[u8], Want<'_>) -> Peeked + 'a {
        move |key: &[u8], _: Want<'_>| {
            read.push(key.to_vec());
            keys.iter().find(|(k, _, _)| k.as_bytes() == key).map_or(
                Peeked {
                    ty: "none",
                    value: None,
                },
                |(_, ty, value)| Peeked {
                    ty,
                    value: Some(value.to_vec()),
                },
            )
        }
    }

    #[test]
    fn former_names_are_read_only_when_the_key_is_absent() {
        let wire = Wire::from_url("redis://127.0.0.1/?prefix=app&string=oldc,c")
            .unwrap_or_else(|e| panic!("{e}"));
        let l = Loaded {
            fast: vec![FastKind {
                kind: "c".into(),
                layout: KindLayout::Text,
                version: 2,
                prefix_len: "app:c:".len(),
                former_prefixes: vec![b"app:oldc:".to_vec()],
            }],
            ..Loaded::default()
        };
        let tag = wire.container_tag(KindLayout::Text, 2, b"one");
        let tag_key = wire.version_key("app:c:1");
        // Whether a GET of `key` passes on a server of `keys`, and what it read.
        let get = |key: &str, keys: &[(&str, &'static str, &[u8])]| {
            let mut read = Vec::new();
            let passes = may_pass(
                &wire,
                &l,
                b"GET",
                key.as_bytes(),
                2,
                &mut server(keys, &mut read),
            );
            (passes, read)
        };
        let current = [
            ("app:c:1", "string", &b"one"[..]),
            (tag_key.as_str(), "string", tag.as_bytes()),
            ("app:oldc:1", "string", b"stale"),
            ("app:oldc:2", "string", b"two"),
        ];
        let (passes, read) = get("app:c:1", &current);
        assert!(passes);
        assert!(
            !read.iter().any(|k| k.starts_with(b"app:oldc:")),
            "the key holds the entity: no former lookup"
        );
        // Absent under the name now: a copy under the former name is moved by the module.
        let (passes, read) = get("app:c:2", &current);
        assert!(!passes);
        assert_eq!(read, [b"app:c:2".to_vec(), b"app:oldc:2".to_vec()]);
        // Absent everywhere: nothing to do.
        assert!(get("app:c:3", &current).0);
        // Another value than the tag's digest names: written by someone else, stale.
        let other = [
            ("app:c:1", "string", &b"two"[..]),
            (tag_key.as_str(), "string", tag.as_bytes()),
        ];
        assert!(!get("app:c:1", &other).0);
    }

    #[test]
    fn nothing_passes_without_a_pending_kind() {
        let wire =
            Wire::from_url("redis://127.0.0.1/?prefix=app").unwrap_or_else(|e| panic!("{e}"));
        let mut never = |_: &[u8], _: Want<'_>| -> Peeked { panic!("no read expected") };
        let waiting = Loaded::awaiting(&wire);
        let none = Loaded::default();
        for (l, args) in [
            (&none, &[&b"GET"[..], b"app:user:1"][..]),
            (&none, &[&b"GET"[..]][..]),
            (&waiting, &[&b"GET"[..], b"app:user:1"][..]),
        ] {
            let (name, key) = match args {
                [name, key, ..] => (*name, *key),
                [name] => (*name, &b""[..]),
                [] => (&b""[..], &b""[..]),
            };
            assert!(!may_pass(&wire, l, name, key, args.len(), &mut never));
        }
    }
}
