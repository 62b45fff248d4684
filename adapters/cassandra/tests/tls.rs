//! TLS and credentials against a real Cassandra node with `client_encryption_options` (TLS
//! required, a test CA) and `PasswordAuthenticator`: `TERN_IT_CASSANDRA_TLS_URL`, started by
//! `scripts/servers.sh start cassandra-tls` (127.0.0.1:9242; its URL names the CA with
//! `tls_ca_file`, and `other-ca.pem` next to it is a CA that signed nothing). Each test logs in
//! as the node's superuser (cassandra/cassandra) to create a role of its own, then runs tern
//! as that role: a migration over TLS, and the refusals (a CA that did not sign the node's
//! certificate, a wrong password, no password, a plain connection to the TLS port), each
//! naming the URL and never the password. Without the variable the tests print why and are
//! skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[allow(dead_code)] // only `unique_keyspace`: this node has a variable of its own
mod server;

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use tern_core::migrate::Migrator;
use tern_core::model::{Key, Value};
use tern_core::store::ErrorKind;

const VAR: &str = "TERN_IT_CASSANDRA_TLS_URL";
const PASSWORD: &str = "tls-Secret-7c1q";

/// The TLS node: its `host:port` and CA file.
struct TlsNode {
    node: String,
    ca: PathBuf,
}

impl TlsNode {
    /// The node, or `None` after printing why `test` is skipped.
    fn find(test: &str) -> Option<TlsNode> {
        let Some(url) = std::env::var(VAR).ok().filter(|u| !u.trim().is_empty()) else {
            eprintln!(
                "{test}: skipped: {VAR} is not set (scripts/servers.sh start cassandra-tls; \
                 eval \"$(scripts/servers.sh env cassandra-tls)\")"
            );
            return None;
        };
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let node = rest.split(['/', '?']).next().unwrap().to_owned();
        let ca = url
            .split_once("tls_ca_file=")
            .map(|(_, p)| PathBuf::from(p.split('&').next().unwrap()))
            .unwrap_or_else(|| panic!("{VAR}={url} names no tls_ca_file"));
        if !ca.is_file() {
            // `servers.sh env` names the CA a start of the node makes: without it the node
            // was not started here.
            eprintln!(
                "{test}: skipped: the CA file {} named by {VAR} does not exist \
                 (scripts/servers.sh start cassandra-tls makes it)",
                ca.display()
            );
            return None;
        }
        Some(TlsNode { node, ca })
    }

    fn other_ca(&self) -> PathBuf {
        self.ca.with_file_name("other-ca.pem")
    }

    /// A session as the node's superuser.
    async fn admin(&self) -> Session {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&self.ca).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        SessionBuilder::new()
            .known_node(&self.node)
            .user("cassandra", "cassandra")
            .tls_context(Some(Arc::new(config)))
            .build()
            .await
            .unwrap()
    }

    /// A new login role with [`PASSWORD`], created as the superuser.
    async fn role(&self, admin: &Session) -> String {
        let role = server::unique_keyspace("tern_role");
        admin
            .query_unpaged(
                format!("CREATE ROLE {role} WITH PASSWORD = '{PASSWORD}' AND LOGIN = true"),
                &[],
            )
            .await
            .unwrap();
        role
    }

    /// The store URL of a fresh keyspace as `userinfo` (`user:password`) with `query`.
    fn url(&self, userinfo: &str, ks: &str, query: &str) -> String {
        let at = if userinfo.is_empty() { "" } else { "@" };
        format!("cassandra://{userinfo}{at}{}/{ks}?{query}", self.node)
    }

    fn ca_query(&self, ca: &std::path::Path) -> String {
        format!("tls_ca_file={}", ca.display())
    }
}

fn key(kind: &str, id: &str) -> Key {
    Key::new(kind, id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_over_tls_as_a_password_role() {
    let Some(node) = TlsNode::find("a_migration_over_tls_as_a_password_role") else {
        return;
    };
    let admin = node.admin().await;
    let role = node.role(&admin).await;
    let ks = server::unique_keyspace("tern_tls");
    let url = node.url(&format!("{role}:{PASSWORD}"), &ks, &node.ca_query(&node.ca));
    let store = tern_cassandra::open(&url).await.unwrap();
    assert!(!store.info().location.contains(PASSWORD));
    let set = tern_testkit::tls::seed_posts(store.as_ref(), &["1", "2", "3"]).await;
    Migrator::new(Arc::clone(&store), set)
        .up(None)
        .await
        .unwrap();
    for id in ["1", "2", "3"] {
        let post = store.get(&key("post", id)).await.unwrap().unwrap();
        assert_eq!(post.value.get("likes"), Some(&Value::from(0)), "{post:?}");
    }
    // The rows are where the role wrote them, as the superuser sees them.
    let rows = admin
        .query_unpaged(format!("SELECT id FROM {ks}.post"), &[])
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .rows_num();
    assert_eq!(rows, 3);
}

async fn connect_error(url: &str) -> tern_core::store::Error {
    match tern_cassandra::open(url).await {
        Ok(_) => panic!("{url}: connected"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_name_the_url_never_the_password() {
    let Some(node) = TlsNode::find("refused_connections_name_the_url_never_the_password") else {
        return;
    };
    let admin = node.admin().await;
    let role = node.role(&admin).await;
    let ks = server::unique_keyspace("tern_tls");
    let check = |err: &tern_core::store::Error, says: &[&str]| {
        let text = format!("{err} {err:?}");
        assert!(
            text.contains(&format!("cassandra://{role}:***@{}", node.node)),
            "no URL in: {text}"
        );
        assert!(!text.contains(PASSWORD), "the password in: {text}");
        for s in says {
            assert!(text.contains(s), "no {s:?} in: {text}");
        }
    };
    let good = format!("{role}:{PASSWORD}");

    // A CA that did not sign the node's certificate.
    let err = connect_error(&node.url(&good, &ks, &node.ca_query(&node.other_ca()))).await;
    check(
        &err,
        &[
            "TLS certificate is not trusted",
            "tls_ca_file",
            "UnknownIssuer",
        ],
    );
    assert_eq!(err.kind(), ErrorKind::ConfigInvalid, "{err}");

    // A wrong password, and none, over a good TLS connection.
    let err = connect_error(&node.url(
        &format!("{role}:not-{PASSWORD}"),
        &ks,
        &node.ca_query(&node.ca),
    ))
    .await;
    assert!(!format!("{err:?}").contains("not-tls"), "{err:?}");
    check(&err, &["refused the user name or password"]);
    assert_eq!(err.kind(), ErrorKind::Rejected, "{err}");
    assert!(!err.is_temporary(), "{err}");
    let err = connect_error(&node.url(&role, &ks, &node.ca_query(&node.ca))).await;
    assert!(
        format!("{err}").contains(&format!("cassandra://{role}@{}", node.node)),
        "{err}"
    );
    assert!(
        format!("{err}").contains("refused the user name or password"),
        "{err}"
    );
    let err = connect_error(&node.url("", &ks, &node.ca_query(&node.ca))).await;
    assert!(
        format!("{err}").contains("requires a user name and password"),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Rejected, "{err}");

    // A plain connection to the TLS port.
    let err = connect_error(&node.url(&good, &ks, "")).await;
    check(&err, &["tls=true"]);
}
