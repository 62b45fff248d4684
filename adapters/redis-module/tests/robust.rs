//! Never take the server down: random commands and arguments through the
//! filter and the module's commands, on keys of migrating kinds and others
//! (the server must answer after every one); and big containers migrated on
//! first touch, with the server's pause measured (printed; docs/module.md).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use common::{Valkey, up};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use redis::Commands;

const URL: &str = "redis://127.0.0.1/0?prefix=app&string=oldc,c&set=oldtags,tags&zset=sc&list=log";

const NAMES: &[&str] = &[
    "GET",
    "SET",
    "MGET",
    "MSET",
    "DEL",
    "UNLINK",
    "EXISTS",
    "TYPE",
    "TTL",
    "PTTL",
    "EXPIRE",
    "PEXPIRE",
    "PERSIST",
    "RENAME",
    "RENAMENX",
    "COPY",
    "INCR",
    "INCRBY",
    "DECR",
    "APPEND",
    "GETSET",
    "GETDEL",
    "GETEX",
    "SETNX",
    "SETRANGE",
    "HGET",
    "HSET",
    "HSETNX",
    "HMGET",
    "HDEL",
    "HGETALL",
    "HINCRBY",
    "HKEYS",
    "HLEN",
    "SADD",
    "SREM",
    "SMEMBERS",
    "SISMEMBER",
    "SMOVE",
    "SUNIONSTORE",
    "SINTERSTORE",
    "SPOP",
    "ZADD",
    "ZINCRBY",
    "ZRANGE",
    "ZREM",
    "ZSCORE",
    "ZUNIONSTORE",
    "LPUSH",
    "RPUSH",
    "LPOP",
    "RPOP",
    "LRANGE",
    "LMOVE",
    "LSET",
    "LINSERT",
    "SORT",
    "OBJECT",
    "DUMP",
    "EVAL",
    "MULTI",
    "EXEC",
    "WATCH",
    "TERN.R",
    "TERN.W",
    "TERN.DECLARE",
    "TERN.LOADSPEC",
    "TERN.INFO",
    "XADD",
    "PFADD",
    "SETBIT",
    "BITOP",
];

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0..6u8).prop_map(|i| format!("app:user:{i}").into_bytes()),
        (0..6u8).prop_map(|i| format!("app:oldc:{i}").into_bytes()),
        (0..6u8).prop_map(|i| format!("app:c:{i}").into_bytes()),
        (0..6u8).prop_map(|i| format!("app:oldtags:{i}").into_bytes()),
        (0..6u8).prop_map(|i| format!("app:tags:{i}").into_bytes()),
        Just(b"app:".to_vec()),
        Just(b"app:user:".to_vec()),
        (-3i64..100).prop_map(|n| n.to_string().into_bytes()),
        prop::sample::select(vec![
            "NX",
            "XX",
            "EX",
            "PX",
            "KEEPTTL",
            "GET",
            "WITHSCORES",
            "0",
            "-1",
            "1"
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..12),
    ]
}

