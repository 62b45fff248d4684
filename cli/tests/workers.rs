//! `tern up --workers N` and `tern worker` as processes: kill -9 of the
//! coordinating process (and its workers with it) at random moments of a
//! partitioned run on the embedded store, `tern status`'s partition view, and
//! a `tern worker` that finishes the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

mod common;

use common::{Project, blog_lines};

/// A project with `posts` blog posts and a lazy `add blogpost.likes = 0`
/// applied: every post is stale.
fn lazy_likes(posts: usize) -> Project {
    let p = Project::with_blog(300, 1, posts);
    p.write(
        "migrations/0001_likes.tern",
        "lazy\nadd blogpost.likes = 0\n",
    );
    p.ok(&["up"]);
    p
}

/// [`lazy_likes`] on the store at `url` (1,000 entities per batch).
fn lazy_likes_on(url: &str, posts: usize) -> Project {
    let p = Project::on(url, 1_000);
    p.import_blog(1, posts);
    p.write(
        "migrations/0001_likes.tern",
        "lazy\nadd blogpost.likes = 0\n",
    );
    p.ok(&["up"]);
    p
}

/// Runs `test` with a fresh Redis URL on a blocking thread, or says why it
/// is skipped.
async fn on_redis(what: &str, test: fn(&str)) {
    let url = match tern_integration_tests::redis::backend().await {
        Ok(b) => b.fresh_url(),
        Err(reason) => {
            eprintln!("skipped: {what} on redis: {reason}");
            return;
        }
    };
    tokio::task::spawn_blocking(move || test(&url))
        .await
        .unwrap();
}

/// `tern sweep` of 8 partitions in batches of 20 at `rate` entities/s, one
/// worker of its own, reporting in JSON.
fn partitioned_sweep(rate: &str) -> [&str; 10] {
    [
        "sweep",
        "--workers",
        "1",
        "--partitions",
        "8",
        "--batch-size",
        "20",
        "--max-rate",
        rate,
        "--json",
    ]
}

