//! The real `tern` binary against each server of the integration tests (the
//! `TERN_IT_*_URL` variables, or a container): the blog example's whole
//! workflow ends with the same export as on the embedded store. A backend that
//! is not reachable here is reported skipped, with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Project, RELEASE2, RELEASE3};

/// Imports the blog example, applies releases 2 and 3 and returns the export.
fn workflow(p: &Project) -> String {
    p.import_blog(6, 3);
    p.write("migrations/0001_release2.tern", RELEASE2);
    p.write("migrations/0002_release3.tern", RELEASE3);
    let plan: serde_json::Value = serde_json::from_str(&p.ok(&["plan", "--json"])).unwrap();
    assert_eq!(plan["safe"], true, "{plan}");
    let up: serde_json::Value = serde_json::from_str(&p.ok(&["up", "--json"])).unwrap();
    assert_eq!(up["applied"].as_array().unwrap().len(), 2, "{up}");
    let verify: serde_json::Value = serde_json::from_str(&p.ok(&["verify", "--json"])).unwrap();
    assert_eq!(verify["ok"], true, "{verify}");
    let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    assert_eq!(status["migrations"][1]["state"], "applied", "{status}");
    assert!(p.ok(&["lock"]).contains("free"));
    assert!(p.ok(&["up"]).contains("up to date"));
    p.ok(&["export"])
}

fn embedded_export() -> String {
    workflow(&Project::new(5_000))
}

/// Runs the workflow on the store at `url` (or prints why it is skipped).
fn on_server(backend: &str, url: Result<String, String>) {
    let url = match url {
        Ok(url) => url,
        Err(reason) => {
            eprintln!("skipped: tern CLI on {backend}: {reason}");
            return;
        }
    };
    let export = workflow(&Project::on(&url, 5_000));
    assert!(!export.is_empty());
    assert_eq!(
        export,
        embedded_export(),
        "{backend}: the same entities as on the embedded store"
    );
    eprintln!("tern CLI on {backend}: passed");
}

/// [`on_server`] on a thread that may block (it runs the `tern` binary).
async fn on_server_blocking(backend: &'static str, url: Result<String, String>) {
    tokio::task::spawn_blocking(move || on_server(backend, url))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_on_redis_ends_like_on_the_embedded_store() {
    let url = tern_integration_tests::redis::backend()
        .await
        .map(|b| b.fresh_url());
    on_server_blocking("redis", url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_on_mongodb_ends_like_on_the_embedded_store() {
    let url = tern_integration_tests::mongodb::backend()
        .await
        .map(|b| b.url_for(&tern_integration_tests::common::unique_name("tern_cli")));
    on_server_blocking("mongodb", url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_on_cassandra_ends_like_on_the_embedded_store() {
    let url = tern_integration_tests::cassandra::backend()
        .await
        .map(|b| b.fresh_url());
    on_server_blocking("cassandra", url).await;
}

/// An unreachable server: exit 1 and a message with the URL, never the password.
#[test]
fn an_unreachable_server_is_named_without_its_password() {
    for url in [
        "redis://:s3cret@127.0.0.1:1",
        "mongodb://app:s3cret@127.0.0.1:1/db?serverSelectionTimeoutMS=500",
        "cassandra://127.0.0.1:1/ks",
    ] {
        let p = Project::on(url, 5_000);
        let err = p.fails(&["status"], 1);
        assert!(!err.contains("s3cret"), "{err}");
        let shown = url.replace("s3cret", "***");
        let host = shown.split('?').next().unwrap();
        assert!(err.contains(host), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "one line, no driver log: {err}");
    }
}
