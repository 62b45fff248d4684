//! The `tern` binary on a Valkey cluster whose masters run tern's server module
//! (`scripts/servers.sh start valkey-cluster`; `TERN_IT_VALKEY_CLUSTER_URL`): a master
//! that does not hold tern's state key knows a lazy migration only from the state it is
//! sent, so `tern up` sends it to every master (docs/module.md, "Valkey / Redis Cluster").
//! Without that, the other masters would serve their keys unmigrated. The cluster is
//! dedicated to the tests that use it: it is flushed first. Without it the test prints
//! why and is skipped. Plain commands go through `valkey-cli` (no tern code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::Project;

/// `valkey-cli -p port args...` (with `-c`: following the cluster's redirections),
/// its output, or why it failed.
fn valkey_cli(port: &str, cluster: bool, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("valkey-cli");
    cmd.args(["-h", "127.0.0.1", "-p", port]);
    if cluster {
        cmd.arg("-c");
    }
    let out = cmd
        .args(args)
        .output()
        .map_err(|e| format!("valkey-cli: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || text.starts_with("ERR") || text.contains("TERN") {
        return Err(format!("valkey-cli {args:?}: {text}"));
    }
    Ok(text)
}

/// The ports of the cluster's masters, after emptying each and giving each an
/// empty spec (as a fresh cluster has).
fn flushed_masters(port: &str) -> Result<Vec<String>, String> {
    let nodes = valkey_cli(port, false, &["CLUSTER", "NODES"])?;
    let mut masters = Vec::new();
    for line in nodes.lines().filter(|l| l.contains("master")) {
        let addr = line.split_whitespace().nth(1).unwrap_or_default();
        let addr = addr.split('@').next().unwrap_or_default();
        let master = addr.rsplit(':').next().unwrap_or_default().to_owned();
        valkey_cli(&master, false, &["FLUSHALL"])?;
        valkey_cli(&master, false, &["TERN.LOADSPEC", "", ""])
            .map_err(|e| format!("{addr}: the module is not loaded: {e}"))?;
        masters.push(master);
    }
    Ok(masters)
}

/// Writes the users `ids` (`vm:user:{ID}`, `visits` = the id) through the
/// cluster node at `port` (`id_tag=1`: the id is the key's hash tag).
fn write_users(port: &str, ids: std::ops::Range<u32>) {
    for i in ids {
        let visits = i.to_string();
        valkey_cli(
            port,
            true,
            &["HSET", &format!("vm:user:{{{i}}}"), "visits", &visits],
        )
        .unwrap();
    }
}

#[test]
fn tern_up_on_a_valkey_cluster_sends_the_state_to_every_master() {
    let name = "tern_up_on_a_valkey_cluster_sends_the_state_to_every_master";
    let Ok(url) = std::env::var("TERN_IT_VALKEY_CLUSTER_URL") else {
        eprintln!(
            "skipped: {name}: TERN_IT_VALKEY_CLUSTER_URL is not set (scripts/servers.sh start \
             valkey-cluster; eval \"$(scripts/servers.sh env valkey-cluster)\")"
        );
        return;
    };
    let port = url
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default()
        .to_owned();
    let masters = match flushed_masters(&port) {
        Ok(m) => m,
        Err(reason) => {
            eprintln!("skipped: {name}: the Valkey cluster cannot be used: {reason}");
            return;
        }
    };
    assert!(masters.len() >= 3, "{masters:?}");
    // Users spread over every master (`id_tag=1`: the id is the key's hash tag).
    write_users(&port, 0..40);
    for m in &masters {
        let keys = valkey_cli(m, false, &["DBSIZE"]).unwrap();
        assert_ne!(
            keys, "0",
            "master {m} holds no user: the test would prove nothing"
        );
    }
    let p = Project::on(&url, 5_000);
    p.write(
        "migrations/0001_hits.tern",
        "lazy\nrename user.visits to hits\n",
    );
    p.ok(&["up"]);
    // Every master answers migrated: `hits`, never the stale `visits`.
    for i in 0..40 {
        let key = format!("vm:user:{{{i}}}");
        let hits = valkey_cli(&port, true, &["HGET", &key, "hits"]).unwrap();
        assert_eq!(hits, i.to_string(), "{key}");
        let visits = valkey_cli(&port, true, &["HEXISTS", &key, "visits"]).unwrap();
        assert_eq!(visits, "0", "{key}");
    }
    // A master that lost it (a restart): `tern up` with nothing to apply sends it again.
    for m in &masters {
        valkey_cli(m, false, &["TERN.LOADSPEC", "", ""]).unwrap();
    }
    write_users(&port, 100..140);
    p.ok(&["up"]);
    for i in 100..140 {
        let key = format!("vm:user:{{{i}}}");
        let hits = valkey_cli(&port, true, &["HGET", &key, "hits"]).unwrap();
        assert_eq!(hits, i.to_string(), "{key}");
    }
}
