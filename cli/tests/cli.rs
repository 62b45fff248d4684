//! The real `tern` binary in a scratch folder: every command, the exit codes,
//! bad input, and `kill -9` at random moments followed by a resume.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod common;

use common::{Project, RELEASE2, RELEASE3, blog_lines};

#[test]
fn the_whole_workflow() {
    let p = Project::with_blog(5_000, 3, 2);
    p.ok(&["new", "release2"]);
    p.write("migrations/0001_release2.tern", RELEASE2);
    p.ok(&["new", "release3"]);
    p.write("migrations/0002_release3.tern", RELEASE3);
    let check = p.ok(&["check"]);
    assert!(
        check.contains("safe (Proposition 1)") && check.contains("needs data check"),
        "{check}"
    );
    let status = p.ok(&["status", "--json"]);
    let st: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(st["migrations"][0]["state"], "pending");
    let before = p.ok(&["export"]);
    let plan: serde_json::Value = serde_json::from_str(&p.ok(&["plan", "--json"])).unwrap();
    assert_eq!(plan["safe"], true);
    assert_eq!(p.ok(&["export"]), before, "plan writes nothing");
    let up: serde_json::Value = serde_json::from_str(&p.ok(&["up", "--json"])).unwrap();
    assert_eq!(up["applied"].as_array().unwrap().len(), 2);
    let verify: serde_json::Value = serde_json::from_str(&p.ok(&["verify", "--json"])).unwrap();
    assert_eq!(verify["ok"], true);
    let export = p.ok(&["export", "blogpost"]);
    let first: serde_json::Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    assert_eq!(first["id"], "0-0");
    assert_eq!(first["version"], 4);
    assert_eq!(first["value"]["likes"], 0);
    assert_eq!(first["value"]["email"], "u0@x.org");
    assert!(first["value"].get("url").is_none(), "user0 has no url");
    // Exports are sorted by kind then id, so they can be diffed.
    let all = p.ok(&["export"]);
    // The first line of a migrated store's export is tern's state (issue 34 item 5).
    assert!(all.starts_with("{\"tern_state\":"), "{all}");
    let kinds: Vec<String> = all
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(kinds, sorted);
    assert!(p.ok(&["up"]).contains("up to date"));
    assert!(p.ok(&["lock"]).contains("free"));
}

#[test]
fn exit_codes_and_messages_for_bad_input() {
    let p = Project::new(5_000);
    // No migrations folder.
    std::fs::remove_dir(p.path("migrations")).unwrap();
    p.fails_saying(&["up"], 1, &["migrations folder", "not found"]);
    std::fs::create_dir(p.path("migrations")).unwrap();
    // Malformed and duplicate file numbers.
    p.write("migrations/one_x.tern", "add user.x = 1");
    p.fails_saying(
        &["check", "--offline"],
        1,
        &["one_x.tern", "NNNN_name.tern"],
    );
    std::fs::remove_file(p.path("migrations/one_x.tern")).unwrap();
    p.write("migrations/0001_a.tern", "add user.x = 1");
    p.write("migrations/01_b.tern", "add user.y = 1");
    p.fails_saying(&["check", "--offline"], 1, &["used twice"]);
    std::fs::remove_file(p.path("migrations/01_b.tern")).unwrap();
    // A parse error names file:line:col.
    p.write(
        "migrations/0002_b.tern",
        "add user.y = 1\nrename user.y = z\n",
    );
    p.fails_saying(&["check", "--offline"], 1, &["0002_b.tern:2:"]);
    std::fs::remove_file(p.path("migrations/0002_b.tern")).unwrap();
    // Usage errors exit 2.
    p.fails(&["up", "--batch-size", "many"], 2);
    p.fails(&["frobnicate"], 2);
    // Unknown store scheme; and no store at all.
    let err = p.fails(&["--store", "postgres://u:secret@127.0.0.1/x", "status"], 1);
    assert!(err.contains("postgres") && !err.contains("secret"), "{err}");
    p.write("empty.toml", "");
    p.fails_saying(
        &["--config", "empty.toml", "status"],
        1,
        &["no store given"],
    );
    // A typo in tern.toml.
    p.write("bad.toml", "stor_url = \"embedded:x\"\n");
    p.fails_saying(
        &["--config", "bad.toml", "status"],
        1,
        &["unknown key `stor_url`"],
    );
    // An edited applied migration: exit 4.
    p.import_blog(2, 1);
    p.ok(&["up"]);
    p.write("migrations/0001_a.tern", "add user.x = 2");
    let err = p.fails(&["up"], 4);
    assert!(
        err.contains("checksum") && err.contains("0001") || err.contains("migration 1"),
        "{err}"
    );
    p.write("migrations/0001_a.tern", "add user.x = 1");
    // An unsafe copy: exit 5, naming the conflicting keys.
    p.write(
        "more.jsonl",
        "{\"kind\":\"user\",\"id\":100,\"value\":{\"name\":\"twin\",\"url\":\"a\"}}\n\
         {\"kind\":\"user\",\"id\":101,\"value\":{\"name\":\"twin\",\"url\":\"b\"}}\n\
         {\"kind\":\"blogpost\",\"id\":\"tw\",\"value\":{\"author\":\"twin\"}}\n",
    );
    p.ok(&["import", "more.jsonl"]);
    p.write(
        "migrations/0002_c.tern",
        "copy user.url to blogpost where user.name = blogpost.author\n",
    );
    p.fails_saying(&["up"], 5, &["blogpost:tw", "user:100", "user:101"]);
    p.fails_saying(&["check"], 5, &["blogpost:tw"]);
    // A malformed import line names file and line.
    p.write(
        "broken.jsonl",
        "{\"kind\":\"user\",\"id\":1,\"value\":{}}\n{\"kind\":\"user\",\"value\":{}}\n",
    );
    p.fails_saying(&["import", "broken.jsonl"], 1, &["broken.jsonl:2", "id"]);
}

