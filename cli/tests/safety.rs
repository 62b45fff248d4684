//! Issue 12, "nothing lost, nothing false": one test per defect, named for it,
//! each failing without its fix.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{Project, blog_lines};

// ---- Data loss ----

/// Item 1: `tern export -o` naming the open store file (directly or through a
/// link) is refused, and the store still works afterwards.
#[test]
fn export_refuses_the_open_store_file() {
    let p = Project::new(5_000);
    p.write("data.jsonl", &blog_lines(3, 2));
    p.ok(&["import", "data.jsonl"]);
    let before = p.ok(&["export"]);
    let err = p.fails(&["export", "-o", "store.redb"], 1);
    assert!(err.contains("store file itself"), "{err}");
    std::os::unix::fs::symlink(p.path("store.redb"), p.path("link.redb")).unwrap();
    let err = p.fails(&["export", "-o", "link.redb"], 1);
    assert!(err.contains("store file itself"), "{err}");
    std::fs::hard_link(p.path("store.redb"), p.path("hard.redb")).unwrap();
    p.fails(&["export", "-o", "hard.redb"], 1);
    assert_eq!(p.ok(&["export"]), before, "the store is intact");
}

/// Item 1: an export to a file goes through a temporary file renamed at the
/// end: the target holds the complete export, and no temporary file is left.
#[test]
fn export_writes_through_a_temporary_file_renamed_at_the_end() {
    let p = Project::new(5_000);
    p.write("data.jsonl", &blog_lines(3, 2));
    p.ok(&["import", "data.jsonl"]);
    p.write("out.jsonl", "old content that must be replaced whole\n");
    p.ok(&["export", "-o", "out.jsonl"]);
    assert_eq!(
        std::fs::read_to_string(p.path("out.jsonl")).unwrap(),
        p.ok(&["export"])
    );
    // A failed export (an unknown store) leaves the old file untouched.
    p.write("out.jsonl", "kept\n");
    p.fails(
        &["--store", "embedded:nope.redb", "export", "-o", "out.jsonl"],
        1,
    );
    assert_eq!(
        std::fs::read_to_string(p.path("out.jsonl")).unwrap(),
        "kept\n"
    );
    let leftovers: Vec<_> = std::fs::read_dir(p.path("."))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tern-export-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Item 2 (end to end; the property test is core/tests/export_import.rs):
/// a value nested 256 levels deep, which the store accepts, exports and
/// imports back byte-identical.
#[test]
fn export_of_a_256_level_value_imports_back() {
    let p = Project::new(5_000);
    let deep = format!("{}1{}", "[".repeat(256), "]".repeat(256));
    p.write(
        "deep.jsonl",
        &format!("{{\"kind\":\"d\",\"id\":1,\"value\":{{\"x\":{deep}}}}}\n"),
    );
    p.ok(&["import", "deep.jsonl"]);
    p.ok(&["export", "-o", "out.jsonl"]);
    let q = Project::new(5_000);
    std::fs::copy(p.path("out.jsonl"), q.path("out.jsonl")).unwrap();
    q.ok(&["import", "out.jsonl"]);
    assert_eq!(q.ok(&["export"]), p.ok(&["export"]));
    // One level more is refused at the line, clearly.
    let deeper = format!("{}1{}", "[".repeat(257), "]".repeat(257));
    p.write(
        "deeper.jsonl",
        &format!("{{\"kind\":\"d\",\"id\":2,\"value\":{{\"x\":{deeper}}}}}\n"),
    );
    let err = p.fails(&["import", "deeper.jsonl"], 1);
    assert!(
        err.contains("deeper.jsonl:1") && err.contains("nested deeper"),
        "{err}"
    );
}

/// Item 3: a mistyped embedded path is an error with a hint, not a new empty
/// store that `tern up` reports as migrated.
#[test]
fn a_mistyped_store_path_is_refused_not_created() {
    let p = Project::new(5_000);
    p.write("data.jsonl", &blog_lines(1, 1));
    p.ok(&["import", "data.jsonl"]);
    p.write("migrations/0001_a.tern", "add user.x = 1\n");
    for cmd in [
        &["up"][..],
        &["status"],
        &["verify"],
        &["export"],
        &["plan"],
        &["lock"],
    ] {
        let mut args = vec!["--store", "embedded:store.rdb"];
        args.extend_from_slice(cmd);
        let err = p.fails(&args, 1);
        assert!(
            err.contains("no embedded store at store.rdb") && err.contains("embedded:./store.redb"),
            "{cmd:?}: {err}"
        );
    }
    assert!(!p.path("store.rdb").exists());
    // The explicit flag creates it.
    p.ok(&["--store", "embedded:new.redb", "--create-store", "status"]);
    assert!(p.path("new.redb").exists());
}

/// Item 3: the scheme is case-insensitive (`EMBEDDED:x.redb` is the store
/// x.redb, not a file literally named so), and a password in an embedded URL
/// is refused rather than put into a file name.
#[test]
fn store_url_schemes_are_case_insensitive_and_embedded_takes_no_password() {
    let p = Project::new(5_000);
    p.write("data.jsonl", &blog_lines(1, 1));
    p.ok(&["import", "data.jsonl"]);
    let expected = p.ok(&["export"]);
    assert_eq!(
        p.ok(&["--store", "EMBEDDED:store.redb", "export"]),
        expected
    );
    assert_eq!(
        p.ok(&["--store", "Embedded://store.redb", "export"]),
        expected
    );
    let err = p.fails(
        &[
            "--store",
            "embedded://user:s3cret@x.redb",
            "--create-store",
            "status",
        ],
        1,
    );
    assert!(
        err.contains("no user or password") && !err.contains("s3cret"),
        "{err}"
    );
    let names: Vec<String> = std::fs::read_dir(p.path("."))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("s3cret")), "{names:?}");
}

