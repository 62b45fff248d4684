//! Helpers shared by the advisor's tests.
#![allow(dead_code)]

use std::path::PathBuf;

use tern_advisor::{Model, Workload};

/// The repository's examples/advisor directory.
pub(crate) fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/advisor")
}

/// Parses a model from text, panicking with the parse error.
pub(crate) fn model(text: &str) -> Model {
    match Model::parse("test.model", text) {
        Ok(m) => m,
        Err(e) => panic!("model: {e}"),
    }
}

/// Parses a workload from text, panicking with the parse error.
pub(crate) fn workload(model: &Model, text: &str) -> Workload {
    match Workload::parse("test.workload", text, model) {
        Ok(w) => w,
        Err(e) => panic!("workload: {e}"),
    }
}

/// Reads and parses an example pair.
pub(crate) fn example(name: &str) -> (Model, Workload) {
    let dir = examples();
    let m = std::fs::read_to_string(dir.join(format!("{name}.model"))).unwrap_or_default();
    let model = model(&m);
    let w = std::fs::read_to_string(dir.join(format!("{name}.workload"))).unwrap_or_default();
    let workload = workload(&model, &w);
    (model, workload)
}