fn command() -> impl Strategy<Value = (Vec<u8>, Vec<Vec<u8>>)> {
    (
        prop_oneof![
            4 => prop::sample::select(NAMES).prop_map(|s| s.as_bytes().to_vec()),
            1 => prop::collection::vec(any::<u8>(), 1..8),
        ],
        prop::collection::vec(arg(), 0..7),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_commands_never_take_the_server_down() {
    let name = "random_commands_never_take_the_server_down";
    let v = match Valkey::start(URL, &[]) {
        Ok(v) => v,
        Err(reason) => return common::skip("valkey-module", name, &reason),
    };
    let mut c = v.conn();
    for i in 0..6 {
        let _: () = c.hset(format!("app:user:{i}"), "visits", i).unwrap();
        let _: () = c.set(format!("app:oldc:{i}"), i).unwrap();
        let _: () = c.sadd(format!("app:oldtags:{i}"), &["a", "b"]).unwrap();
    }
    up(&v, &[(1, "lazy\nrename user.visits to hits\nrename kind oldc to c\nrename kind oldtags to tags\n")]).await;
    let mut runner = TestRunner::new(Config {
        cases: 1500,
        failure_persistence: None,
        ..Config::default()
    });
    let sent = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&command(), |(cmd, args)| {
            let mut c = v.conn();
            let mut q2 = redis::Cmd::new();
            q2.arg(&cmd);
            for a in &args {
                q2.arg(a);
            }
            let _ = q2.query::<redis::Value>(&mut c);
            sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // A fresh connection: the driver may drop one whose reply it cannot read.
            let pong: Result<String, _> = v
                .conn_checked()
                .and_then(|mut c| redis::cmd("PING").query(&mut c));
            prop_assert!(
                pong.is_ok(),
                "the server stopped answering after {} {:?}: {}",
                String::from_utf8_lossy(&cmd),
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>(),
                v.log_tail()
            );
            Ok(())
        })
        .unwrap();
    assert!(sent.into_inner() >= 1500);
    // Still serving migrated data afterwards.
    let mut c = v.conn();
    let _: () = c.hset("app:user:99", "hits", "1").unwrap();
    assert_eq!(c.hget::<_, _, String>("app:user:99", "hits").unwrap(), "1");
    assert!(!v.log_tail().contains("crashed"), "{}", v.log_tail());
    tern_testkit::battery::report("valkey-module", name, "passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_containers_migrate_whole_with_the_pause_measured() {
    let name = "big_containers_migrate_whole_with_the_pause_measured";
    let v = match Valkey::start(URL, &["--appendfsync", "no"]) {
        Ok(v) => v,
        Err(reason) => return common::skip("valkey-module", name, &reason),
    };
    let mut c = v.conn();
    const FIELDS: usize = 200_000;
    const MEMBERS: usize = 100_000;
    for chunk in (0..FIELDS).collect::<Vec<_>>().chunks(10_000) {
        let pairs: Vec<(String, String)> = chunk
            .iter()
            .map(|i| (format!("f{i}"), i.to_string()))
            .collect();
        let _: () = c.hset_multiple("app:user:big", &pairs).unwrap();
    }
    let _: () = c.hset("app:user:big", "visits", "7").unwrap();
    for chunk in (0..MEMBERS).collect::<Vec<_>>().chunks(10_000) {
        let members: Vec<String> = chunk.iter().map(|i| format!("m{i}")).collect();
        let _: () = c.sadd("app:oldtags:big", &members).unwrap();
    }
    up(
        &v,
        &[(
            1,
            "lazy\nrename user.visits to hits\nadd user.plan = 1\nrename kind oldtags to tags\n",
        )],
    )
    .await;
    // Another client's PING during the migration waits for it: the pause others see.
    let t = Instant::now();
    let hits: String = c.hget("app:user:big", "hits").unwrap();
    let hash_pause = t.elapsed();
    assert_eq!(hits, "7");
    assert_eq!(c.hlen::<_, usize>("app:user:big").unwrap(), FIELDS + 3);
    let t = Instant::now();
    let n: usize = c.scard("app:tags:big").unwrap();
    let set_pause = t.elapsed();
    assert_eq!(n, MEMBERS);
    assert!(!c.exists::<_, bool>("app:oldtags:big").unwrap());
    eprintln!(
        "PAUSE hash of {FIELDS} fields (add + rename of a field): {:.1} ms; set of {MEMBERS} members (kind rename): {:.1} ms (module {})",
        hash_pause.as_secs_f64() * 1e3,
        set_pause.as_secs_f64() * 1e3,
        common::module_path()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    assert!(hash_pause < Duration::from_secs(30) && set_pause < Duration::from_secs(30));
    tern_testkit::battery::report("valkey-module", name, "passed");
}

/// On Redis 7.0 (Debian's redis-server) the module refuses to load, and the
/// server's log names the missing API.
#[test]
fn refuses_to_load_on_redis_7_0_naming_the_missing_api() {
    let name = "refuses_to_load_on_redis_7_0_naming_the_missing_api";
    let version = match std::process::Command::new("redis-server")
        .arg("--version")
        .output()
    {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(_) => return common::skip("valkey-module", name, "redis-server is not installed"),
    };
    if !version.contains("v=7.0.") {
        return common::skip(
            "valkey-module",
            name,
            &format!("redis-server is not 7.0 ({})", version.trim()),
        );
    }
    let module = match common::module_path() {
        Ok(m) => m,
        Err(reason) => return common::skip("valkey-module", name, &reason),
    };
    let Some(port) = common::free_port() else {
        return common::skip("valkey-module", name, "no free port in 6390-6399");
    };
    let dir = tempfile::tempdir().unwrap();
    let out = tern_testkit::server::redis_server(port, dir.path())
        .arg("--loadmodule")
        .arg(module.display().to_string())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "redis-server 7.0 started with the module: {log}"
    );
    assert!(
        log.contains("RedisModule_CommandFilterGetClientId") && log.contains("Valkey 8"),
        "{log}"
    );
    tern_testkit::battery::report("valkey-module", name, "passed");
}

/// `MODULE LOAD` on a running server with a lazy migration already installed
/// reads the spec at once: the next read migrates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_load_at_run_time_reads_the_spec_at_once() {
    let name = "module_load_at_run_time_reads_the_spec_at_once";
    let (v, module) = match (
        Valkey::start_without_module(&["--enable-module-command", "local"]),
        common::module_path(),
    ) {
        (Ok(v), Ok(m)) => (v, m),
        (Err(reason), _) | (_, Err(reason)) => return common::skip("valkey-module", name, &reason),
    };
    let mut c = v.conn();
    let _: () = c.hset("app:user:1", "visits", "5").unwrap();
    let store = tern_redis::open(&format!("redis://127.0.0.1:{}/0?prefix=app", v.port))
        .await
        .unwrap();
    tern_testkit::lazy::up(&store, &[(1, "lazy\nrename user.visits to hits\n")])
        .await
        .unwrap();
    let _: () = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(module.display().to_string())
        .arg("redis://127.0.0.1/0?prefix=app")
        .query(&mut c)
        .unwrap();
    assert_eq!(c.hget::<_, _, String>("app:user:1", "hits").unwrap(), "5");
    tern_testkit::battery::report("valkey-module", name, "passed");
}
