//! TLS of a `rediss://` store: the files of [`TlsFiles`] read into the
//! driver's certificates, and the crypto provider rustls uses.

use redis::{ClientTlsConfig, TlsCertificates};
use tern_core::store::{Error, ErrorKind, Result};

use crate::config::{RedisConfig, TlsFiles};

/// Installs rustls's `ring` provider as the process's default, once, unless
/// one is installed already. The driver builds its TLS configuration with the
/// default provider; with two providers compiled into one binary (scylla's
/// rustls brings `aws-lc-rs`, the MongoDB driver's `ring`) rustls cannot
/// choose one and would panic.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err: another thread installed one meanwhile, which serves as well.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// The certificates of `config`'s TLS files, read now (`None`: no TLS, or
/// TLS with the system's roots and no client certificate).
pub(crate) fn certificates(config: &RedisConfig) -> Result<Option<TlsCertificates>> {
    let Some(files) = &config.tls else {
        return Ok(None);
    };
    install_crypto_provider();
    if *files == TlsFiles::default() {
        return Ok(None);
    }
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read(path).map_err(|e| {
            Error::new(
                ErrorKind::ConfigInvalid,
                format!("cannot read the TLS {what} {}: {e}", path.display()),
            )
            .with_context("url", config.redacted.clone())
        })
    };
    let root_cert = match &files.ca_file {
        Some(path) => Some(read(path, "CA file (tls_ca_file)")?),
        None => None,
    };
    let client_tls = match (&files.cert_file, &files.key_file) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig {
            client_cert: read(cert, "client certificate (tls_cert_file)")?,
            client_key: read(key, "client key (tls_key_file)")?,
        }),
        _ => None,
    };
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}
