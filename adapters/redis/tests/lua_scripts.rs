//! The Lua folder (`lua/`) and its README agree, and the adapter loads every script
//! there: a script added without a README line, or left behind unused, fails here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;

fn names_in(dir: &Path, ext: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(ext))
        .collect()
}

#[test]
fn the_readme_lists_every_script_and_the_adapter_loads_each() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scripts = names_in(&root.join("lua"), ".lua");
    assert!(scripts.len() >= 10, "lua/ holds only {scripts:?}");
    let readme = std::fs::read_to_string(root.join("lua/README.md")).unwrap();
    let listed: BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(name, _)| name.to_owned()))
        .collect();
    assert_eq!(
        listed, scripts,
        "lua/README.md's table and the folder differ"
    );
    let mut sources = String::new();
    for name in names_in(&root.join("src"), ".rs") {
        sources.push_str(&std::fs::read_to_string(root.join("src").join(name)).unwrap());
    }
    for script in &scripts {
        assert!(
            sources.contains(&format!("include_str!(\"../lua/{script}\")")),
            "lua/{script} is loaded by no file of src/"
        );
    }
}
