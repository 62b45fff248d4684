//! `rediss://` against redis-servers of the test's own, with a CA and
//! certificates the test makes (rcgen): a migration and lazy-client commands
//! over TLS as an ACL user with a client certificate, and the refusals (a
//! plain connection to the TLS port, a wrong CA, an expired certificate, one
//! for another host), each naming the URL and never the password.
//!
//! And a Redis Cluster of three masters with TLS on the client ports and the
//! cluster bus (`tls-cluster yes`), made by `redis-cli --tls --cluster create`:
//! a migration over `rediss://...?cluster=1` as the ACL user.
//!
//! Needs `redis-server` built with TLS (Debian's is) on the PATH (and `redis-cli`
//! for the cluster); without them the tests print why and are skipped. Servers
//! listen on 127.0.0.1:6401-6405 and 6410-6412 (the cluster, bus ports
//! 16410-16412) and are stopped when the tests end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::lazy::LazyClient;
use tern_core::migrate::{Migration, Migrator};
use tern_core::model::{Key, Value};
use tern_core::store::Store;
use tern_redis::{RedisConfig, RedisLazy, RedisStore};
use tern_testkit::server::LocalServer;
use tern_testkit::tls::{self, Leaf, TestPki};

const USER: &str = "tern_tls";
const PASSWORD: &str = "tls-Secret-9f3";

/// A CA (`ca.pem`), another CA that signed nothing here (`other-ca.pem`), a
/// server certificate for 127.0.0.1 (`server.pem`/`.key`), an expired one
/// (`expired.pem`/`.key`), one for another host (`elsewhere.pem`/`.key`) and a
/// client certificate (`client.pem`/`.key`), all signed by the CA, in a
/// folder of their own.
fn make_pki() -> (TestPki, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(dir.path());
    pki.issue("server", Leaf::SERVER);
    pki.issue(
        "expired",
        Leaf {
            expired: true,
            ..Leaf::SERVER
        },
    );
    pki.issue(
        "elsewhere",
        Leaf {
            hosts: &["elsewhere.example"],
            ..Leaf::default()
        },
    );
    pki.issue("client", Leaf::CLIENT);
    (pki, dir)
}

/// Why redis-server with TLS cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    match Command::new("redis-server").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        _ => Some("redis-server is not on the PATH".to_owned()),
    }
}

/// Starts redis-server on the TLS port `port` with the server certificate
/// `cert` (`cert.pem`/`cert.key` of `pki`), client certificates of the CA
/// required, and only the ACL user [`USER`].
fn start_tls_server(pki: &TestPki, port: u16, cert: &str) -> LocalServer {
    start_tls_server_with(pki, port, cert, &[])
}

/// [`start_tls_server`] with more redis-server arguments (`extra`).
fn start_tls_server_with(pki: &TestPki, port: u16, cert: &str, extra: &[&str]) -> LocalServer {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("users.acl");
    std::fs::write(
        &acl,
        format!("user default off\nuser {USER} on >{PASSWORD} ~* &* +@all\n"),
    )
    .unwrap();
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", "0", "--tls-port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--tls-cert-file")
        .arg(pki.path(&format!("{cert}.pem")))
        .arg("--tls-key-file")
        .arg(pki.path(&format!("{cert}.key")))
        .arg("--tls-ca-cert-file")
        .arg(pki.path("ca.pem"))
        .arg("--dir")
        .arg(dir.path())
        .arg("--aclfile")
        .arg(&acl)
        .args(extra);
    LocalServer::start(&mut cmd, port, Duration::from_secs(10)).keeping(dir)
}

/// `path` as a URL option's value.
fn encoded(path: &Path) -> String {
    path.display()
        .to_string()
        .replace('%', "%25")
        .replace(' ', "%20")
}

/// The `rediss://` URL of the server on `port` as [`USER`], trusting
/// `ca` and presenting the client certificate.
fn tls_url(pki: &TestPki, port: u16, ca: &str, prefix: &str) -> String {
    format!(
        "rediss://{USER}:{PASSWORD}@127.0.0.1:{port}/?prefix={prefix}&tls_ca_file={}&tls_cert_file={}&tls_key_file={}",
        encoded(&pki.path(ca)),
        encoded(&pki.path("client.pem")),
        encoded(&pki.path("client.key")),
    )
}

/// The error of connecting to `url`, with its causes, as a user sees it.
async fn connect_error(url: &str) -> String {
    let config = RedisConfig::from_url(url).unwrap();
    tls::connect_error(url, RedisStore::connect(config)).await
}

