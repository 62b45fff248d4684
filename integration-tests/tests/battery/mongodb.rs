//! The battery on mongodb, the store contract, and MongoDB-specific tests.

tern_core::battery_tests!("mongodb", tern_integration_tests::mongodb::backend());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_missing_database_and_unreachable_server_are_clear_errors() {
    let e = tern_mongodb::open("mongodb://127.0.0.1:27017")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), tern_core::store::ErrorKind::ConfigInvalid);
    let e = tern_mongodb::open(
        "mongodb://app:s3cretpw@127.0.0.1:1/db?serverSelectionTimeoutMS=500&connectTimeoutMS=500",
    )
    .await
    .unwrap_err();
    let text = format!("{e}");
    assert_eq!(e.kind(), tern_core::store::ErrorKind::Unavailable, "{text}");
    assert!(e.is_temporary());
    assert!(!text.contains("s3cretpw"), "{text}");
    assert!(text.contains("mongodb://app:***@127.0.0.1:1/db"), "{text}");
}
