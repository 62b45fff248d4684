//! The facet table of `src/docs.md` says what `Store::features` hands out, on
//! the server at `TERN_IT_MONGODB_URL` (skipped, saying so, where it is unset).

#[tokio::test]
async fn the_docs_table_matches_the_facets() {
    let Ok(url) = std::env::var("TERN_IT_MONGODB_URL") else {
        eprintln!(
            "skipped: TERN_IT_MONGODB_URL is not set (scripts/servers.sh start mongodb; \
             eval \"$(scripts/servers.sh env)\")"
        );
        return;
    };
    // Opening writes nothing: any database name will do.
    let (main, query) = url.split_once('?').unwrap_or((&url, ""));
    let (scheme, rest) = main.split_once("://").unwrap_or(("mongodb", main));
    let host = rest.split('/').next().unwrap_or(rest);
    let url = format!("{scheme}://{host}/tern_facets_check?{query}");
    let store = tern_mongodb::open(url.trim_end_matches('?'))
        .await
        .unwrap_or_else(|e| panic!("opening {url}: {e}"));
    if let Err(e) =
        tern_testkit::facets::check(include_str!("../src/docs.md"), "MongoDB", &store.features())
    {
        panic!("{e}");
    }
}