/// Item 4: every integer outside the 64-bit range is a clear error naming the
/// line (not a rounded float).
#[test]
fn import_refuses_integers_beyond_64_bits() {
    let p = Project::new(5_000);
    for (i, n) in [
        "18446744073709551616",
        "9223372036854775808",
        "-9223372036854775809",
        "1000000000000000000000000",
    ]
    .iter()
    .enumerate()
    {
        p.write(
            "n.jsonl",
            &format!("{{\"kind\":\"k\",\"id\":{i},\"value\":{{\"n\":{n}}}}}\n"),
        );
        let err = p.fails(&["import", "n.jsonl"], 1);
        assert!(
            err.contains("n.jsonl:1") && err.contains("outside the 64-bit"),
            "{n}: {err}"
        );
    }
    assert_eq!(p.ok(&["export"]), "");
}

/// Item 4: a key twice in one object is an error; the same (kind, id) on two
/// lines is a warning and counted once (the later line wins).
#[test]
fn import_duplicate_keys_and_lines_are_not_counted_twice() {
    let p = Project::new(5_000);
    p.write(
        "dup.jsonl",
        "{\"kind\":\"k\",\"id\":1,\"value\":{\"a\":1,\"a\":2}}\n",
    );
    let err = p.fails(&["import", "dup.jsonl"], 1);
    assert!(
        err.contains("dup.jsonl:1") && err.contains("\"a\" appears twice"),
        "{err}"
    );
    p.write(
        "twice.jsonl",
        "{\"kind\":\"k\",\"id\":1,\"value\":{\"a\":1}}\n{\"kind\":\"k\",\"id\":1,\"value\":{\"a\":2}}\n",
    );
    let out = p.run(&["import", "--json", "twice.jsonl"]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["imported"], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("also on line 1"));
    assert_eq!(
        p.ok(&["export"]),
        "{\"kind\":\"k\",\"id\":1,\"version\":0,\"value\":{\"a\":2}}\n"
    );
}

/// Item 4: an import failing at line N says that the earlier batches were
/// written (it is not all or nothing) and how to go on.
#[test]
fn a_failed_import_says_what_it_already_wrote() {
    let p = Project::new(5_000);
    let mut lines = blog_lines(30, 0);
    lines.push_str("{\"kind\":\"user\",\"value\":{}}\n");
    p.write("bad.jsonl", &lines);
    let err = p.fails(&["import", "--batch-size", "10", "bad.jsonl"], 1);
    assert!(
        err.contains("bad.jsonl:31") && err.contains("30 lines before it were imported"),
        "{err}"
    );
    assert_eq!(p.ok(&["export"]).lines().count(), 30);
}
