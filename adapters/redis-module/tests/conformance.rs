//! LAZY.md's conformance scenarios (KVolve's own test suite as black-box
//! expectations) through a plain `redis` client, with no tern code on the
//! client side: tern installs the lazy migrations (`tern up`), then every
//! command of the application runs on a Valkey 8 server with the module loaded.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Valkey, up};
use redis::{Commands, Connection, Value};

const URL: &str = "redis://127.0.0.1/0?prefix=app&string=oldc,c,oldd,d,oldn,n&set=oldtags,tags&list=oldlog,log&zset=oldsc,sc&json=doc,olddoc,newdoc";

/// Runs `body` on a fresh server, or reports the test skipped with the reason.
macro_rules! on_valkey {
    ($name:ident, |$v:ident| $body:block) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            #[allow(unused_mut)]
            let mut $v = match Valkey::start(URL, &[]) {
                Ok(v) => v,
                Err(reason) => return common::skip("valkey-module", stringify!($name), &reason),
            };
            $body
            tern_testkit::battery::report("valkey-module", stringify!($name), "passed");
        }
    };
}

fn hgetall(c: &mut Connection, key: &str) -> BTreeMap<String, String> {
    c.hgetall(key).unwrap()
}

fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn exists(c: &mut Connection, key: &str) -> bool {
    c.exists(key).unwrap()
}

on_valkey!(hash_value_transform_then_read, |v| {
    let mut c = v.conn();
    for i in 1..=3 {
        let _: () = c
            .hset_multiple(format!("app:user:{i}"), &[("name", "Ann"), ("visits", "3")])
            .unwrap();
    }
    let _: () = c.hset("app:post:1", "title", "t").unwrap();
    let _: () = c.hset_multiple("app:user:4", &[("visits", "7")]).unwrap();
    let _: () = c.hset_multiple("app:user:5", &[("visits", "8")]).unwrap();
    up(
        &v,
        &[(
            1,
            "lazy\nadd user.plan = \"free\"\nrename user.visits to hits\n",
        )],
    )
    .await;
    // A read migrates: the application sees the new format, stored with its version.
    assert_eq!(
        hgetall(&mut c, "app:user:1"),
        fields(&[
            ("name", "Ann"),
            ("hits", "3"),
            ("plan", "free"),
            ("_v", "2")
        ])
    );
    // A single-field read of another stale entity migrates it first.
    let hits: Option<String> = c.hget("app:user:2", "hits").unwrap();
    assert_eq!(hits.as_deref(), Some("3"));
    let old: Option<String> = c.hget("app:user:3", "visits").unwrap();
    assert_eq!(old, None, "the renamed field is gone on the first access");
    // Keys outside every migrated kind pass through untouched.
    assert_eq!(hgetall(&mut c, "app:post:1"), fields(&[("title", "t")]));
    // A new entity written by a current client is stamped with the version.
    let _: () = c.hset("app:user:9", "name", "Bo").unwrap();
    assert_eq!(
        hgetall(&mut c, "app:user:9"),
        fields(&[("name", "Bo"), ("_v", "2")])
    );
    // Scripts and transactions see migrated entities too (each redis.call, each queued command).
    let got: Option<String> = redis::cmd("EVAL")
        .arg("return redis.call('HGET', KEYS[1], 'hits')")
        .arg(1)
        .arg("app:user:4")
        .query(&mut c)
        .unwrap();
    assert_eq!(got.as_deref(), Some("7"));
    let (got,): (Option<String>,) = redis::pipe()
        .atomic()
        .hget("app:user:5", "hits")
        .query(&mut c)
        .unwrap();
    assert_eq!(got.as_deref(), Some("8"));
});

