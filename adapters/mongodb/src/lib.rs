//! tern adapter for mongodb. Work in progress: [`open`] is the entry point the CLI
//! and the integration tests call.
#![deny(missing_docs)]

use std::sync::Arc;

use tern_core::store::{Error, ErrorKind, Store, url};

/// Opens the store named by `url`.
///
/// # Errors
/// Always, until the adapter is written.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    Err(Error::new(
        ErrorKind::Unsupported,
        format!(
            "the mongodb adapter is not written yet; store URL {}",
            url::redact(url)
        ),
    ))
}