#[test]
fn a_second_runner_exits_3_while_the_first_runs_and_waits_with_wait() {
    let p = Project::with_blog(60_000, 300, 3);
    p.write("migrations/0001_release2.tern", RELEASE2);
    let mut first = p.cmd(&["up", "--max-rate", "600", "-q"]).spawn().unwrap();
    // Wait until the first runner is at work (it holds the lock, and the embedded
    // store's file, which admits one process at a time).
    let mut busy = String::new();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        let out = p.run(&["up"]);
        if out.status.code() == Some(3) {
            busy = String::from_utf8_lossy(&out.stderr).into_owned();
            break;
        }
    }
    assert!(
        busy.contains("in use by another process") || busy.contains("lock is held"),
        "{busy}"
    );
    // A second runner that waits gets its turn and finds nothing left to do.
    let second = p.ok(&["up", "--wait", "30"]);
    assert!(second.contains("up to date"), "{second}");
    assert!(first.wait().unwrap().success());
    assert!(p.ok(&["lock"]).contains("free"));
}

fn export_after_uninterrupted(lines: &str) -> String {
    let p = Project::new(5_000);
    p.write("data.jsonl", lines);
    p.ok(&["import", "data.jsonl"]);
    p.write("migrations/0001_release2.tern", RELEASE2);
    p.write("migrations/0002_release3.tern", RELEASE3);
    p.ok(&["up", "-q"]);
    p.ok(&["export"])
}

#[test]
fn kill_9_at_random_moments_then_resume_gives_a_byte_identical_export() {
    let lines = blog_lines(400, 4);
    let expected = export_after_uninterrupted(&lines);
    // Kill moments spread over the run (deterministic, so failures reproduce).
    for (i, kill_after_ms) in [150u64, 400, 700, 1000, 1400, 1900].into_iter().enumerate() {
        let p = Project::new(300);
        p.write("data.jsonl", &lines);
        p.ok(&["import", "data.jsonl"]);
        p.write("migrations/0001_release2.tern", RELEASE2);
        p.write("migrations/0002_release3.tern", RELEASE3);
        let mut child = p.cmd(&["up", "--max-rate", "2500", "-q"]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        let killed = child.try_wait().unwrap().is_none();
        if killed {
            // SIGKILL: no chance to checkpoint or release the lock.
            child.kill().unwrap();
        }
        child.wait().unwrap();
        // The next run waits for the dead runner's lease to expire, then resumes.
        p.ok(&["up", "--wait", "10", "-q"]);
        let got = p.ok(&["export"]);
        assert!(
            got == expected,
            "run {i}: export after kill at {kill_after_ms} ms (killed: {killed}) differs"
        );
        assert!(p.ok(&["verify"]).contains("verified"));
    }
}

#[test]
fn init_creates_a_project() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["init", "proj"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(Path::new(&dir.path().join("proj/tern.toml")).exists());
    assert!(dir.path().join("proj/migrations").is_dir());
    let out = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["--config", "proj/tern.toml", "new", "first"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    common::assert_success(&out);
    assert!(dir.path().join("proj/migrations/0001_first.tern").exists());
    // --help works everywhere.
    for cmd in [
        "init", "new", "check", "plan", "up", "status", "verify", "lock", "import", "export",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args([cmd, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{cmd} --help");
    }
}

#[test]
fn ctrl_c_finishes_the_batch_checkpoints_and_exits_130_resumable() {
    let lines = blog_lines(300, 4);
    let expected = export_after_uninterrupted(&lines);
    let p = Project::with_release2(&lines);
    p.write("migrations/0002_release3.tern", RELEASE3);
    let stderr = p.up_interrupted("INT", 600);
    assert!(stderr.contains("resume"), "{stderr}");
    // The lock was released on the way out: status shows the interrupted run, up resumes at once.
    let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    assert!(status["lock"].is_null(), "{status}");
    assert!(
        status["running"]["processed"].as_u64().unwrap() > 0,
        "{status}"
    );
    let up: serde_json::Value = serde_json::from_str(&p.ok(&["up", "--json"])).unwrap();
    assert_eq!(up["applied"][0]["resumed"], true, "{up}");
    assert_eq!(p.ok(&["export"]), expected);
}