on_valkey!(json_transforms_compose_in_one_access, |v| {
    let mut c = v.conn();
    let _: () = c.set("app:doc:1", r#"{"title":"x","n":1}"#).unwrap();
    up(
        &v,
        &[
            (1, "lazy\nadd doc.tags = 0\n"),
            (2, "lazy\nrename doc.title to name\n"),
        ],
    )
    .await;
    let text: String = c.get("app:doc:1").unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"name": "x", "n": 1, "tags": 0, "_v": 2})
    );
    // A current client's new entity is stamped, its own text kept.
    let _: () = c.set("app:doc:2", r#"{"name":"y","tags":1.50}"#).unwrap();
    assert_eq!(
        c.get::<_, String>("app:doc:2").unwrap(),
        r#"{"_v":2,"name":"y","tags":1.50}"#
    );
});

on_valkey!(rename_then_read_under_the_new_name_old_name_absent, |v| {
    let mut c = v.conn();
    let _: () = c.set("app:oldc:1", "hello").unwrap();
    let _: () = c.set("app:oldc:2", "world").unwrap();
    up(&v, &[(1, "lazy\nrename kind oldc to c\n")]).await;
    let got: Option<String> = c.get("app:c:1").unwrap();
    assert_eq!(got.as_deref(), Some("hello"));
    assert!(!exists(&mut c, "app:oldc:1"));
    // A kind rename steps no version: the container stays at version 0 (no tag key).
    assert_eq!(
        c.get::<_, Option<String>>("app:__tern:v:{app:c:1}")
            .unwrap(),
        None
    );
    // A read under the former name moves the entity first: the old name is empty.
    let got: Option<String> = c.get("app:oldc:2").unwrap();
    assert_eq!(got, None);
    assert_eq!(
        c.get::<_, Option<String>>("app:c:2").unwrap().as_deref(),
        Some("world")
    );
    // A write that would create an entity under the former name is refused, visibly.
    let err = c.set::<_, _, ()>("app:oldc:3", "x").unwrap_err();
    assert!(err.to_string().contains("TERNRENAMED"), "{err}");
    assert!(!exists(&mut c, "app:oldc:3"));
});

on_valkey!(transform_and_renames_back_to_back, |v| {
    let mut c = v.conn();
    let _: () = c.hset("app:a:1", "x", "1").unwrap();
    let _: () = c.hset("app:a:2", "x", "2").unwrap();
    // Two kind renames and a value step with no access in between (KVolve followed one hop).
    up(
        &v,
        &[
            (1, "lazy\nrename kind a to b\n"),
            (2, "lazy\nadd b.y = 2\n"),
            (3, "lazy\nrename kind b to e\n"),
        ],
    )
    .await;
    assert_eq!(
        hgetall(&mut c, "app:e:1"),
        fields(&[("x", "1"), ("y", "2"), ("_v", "1")])
    );
    assert!(!exists(&mut c, "app:a:1") && !exists(&mut c, "app:b:1"));
    // Insert-if-absent sees the entity still under a former name as existing.
    let set: bool = c.hset_nx("app:e:2", "x", "9").unwrap();
    assert!(!set);
    assert_eq!(
        hgetall(&mut c, "app:e:2"),
        fields(&[("x", "2"), ("y", "2"), ("_v", "1")])
    );
});

on_valkey!(
    insert_if_absent_and_update_if_present_across_a_rename,
    |v| {
        let mut c = v.conn();
        let _: () = c.set("app:oldc:1", "v1").unwrap();
        let _: () = c.set("app:oldc:2", "v2").unwrap();
        up(&v, &[(1, "lazy\nrename kind oldc to c\n")]).await;
        let nx: Option<String> = redis::cmd("SET")
            .arg("app:c:1")
            .arg("new")
            .arg("NX")
            .query(&mut c)
            .unwrap();
        assert_eq!(nx, None, "SET NX saw no entity under the former name");
        assert_eq!(c.get::<_, String>("app:c:1").unwrap(), "v1");
        let xx: Option<String> = redis::cmd("SET")
            .arg("app:c:2")
            .arg("upd")
            .arg("XX")
            .query(&mut c)
            .unwrap();
        assert_eq!(
            xx.as_deref(),
            Some("OK"),
            "SET XX did not find the entity under the former name"
        );
        assert_eq!(c.get::<_, String>("app:c:2").unwrap(), "upd");
        let xx: Option<String> = redis::cmd("SET")
            .arg("app:c:3")
            .arg("x")
            .arg("XX")
            .query(&mut c)
            .unwrap();
        assert_eq!(xx, None);
        assert!(!exists(&mut c, "app:oldc:2"));
    }
);

