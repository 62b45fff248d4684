//! TLS to the cluster: the driver's rustls configuration, from the files of
//! [`CassTls`], built with the `ring` crypto provider named explicitly.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tern_core::store::{Error, ErrorKind, Result};

use crate::config::CassTls;

/// The client configuration of `tls` (`shown`: the URL for messages).
///
/// The provider is named here rather than taken from the process default:
/// scylla's rustls brings `aws-lc-rs` and the MongoDB driver's `ring`, and
/// with both compiled in rustls has no default to take.
///
/// # Errors
/// [`ErrorKind::ConfigInvalid`] for a file that cannot be read or holds no
/// certificate or key, naming the file.
pub(crate) fn client_config(tls: &CassTls, shown: &str) -> Result<Arc<rustls::ClientConfig>> {
    let invalid = |message: String| {
        Error::new(ErrorKind::ConfigInvalid, message).with_context("url", shown.to_owned())
    };
    let certificates = |path: &Path, what: &str| -> Result<Vec<CertificateDer<'static>>> {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(Iterator::collect::<std::result::Result<Vec<_>, _>>)
            .map_err(|e| {
                invalid(format!(
                    "cannot read the TLS {what} {}: {e}",
                    path.display()
                ))
            })?;
        if certs.is_empty() {
            return Err(invalid(format!(
                "the TLS {what} {} holds no PEM certificate",
                path.display()
            )));
        }
        Ok(certs)
    };
    let mut roots = RootCertStore::empty();
    match &tls.ca_file {
        Some(path) => {
            for cert in certificates(path, "CA file (tls_ca_file)")? {
                roots.add(cert).map_err(|e| {
                    invalid(format!(
                        "the TLS CA file (tls_ca_file) {}: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(invalid(
                    "TLS without tls_ca_file uses the system's trusted roots, and none were found; \
                     give the CA with tls_ca_file"
                        .to_owned(),
                ));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS: {e}")))?
        .with_root_certificates(roots);
    let config = match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert, "client certificate (tls_cert_file)")?;
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                invalid(format!(
                    "cannot read the TLS client key (tls_key_file) {}: {e}",
                    key.display()
                ))
            })?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| invalid(format!("the TLS client certificate and key: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_files_are_config_errors_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("tern-cass-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "no certificate here").unwrap();
        for (tls, says) in [
            (
                CassTls {
                    ca_file: Some(dir.join("missing.pem")),
                    ..CassTls::default()
                },
                "cannot read the TLS CA file (tls_ca_file)",
            ),
            (
                CassTls {
                    ca_file: Some(not_pem.clone()),
                    ..CassTls::default()
                },
                "holds no PEM certificate",
            ),
        ] {
            let err = client_config(&tls, "cassandra://u:***@h/ks").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConfigInvalid);
            let text = err.to_string();
            assert!(text.contains(says), "{text}");
            assert!(text.contains("cassandra://u:***@h/ks"), "{text}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
