//! What the advisor-exec tests share: the advisor's examples.

use tern_advisor::{Model, Workload};

/// The model and workload of the example `name` (`examples/advisor/NAME.model`
/// and `NAME.workload`).
pub(crate) fn example(name: &str) -> (Model, Workload) {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/advisor");
    let read = |ext: &str| {
        std::fs::read_to_string(dir.join(format!("{name}.{ext}")))
            .unwrap_or_else(|e| panic!("{name}.{ext}: {e}"))
    };
    let model = Model::parse("m", &read("model")).unwrap_or_else(|e| panic!("{e}"));
    let workload =
        Workload::parse("w", &read("workload"), &model).unwrap_or_else(|e| panic!("{e}"));
    (model, workload)
}
