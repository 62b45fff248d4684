//! Issue 34 item 5, "an export is not a backup": the `tern` binary's export of
//! a migrated store carries tern's state and imports into a new store as the
//! same store. (The same on every store: the battery's
//! `an_export_is_a_backup_export_import_export_is_identical_in_a_new_store`.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{Project, RELEASE2, blog_lines};

/// A project on the embedded store holding the blog, migrated by release 2.
fn migrated() -> Project {
    let p = Project::with_release2(&blog_lines(40, 2));
    p.ok(&["up"]);
    p
}

/// The reported case: an export of a migrated store was refused by a new
/// store ("version 4 is above kind user's version 0"). Now export → import
/// into a new store → export is identical, and the new store knows release 2
/// is applied (`up` has nothing to do, `verify` passes).
#[test]
fn item5_an_export_of_a_migrated_store_imports_into_a_new_store_identically() {
    let p = migrated();
    p.ok(&["export", "-o", "backup.jsonl"]);
    let file = std::fs::read_to_string(p.path("backup.jsonl")).unwrap();
    assert!(file.starts_with("{\"tern_state\":"), "{file}");

    let q = Project::new(5_000);
    q.write("migrations/0001_release2.tern", RELEASE2);
    std::fs::copy(p.path("backup.jsonl"), q.path("backup.jsonl")).unwrap();
    q.ok(&["import", "backup.jsonl"]);
    assert_eq!(q.ok(&["export"]), file);
    assert!(q.ok(&["up"]).contains("up to date"));
    q.ok(&["verify"]);
    let status: serde_json::Value = serde_json::from_str(&q.ok(&["status", "--json"])).unwrap();
    assert_eq!(status["migrations"][0]["state"], "applied", "{status}");

    // Importing it again (an import that stopped part-way, run again) is accepted.
    q.ok(&["import", "backup.jsonl"]);
    assert_eq!(q.ok(&["export"]), file);
}

/// The state goes only into an empty store or one with the same state:
/// elsewhere the import is refused at line 1 with the reason, writing
/// nothing; `--no-state` imports the entities alone (checked against the
/// store's versions, so migrated entities are refused as before).
#[test]
fn item5_a_state_is_refused_by_a_store_it_does_not_describe() {
    let p = migrated();
    p.ok(&["export", "-o", "backup.jsonl"]);
    let q = Project::with_blog(5_000, 3, 1);
    std::fs::copy(p.path("backup.jsonl"), q.path("backup.jsonl")).unwrap();
    let before = q.ok(&["export"]);
    q.fails_saying(
        &["import", "backup.jsonl"],
        1,
        &[
            "backup.jsonl:1",
            "already holds entities",
            "--no-state",
            "nothing was imported",
        ],
    );
    q.fails_saying(
        &["import", "--no-state", "backup.jsonl"],
        1,
        &["backup.jsonl:2", "is above kind"],
    );
    assert_eq!(q.ok(&["export"]), before);
    // An export of named kinds is their entities alone.
    let kinds = p.ok(&["export", "user"]);
    assert!(
        kinds.lines().all(|l| l.starts_with("{\"kind\":\"user\"")),
        "{kinds}"
    );
    // An export without the state is the entity lines of the whole export.
    let all = p.ok(&["export"]);
    let bare = p.ok(&["export", "--no-state"]);
    assert_eq!(all.split_once('\n').unwrap().1, bare);
}

/// While a migration is in progress (here interrupted by Ctrl-C), its
/// entities are between versions: the export refuses, naming the migration
/// and the way out, rather than write a backup that restores a half-migrated
/// store as finished; `--no-state` still exports the entities.
#[test]
fn item5_an_export_during_an_interrupted_migration_is_refused() {
    let p = Project::with_release2(&blog_lines(300, 4));
    p.up_interrupted("INT", 600);
    p.fails_saying(&["export"], 1, &["migration 1 is in progress", "tern up"]);
    let bare = p.ok(&["export", "--no-state"]);
    assert_eq!(bare.lines().count(), 1500);
    p.ok(&["up"]);
    assert!(p.ok(&["export"]).starts_with("{\"tern_state\":"));
}
