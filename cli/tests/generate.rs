//! `tern completions SHELL`, `tern man` and `tern --version`, from the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Project;

#[test]
fn completions_cover_every_command_for_each_shell() {
    // A broken tern.toml does not matter: nothing is read but the definitions.
    let p = Project::new(5_000);
    p.write("tern.toml", "this is not toml = = =");
    let bash = p.ok(&["completions", "bash"]);
    assert!(bash.contains("complete -F _tern"), "{bash}");
    for command in ["up", "sweep", "status", "completions", "man"] {
        assert!(bash.contains(command), "bash completion lacks {command}");
    }
    assert!(
        bash.contains("--max-rate"),
        "bash completion lacks --max-rate"
    );
    let zsh = p.ok(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef tern"), "{zsh}");
    let fish = p.ok(&["completions", "fish"]);
    assert!(fish.contains("complete -c tern"), "{fish}");
    for shell in ["elvish", "powershell"] {
        assert!(!p.ok(&["completions", shell]).is_empty(), "{shell}");
    }
    let err = p.fails(&["completions", "tcsh"], 2);
    assert!(err.contains("bash") && err.contains("zsh"), "{err}");
}

#[test]
fn man_prints_a_page_or_writes_one_per_command() {
    let p = Project::new(5_000);
    let page = p.ok(&["man"]);
    assert!(page.contains(".TH tern 1"), "{page}");
    assert!(
        page.contains("sweep") && page.contains("completions"),
        "{page}"
    );
    p.ok(&["man", "--dir", "man/man1"]);
    for file in ["tern.1", "tern-up.1", "tern-sweep.1", "tern-completions.1"] {
        let text = std::fs::read_to_string(p.path("man/man1").join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.starts_with(".ie"), "{file}: {text}");
        assert!(text.contains(".TH"), "{file}: {text}");
    }
    let up = std::fs::read_to_string(p.path("man/man1/tern-up.1")).unwrap();
    assert!(up.contains("max\\-rate"), "{up}");
}

#[test]
fn version_names_the_commit() {
    let p = Project::new(5_000);
    let version = p.ok(&["--version"]);
    assert!(
        version.starts_with(&format!("tern {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    // Inside this repository's checkout the build script finds the commit; a
    // build without git says so instead (cli/build.rs).
    let in_git = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .is_ok_and(|o| o.status.success());
    if in_git {
        assert!(!version.contains("unknown"), "{version}");
    } else {
        assert!(version.contains("commit unknown"), "{version}");
    }
}
