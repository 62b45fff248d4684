//! The store URL and what it configures.

use mongodb::options::ConnectionString;
use tern_core::store::{Error, ErrorKind, Result, url};

/// The URL scheme of this adapter.
pub const MONGO_SCHEME: &str = "mongodb";

/// The parsed configuration of a MongoDB store:
/// `mongodb://[user:pass@]host:port/database[?driver options]` (or `mongodb+srv://`).
/// The path names the database whose collections are the kinds; the query holds the
/// driver's own options.
#[derive(Clone)]
pub struct MongoConfig {
    /// The parsed connection string handed to the driver (may hold a password).
    pub(crate) connection: ConnectionString,
    /// The URL as given (may hold a password): only to mask it in driver messages.
    pub(crate) url: String,
    /// The database named by the URL path.
    pub database: String,
    /// The URL for messages: password masked.
    pub redacted: String,
}

impl std::fmt::Debug for MongoConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the connection string: its credential holds the password.
        f.debug_struct("MongoConfig")
            .field("url", &self.redacted)
            .field("database", &self.database)
            .finish_non_exhaustive()
    }
}

impl MongoConfig {
    /// Parses a store URL (no server is contacted).
    ///
    /// # Errors
    /// [`ErrorKind::ConfigInvalid`] for a URL the driver does not parse or one that
    /// names no database. Messages name the URL with its password masked.
    pub fn from_url(store_url: &str) -> Result<MongoConfig> {
        let redacted = url::redact(store_url);
        // Every error of the connection string's syntax is the driver's
        // `InvalidArgument`: a configuration error, its text with the password masked.
        let connection = ConnectionString::parse(store_url).map_err(|e| {
            Error::new(
                ErrorKind::ConfigInvalid,
                "mongodb: parsing the store URL failed",
            )
            .with_driver_error(url::scrub(&e.kind.to_string(), store_url))
            .with_context("url", redacted.clone())
        })?;
        let Some(database) = connection
            .default_database
            .clone()
            .filter(|d| !d.is_empty())
        else {
            return Err(Error::new(
                ErrorKind::ConfigInvalid,
                "the mongodb URL names no database: add it as the path, e.g. mongodb://127.0.0.1:27017/mydb",
            )
            .with_context("url", redacted));
        };
        Ok(MongoConfig {
            connection,
            url: store_url.to_owned(),
            database,
            redacted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_database_and_masks_the_password() {
        let c =
            MongoConfig::from_url("mongodb://app:s3cret@127.0.0.1:27017/shop?appName=x").unwrap();
        assert_eq!(c.database, "shop");
        assert!(!c.redacted.contains("s3cret"), "{}", c.redacted);
        assert!(!format!("{c:?}").contains("s3cret"), "{c:?}");
    }

    #[test]
    fn refuses_urls_without_a_database_or_that_do_not_parse() {
        for bad in [
            "mongodb://app:s3cret@127.0.0.1:27017",
            "mongodb://app:s3cret@127.0.0.1:27017/",
            "redis://app:s3cret@127.0.0.1:6379/db",
            "mongodb://app:s3cret@127.0.0.1:notaport/db",
        ] {
            let err = MongoConfig::from_url(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConfigInvalid, "{bad}: {err}");
            assert!(!err.to_string().contains("s3cret"), "{err}");
            assert!(!format!("{err:?}").contains("s3cret"), "{err:?}");
        }
    }
}
