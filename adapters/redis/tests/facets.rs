//! The facet table of `src/docs.md` says what `Store::features` hands out, in
//! each configuration it has a column for: one server (`TERN_IT_REDIS_URL`),
//! with `json=*`, a cluster (`TERN_IT_REDIS_CLUSTER_URL`), with `id_tag=1`.
//! A configuration whose server's variable is unset is skipped, saying so.

/// `url` with `option` added to its query.
fn with(url: &str, option: &str) -> String {
    if url.contains('?') {
        format!("{url}&{option}")
    } else {
        format!("{}/?{option}", url.trim_end_matches('/'))
    }
}

#[tokio::test]
async fn the_docs_table_matches_the_facets() {
    let docs = include_str!("../src/docs.md");
    let one = std::env::var("TERN_IT_REDIS_URL").ok();
    let cluster = std::env::var("TERN_IT_REDIS_CLUSTER_URL").ok();
    let columns = [
        ("one server", one.clone()),
        ("`json=*`", one.map(|u| with(&u, "json=*"))),
        ("cluster", cluster.clone()),
        ("cluster, `id_tag=1`", cluster.map(|u| with(&u, "id_tag=1"))),
    ];
    let mut checked = 0;
    for (column, url) in columns {
        let Some(url) = url else {
            eprintln!(
                "skipped column {column}: its server's URL is not set (scripts/servers.sh start \
                 redis|cluster; eval \"$(scripts/servers.sh env)\")"
            );
            continue;
        };
        let url = with(&url, "prefix=tern_facets_check");
        let store = tern_redis::open(&url)
            .await
            .unwrap_or_else(|e| panic!("opening {url}: {e}"));
        if let Err(e) = tern_testkit::facets::check(docs, column, &store.features()) {
            panic!("{e}");
        }
        checked += 1;
    }
    eprintln!("{checked} of 4 columns checked");
}
