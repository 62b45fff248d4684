//! MongoDB over TLS with SCRAM credentials, against a SecantusDB of the
//! test's own (127.0.0.1:27101) started with `--tls-cert-file`,
//! `--tls-ca-file`, `--tls-require-client-cert` and `--auth`, with a CA and
//! certificates the test makes (rcgen): a migration as an authenticated user
//! over TLS with a client certificate (`tls=true`, `tlsCAFile`,
//! `tlsCertificateKeyFile`), and the refusals (a plain connection, a wrong
//! CA, no client certificate, a wrong password), each naming the URL and
//! never the password.
//!
//! SecantusDB's `secantusd-py` is found at `$TERN_SECANTUSD`, else in the
//! venv of `scripts/servers.sh` (`$TERN_STATE_DIR/venv`, default
//! `.tern-servers/venv`), else on the PATH; without it the test prints why
//! and is skipped. What SecantusDB does not offer (x.509 authentication,
//! `MONGODB-X509`) is not tested: see the adapter's docs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::doc;
use tern_core::migrate::Migrator;
use tern_core::model::{Key, Value};
use tern_core::store::Store;
use tern_mongodb::{MongoConfig, MongoStore};
use tern_testkit::server::{LocalServer, secantusd};
use tern_testkit::tls::{Leaf, TestPki, connect_error, seed_posts, server_tls_args};

const PORT: u16 = 27101;
const USER: &str = "tern_tls";
const PASSWORD: &str = "mongo-Secret-4e1";

/// Starts SecantusDB over TLS on [`PORT`] with the storage `dir/data`;
/// `auth` adds `--auth` and `--tls-require-client-cert`.
fn start(bin: &Path, dir: &Path, auth: bool) -> LocalServer {
    let mut cmd = Command::new(bin);
    cmd.args(["--host", "127.0.0.1", "--port", &PORT.to_string()])
        .arg("--storage-path")
        .arg(dir.join("data"));
    server_tls_args(&mut cmd, dir, "--tls-ca-file");
    if auth {
        cmd.args(["--auth", "--tls-require-client-cert"]);
    }
    LocalServer::start(&mut cmd, PORT, Duration::from_secs(60))
}

/// Writes a CA (`ca.pem`), another (`other-ca.pem`), the server's certificate
/// for 127.0.0.1 (`server.pem`/`.key`) and the client's certificate with its
/// key in one file (`client.pem`, as `tlsCertificateKeyFile` wants) to `dir`.
fn make_pki(dir: &Path) {
    let pki = TestPki::new(dir);
    pki.issue("server", Leaf::SERVER);
    let (cert, key) = pki.issue("client", Leaf::CLIENT);
    std::fs::write(dir.join("client.pem"), format!("{cert}{key}")).unwrap();
}

/// The URL of the test server, with `credentials` (`user:pass@` or empty)
/// and `options` after the database's.
fn url(credentials: &str, options: &str) -> String {
    format!(
        "mongodb://{credentials}127.0.0.1:{PORT}/tern_tls?authSource=admin&serverSelectionTimeoutMS=4000{options}"
    )
}

/// The TLS options trusting `ca` in `dir`, with the client certificate or not.
fn tls(dir: &Path, ca: &str, client: bool) -> String {
    let mut options = format!("&tls=true&tlsCAFile={}", dir.join(ca).display());
    if client {
        options.push_str(&format!(
            "&tlsCertificateKeyFile={}",
            dir.join("client.pem").display()
        ));
    }
    options
}

/// The error of opening the store at `url`, with its causes.
async fn open_error(url: &str) -> String {
    let config = MongoConfig::from_url(url).unwrap();
    connect_error(url, MongoStore::connect(config)).await
}

fn key(id: &str) -> Key {
    Key {
        kind: "post".to_owned(),
        id: Value::from(id),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_over_tls_as_a_scram_user_and_the_refusals() {
    let bin = match secantusd() {
        Ok(bin) => bin,
        Err(reason) => {
            eprintln!("skipped: MongoDB over TLS: {reason}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    make_pki(dir);

    // SecantusDB's way to a first user: create it without --auth, restart with it.
    {
        let _server = start(&bin, dir, false);
        let options = mongodb::options::ClientOptions::parse(url("", &tls(dir, "ca.pem", false)))
            .await
            .unwrap();
        let client = mongodb::Client::with_options(options).unwrap();
        client
            .database("admin")
            .run_command(doc! {"createUser": USER, "pwd": PASSWORD, "roles": ["root"]})
            .await
            .unwrap();
    }
    let _server = start(&bin, dir, true);
    let good = url(&format!("{USER}:{PASSWORD}@"), &tls(dir, "ca.pem", true));
    let store = Arc::new(
        MongoStore::connect(MongoConfig::from_url(&good).unwrap())
            .await
            .unwrap(),
    );
    let set = seed_posts(store.as_ref(), &["1", "2"]).await;
    Migrator::new(store.clone(), set).up(None).await.unwrap();
    let post = store.get(&key("2")).await.unwrap().unwrap();
    assert_eq!(post.value.get("likes"), Some(&Value::from(0)), "{post:?}");

    let check = |err: &str, says: &[&str]| {
        assert!(
            err.contains(&format!("127.0.0.1:{PORT}")),
            "no URL in: {err}"
        );
        assert!(!err.contains(PASSWORD), "the password in: {err}");
        for s in says {
            assert!(err.contains(s), "no {s:?} in: {err}");
        }
    };
    // A plain connection to the TLS server.
    let err = open_error(&url(&format!("{USER}:{PASSWORD}@"), "")).await;
    check(&err, &["mongodb: connecting failed"]);
    // A CA that did not sign the server's certificate.
    let err = open_error(&url(
        &format!("{USER}:{PASSWORD}@"),
        &tls(dir, "other-ca.pem", true),
    ))
    .await;
    check(&err, &["certificate"]);
    // No client certificate where the server requires one.
    let err = open_error(&url(
        &format!("{USER}:{PASSWORD}@"),
        &tls(dir, "ca.pem", false),
    ))
    .await;
    check(&err, &["mongodb: connecting failed"]);
    // A wrong password.
    let err = open_error(&url(
        &format!("{USER}:not-it-55@"),
        &tls(dir, "ca.pem", true),
    ))
    .await;
    assert!(!err.contains("not-it-55"), "{err}");
    check(&err, &["uthentication"]);
}