/// `tern <args>` started in `p`, its output piped.
fn spawn_piped(p: &Project, args: &[&str]) -> std::process::Child {
    p.cmd(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child`, asserts that it succeeded, and returns its stdout.
fn finished_ok(child: std::process::Child) -> String {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A worker's `--json` report shows partitions of a sweep run by it.
fn assert_joined_a_sweep(report: &str) {
    let w: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    assert!(
        w["worker"]["sweep_partitions"].as_u64().unwrap() >= 1,
        "the worker joined the sweep: {report}"
    );
}

/// The sweep's `--json` report shows every post migrated and the migration complete.
fn assert_swept_all(report: &str, posts: usize) {
    let v: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    assert_eq!(v["migrated"]["blogpost"], posts, "{report}");
    assert_eq!(v["stale"]["blogpost"], 0, "{report}");
    assert_eq!(v["completed"], serde_json::json!([1]), "{report}");
}

/// The export of one uninterrupted single-runner `tern up` of release 2 over `lines`.
fn reference(lines: &str) -> String {
    let p = Project::with_release2(lines);
    p.ok(&["up"]);
    p.ok(&["export"])
}

#[test]
fn kill_9_of_the_coordinating_process_then_a_worker_finishes_with_one_runs_result() {
    let lines = blog_lines(300, 10);
    let expected = reference(&lines);
    let p = Project::with_release2(&lines);
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut saw_partitions = false;
    for round in 0..3 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let args = [
            "up",
            "--workers",
            "4",
            "--partitions",
            "16",
            "--max-rate",
            "2000",
        ];
        p.interrupt(&args, "KILL", 300 + seed % 500); // no release, no last checkpoint
        let status = p.ok(&["status"]);
        if status.contains("partitions of stage") {
            saw_partitions = true;
            assert!(
                status.contains("done") || status.contains("stalled") || status.contains("waiting"),
                "round {round}: {status}"
            );
        }
        let json = p.ok(&["status", "--json"]);
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        if v["migrations"][0]["state"] == "applied" {
            break;
        }
    }
    assert!(saw_partitions, "the kills hit the partitioned stage");
    // The dead runner's lease (300 ms) expires; a worker takes over and finishes.
    std::thread::sleep(Duration::from_millis(400));
    let out = p.ok(&["worker", "--workers", "2"]);
    assert!(out.contains("worker done"), "{out}");
    assert_eq!(p.ok(&["export"]), expected);
    let json = p.ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["migrations"][0]["state"], "applied", "{json}");
    assert!(v["running"].is_null(), "{json}");
}

#[test]
fn workers_one_is_todays_runner_and_workers_four_gives_its_result() {
    let lines = blog_lines(50, 4);
    let expected = reference(&lines);
    let p = Project::with_release2(&lines);
    let out = p.ok(&["up", "--workers", "4"]);
    assert!(out.contains("applied 0001_release2"), "{out}");
    assert_eq!(p.ok(&["export"]), expected);
    // Nothing pending: a worker exits at once.
    assert!(p.ok(&["worker"]).contains("nothing is pending"));
    p.fails_saying(&["up", "--workers", "0"], 2, &["at least 1"]);
}

#[test]
fn sweep_with_workers_migrates_every_stale_entity_once() {
    let p = lazy_likes(500);
    let out = p.ok(&[
        "sweep",
        "--workers",
        "4",
        "--partitions",
        "8",
        "--batch-size",
        "20",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["migrated"]["blogpost"], 500, "{out}");
    assert_eq!(v["stale"]["blogpost"], 0, "{out}");
    assert_eq!(v["completed"], serde_json::json!([1]), "{out}");
    p.fails_saying(&["sweep", "--workers", "0"], 2, &["at least 1"]);
}

#[test]
fn status_shows_the_partitions_of_a_killed_sweep() {
    let p = lazy_likes(2000);
    let mut shown = None;
    for wait_ms in [600, 1200, 2400] {
        let args = [
            "sweep",
            "--workers",
            "2",
            "--partitions",
            "4",
            "--batch-size",
            "20",
            "--max-rate",
            "200",
        ];
        p.interrupt(&args, "KILL", wait_ms); // the split and its checkpoints stay
        let status = p.ok(&["status"]);
        if status.contains("partitions of the sweep of blogpost") {
            shown = Some(status);
            break;
        }
    }
    let status = shown.expect("a killed sweep left its partitions in the checkpoint");
    assert!(status.contains("of 4 done"), "{status}");
    let json = p.ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["sweep"]["kind"], "blogpost", "{json}");
    assert_eq!(
        v["sweep"]["partitions"]["partitions"]
            .as_array()
            .map(Vec::len),
        Some(4),
        "{json}"
    );
}

/// `tern worker` in another process joining a `tern sweep --workers 1
/// --partitions 8` (throttled, so the split stays open a while) on a Redis
/// server both reach (the embedded store's file is one process's): the
/// worker sweeps partitions of the split and returns once the sweep is over;
/// the sweep counts every entity once and records the migration complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_in_another_process_joins_a_running_sweep() {
    on_redis("tern worker joining a sweep", worker_joins_a_sweep).await;
}

fn worker_joins_a_sweep(url: &str) {
    let posts = 600;
    let p = lazy_likes_on(url, posts);
    let sweep = spawn_piped(&p, &partitioned_sweep("400"));
    let mut split = false;
    for _ in 0..300 {
        if p.ok(&["status"])
            .contains("partitions of the sweep of blogpost")
        {
            split = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let joined = p.ok(&["worker", "--workers", "2", "--batch-size", "20", "--json"]);
    let stdout = finished_ok(sweep);
    assert!(split, "the sweep recorded its split");
    assert_joined_a_sweep(&joined);
    assert_swept_all(&stdout, posts);
    let status = p.ok(&["status", "--json"]);
    assert!(!status.contains("\"partitions\""), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_before_the_sweep_waits_for_it_and_joins() {
    on_redis("tern worker waiting for a sweep", worker_waits_for_a_sweep).await;
}

fn worker_waits_for_a_sweep(url: &str) {
    let posts = 600;
    let p = lazy_likes_on(url, posts);
    // Without --wait-for-sweep, a worker with no sweep to join ends at once.
    let alone = p.ok(&["worker", "--json"]);
    let w: serde_json::Value = serde_json::from_str(alone.trim()).unwrap();
    assert_eq!(w["worker"]["sweep_partitions"], 0, "{alone}");
    // Started first, as a Job's pods may be: it waits, then joins the sweep.
    let worker = spawn_piped(
        &p,
        &[
            "worker",
            "--wait-for-sweep",
            "120",
            "--workers",
            "2",
            "--batch-size",
            "20",
            "--json",
        ],
    );
    // Long enough for a worker without the wait to have found nothing and ended.
    std::thread::sleep(Duration::from_millis(1500));
    let swept = p.ok(&partitioned_sweep("200"));
    let joined = finished_ok(worker);
    assert_joined_a_sweep(&joined);
    assert_swept_all(&swept, posts);
}
