//! Build script of tern-cli: the commit `tern --version` names.
//!
//! `TERN_BUILD_COMMIT`, when set, wins (a build from a source archive can say
//! where it came from); otherwise `git rev-parse` in the source tree; without
//! git or outside a checkout the version says so instead of failing the build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TERN_BUILD_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match std::env::var("TERN_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => Some(c.trim().to_owned()),
        _ => {
            // Rebuild when HEAD moves: HEAD itself, the branch it names, packed refs.
            if let Some(git_dir) = git(&dir, &["rev-parse", "--absolute-git-dir"]) {
                println!("cargo:rerun-if-changed={git_dir}/HEAD");
                if let Some(common) = git(&dir, &["rev-parse", "--git-common-dir"]) {
                    let common = dir.join(common);
                    println!(
                        "cargo:rerun-if-changed={}",
                        common.join("packed-refs").display()
                    );
                    if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
                        println!("cargo:rerun-if-changed={}", common.join(branch).display());
                    }
                }
            }
            git(&dir, &["rev-parse", "--short=12", "HEAD"])
        }
    };
    let described = match commit {
        Some(c) => format!("commit {c}"),
        None => "commit unknown: built outside a git checkout".to_owned(),
    };
    println!("cargo:rustc-env=TERN_BUILD_COMMIT_INFO={described}");
}
