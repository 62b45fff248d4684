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
    let p = Project::with_blog(5_000, 3, 2);
    let before = p.ok(&["export"]);
    p.fails_saying(&["export", "-o", "store.redb"], 1, &["store file itself"]);
    std::os::unix::fs::symlink(p.path("store.redb"), p.path("link.redb")).unwrap();
    p.fails_saying(&["export", "-o", "link.redb"], 1, &["store file itself"]);
    std::fs::hard_link(p.path("store.redb"), p.path("hard.redb")).unwrap();
    p.fails(&["export", "-o", "hard.redb"], 1);
    assert_eq!(p.ok(&["export"]), before, "the store is intact");
}

/// Item 1: an export to a file goes through a temporary file renamed at the
/// end: the target holds the complete export, and no temporary file is left.
#[test]
fn export_writes_through_a_temporary_file_renamed_at_the_end() {
    let p = Project::with_blog(5_000, 3, 2);
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
    p.fails_saying(
        &["import", "deeper.jsonl"],
        1,
        &["deeper.jsonl:1", "nested deeper"],
    );
}

/// Item 3: a mistyped embedded path is an error with a hint, not a new empty
/// store that `tern up` reports as migrated.
#[test]
fn a_mistyped_store_path_is_refused_not_created() {
    let p = Project::with_blog(5_000, 1, 1);
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
    let p = Project::with_blog(5_000, 1, 1);
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
    p.fails_saying(
        &["import", "dup.jsonl"],
        1,
        &["dup.jsonl:1", "\"a\" appears twice"],
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
    p.fails_saying(
        &["import", "--batch-size", "10", "bad.jsonl"],
        1,
        &["bad.jsonl:31", "30 lines before it were imported"],
    );
    assert_eq!(p.ok(&["export"]).lines().count(), 30);
}

// ---- False reports ----

/// Item 5: import refuses a version above the kind's (tern would never
/// migrate it), naming the line.
#[test]
fn import_refuses_versions_above_the_kinds_version() {
    let p = Project::new(5_000);
    p.write(
        "v.jsonl",
        "{\"kind\":\"user\",\"id\":1,\"value\":{}}\n{\"kind\":\"user\",\"id\":2,\"version\":99,\"value\":{}}\n",
    );
    p.fails_saying(
        &["import", "v.jsonl"],
        1,
        &["v.jsonl:2", "version 99 is above kind user's version 0"],
    );
    // At the kind's version it is fine.
    p.write("migrations/0001_a.tern", "add user.x = 1\n");
    p.ok(&["up"]);
    p.write(
        "v1.jsonl",
        "{\"kind\":\"user\",\"id\":3,\"version\":1,\"value\":{\"x\":1}}\n",
    );
    p.ok(&["import", "v1.jsonl"]);
}

/// Item 5: verify flags entities above their kind's version (exit 1).
#[test]
fn verify_flags_entities_above_their_kinds_version() {
    let p = Project::with_blog(5_000, 2, 1);
    assert!(p.ok(&["verify"]).contains("verified"));
    p.put_raw(&[("user", 50, 99)]);
    verify_flags(&p, "1 ABOVE v0");
    let json: serde_json::Value =
        serde_json::from_slice(&p.run(&["verify", "--json"]).stdout).unwrap();
    assert_eq!(json["above"], 1);
    assert_eq!(json["ok"], false);
}

/// Runs `tern verify`, asserts it exits 1 with a report that says `problem`
/// and not "verified".
fn verify_flags(p: &Project, problem: &str) {
    let out = p.run(&["verify"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(problem) && !text.contains("verified"),
        "{text}"
    );
}

/// Item 5: verify flags a migration interrupted halfway (some entities
/// migrated, some not), naming it "in progress".
#[test]
fn verify_flags_an_interrupted_migration() {
    let p = Project::with_blog(5_000, 20, 0);
    p.write("migrations/0001_a.tern", "add user.x = 1\n");
    // Stop the run after its first checkpoint: a fault is not available to the
    // binary, so write what an interrupted run leaves: half the entities at
    // v1 and the run's checkpoint.
    record_run(&p, run_state(1, "sha256:x", 1), None);
    p.put_raw(&[("user", 0, 1), ("user", 1, 1)]);
    verify_flags(&p, "migration 1 is in progress");
}

/// Item 6: entities written below their kind's version after its last
/// migration are brought forward by `tern up` with nothing pending.
#[test]
fn up_sweeps_late_entities_with_nothing_pending() {
    let p = Project::with_blog(5_000, 3, 1);
    p.write("migrations/0001_a.tern", common::RELEASE2);
    p.ok(&["up"]);
    // Old application code writes a post of version 0.
    p.write(
        "late.jsonl",
        "{\"kind\":\"blogpost\",\"id\":\"late\",\"value\":{\"title\":\"t\",\"text\":\"old\",\"author\":\"user1\"}}\n",
    );
    p.ok(&["import", "late.jsonl"]);
    p.fails(&["verify"], 1);
    let up = p.ok(&["up"]);
    assert!(
        up.contains("1 entities of blogpost") && up.contains("brought forward"),
        "{up}"
    );
    assert!(p.ok(&["verify"]).contains("verified"));
    let export = p.ok(&["export", "blogpost"]);
    assert!(
        export.contains("{\"kind\":\"blogpost\",\"id\":\"late\",\"version\":2,\"value\":{\"author\":\"user1\",\"content\":\"old\",\"likes\":0,\"title\":\"t\"}}"),
        "{export}"
    );
}

fn unsafe_project() -> Project {
    let p = Project::new(5_000);
    // Two users named twin (different email and url): the copy and the move
    // conflict on twin's 3 posts. Two named pair (same email, different
    // url): only the move conflicts on pair's 2 posts.
    let mut lines = String::new();
    for (id, name, email, url) in [
        (100, "twin", "a@x", "ua"),
        (101, "twin", "b@x", "ub"),
        (102, "pair", "p@x", "pa"),
        (103, "pair", "p@x", "pb"),
    ] {
        lines.push_str(&format!(
            "{{\"kind\":\"user\",\"id\":{id},\"value\":{{\"name\":\"{name}\",\"email\":\"{email}\",\"url\":\"{url}\"}}}}\n"
        ));
    }
    for (i, author) in ["twin", "twin", "twin", "pair", "pair"].iter().enumerate() {
        lines.push_str(&format!(
            "{{\"kind\":\"blogpost\",\"id\":{i},\"value\":{{\"author\":\"{author}\"}}}}\n"
        ));
    }
    p.write("data.jsonl", &lines);
    p.ok(&["import", "data.jsonl"]);
    p.write("migrations/0001_r3.tern", common::RELEASE3);
    p
}

/// Item 7: the refusal names the unsafe statement and counts conflicts per
/// statement; `check --json` lists each conflict with its statement.
#[test]
fn unsafe_refusal_names_each_statement_with_its_own_count() {
    let p = unsafe_project();
    let err = p.fails(&["up"], 5);
    assert!(
        err.contains("`copy user.email to blogpost where user.name = blogpost.author` writes 3 target(s)")
            && err.contains("also unsafe: `move user.url to blogpost where user.name = blogpost.author` writes 5 target(s)")
            && !err.contains("pending migrations"),
        "{err}"
    );
    p.fails_saying(&["check"], 5, &["`copy user.email", "writes 3 target(s)"]);
    let out = p.run(&["check", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let conflicts = json["unsafe_conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 8, "{conflicts:?}");
    assert!(conflicts.iter().all(|c| {
        c["statement"]
            .as_str()
            .is_some_and(|s| s.starts_with("copy") || s.starts_with("move"))
    }));
    assert_eq!(
        conflicts
            .iter()
            .filter(|c| c["statement"].as_str().unwrap().starts_with("move"))
            .count(),
        5
    );
}

/// Item 7: with --force-unsafe, the overridden conflicts are in the report.
#[test]
fn force_unsafe_reports_the_overridden_conflicts() {
    let p = unsafe_project();
    let out = p.run(&["up", "--force-unsafe", "--json"]);
    common::assert_success(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let forced = json["applied"][0]["forced_conflicts"].as_array().unwrap();
    assert_eq!(forced.len(), 8, "{forced:?}");
    assert!(
        forced
            .iter()
            .any(|c| c["target"].as_str().unwrap().contains("user:100"))
    );
}

/// Item 8: `tern plan` exits 5 when it prints UNSAFE, as check and up do.
#[test]
fn plan_exits_5_on_unsafe() {
    let p = unsafe_project();
    let out = p.run(&["plan"]);
    assert_eq!(out.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&out.stdout).contains("UNSAFE"));
    p.fails(&["up", "--dry-run"], 5);
}

// ---- States a user cannot leave ----

/// Writes what an interrupted run of migration `id` leaves (its checkpoint,
/// with the checksum its file had then) and, optionally, a lease.
fn record_interrupted_run(
    p: &Project,
    id: u32,
    lease: Option<tern_core::migrate::state::LeaseRecord>,
) {
    record_run(
        p,
        run_state(id, "sha256:the-file-before-the-edit", 0),
        lease,
    );
}

/// The checkpoint a run of migration `id` (its file's `checksum` then)
/// leaves after `checkpoints` checkpoints, at its start.
fn run_state(id: u32, checksum: &str, checkpoints: u64) -> tern_core::migrate::RunState {
    tern_core::migrate::RunState {
        migration: id,
        checksum: checksum.into(),
        started_at: 0,
        stage: 0,
        phase: 0,
        cursor: None,
        counts: Default::default(),
        checkpoints,
        partitions: None,
    }
}

/// Writes `running` as the store's run in progress and, optionally, a lease.
fn record_run(
    p: &Project,
    running: tern_core::migrate::RunState,
    lease: Option<tern_core::migrate::state::LeaseRecord>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = tern_core::store::embedded::EmbeddedStore::open(p.path("store.redb")).unwrap();
        let mut v = tern_core::migrate::state::load(&store).await.unwrap();
        v.doc.running = Some(running);
        if lease.is_some() {
            v.doc.next_token = 5;
            v.doc.lease = lease;
        }
        tern_core::migrate::state::store_if(&store, v.revision, &v.doc)
            .await
            .unwrap();
    });
}

/// Item 9: a migration interrupted before it wrote anything may be edited;
/// the next `tern up` starts it afresh (it used to exit 4 "was applied").
#[test]
fn an_interrupted_migration_that_wrote_nothing_may_be_edited() {
    let p = Project::with_blog(5_000, 3, 0);
    p.write("migrations/0001_a.tern", "add user.x = 2\n");
    record_interrupted_run(&p, 1, None);
    let out = p.run(&["up"]);
    common::assert_success(&out);
    assert!(p.ok(&["export"]).contains("\"x\":2"));
    assert!(p.ok(&["verify"]).contains("verified"));
}

/// Item 9: once the interrupted migration has written entities, an edit is
/// refused, worded "in progress" (not "applied"), and so is `tern abandon`.
#[test]
fn an_edited_migration_in_progress_is_refused_as_in_progress_not_applied() {
    let p = Project::with_blog(5_000, 3, 0);
    p.write("migrations/0001_a.tern", "add user.x = 2\n");
    record_interrupted_run(&p, 1, None);
    p.put_raw(&[("user", 0, 1)]);
    let err = p.fails(&["up"], 1);
    assert!(
        err.contains("in progress") && !err.contains("was applied") && err.contains("1 of user"),
        "{err}"
    );
    p.fails_saying(&["abandon"], 1, &["cannot abandon", "half-migrated"]);
}

/// Item 9: `tern abandon` drops an interrupted run that wrote nothing, so
/// its file can go and later migrations run.
#[test]
fn abandon_drops_an_interrupted_run_that_wrote_nothing() {
    let p = Project::with_blog(5_000, 3, 0);
    record_interrupted_run(&p, 1, None);
    // Its file is gone; a later migration is blocked.
    p.write("migrations/0002_b.tern", "add user.y = 1\n");
    p.fails(&["up"], 1);
    assert!(
        p.ok(&["abandon"])
            .contains("abandoned the interrupted run of migration 1")
    );
    assert!(p.ok(&["abandon"]).contains("nothing to abandon"));
    p.ok(&["up"]);
    assert!(p.ok(&["verify"]).contains("verified"));
}

/// Item 10: SIGTERM is handled like Ctrl-C: the batch finishes, its
/// checkpoint is written, the lock is released, exit 130, and `tern up`
/// resumes to the same result.
#[test]
fn sigterm_checkpoints_releases_the_lock_and_exits_130() {
    let p = Project::with_release2(&blog_lines(300, 4));
    // Let the run checkpoint at least once (status cannot open the store
    // while it runs, so poll stderr-free: just give it time).
    let stderr = p.up_interrupted("TERM", 700);
    assert!(
        stderr.contains("SIGTERM") && stderr.contains("resume"),
        "{stderr}"
    );
    let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    assert!(status["lock"].is_null(), "the lock was released: {status}");
    let up: serde_json::Value = serde_json::from_str(&p.ok(&["up", "--json"])).unwrap();
    assert_eq!(up["applied"][0]["resumed"], true, "{up}");
    assert!(p.ok(&["verify"]).contains("verified"));
}

/// Item 10: after a crash, the embedded store proves the lease's holder
/// gone (the file opened), so the next `tern up` takes over at once and says
/// so, instead of exiting 3 until the lease expires.
#[test]
fn a_dead_runners_lease_is_taken_over_at_once() {
    let p = Project::with_blog(600_000, 3, 0);
    p.write("migrations/0001_a.tern", "add user.x = 1\n");
    let far = i64::MAX / 4;
    record_interrupted_run(
        &p,
        1,
        Some(tern_core::migrate::state::LeaseRecord {
            owner: "crashed".into(),
            token: 4,
            holder: "some-host pid 4000000".into(),
            acquired_at: 0,
            expires_at: far,
        }),
    );
    // The recorded checksum differs but nothing was written: it starts afresh.
    let out = p.run(&["up"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("taking over the lease at once"), "{stderr}");
    assert!(p.ok(&["verify"]).contains("verified"));
}

/// Item 9: `check --offline` refuses a path nested deeper than the store
/// keeps (it used to pass, and `up` failed on its first batch, stuck).
#[test]
fn check_catches_nesting_depth_that_up_refuses() {
    let p = Project::new(5_000);
    let path = |n: usize| {
        (0..n)
            .map(|i| format!("p{i}"))
            .collect::<Vec<_>>()
            .join(".")
    };
    p.write(
        "migrations/0001_deep.tern",
        &format!("-- deep\nadd user.{} = 1\n", path(300)),
    );
    p.fails_saying(
        &["check", "--offline"],
        1,
        &["0001_deep.tern:2:", "nested 299 levels"],
    );
    // The deepest the store keeps passes check and applies.
    p.write(
        "migrations/0001_deep.tern",
        &format!("add user.{} = 1\n", path(257)),
    );
    p.ok(&["check", "--offline"]);
    p.import_blog(1, 0);
    p.ok(&["up"]);
    assert!(p.ok(&["verify"]).contains("verified"));
}

// ---- Corrupted stores ----

/// Item 11: a store file with flipped bytes never makes tern panic, and a
/// command that exits 0 on it reports the true data (so a corruption is
/// either harmless or reported, never silently wrong). Bytes are flipped at
/// many offsets across the file.
#[test]
fn a_corrupted_store_file_never_panics_and_never_reports_wrong_data() {
    let p = Project::with_blog(5_000, 40, 3);
    p.write("migrations/0001_a.tern", common::RELEASE2);
    p.ok(&["up"]);
    let expected = p.ok(&["export"]);
    let verified = p.ok(&["verify"]);
    let pristine = std::fs::read(p.path("store.redb")).unwrap();
    let len = pristine.len();
    let mut corrupted_reports = 0;
    let offsets: Vec<usize> = (0..40)
        .map(|i| (i * 7919 + 13) % len)
        .chain([0, 1, 8, 16, 32, 64, 512, 4096 % len])
        .collect();
    for offset in offsets {
        let mut bytes = pristine.clone();
        for b in bytes.iter_mut().skip(offset).take(4) {
            *b ^= 0xA5;
        }
        let q = Project::new(5_000);
        std::fs::write(q.path("store.redb"), &bytes).unwrap();
        for args in [&["export"][..], &["verify"], &["status"]] {
            let out = q.run(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.code().is_some()
                    && out.status.code() != Some(101)
                    && !stderr.contains("panicked"),
                "offset {offset}, {args:?}: {:?}\n{stderr}",
                out.status.code()
            );
            if out.status.success() {
                let stdout = String::from_utf8_lossy(&out.stdout);
                match args[0] {
                    "export" => {
                        assert_eq!(stdout, expected, "offset {offset}: export exit 0 but wrong")
                    }
                    "verify" => {
                        assert_eq!(stdout, verified, "offset {offset}: verify exit 0 but wrong")
                    }
                    _ => {}
                }
            } else if stderr.contains("corrupt") {
                corrupted_reports += 1;
            }
        }
    }
    assert!(
        corrupted_reports > 0,
        "no corruption was ever reported as such"
    );
}

// ---- Smaller ones ----

/// `--batch-size 0` and `--max-rate 0` are usage errors (exit 2), as
/// `batch_size = 0` in tern.toml is an error.
#[test]
fn batch_size_0_and_max_rate_0_are_refused_on_the_command_line() {
    let p = Project::new(5_000);
    p.fails_saying(&["up", "--batch-size", "0"], 2, &["at least 1"]);
    p.fails(&["import", "--batch-size", "0", "x.jsonl"], 2);
    p.fails_saying(&["up", "--max-rate", "0"], 2, &["above 0"]);
    p.fails(&["plan", "--max-rate", "-3"], 2);
}

/// `--config` naming a missing file is an error naming it.
#[test]
fn config_naming_a_missing_file_is_reported() {
    let p = Project::new(5_000);
    let err = p.fails(
        &[
            "--config",
            "nope.toml",
            "--store",
            "embedded:store.redb",
            "status",
        ],
        1,
    );
    assert!(err.contains("nope.toml: no such file"), "{err}");
}

/// A `TERN_RUN__*` typo is an error, as an unknown tern.toml key is.
#[test]
fn tern_run_variable_typos_are_errors() {
    let p = Project::new(5_000);
    let out = p
        .cmd(&["status"])
        .env("TERN_RUN__BATCH_SIZ", "5")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TERN_RUN__BATCH_SIZ") && err.contains("TERN_RUN__BATCH_SIZE"),
        "{err}"
    );
    let out = p
        .cmd(&["--create-store", "status"])
        .env("TERN_RUN__BATCH_SIZE", "5")
        .output()
        .unwrap();
    common::assert_success(&out);
}

/// `tern new` writes a comment-only file; `status` still shows the store and
/// names the problem instead of failing.
#[test]
fn status_survives_a_comment_only_migration_from_tern_new() {
    let p = Project::with_blog(5_000, 1, 0);
    p.ok(&["new", "next"]);
    let out = p.ok(&["status"]);
    assert!(
        out.contains("problem:") && out.contains("no statements"),
        "{out}"
    );
}

/// Logs written to a file or a pipe carry no ANSI colour codes.
#[test]
fn logs_off_a_terminal_have_no_ansi_colours() {
    let p = Project::with_blog(5_000, 1, 0);
    p.write("migrations/0001_a.tern", "add user.x = 1\n");
    let out = p.run(&["-vv", "up"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.is_empty() && !err.contains('\u{1b}'), "{err:?}");
}

/// `tern export | head -1` ends quietly (exit 0), without a broken-pipe error.
#[test]
fn export_into_a_closed_pipe_is_not_an_error() {
    use std::io::BufRead as _;
    let p = Project::with_blog(5_000, 300, 5);
    let mut child = p
        .cmd(&["export"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("{\"kind\""));
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.to_lowercase().contains("pipe"), "{err}");
}

/// `init --json` and `export -o FILE --json` print JSON.
#[test]
fn init_and_export_honour_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .current_dir(dir.path())
        .args(["init", "--json", "proj"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["created"], true, "{json}");
    let p = Project::with_blog(5_000, 2, 1);
    let json: serde_json::Value =
        serde_json::from_str(&p.ok(&["export", "--json", "-o", "out.jsonl"])).unwrap();
    assert_eq!(json["exported"], 4, "{json}");
    assert_eq!(json["kinds"]["user"], 2, "{json}");
}

/// An error about a 1 MB import line does not echo the line.
#[test]
fn an_error_on_a_huge_line_does_not_echo_it() {
    let p = Project::new(5_000);
    let huge = "x".repeat(1 << 20);
    for line in [
        format!("{{\"kind\":\"k\",\"id\":1,\"{huge}\":1}}"),
        format!("{{\"kind\":\"k\",\"id\":1,\"value\":{{\"a\":\"{huge}}}}}"),
        format!("{{\"kind\":\"{huge}\",\"id\":1,\"value\":{{}},\"value\":1}}"),
        huge.clone(),
    ] {
        p.write("huge.jsonl", &format!("{line}\n"));
        let err = p.fails(&["import", "huge.jsonl"], 1);
        assert!(
            err.len() < 2_000 && err.contains("huge.jsonl:1"),
            "{} bytes: {}",
            err.len(),
            &err[..200.min(err.len())]
        );
    }
}

/// Invalid UTF-8 in an import file or a migration names the line (and column).
#[test]
fn invalid_utf8_names_its_line() {
    let p = Project::new(5_000);
    std::fs::write(
        p.path("bad.jsonl"),
        b"{\"kind\":\"k\",\"id\":1,\"value\":{}}\n{\"kind\":\"k\",\"id\":2,\"value\":{\"a\":\"\xff\"}}\n",
    )
    .unwrap();
    p.fails_saying(&["import", "bad.jsonl"], 1, &["bad.jsonl:2", "UTF-8"]);
    std::fs::write(
        p.path("migrations/0001_a.tern"),
        b"add user.x = 1\nadd user.y = \"\xfe\"\n",
    )
    .unwrap();
    p.fails_saying(&["check", "--offline"], 1, &["0001_a.tern:2:15", "UTF-8"]);
}

/// A byte-order mark neither breaks an import nor shifts the columns of a
/// migration's first line.
#[test]
fn a_byte_order_mark_is_ignored() {
    let p = Project::new(5_000);
    p.write(
        "bom.jsonl",
        "\u{feff}{\"kind\":\"k\",\"id\":1,\"value\":{}}\n",
    );
    p.ok(&["import", "bom.jsonl"]);
    assert_eq!(p.ok(&["export"]).lines().count(), 1);
    p.write("migrations/0001_a.tern", "\u{feff}add user.x = \n");
    p.fails_saying(&["check", "--offline"], 1, &["0001_a.tern:1:14"]);
}

/// `tern help --help` shows the help (exit 0).
#[test]
fn help_help_exits_0() {
    let p = Project::new(5_000);
    let out = p.ok(&["help", "--help"]);
    assert!(out.contains("Usage"), "{out}");
}

/// A store file without write permission: the reading commands work, and a
/// command that writes is refused naming the cause.
#[test]
fn a_read_only_store_can_be_read_and_refuses_writes_clearly() {
    use std::os::unix::fs::PermissionsExt as _;
    let p = Project::with_blog(5_000, 3, 1);
    let before = p.ok(&["export"]);
    std::fs::set_permissions(p.path("store.redb"), std::fs::Permissions::from_mode(0o444)).unwrap();
    p.write("migrations/0001_a.tern", "add user.x = 1\n");
    assert!(p.ok(&["status"]).contains("pending"));
    assert_eq!(p.ok(&["export"]), before);
    p.ok(&["export", "-o", "out.jsonl"]);
    p.ok(&["verify"]);
    p.ok(&["plan"]);
    p.ok(&["lock"]);
    p.fails_saying(&["up"], 1, &["read-only"]);
    std::fs::set_permissions(p.path("store.redb"), std::fs::Permissions::from_mode(0o644)).unwrap();
    p.ok(&["up"]);
}
