//! Certificates for the TLS tests (`rediss://`, MongoDB over TLS, the `tern`
//! binary's `[tls]` files): a test CA and the certificates it signs, written as
//! PEM files into a folder of the test's own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use tern_core::migrate::{Migration, MigrationSet};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, StoreExt};

/// A certificate authority of a test, and the files of what it signed.
///
/// [`TestPki::new`] writes the CA's certificate to `ca.pem` and that of another
/// CA, which signs nothing, to `other-ca.pem` (the wrong CA of the refusal
/// tests); [`TestPki::issue`] writes certificates signed by the CA.
pub struct TestPki {
    dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPki").field("dir", &self.dir).finish()
    }
}

/// What a certificate of [`TestPki::issue`] names, and whether it is expired.
#[derive(Debug, Clone, Copy, Default)]
pub struct Leaf<'a> {
    /// Its DNS names (subject alternative names).
    pub hosts: &'a [&'a str],
    /// Whether 127.0.0.1 is one of its subject alternative names.
    pub loopback: bool,
    /// Valid in 2020 only: expired.
    pub expired: bool,
}

impl Leaf<'_> {
    /// A server's certificate for `localhost` and 127.0.0.1.
    pub const SERVER: Leaf<'static> = Leaf {
        hosts: &["localhost"],
        loopback: true,
        expired: false,
    };
    /// A client's certificate (no name).
    pub const CLIENT: Leaf<'static> = Leaf {
        hosts: &[],
        loopback: false,
        expired: false,
    };
}

/// The parameters of a CA certificate named `name`.
fn ca_params(name: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Distinct names: a certificate named like its issuer looks self-signed.
    p.distinguished_name.push(DnType::CommonName, name);
    p
}

/// Adds to a server's command line its certificate `dir/server.pem`, its key
/// `dir/server.key` and the CA `dir/ca.pem` it trusts, the CA under the
/// option `ca_option` (`--tls-ca-file` for SecantusDB, `--tls-ca-cert-file`
/// for redis-server).
pub fn server_tls_args<'c>(cmd: &'c mut Command, dir: &Path, ca_option: &str) -> &'c mut Command {
    cmd.arg("--tls-cert-file")
        .arg(dir.join("server.pem"))
        .arg("--tls-key-file")
        .arg(dir.join("server.key"))
        .arg(ca_option)
        .arg(dir.join("ca.pem"))
}

impl TestPki {
    /// A new CA ("tern test CA") whose files go to `dir` (which must exist):
    /// `ca.pem`, and `other-ca.pem` for another CA that signs nothing.
    pub fn new(dir: &Path) -> TestPki {
        let ca =
            CertifiedIssuer::self_signed(ca_params("tern test CA"), KeyPair::generate().unwrap())
                .unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        let other =
            CertifiedIssuer::self_signed(ca_params("another CA"), KeyPair::generate().unwrap())
                .unwrap();
        std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
        TestPki {
            dir: dir.to_owned(),
            ca,
        }
    }

    /// The file `name` of the folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A certificate with the common name `name`, signed by the CA, written to
    /// `name.pem` and its key to `name.key`. Returns both PEM texts (for a file
    /// that holds the two, as MongoDB's `tlsCertificateKeyFile` wants).
    pub fn issue(&self, name: &str, leaf: Leaf<'_>) -> (String, String) {
        let hosts = leaf
            .hosts
            .iter()
            .map(|h| (*h).to_owned())
            .collect::<Vec<_>>();
        let mut p = CertificateParams::new(hosts).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        if leaf.loopback {
            p.subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        }
        if leaf.expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.ca).unwrap();
        let (cert, key) = (cert.pem(), key.serialize_pem());
        std::fs::write(self.path(&format!("{name}.pem")), &cert).unwrap();
        std::fs::write(self.path(&format!("{name}.key")), &key).unwrap();
        (cert, key)
    }
}

/// The error `connect` (a connection attempt to `url`) ends with, and its
/// causes, as a user sees them. Panics when it connects, or when it does not
/// end within 60 s.
pub async fn connect_error<T, E: std::error::Error>(
    url: &str,
    connect: impl std::future::Future<Output = Result<T, E>>,
) -> String {
    let err = match tokio::time::timeout(std::time::Duration::from_secs(60), connect)
        .await
        .unwrap_or_else(|_| panic!("{url}: the connection attempt hangs"))
    {
        Ok(_) => panic!("{url}: connected"),
        Err(e) => e,
    };
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// What every TLS test migrates once connected: a post (kind `post`, with a
/// `title`) at each of `ids`, written to `store`, and the migration set that
/// adds `likes = 0` to them (`0001_likes.tern`), for the test to run and check.
pub async fn seed_posts<S: AsRef<str>>(store: &dyn Store, ids: &[S]) -> MigrationSet {
    for id in ids {
        let id = id.as_ref();
        let mut value = Map::new();
        value.insert("title".into(), Value::from(format!("post {id}")));
        let key = Key {
            kind: "post".to_owned(),
            id: Value::from(id),
        };
        store.put(Entity::new(key, value)).await.unwrap();
    }
    let mut set = MigrationSet::new();
    set.add(Migration::from_script(1, "likes", "0001_likes.tern", "add post.likes = 0\n").unwrap())
        .unwrap();
    set
}
