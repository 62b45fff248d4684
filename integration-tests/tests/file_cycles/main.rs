//! No file circles in any crate of the workspace (docs/testing.md, "File circles").
//!
//! For every target of every workspace member (library, binaries, tests, benches,
//! examples), the check reads the module tree from the root file with `syn`, builds the
//! file-level import graph (an edge is a real `use` or a path in code naming something
//! defined in another file; a parent declaring `mod child;` or re-exporting a child's
//! item is not an import) and fails naming each circle with the line that makes each
//! edge. The unit tests below show it fails on a synthetic tree with a circle.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod graph;
mod modules;

use std::path::{Path, PathBuf};

use graph::Graph;
use modules::Crate;

/// The root files of every target of the workspace's members, from `cargo metadata`.
fn workspace_roots() -> (PathBuf, Vec<(String, PathBuf)>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout).expect("metadata JSON");
    let root = PathBuf::from(meta["workspace_root"].as_str().expect("workspace_root"));
    let mut roots = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            let name = format!(
                "{} ({} {})",
                package["name"].as_str().unwrap_or("?"),
                target["kind"][0].as_str().unwrap_or("?"),
                target["name"].as_str().unwrap_or("?")
            );
            let src = PathBuf::from(target["src_path"].as_str().expect("src_path"));
            roots.push((name, src));
        }
    }
    (root, roots)
}

/// The circles of the crate rooted at `root`, file names relative to `base`.
fn circles(root: &Path, base: &Path) -> Result<Vec<String>, String> {
    let krate = Crate::read(root)?;
    Ok(Graph::of(&krate, base).cycles())
}

#[test]
fn no_file_circles_in_any_crate() {
    let (base, roots) = workspace_roots();
    assert!(
        roots.len() > 10,
        "cargo metadata listed only {} targets",
        roots.len()
    );
    let mut failures = Vec::new();
    for (name, root) in &roots {
        match circles(root, &base) {
            Ok(found) => {
                for circle in found {
                    failures.push(format!("{name}: {circle}"));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    failures.sort();
    failures.dedup();
    assert!(
        failures.is_empty(),
        "file circles (each `a.rs:LINE (path) -> b.rs` is a use in a.rs of something defined in b.rs; \
         move what both sides need into a file under both):\n  {}",
        failures.join("\n  ")
    );
}

#[cfg(test)]
mod synthetic {
    use super::*;

    /// Writes `files` (path, text) under a fresh directory and returns the circles of
    /// the crate rooted at its `lib.rs`.
    fn circles_of(files: &[(&str, &str)]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        circles(&dir.path().join("lib.rs"), dir.path()).unwrap()
    }

    #[test]
    fn a_use_circle_is_named_with_its_lines() {
        let found = circles_of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "b.rs",
                "pub struct B;\n\nfn f() -> crate::a::A { crate::a::A }\n",
            ),
        ]);
        assert_eq!(
            found,
            vec!["a.rs:1 (crate::b::B) -> b.rs:3 (crate::a::A) -> a.rs".to_owned()]
        );
    }

    #[test]
    fn a_circle_through_a_re_export_and_super_is_found() {
        // engine.rs uses lazy's client by the re-exported name; client.rs uses the
        // engine through `super::super`: a circle between the two files.
        let found = circles_of(&[
            ("lib.rs", "pub mod lazy;\npub mod migrate;\n"),
            ("lazy/mod.rs", "mod client;\npub use client::Client;\n"),
            (
                "lazy/client.rs",
                "pub struct Client;\nfn f() { super::super::migrate::engine::run(); }\n",
            ),
            ("migrate/mod.rs", "pub mod engine;\n"),
            (
                "migrate/engine.rs",
                "use crate::lazy::Client;\npub fn run() {}\n",
            ),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("migrate/engine.rs:1 (crate::lazy::Client) -> lazy/client.rs"));
        assert!(found[0].contains("lazy/client.rs:2 (super::super::migrate::engine::run)"));
    }

    #[test]
    fn a_parent_declaring_and_re_exporting_its_children_is_no_circle() {
        let found = circles_of(&[
            (
                "lib.rs",
                "pub mod store;\npub use store::Store;\npub struct Root;\n",
            ),
            (
                "store/mod.rs",
                "mod error;\npub use error::Error;\npub trait Store {}\n",
            ),
            (
                "store/error.rs",
                "use super::Store;\nuse crate::Root;\npub struct Error;\nfn f(_: &dyn Store) {}\n",
            ),
            ("store/tests.rs", "use super::*;\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_glob_import_circle_is_found() {
        let found = circles_of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::*;\npub fn fa() { fb(); }\n"),
            ("b.rs", "pub fn fb() { crate::a::fa(); }\n"),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
    }
}
