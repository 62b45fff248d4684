//! The embedded store's facet table (`core/src/store/embedded/docs.md`) says
//! what `Store::features` hands out.

use tern_core::store::Store;
use tern_core::store::embedded::EmbeddedStore;

#[test]
fn the_embedded_docs_table_matches_the_facets() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path().join("facets.redb")).unwrap();
    let docs = include_str!("../src/store/embedded/docs.md");
    if let Err(e) = tern_testkit::facets::check(docs, "embedded", &store.features()) {
        panic!("{e}");
    }
}
