//! The error chain the CLI prints (`outer: cause: cause`): every layer says its
//! own part once, no cause is dropped, and a URL's password never shows.
//!
//! The store errors come from the real drivers, failing to reach a closed port
//! on 127.0.0.1, so no server is needed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tern_cli::{render_chain, render_error};
use tern_core::migrate::MigrateError;
use tern_core::migrate::source::MigrationSet;

const PASSWORD: &str = "s3cret";

/// The messages of the chain, outermost first.
fn causes(err: &anyhow::Error) -> Vec<String> {
    err.chain().map(ToString::to_string).collect()
}

/// No message of the chain contains the message of a cause below it, the
/// rendered line is the whole chain, and the password shows nowhere.
fn assert_clean(err: &anyhow::Error) -> String {
    let causes = causes(err);
    for (i, outer) in causes.iter().enumerate() {
        for inner in &causes[i + 1..] {
            assert!(
                !outer.contains(inner.as_str()),
                "the message {outer:?} repeats its cause {inner:?}\nchain: {causes:#?}"
            );
        }
    }
    let rendered = render_error(err);
    assert_eq!(rendered, causes.join(": "));
    for shown in [rendered.clone(), format!("{err:?}"), format!("{err:#}")] {
        assert!(!shown.contains(PASSWORD), "the password shows: {shown}");
    }
    rendered
}

async fn open_err(url: &str) -> anyhow::Error {
    match tern_cli::connect::open(url).await {
        Ok(_) => panic!("{url} opened: something listens on port 1 of 127.0.0.1"),
        Err(e) => e,
    }
}

/// Opens `url` (nothing listens there), asserts the error is clean, shows
/// the URL as `masked` and says "Connection refused" once; returns it.
async fn refused_once(url: &str, masked: &str) -> String {
    let rendered = assert_clean(&open_err(url).await);
    assert!(rendered.contains(masked), "{rendered}");
    assert_eq!(
        rendered.matches("Connection refused").count(),
        1,
        "{rendered}"
    );
    rendered
}

#[tokio::test]
async fn an_unreachable_redis_server_is_said_once_with_its_url() {
    refused_once("redis://:s3cret@127.0.0.1:1", "redis://:***@127.0.0.1:1").await;
}

#[tokio::test]
async fn an_unreachable_mongodb_server_is_said_once_with_its_url() {
    let rendered = refused_once(
        "mongodb://app:s3cret@127.0.0.1:1/db?serverSelectionTimeoutMS=300",
        "mongodb://app:***@127.0.0.1:1/db",
    )
    .await;
    // The driver's own Display adds its labels and the Debug form of its sources.
    assert!(!rendered.contains("labels: {}"), "{rendered}");
}

#[tokio::test]
async fn an_unreachable_cassandra_server_is_said_once_with_its_url() {
    refused_once(
        "cassandra://app:s3cret@127.0.0.1:1/ks",
        "cassandra://app:***@127.0.0.1:1/ks",
    )
    .await;
}

#[tokio::test]
async fn a_driver_refusing_the_url_is_said_once() {
    let err = open_err("redis://:s3cret@127.0.0.1:1/not-a-db-number").await;
    let rendered = assert_clean(&err);
    assert!(
        rendered.contains("the Redis URL is not valid"),
        "{rendered}"
    );
    // An unencoded `/` in the password: the driver refuses it, and the whole
    // password is masked (the userinfo ends at the last `@`).
    let err = open_err("mongodb://app:s3cret/x@127.0.0.1:1/db").await;
    let rendered = assert_clean(&err);
    assert!(!rendered.contains("x@"), "{rendered}");
}

#[tokio::test]
async fn a_migration_error_over_a_store_error_says_each_layer_once() {
    let config = tern_redis::RedisConfig::from_url("redis://:s3cret@127.0.0.1:1").unwrap();
    let store_err = match tern_redis::RedisStore::connect(config).await {
        Ok(_) => panic!("something listens on port 1 of 127.0.0.1"),
        Err(e) => e,
    };
    let migrate = MigrateError::store("reading tern's state")(store_err);
    let rendered_migrate = render_chain(&migrate);
    let err = anyhow::Error::new(migrate).context("status failed");
    let rendered = assert_clean(&err);
    assert_eq!(rendered, format!("status failed: {rendered_migrate}"));
    assert!(
        rendered.starts_with("status failed: store operation failed: reading tern's state: store unavailable: cannot connect to Redis at redis://:***@127.0.0.1:1"),
        "{rendered}"
    );
    assert_eq!(
        rendered.matches("Connection refused").count(),
        1,
        "{rendered}"
    );
}

#[test]
fn a_parse_error_names_the_file_line_and_column_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0001_blog.tern"),
        "add user.x = 1\nrename user.y = z\n",
    )
    .unwrap();
    let err = MigrationSet::load_dir(dir.path()).unwrap_err();
    assert!(matches!(err, MigrateError::Parse(_)), "{err:?}");
    let err = anyhow::Error::new(err);
    let rendered = assert_clean(&err);
    assert_eq!(
        rendered.matches("0001_blog.tern:2:15:").count(),
        1,
        "{rendered}"
    );
    assert!(
        rendered.contains("expected `to` after the property"),
        "{rendered}"
    );
}

#[test]
fn an_embedded_store_that_cannot_open_names_its_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-folder").join("store.redb");
    let url = format!("embedded:{}", path.display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = match rt.block_on(tern_cli::connect::open(&url)) {
        Ok(_) => panic!("{url} opened in a missing folder"),
        Err(e) => e,
    };
    let rendered = assert_clean(&err);
    let shown = path.display().to_string();
    assert_eq!(rendered.matches(shown.as_str()).count(), 1, "{rendered}");
}

/// A cause whose text happens to be part of an outer message is still printed.
#[test]
fn a_cause_inside_the_outer_message_is_kept() {
    let err = anyhow::Error::new(std::io::Error::other("denied"))
        .context("access denied to migrations/0001_a.tern");
    assert_eq!(
        render_error(&err),
        "access denied to migrations/0001_a.tern: denied"
    );
    // Empty messages are skipped.
    let err = anyhow::Error::new(std::io::Error::other("")).context("outer");
    assert_eq!(render_error(&err), "outer");
}
