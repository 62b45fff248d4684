//! The command filter's decision, as a pure function of the arguments: which
//! commands go through the module (`TERN.R`/`TERN.W` inserted in front) and
//! which pass untouched. It runs for every command of every client, so it only
//! compares argument prefixes; the module command then finds the exact keys.

/// What the filter does with a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Leave it as it is.
    Pass,
    /// Run it through `TERN.R` (a command that reads only).
    Read,
    /// Run it through `TERN.W`.
    Write,
    /// A blocking command (`BLPOP`...) on a key of a kind being migrated:
    /// refused through `TERN.B` (the module cannot migrate during a blocking
    /// wait, and `RM_Call` would not block).
    Blocked,
}

/// Commands never rewritten: no keys, or keys the module must not wrap
/// (transactions and WATCH, scripts and functions whose own `redis.call`s are
/// filtered one by one, pub/sub channels, streams, scans whose MATCH pattern
/// looks like a key, tern's own commands). [`BLOCKING`] commands are refused
/// instead.
const SKIP: &[&str] = &[
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "function",
    "script",
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "publish",
    "spublish",
    "client",
    "hello",
    "auth",
    "select",
    "ping",
    "echo",
    "info",
    "config",
    "debug",
    "module",
    "command",
    "scan",
    "keys",
    "dbsize",
    "flushdb",
    "flushall",
    "swapdb",
    "move",
    "migrate",
    "xread",
    "xreadgroup",
    "wait",
    "waitaof",
    "object",
    "memory",
    "dump",
    "restore",
    "cluster",
    "readonly",
    "readwrite",
    "asking",
    "monitor",
    "shutdown",
    "save",
    "bgsave",
    "bgrewriteaof",
    "lastsave",
    "slowlog",
    "latency",
    "acl",
    "reset",
    "quit",
    "time",
];

/// The blocking commands on the types tern maps (lists and sorted sets): on a
/// kind being migrated they are refused ([`Route::Blocked`]), since `RM_Call`
/// runs a blocking command without blocking and the module cannot migrate an
/// entity during a client's wait (docs/module.md, Limits).
pub const BLOCKING: &[&str] = &[
    "blpop",
    "brpop",
    "brpoplpush",
    "blmove",
    "blmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
];

/// Commands that only read their keys (`TERN.R`, allowed on replicas).
const READS: &[&str] = &[
    "get",
    "mget",
    "getrange",
    "substr",
    "strlen",
    "exists",
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "hget",
    "hmget",
    "hgetall",
    "hkeys",
    "hvals",
    "hlen",
    "hexists",
    "hstrlen",
    "hrandfield",
    "hscan",
    "smembers",
    "sismember",
    "smismember",
    "scard",
    "srandmember",
    "sunion",
    "sinter",
    "sdiff",
    "sintercard",
    "sscan",
    "zrange",
    "zrangebyscore",
    "zrangebylex",
    "zrevrange",
    "zrevrangebyscore",
    "zrevrangebylex",
    "zscore",
    "zmscore",
    "zrank",
    "zrevrank",
    "zcard",
    "zcount",
    "zlexcount",
    "zscan",
    "zrandmember",
    "zunion",
    "zinter",
    "zdiff",
    "zintercard",
    "lrange",
    "lindex",
    "llen",
    "lpos",
    "getbit",
    "bitcount",
    "bitpos",
    "touch",
    "sort_ro",
    "lcs",
];

fn is_in(name: &[u8], list: &[&str]) -> bool {
    list.iter().any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// The route of the command `args` (name first) when `watched` says which
/// arguments may name a key of a kind being migrated.
pub fn route<'a>(
    args: impl IntoIterator<Item = &'a [u8]>,
    watched: impl Fn(&[u8]) -> bool,
) -> Route {
    let mut it = args.into_iter();
    let Some(name) = it.next() else {
        return Route::Pass;
    };
    // tern.* commands are the module's own.
    if name.len() >= 5 && name[..5].eq_ignore_ascii_case(b"tern.") {
        return Route::Pass;
    }
    if !it.any(&watched) {
        return Route::Pass;
    }
    if is_in(name, SKIP) {
        Route::Pass
    } else if is_in(name, BLOCKING) {
        Route::Blocked
    } else if is_in(name, READS) {
        Route::Read
    } else {
        Route::Write
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(args: &[&str]) -> Route {
        route(args.iter().map(|a| a.as_bytes()), |a| {
            a.starts_with(b"app:user:")
        })
    }

    #[test]
    fn commands_on_watched_keys_are_routed_by_what_they_do() {
        assert_eq!(r(&["GET", "app:user:1"]), Route::Read);
        assert_eq!(r(&["hgetall", "app:user:1"]), Route::Read);
        assert_eq!(r(&["SET", "app:user:1", "x"]), Route::Write);
        assert_eq!(
            r(&["MSET", "app:post:1", "x", "app:user:2", "y"]),
            Route::Write
        );
        assert_eq!(r(&["unknowncmd", "app:user:2"]), Route::Write);
        assert_eq!(r(&["BLPOP", "app:user:1", "0"]), Route::Blocked);
        assert_eq!(
            r(&["bzpopmin", "app:post:1", "app:user:1", "0"]),
            Route::Blocked
        );
        assert_eq!(r(&["BLPOP", "app:post:1", "0"]), Route::Pass);
    }

    #[test]
    fn other_keys_and_skipped_commands_pass() {
        assert_eq!(r(&["GET", "app:post:1"]), Route::Pass);
        assert_eq!(r(&["GET"]), Route::Pass);
        assert_eq!(r(&[]), Route::Pass);
        assert_eq!(r(&["EVAL", "return 1", "1", "app:user:1"]), Route::Pass);
        assert_eq!(r(&["WATCH", "app:user:1"]), Route::Pass);
        assert_eq!(r(&["XREAD", "STREAMS", "app:user:1", "0"]), Route::Pass);
        assert_eq!(r(&["TERN.W", "GET", "app:user:1"]), Route::Pass);
        assert_eq!(r(&["SCAN", "0", "MATCH", "app:user:*"]), Route::Pass);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any command: no panic; untouched unless an argument after the name is watched.
        #[test]
        fn any_command_is_routed_without_panic(
            args in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..10), 0..8),
            prefix in prop::collection::vec(any::<u8>(), 1..4),
        ) {
            let watched = |a: &[u8]| a.starts_with(&prefix);
            let route = route(args.iter().map(Vec::as_slice), watched);
            if !args.iter().skip(1).any(|a| a.starts_with(&prefix)) {
                prop_assert_eq!(route, Route::Pass);
            }
        }
    }
}
