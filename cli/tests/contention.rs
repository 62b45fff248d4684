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