on_valkey!(multi_get_across_a_rename_each_key_by_its_own_kind, |v| {
    let mut c = v.conn();
    let _: () = c.set("app:oldc:1", "c1").unwrap();
    let _: () = c.set("app:oldd:1", "d1").unwrap();
    let _: () = c.set("app:oldd:2", "d2").unwrap();
    up(
        &v,
        &[
            (1, "lazy\nrename kind oldc to c\n"),
            (2, "lazy\nrename kind oldd to d\n"),
        ],
    )
    .await;
    let got: Vec<Option<String>> = c
        .mget(&["app:c:1", "app:d:1", "app:d:2", "app:c:9"])
        .unwrap();
    assert_eq!(
        got,
        vec![
            Some("c1".into()),
            Some("d1".into()),
            Some("d2".into()),
            None
        ]
    );
    let _: () = c
        .mset(&[("app:c:5", "x"), ("app:d:5", "y"), ("app:d:2", "d3")])
        .unwrap();
    assert!(
        !exists(&mut c, "app:oldd:2"),
        "a stale copy outlived a write under the new name"
    );
    assert_eq!(c.get::<_, String>("app:d:2").unwrap(), "d3");
});

on_valkey!(delete_of_old_and_new_names, |v| {
    let mut c = v.conn();
    for i in 1..=3 {
        let _: () = c.set(format!("app:oldc:{i}"), format!("v{i}")).unwrap();
    }
    up(&v, &[(1, "lazy\nrename kind oldc to c\n")]).await;
    // Under the new name: the entity is deleted, with its copy under the former name.
    assert_eq!(c.del::<_, i64>("app:c:1").unwrap(), 1);
    assert!(!exists(&mut c, "app:c:1") && !exists(&mut c, "app:oldc:1"));
    assert_eq!(c.get::<_, Option<String>>("app:c:1").unwrap(), None);
    // Multi-key DEL across both names.
    assert_eq!(c.del::<_, i64>(&["app:c:2", "app:c:3"]).unwrap(), 2);
    assert!(!exists(&mut c, "app:oldc:2") && !exists(&mut c, "app:oldc:3"));
    assert!(
        !exists(&mut c, "app:__tern:v:{app:c:2}"),
        "the version tag outlived its entity"
    );
});

on_valkey!(counters_before_and_after_a_rename, |v| {
    let mut c = v.conn();
    let _: () = c.set("app:oldn:1", 5).unwrap();
    assert_eq!(c.incr::<_, _, i64>("app:oldn:1", 1).unwrap(), 6);
    up(&v, &[(1, "lazy\nrename kind oldn to n\n")]).await;
    assert_eq!(c.incr::<_, _, i64>("app:n:1", 1).unwrap(), 7);
    assert_eq!(c.getset::<_, _, i64>("app:n:1", 0).unwrap(), 7);
    assert_eq!(c.incr::<_, _, i64>("app:n:2", 3).unwrap(), 3);
    assert!(!exists(&mut c, "app:oldn:1"));
});