fn key(kind: &str, id: &str) -> Key {
    Key {
        kind: kind.to_owned(),
        id: Value::from(id),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_and_lazy_commands_over_tls_as_an_acl_user() {
    if let Some(reason) = unavailable() {
        eprintln!("skipped: Redis over TLS: {reason}");
        return;
    }
    let (pki, _dir) = make_pki();
    let _server = start_tls_server(&pki, 6401, "server");
    let url = tls_url(&pki, 6401, "ca.pem", "tern_tls");
    let store = Arc::new(
        RedisStore::connect(RedisConfig::from_url(&url).unwrap())
            .await
            .unwrap(),
    );
    let mut set = tls::seed_posts(store.as_ref(), &["1", "2", "3"]).await;
    let lazy = Migration::from_script(2, "stars", "0002_stars.tern", "lazy\nadd post.stars = 5\n")
        .unwrap();
    set.add(lazy.clone()).unwrap();
    Migrator::new(store.clone(), set).up(None).await.unwrap();
    let post = store.get(&key("post", "2")).await.unwrap().unwrap();
    assert_eq!(post.value.get("likes"), Some(&Value::from(0)), "{post:?}");

    // The lazy client, and a Redis command through it, over the same TLS store.
    let client = LazyClient::builder(store.clone())
        .declare("post", 2)
        .code(lazy)
        .connect()
        .await
        .unwrap();
    let lazy_ops = RedisLazy::new(Arc::clone(&store), client);
    assert_eq!(
        lazy_ops
            .hincr_by(&key("post", "3"), "stars", 1)
            .await
            .unwrap(),
        6
    );
    let post = lazy_ops
        .client()
        .get(&key("post", "1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(post.value.get("stars"), Some(&Value::from(5)), "{post:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_name_the_url_never_the_password() {
    if let Some(reason) = unavailable() {
        eprintln!("skipped: Redis over TLS refusals: {reason}");
        return;
    }
    let (pki, _dir) = make_pki();
    let _good = start_tls_server(&pki, 6402, "server");
    let _expired = start_tls_server(&pki, 6403, "expired");
    let _elsewhere = start_tls_server(&pki, 6404, "elsewhere");
    let check = |err: &str, port: u16, says: &[&str]| {
        assert!(
            err.contains(&format!("127.0.0.1:{port}")),
            "no URL in: {err}"
        );
        assert!(!err.contains(PASSWORD), "the password in: {err}");
        for s in says {
            assert!(err.contains(s), "no {s:?} in: {err}");
        }
    };

    // A plain connection to the TLS port.
    let plain = format!("redis://{USER}:{PASSWORD}@127.0.0.1:6402/?prefix=tern_tls");
    let err = connect_error(&plain).await;
    check(
        &err,
        6402,
        &["cannot connect to Redis at redis://", "rediss://"],
    );

    // A CA that did not sign the server's certificate.
    let err = connect_error(&tls_url(&pki, 6402, "other-ca.pem", "tern_tls")).await;
    check(&err, 6402, &["certificate", "tls_ca_file"]);

    // The system's roots only: the test CA is not among them.
    let no_ca = format!("rediss://{USER}:{PASSWORD}@127.0.0.1:6402/?prefix=tern_tls");
    let err = connect_error(&no_ca).await;
    check(&err, 6402, &["certificate", "give its CA with tls_ca_file"]);

    // An expired certificate, and one for another host.
    let err = connect_error(&tls_url(&pki, 6403, "ca.pem", "tern_tls")).await;
    check(&err, 6403, &["certificate", "xpired"]);
    let err = connect_error(&tls_url(&pki, 6404, "ca.pem", "tern_tls")).await;
    check(&err, 6404, &["certificate", "not valid for name"]);

    // A wrong password over a good TLS connection.
    let wrong = tls_url(&pki, 6402, "ca.pem", "tern_tls").replace(PASSWORD, "not-it-77");
    let err = connect_error(&wrong).await;
    assert!(!err.contains("not-it-77"), "{err}");
    assert!(err.contains("127.0.0.1:6402"), "{err}");

    // A CA file that does not exist: the file named, before any connection.
    let missing = tls_url(&pki, 6402, "missing-ca.pem", "tern_tls");
    let err = connect_error(&missing).await;
    check(
        &err,
        6402,
        &["cannot read the TLS CA file", "missing-ca.pem"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_on_a_tls_redis_cluster() {
    if let Some(reason) = unavailable() {
        eprintln!("skipped: a Redis Cluster over TLS: {reason}");
        return;
    }
    if Command::new("redis-cli").arg("--version").output().is_err() {
        eprintln!("skipped: a Redis Cluster over TLS: redis-cli is not on the PATH");
        return;
    }
    let (pki, _dir) = make_pki();
    let ports = [6410u16, 6411, 6412];
    let _servers: Vec<LocalServer> = ports
        .iter()
        .map(|port| {
            start_tls_server_with(
                &pki,
                *port,
                "server",
                &[
                    "--cluster-enabled",
                    "yes",
                    "--tls-cluster",
                    "yes",
                    "--cluster-node-timeout",
                    "5000",
                ],
            )
        })
        .collect();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["--tls", "--cacert"])
            .arg(pki.path("ca.pem"))
            .arg("--cert")
            .arg(pki.path("client.pem"))
            .arg("--key")
            .arg(pki.path("client.key"))
            .args(["--user", USER, "--pass", PASSWORD, "--no-auth-warning"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut create = vec!["--cluster", "create"];
    create.extend(nodes.iter().map(String::as_str));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    let (ok, out) = cli(&create);
    assert!(ok, "redis-cli --cluster create over TLS: {out}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ok = ports.iter().all(|p| {
            cli(&["-h", "127.0.0.1", "-p", &p.to_string(), "cluster", "info"])
                .1
                .contains("cluster_state:ok")
        });
        if ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the TLS cluster did not reach cluster_state:ok"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let url = format!("{}&cluster=1", tls_url(&pki, 6410, "ca.pem", "tern_tlsc"));
    let store = Arc::new(
        RedisStore::connect(RedisConfig::from_url(&url).unwrap())
            .await
            .unwrap(),
    );
    let ids: Vec<String> = (0..30).map(|i| i.to_string()).collect();
    let set = tls::seed_posts(store.as_ref(), &ids).await;
    Migrator::new(store.clone(), set).up(None).await.unwrap();
    for id in &ids {
        let post = store.get(&key("post", id)).await.unwrap().unwrap();
        assert_eq!(post.value.get("likes"), Some(&Value::from(0)), "{post:?}");
    }
    // The keys are spread over the three masters (each holds some).
    for port in ports {
        let (_, out) = cli(&["-h", "127.0.0.1", "-p", &port.to_string(), "dbsize"]);
        let keys: u64 = out.trim().parse().unwrap_or(0);
        assert!(keys > 0, "master {port} holds no key: {out}");
    }
}
