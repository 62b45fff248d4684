//! Watching a long run: the Prometheus endpoint of `--metrics-addr`, scraped
//! while `tern up` and `tern sweep` run on the embedded store (loopback only),
//! and the JSON log format with its spans.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{Project, RELEASE2};

/// A port on 127.0.0.1 nobody listens on now.
fn free_loopback() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET path` over HTTP/1.1: the status line and the body, or `None` while
/// nothing listens.
fn get(addr: SocketAddr, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

/// The value of the sample `name` (a whole line `name value`), if exposed.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Starts `tern ARGS --metrics-addr ADDR` in the background (its output
/// dropped) on a free loopback address; returns the process and the address.
fn spawn_serving(p: &Project, args: &[&str]) -> (Child, SocketAddr) {
    let addr = free_loopback();
    let metrics = addr.to_string();
    let mut args = args.to_vec();
    args.extend(["--metrics-addr", &metrics]);
    let child = p
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, addr)
}

/// Scrapes `addr` until `ready` holds for the body or `child` exits; returns
/// the last body scraped while `child` ran.
fn scrape_while_running(
    child: &mut Child,
    addr: SocketAddr,
    ready: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "tern exited ({status}) before the metrics showed the run; last scrape:\n{last}"
            );
        }
        if let Some((status, body)) = get(addr, "/metrics") {
            assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
            if ready(&body) {
                return body;
            }
            last = body;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no scrape showed the run within 60 s; last scrape:\n{last}");
}

#[test]
fn up_serves_its_progress_to_prometheus_while_it_runs() {
    // 3,000 posts (one user) at 1,500 entities/s: a run of about two seconds, with a
    // lease renewed every 100 ms (ttl 300 ms).
    let p = Project::with_blog(300, 1, 3_000);
    p.write("migrations/0001_release2.tern", RELEASE2);
    let (mut child, addr) = spawn_serving(&p, &["up", "--max-rate", "1500"]);
    let during = scrape_while_running(&mut child, addr, |body| {
        sample(body, "tern_entities_processed_total").is_some_and(|n| n >= 300.0)
            && sample(body, "tern_lease_renewals_total").is_some_and(|n| n >= 1.0)
    });
    let processed = sample(&during, "tern_entities_processed_total").unwrap();
    assert!(processed < 3_000.0, "the run was over: {during}");
    // The counters and gauges of the run, under their documented names.
    assert_eq!(sample(&during, "tern_migration"), Some(1.0), "{during}");
    assert!(
        sample(&during, "tern_entities_changed_total").unwrap() > 0.0,
        "{during}"
    );
    assert_eq!(
        sample(&during, "tern_entities_conflicted_total"),
        Some(0.0),
        "{during}"
    );
    let rate = sample(&during, "tern_entities_per_second").unwrap();
    assert!(rate > 0.0 && rate < 5_000.0, "{during}");
    // The lag behind the store's estimate of the stage (3,000 posts).
    let done = sample(&during, "tern_stage_done_entities").unwrap();
    assert!(done > 0.0, "{during}");
    assert_eq!(
        sample(&during, "tern_stage_estimate_entities"),
        Some(3_000.0),
        "{during}"
    );
    let remaining = sample(&during, "tern_stage_remaining_entities").unwrap();
    assert_eq!(remaining, 3_000.0 - done, "{during}");
    assert!(
        sample(&during, "tern_stage_eta_seconds").unwrap() > 0.0,
        "{during}"
    );
    assert!(
        during.contains("tern_retries_total{what=\"write\"} 0"),
        "{during}"
    );
    assert!(
        during.contains("# HELP tern_stage_remaining_entities"),
        "{during}"
    );
    // Anything but /metrics is a clear 404.
    let (status, body) = get(addr, "/").unwrap();
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(body.contains("/metrics"), "{body}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        p.ok(&["verify"])
            .contains("every entity is at its kind's version")
    );
}

#[test]
fn a_taken_metrics_address_fails_at_once_naming_it() {
    let p = Project::with_blog(5_000, 2, 2);
    p.write("migrations/0001_release2.tern", RELEASE2);
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = p.fails(&["up", "--metrics-addr", &addr], 1);
    assert!(err.contains(&format!("--metrics-addr {addr}")), "{err}");
    // Nothing ran: the migration is still pending.
    let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    assert_eq!(status["migrations"][0]["state"], "pending", "{status}");
    let bad = p.fails(&["up", "--metrics-addr", "localhost"], 2);
    assert!(bad.contains("--metrics-addr"), "{bad}");
}

#[test]
fn json_logs_place_each_line_in_its_migration_and_stage() {
    let p = Project::with_blog(5_000, 3, 120);
    p.write("migrations/0001_release2.tern", RELEASE2);
    let out = p.run(&["up", "-v", "--quiet", "--log-format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let checkpoint = lines
        .iter()
        .find(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("checkpoint"))
        })
        .unwrap_or_else(|| panic!("no checkpoint line: {stderr}"));
    let spans: Vec<&str> = checkpoint["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(spans[..2], ["migration", "stage"], "{checkpoint}");
    assert_eq!(checkpoint["spans"][0]["id"], 1, "{checkpoint}");
    assert_eq!(checkpoint["level"], "INFO");
    // Metric events are for --metrics-addr, not the log.
    assert!(!stderr.contains("tern::metric"), "{stderr}");
}

#[test]
fn sweep_serves_its_progress_too() {
    // A lazy migration installed, then swept at 1,000 entities/s.
    let p = Project::with_blog(300, 1, 2_000);
    p.write(
        "migrations/0001_likes.tern",
        "lazy\nadd blogpost.likes = 0\n",
    );
    p.ok(&["up"]);
    let (mut child, addr) =
        spawn_serving(&p, &["sweep", "--max-rate", "1000", "--batch-size", "50"]);
    let during = scrape_while_running(&mut child, addr, |body| {
        sample(body, "tern_entities_processed_total").is_some_and(|n| n >= 100.0)
    });
    assert!(
        sample(&during, "tern_entities_changed_total").unwrap() > 0.0,
        "{during}"
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
}