on_valkey!(containers_rename_then_member_operations, |v| {
    let mut c = v.conn();
    let _: () = c.sadd("app:oldtags:1", &["a", "b", "c"]).unwrap();
    let _: () = c.rpush("app:oldlog:1", &["z", "x", "y", "x"]).unwrap();
    let _: () = c
        .zadd_multiple("app:oldsc:1", &[(1, "a"), (2, "b")])
        .unwrap();
    let _: () = c.pexpire("app:oldtags:1", 100_000).unwrap();
    up(&v, &[(1, "lazy\nrename kind oldtags to tags\nrename kind oldlog to log\nrename kind oldsc to sc\n")]).await;
    // The whole set moves on first touch, whatever the command reads.
    assert!(c.sismember::<_, _, bool>("app:tags:1", "a").unwrap());
    assert!(!exists(&mut c, "app:oldtags:1"));
    assert_eq!(c.sadd::<_, _, i64>("app:tags:1", "d").unwrap(), 1);
    let members: BTreeSet<String> = c.smembers("app:tags:1").unwrap();
    assert_eq!(
        members,
        ["a", "b", "c", "d"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    );
    // TTLs kept.
    let ttl: i64 = c.pttl("app:tags:1").unwrap();
    assert!(ttl > 90_000, "{ttl}");
    // List order kept.
    let items: Vec<String> = c.lrange("app:log:1", 0, -1).unwrap();
    assert_eq!(items, vec!["z", "x", "y", "x"]);
    // Sorted set scores kept, member operations under the new name.
    assert_eq!(c.zscore::<_, _, f64>("app:sc:1", "b").unwrap(), 2.0);
    assert_eq!(c.zincr::<_, _, _, f64>("app:sc:1", "a", 5).unwrap(), 6.0);
    // A kind rename steps no version: containers stay at version 0, no tag key.
    let _: () = c.sadd("app:tags:7", "m").unwrap();
    assert!(!exists(&mut c, "app:__tern:v:{app:tags:7}"));
});

on_valkey!(hash_ttl_kept_by_a_value_step, |v| {
    let mut c = v.conn();
    let _: () = c.hset("app:user:1", "visits", "1").unwrap();
    let _: () = c.pexpire("app:user:1", 100_000).unwrap();
    up(&v, &[(1, "lazy\nrename user.visits to hits\n")]).await;
    assert_eq!(
        hgetall(&mut c, "app:user:1"),
        fields(&[("hits", "1"), ("_v", "1")])
    );
    assert!(c.pttl::<_, i64>("app:user:1").unwrap() > 90_000);
});

on_valkey!(a_restart_reloads_the_spec, |v| {
    {
        let mut c = v.conn();
        let _: () = c.hset("app:user:1", "visits", "4").unwrap();
    }
    up(&v, &[(1, "lazy\nrename user.visits to hits\n")]).await;
    v.restart().unwrap();
    let mut c = v.conn();
    // Not stamped current untransformed (KVolve's failure): migrated on first access.
    assert_eq!(
        hgetall(&mut c, "app:user:1"),
        fields(&[("hits", "4"), ("_v", "1")])
    );
});

on_valkey!(old_clients_are_refused_with_the_versions, |v| {
    let mut c = v.conn();
    let _: () = c.hset("app:user:1", "visits", "4").unwrap();
    up(&v, &[(1, "lazy\nrename user.visits to hits\n")]).await;
    let mut old = v.conn();
    let err = redis::cmd("TERN.DECLARE")
        .arg("user")
        .arg(0)
        .query::<String>(&mut old)
        .unwrap_err();
    assert!(
        err.to_string().contains("TERNOUTDATED") && err.to_string().contains("version 1"),
        "{err}"
    );
    let mut cur = v.conn();
    let ok: String = redis::cmd("TERN.DECLARE")
        .arg("user")
        .arg(1)
        .query(&mut cur)
        .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(cur.hget::<_, _, String>("app:user:1", "hits").unwrap(), "4");
    // An install after the declaration fences the client on that kind only.
    up(
        &v,
        &[
            (1, "lazy\nrename user.visits to hits\n"),
            (2, "lazy\nadd user.plan = 1\n"),
        ],
    )
    .await;
    let err = cur.hget::<_, _, String>("app:user:1", "hits").unwrap_err();
    assert!(err.to_string().contains("TERNOUTDATED"), "{err}");
    let _: () = cur.set("app:other:1", "x").unwrap();
    // Undeclared clients are treated as current.
    assert_eq!(c.hget::<_, _, String>("app:user:1", "plan").unwrap(), "1");
});

on_valkey!(a_replica_converges_and_refuses_stale_reads, |v| {
    let mut c = v.conn();
    for i in 0..200 {
        let _: () = c
            .hset_multiple(format!("app:user:{i}"), &[("visits", i)])
            .unwrap();
        let _: () = c.sadd(format!("app:oldtags:{i}"), &["a", "b"]).unwrap();
    }
    let replica = match Valkey::start(URL, &["--replicaof", "127.0.0.1", &v.port.to_string()]) {
        Ok(r) => r,
        Err(reason) => {
            return common::skip(
                "valkey-module",
                "a_replica_converges_and_refuses_stale_reads",
                &reason,
            );
        }
    };
    let mut r = replica.conn();
    wait_synced(&mut c, &mut r);
    up(
        &v,
        &[(
            1,
            "lazy\nrename user.visits to hits\nrename kind oldtags to tags\n",
        )],
    )
    .await;
    wait_synced(&mut c, &mut r);
    // A replica never answers stale data.
    let err = r.hget::<_, _, String>("app:user:0", "hits").unwrap_err();
    assert!(err.to_string().contains("TERNSTALE"), "{err}");
    // Lazy migrations under load on the primary.
    for i in 0..200 {
        if i % 3 == 0 {
            let _: () = c.hincr(format!("app:user:{i}"), "hits", 1).unwrap();
        } else {
            let _: Option<String> = c.hget(format!("app:user:{i}"), "hits").unwrap();
        }
        let _: () = c.sadd(format!("app:tags:{i}"), "z").unwrap();
    }
    // An entity that expires while a stale copy lies under its former name: the copy's
    // removal (the module's post-notification job) reaches the replica and the AOF.
    let _: () = c.sadd("app:tags:500", "new").unwrap();
    let _: () = c.pexpire("app:tags:500", 100).unwrap();
    let _: () = c.sadd("app:tmp", "stale").unwrap();
    let _: () = c.rename("app:tmp", "app:oldtags:500").unwrap();
    assert!(raw_exists(&mut c, "app:oldtags:500"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while raw_exists(&mut c, "app:oldtags:500") {
        assert!(std::time::Instant::now() < deadline, "the stale copy stays");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    wait_synced(&mut c, &mut r);
    assert!(
        !raw_exists(&mut r, "app:oldtags:500"),
        "the replica kept the copy"
    );
    let d1: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    let d2: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut r).unwrap();
    assert_eq!(d1, d2, "the replica diverged");
    assert_eq!(r.hget::<_, _, String>("app:user:3", "hits").unwrap(), "4");
    // The AOF replayed alone gives the same data.
    let mut v = v;
    v.restart().unwrap();
    let mut c = v.conn();
    let d3: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(d1, d3, "the AOF reload differs");
});

fn wait_synced(primary: &mut Connection, replica: &mut Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(primary)
            .unwrap();
        let offset = field(&info, "master_repl_offset");
        let rinfo: String = redis::cmd("INFO")
            .arg("replication")
            .query(replica)
            .unwrap();
        if field(&rinfo, "master_link_status").as_deref() == Some("up")
            && field(&rinfo, "slave_repl_offset") == offset
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replica not in sync: {rinfo}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| {
        l.strip_prefix(&format!("{name}:"))
            .map(|v| v.trim().to_owned())
    })
}

on_valkey!(untouched_kinds_never_go_through_the_module, |v| {
    let mut c = v.conn();
    let _: () = c.hset("app:user:1", "visits", "1").unwrap();
    up(&v, &[(1, "lazy\nrename user.visits to hits\n")]).await;
    let _: () = c.set("app:post:1", "x").unwrap();
    let _: () = c.set("other", "x").unwrap();
    let _: Option<String> = c.get("app:post:1").unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    assert!(
        !stats.contains("tern.w") && !stats.contains("tern.r"),
        "{stats}"
    );
    let _: Option<String> = c.hget("app:user:1", "hits").unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    assert!(stats.contains("cmdstat_tern.r"), "{stats}");
    let info: Value = redis::cmd("TERN.INFO").query(&mut c).unwrap();
    assert!(format!("{info:?}").contains("user@1"), "{info:?}");
});

// Blocking commands (`BLPOP`...) on a kind with a pending lazy migration are refused with
// the reason and the remedies, popping nothing; elsewhere, and once `tern sweep` completed
// the migration, they run as usual.
on_valkey!(
    blocking_commands_on_a_migrating_kind_are_refused_clearly,
    |v| {
        let mut c = v.conn();
        let _: () = c.rpush("app:oldlog:1", &["a", "b"]).unwrap();
        let _: () = c.rpush("app:queue:1", &["q"]).unwrap();
        up(&v, &[(1, "lazy\nrename kind oldlog to log\n")]).await;
        for (cmd, key) in [("BLPOP", "app:log:1"), ("BRPOP", "app:oldlog:1")] {
            let err = redis::cmd(cmd)
                .arg(key)
                .arg(1)
                .query::<Value>(&mut c)
                .unwrap_err();
            let text = err.to_string();
            for says in ["TERNBLOCKING", cmd, key, "non-blocking", "tern sweep"] {
                assert!(text.contains(says), "no {says:?} in: {text}");
            }
        }
        let items: Vec<String> = c.lrange("app:log:1", 0, -1).unwrap();
        assert_eq!(items, ["a", "b"], "nothing popped");
        let got: (String, String) = redis::cmd("BLPOP")
            .arg("app:queue:1")
            .arg(1)
            .query(&mut c)
            .unwrap();
        assert_eq!(got, ("app:queue:1".to_owned(), "q".to_owned()));
        let report = tern_core::lazy::sweep::sweep(
            v.store().await,
            &tern_core::migrate::lease::LeaseOptions::default(),
            &BTreeMap::new(),
            &tern_core::lazy::SweepOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(report.completed, vec![1], "{report:?}");
        let got: (String, String) = redis::cmd("BLPOP")
            .arg("app:log:1")
            .arg(1)
            .query(&mut c)
            .unwrap();
        assert_eq!(got, ("app:log:1".to_owned(), "a".to_owned()));
    }
);

/// Calls of `cmd` in `INFO commandstats` (0 when never called).
fn calls(c: &mut Connection, cmd: &str) -> u64 {
    let stats: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether `key` exists, seen without the module (KEYS is never rewritten).
fn raw_exists(c: &mut Connection, key: &str) -> bool {
    let keys: Vec<String> = redis::cmd("KEYS").arg(key).query(c).unwrap();
    !keys.is_empty()
}

fn module_calls(c: &mut Connection) -> u64 {
    calls(c, "tern.r") + calls(c, "tern.w")
}

// The fast path: once an entity of a pending kind is up to date (and no copy is left under
// a former name), the application's reads of it run as they are, without the module
// command; writes and everything that could need the module still go through it (a stale
// entity, a former name, the version field, a transaction, a key the command would create).
on_valkey!(
    up_to_date_entities_are_served_without_the_module_command,
    |v| {
        let mut c = v.conn();
        let _: () = c.hset("app:user:1", "visits", "1").unwrap();
        let _: () = c.set("app:oldc:1", "one").unwrap();
        let scripts = [
            (1, "lazy\nadd user.x = 0\n"),
            (2, "lazy\nrename kind oldc to c\n"),
        ];
        up(&v, &scripts).await;
        // First touch: migrated through the module.
        let before = module_calls(&mut c);
        let _: Option<String> = c.hget("app:user:1", "x").unwrap();
        let got: Option<String> = c.get("app:c:1").unwrap();
        assert_eq!(got.as_deref(), Some("one"));
        assert_eq!(module_calls(&mut c), before + 2);
        // Up to date now: plain reads.
        let before = module_calls(&mut c);
        let _: BTreeMap<String, String> = c.hgetall("app:user:1").unwrap();
        let _: Option<String> = c.hget("app:user:1", "visits").unwrap();
        let got: Option<String> = c.get("app:c:1").unwrap();
        assert_eq!(got.as_deref(), Some("one"));
        let _: bool = c.exists("app:user:1").unwrap();
        assert_eq!(
            module_calls(&mut c),
            before,
            "up-to-date entities: no module command"
        );
        // Writes always go through the module (a write held by CLIENT PAUSE WRITE runs
        // after the pause without the filter: a check made before it could not stand).
        let before = module_calls(&mut c);
        let _: () = c.hset("app:user:1", "visits", "2").unwrap();
        let _: i64 = c.hincr("app:user:1", "visits", 1).unwrap();
        let _: () = c.set("app:c:1", "two").unwrap();
        assert_eq!(
            module_calls(&mut c),
            before + 3,
            "writes: the module command"
        );
        let got: Option<String> = c.get("app:c:1").unwrap();
        assert_eq!(got.as_deref(), Some("two"));
        assert_eq!(
            hgetall(&mut c, "app:user:1"),
            fields(&[("visits", "3"), ("x", "0"), ("_v", "1")])
        );
        // Still through the module: the version field, a key it would create, a former
        // name, a transaction, several keys.
        let cases: Vec<redis::Cmd> = vec![
            redis::cmd("HSET")
                .arg("app:user:1")
                .arg("_v")
                .arg("1")
                .clone(),
            redis::cmd("HSET")
                .arg("app:user:2")
                .arg("a")
                .arg("1")
                .clone(),
            redis::cmd("GET").arg("app:oldc:1").clone(),
            redis::cmd("MGET").arg("app:c:1").arg("app:c:2").clone(),
        ];
        for cmd in cases {
            let before = module_calls(&mut c);
            let _: Value = cmd.query(&mut c).unwrap();
            assert_eq!(module_calls(&mut c), before + 1, "{cmd:?}");
        }
        assert_eq!(
            hgetall(&mut c, "app:user:2"),
            fields(&[("a", "1"), ("_v", "1")]),
            "a created hash is stamped"
        );
        let before = module_calls(&mut c);
        let _: Value = redis::pipe()
            .atomic()
            .hset("app:user:2", "b", "2")
            .query(&mut c)
            .unwrap();
        assert_eq!(module_calls(&mut c), before + 1, "a write queued in MULTI");
        // A copy left under a former name (RENAME may write there) beside the entity under
        // the name now: a read of the entity is served as it is (the copy changes no reply:
        // the fast path looks under former names only when the key is absent); the next
        // command through the module on the former name drops it.
        let _: () = c.set("app:c:9", "new").unwrap();
        let _: () = c.set("app:tmp", "stale").unwrap();
        let _: () = c.rename("app:tmp", "app:oldc:9").unwrap();
        assert!(raw_exists(&mut c, "app:oldc:9"));
        let before = module_calls(&mut c);
        let got: Option<String> = c.get("app:c:9").unwrap();
        assert_eq!(got.as_deref(), Some("new"));
        assert_eq!(module_calls(&mut c), before, "the entity is up to date");
        let got: Option<String> = c.get("app:oldc:9").unwrap();
        assert_eq!(got, None, "the entity has one name, the new one");
        assert!(
            !raw_exists(&mut c, "app:oldc:9"),
            "the stale copy is dropped"
        );
        assert_eq!(
            c.get::<_, Option<String>>("app:c:9").unwrap().as_deref(),
            Some("new")
        );
        // The key absent and a copy under a former name: through the module, which moves it.
        let _: () = c.set("app:tmp", "moved").unwrap();
        let _: () = c.rename("app:tmp", "app:oldc:10").unwrap();
        let before = module_calls(&mut c);
        let got: Option<String> = c.get("app:c:10").unwrap();
        assert_eq!(got.as_deref(), Some("moved"));
        assert_eq!(module_calls(&mut c), before + 1, "a former copy to move");
        assert!(!raw_exists(&mut c, "app:oldc:10"));
        // The key absent and no copy anywhere: served as it is (nil).
        let before = module_calls(&mut c);
        let got: Option<String> = c.get("app:c:11").unwrap();
        assert_eq!(got, None);
        assert_eq!(module_calls(&mut c), before, "nothing to move");
    }
);

/// Writes `value` under the former name `app:oldc:<id>` as a client the module does not
/// stop would (RENAME may write there), beside the entity under the name now.
fn stale_copy(c: &mut Connection, id: u32, value: &str) {
    let _: () = c.set("app:tmp", value).unwrap();
    let _: () = c.rename("app:tmp", format!("app:oldc:{id}")).unwrap();
    assert!(raw_exists(c, &format!("app:oldc:{id}")));
}

/// Writes `app:c:<id>` expiring in 60 ms, then a stale copy under its former name. The
/// TTL is set with the value: a later PEXPIRE would go through the module, which drops
/// the copy at once.
fn expiring_beside_a_stale_copy(c: &mut Connection, id: u32) {
    let _: () = redis::cmd("SET")
        .arg(format!("app:c:{id}"))
        .arg("new")
        .arg("PX")
        .arg(60)
        .query(c)
        .unwrap();
    stale_copy(c, id, "stale");
}

/// Turns the server's active expiry cycle on or off (`DEBUG SET-ACTIVE-EXPIRE`).
fn active_expiry(c: &mut Connection, on: bool) {
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(i32::from(on))
        .query(c)
        .unwrap();
}

// An entity under the name now that leaves without the module migrating it first (its TTL
// expires, a script deletes it) while a stale copy lies under a former name: the copy is
// dropped, never moved in, so the expired or deleted entity does not come back.
on_valkey!(
    an_expired_or_deleted_entity_never_comes_back_from_a_former_name,
    |v| {
        let mut c = v.conn();
        up(&v, &[(1, "lazy\nrename kind oldc to c\n")]).await;
        // Expired, and first seen expired by a read (no active expiry): the module's own
        // look at the key expires it, and it drops the copy instead of moving it in.
        active_expiry(&mut c, false);
        expiring_beside_a_stale_copy(&mut c, 1);
        std::thread::sleep(std::time::Duration::from_millis(120));
        let got: Option<String> = c.get("app:c:1").unwrap();
        assert_eq!(
            got, None,
            "an expired entity came back from its former name"
        );
        assert!(
            !raw_exists(&mut c, "app:oldc:1"),
            "the stale copy is dropped"
        );
        // Expired by the server's own cycle, never read: the copy goes too.
        active_expiry(&mut c, true);
        expiring_beside_a_stale_copy(&mut c, 2);
        let mut dropped = false;
        for _ in 0..300 {
            if !raw_exists(&mut c, "app:oldc:2") {
                dropped = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(dropped, "the copy of an entity expired by the server stays");
        assert_eq!(c.get::<_, Option<String>>("app:c:2").unwrap(), None);
        // Deleted by a script: nothing comes back either.
        let _: () = c.set("app:c:3", "new").unwrap();
        stale_copy(&mut c, 3, "stale");
        let _: i64 = redis::cmd("EVAL")
            .arg("return redis.call('DEL', KEYS[1])")
            .arg(1)
            .arg("app:c:3")
            .query(&mut c)
            .unwrap();
        assert_eq!(c.get::<_, Option<String>>("app:c:3").unwrap(), None);
        assert!(!raw_exists(&mut c, "app:oldc:3"));
        // An entity not yet moved (nothing under the name now) still moves in on its read.
        stale_copy(&mut c, 4, "kept");
        assert_eq!(
            c.get::<_, Option<String>>("app:c:4").unwrap().as_deref(),
            Some("kept")
        );
    }
);
