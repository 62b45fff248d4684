//! `tern analyze contention` on the two example schemas: verdicts, witness,
//! suggestion, JSON, exit codes (0 SAFE, 10 UNSAFE, 1 error).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/contention")
        .join(name)
}

fn tern(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .current_dir(dir.path())
        .env_remove("TERN_STORE_URL")
        .output()
        .unwrap()
}

/// `tern analyze contention` on the example `name`, as text and as JSON,
/// each asserted to exit with `code`.
fn contention(name: &str, code: i32) -> (String, serde_json::Value) {
    let file = example(name);
    let out = tern(&["analyze", "contention", file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(code), "{text}");
    let json = tern(&["analyze", "contention", file.to_str().unwrap(), "--json"]);
    assert_eq!(json.status.code(), Some(code));
    (text, serde_json::from_slice(&json.stdout).unwrap())
}

#[test]
fn article_oriented_is_unsafe_with_witness_and_suggestion() {
    let (text, v) = contention("article.mc", 10);
    assert!(text.starts_with("UNSAFE"), "{text}");
    for want in [
        "users(Alice)",
        "articles(Alice, a1)",
        "comments(Dave, a1)    [written by Dave]",
        "comments(Eve, a1)    [written by Eve]",
        "line 16: articles(u, a) ::= comments(u', a)*",
        "suggested safe alternative (re-checked: SAFE)",
        "users(u) ::= (articles(u, a') | comments(u, a'))*",
        "agrees",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert_eq!(v["verdict"], "UNSAFE");
    assert_eq!(v["witness"]["users"], serde_json::json!(["Dave", "Eve"]));
    assert_eq!(v["suggestion"]["safe"], true);
}

#[test]
fn user_oriented_is_safe() {
    let (text, v) = contention("user.mc", 0);
    assert!(text.starts_with("SAFE"), "{text}");
    assert_eq!(v["verdict"], "SAFE");
    assert!(v["witness"].is_null());
}

#[test]
fn a_bad_file_is_an_error_naming_file_line_col() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.mc");
    std::fs::write(&f, "key users(user)\nroot ::= user(u)\nusers(u) ::= eps\n").unwrap();
    let out = tern(&["analyze", "contention", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bad.mc:2:10: unknown key constructor `user`"),
        "{err}"
    );
    let missing = tern(&["analyze", "contention", "/nonexistent/x.mc"]);
    assert_eq!(missing.status.code(), Some(1));
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, bytes).unwrap();
    f
}

#[test]
fn a_file_starting_with_a_byte_order_mark_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(example("user.mc")).unwrap());
    let f = write(dir.path(), "bom.mc", &bytes);
    let out = tern(&["analyze", "contention", f.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_file_that_is_not_utf8_is_an_error_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "latin1.mc",
        b"key users(user)\nroot ::= users(u)\n# caf\xE9\nusers(u) ::= eps\n",
    );
    let out = tern(&["analyze", "contention", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("latin1.mc:3:6: the file is not UTF-8 (byte 0xE9)"),
        "{err}"
    );
}

#[test]
fn json_errors_are_a_json_object_on_stdout_with_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "bad.mc",
        b"key users(user)\nroot ::= user(u)\nusers(u) ::= eps\n",
    );
    let out = tern(&["analyze", "contention", f.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["error"]["kind"], "input");
    assert_eq!(v["error"]["line"], 2);
    assert_eq!(v["error"]["col"], 10);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown key constructor `user`"),
        "{v}"
    );
    let missing = tern(&["analyze", "contention", "/nonexistent/x.mc", "--json"]);
    assert_eq!(missing.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(v["exit_code"], 1);
    assert!(v["error"]["line"].is_null());
}

/// A schema big enough that the check runs for seconds (debug build).
fn big(dir: &Path) -> PathBuf {
    let src = tern_contention::synthetic::schema(
        tern_contention::synthetic::Shape::Forest,
        200_000,
        true,
    );
    write(dir, "big.mc", src.as_bytes())
}

#[cfg(unix)]
#[test]
fn sigterm_and_ctrl_c_stop_the_check_promptly_with_exit_130() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let f = big(dir.path());
    // After the handlers are installed (a signal before that kills the
    // process the default way), while the check still runs (tens of seconds).
    for (signal, after) in [("-TERM", 3000), ("-INT", 4000)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["analyze", "contention", f.to_str().unwrap()])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(after));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the check ended before the signal: make the input bigger"
        );
        let sent = Instant::now();
        let kill = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let out = child.wait_with_output().unwrap();
        let took = sent.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{signal}: {err}");
        // Promptly: well within a second on an idle machine; the bound leaves
        // room for a loaded one.
        assert!(took < Duration::from_secs(5), "{signal}: took {took:?}");
        assert!(err.contains("stopping the analysis"), "{err}");
        assert!(err.contains("stopped before a verdict"), "{err}");
    }
}

#[test]
fn a_time_limit_before_the_verdict_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let f = big(dir.path());
    let out = tern(&[
        "analyze",
        "contention",
        f.to_str().unwrap(),
        "--time-limit",
        "0.001",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "time-limit", "{v}");
    let bad = tern(&["analyze", "contention", "x.mc", "--time-limit", "0"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--time-limit takes a positive number"));
}

#[test]
fn the_printed_suggestion_fed_back_is_safe() {
    // Keys of four parts with nested sub-tasks: the finite check (11,110 keys) runs too.
    let (text, v) = contention("tasks.mc", 10);
    assert!(text.contains("11110 keys): UNSAFE, agrees"), "{text}");
    let source = v["suggestion"]["source"].as_str().unwrap();
    // The text output prints the same schema, indented.
    for line in source.lines() {
        assert!(text.contains(&format!("    {line}\n")), "{line}");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "suggested.mc", source.as_bytes());
    let out = tern(&["analyze", "contention", f.to_str().unwrap()]);
    let again = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{again}");
    assert!(again.starts_with("SAFE"), "{again}");
}
