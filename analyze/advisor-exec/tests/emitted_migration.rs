//! From advice to data: the hotel's emitted migration (`build` statements) run by tern's engine
//! on the embedded store over normalized data, then every query answered from the filled
//! column families, with the same answers as the column families loaded directly.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::example;
use tern_advisor::advise::prepare;
use tern_advisor::column_family::ColumnFamily;
use tern_advisor::synthetic::Rng;
use tern_advisor::{Options, migration};
use tern_advisor_exec::data::{cf_rows, generate, normalized};
use tern_advisor_exec::execute::{execute, params};
use tern_advisor_exec::layout::load;
use tern_advisor_exec::{Naming, Written};
use tern_core::migrate::engine::Migrator;
use tern_core::migrate::source::MigrationSet;
use tern_core::store::embedded::EmbeddedStore;
use tern_core::store::{Store, Write};

#[tokio::test]
async fn the_hotels_emitted_migration_fills_every_column_family_and_answers_every_query() {
    if !tern_advisor::solver::AVAILABLE {
        println!("skipped: tern-advisor was built without CBC");
        return;
    }
    let (model, workload) = example("hotel");
    let opts = Options::default();
    let prepared = prepare(&model, &workload, &opts).unwrap_or_else(|e| panic!("{e}"));
    let rec = prepared.recommend(&opts).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store: Arc<dyn Store> = Arc::new(
        EmbeddedStore::open(dir.path().join("hotel.redb")).unwrap_or_else(|e| panic!("{e}")),
    );
    // The normalized data.
    let data = generate(&model, 300, 42);
    let entities = normalized(&model, &data).unwrap_or_else(|e| panic!("{e}"));
    for chunk in entities.chunks(500) {
        store
            .write_batch(chunk.iter().cloned().map(Write::Put).collect())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // The emitted migration: one `build` per column family, each once.
    let migrations = dir.path().join("migrations");
    let files = migration::emit(&model, &rec, &migrations).unwrap_or_else(|e| panic!("{e}"));
    let script_path = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "tern"))
        .unwrap_or_else(|| panic!("no script in {files:?}"));
    let script = std::fs::read_to_string(script_path).unwrap_or_else(|e| panic!("{e}"));
    let builds: Vec<&str> = script.lines().filter(|l| l.starts_with("build ")).collect();
    assert_eq!(builds.len(), rec.column_families.len(), "{script}");
    assert_eq!(
        builds.iter().collect::<BTreeSet<_>>().len(),
        builds.len(),
        "{script}"
    );
    for cf in &rec.column_families {
        assert!(
            builds
                .iter()
                .any(|b| b.starts_with(&format!("build {} from ", cf.name))),
            "{}: {script}",
            cf.name
        );
    }
    let set = MigrationSet::load_dir(&migrations).unwrap_or_else(|e| panic!("{e}"));
    Migrator::new(store.clone(), set)
        .up(None)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{script}"));
    // The same column families loaded directly from the generated data: the reference.
    let mut written = Written::default();
    for cf in &rec.column_families {
        let rows = cf_rows(&model, &data, &cf.definition);
        load(
            store.as_ref(),
            &format!("ref_{}", cf.name),
            &cf.definition,
            rows,
            &mut written,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let name_of: BTreeMap<usize, &str> = rec
        .column_families
        .iter()
        .filter_map(|cf| Some((prepared.pool.find(&cf.definition)?, cf.name.as_str())))
        .collect();
    assert_eq!(name_of.len(), rec.column_families.len());
    let naming = Naming::columns(&model);
    let mut answered = 0;
    for (i, (name, _, _, space)) in prepared.queries.iter().enumerate() {
        let (_, steps) = space
            .cheapest(|j| name_of.contains_key(&j))
            .unwrap_or_else(|| panic!("{name}: no plan over the recommendation"));
        let cfs: Vec<&ColumnFamily> = steps
            .iter()
            .map(|&s| &prepared.pool.candidates[space.steps[s].cf])
            .collect();
        let built: Vec<String> = steps
            .iter()
            .map(|&s| name_of[&space.steps[s].cf].to_owned())
            .collect();
        let reference: Vec<String> = built.iter().map(|k| format!("ref_{k}")).collect();
        let mut rng = Rng::new(7 + i as u64);
        for _ in 0..5 {
            let p = params(&model, &data, &space.query, &mut rng);
            let got = execute(store.as_ref(), &built, &cfs, &p, &naming)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let want = execute(store.as_ref(), &reference, &cfs, &p, &Naming::Indices)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let (got, want): (BTreeSet<_>, BTreeSet<_>) =
                (got.into_iter().collect(), want.into_iter().collect());
            assert_eq!(got, want, "{name} over {built:?}");
            answered += usize::from(!got.is_empty());
        }
    }
    assert!(answered > 0, "no query found a row");
}
