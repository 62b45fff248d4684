//! Store URLs: the scheme decides the adapter; passwords never reach a message.

/// `url` with any password replaced by `***`, for messages and logs.
///
/// `mongodb://app:s3cret@127.0.0.1:27017/db` becomes `mongodb://app:***@127.0.0.1:27017/db`;
/// a password in a query parameter (`?password=...`) is masked too.
pub fn redact(url: &str) -> String {
    let mut out = match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find(['/', '?']) {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            let authority = match authority.rsplit_once('@') {
                Some((userinfo, host)) => match userinfo.split_once(':') {
                    Some((user, _)) => format!("{user}:***@{host}"),
                    None => format!("{userinfo}@{host}"),
                },
                None => authority.to_owned(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => url.to_owned(),
    };
    for key in ["password=", "pass=", "pwd="] {
        let mut search = 0;
        while let Some(i) = out[search..].find(key) {
            let start = search + i + key.len();
            let end = out[start..].find('&').map_or(out.len(), |j| start + j);
            out.replace_range(start..end, "***");
            search = start + 3;
        }
    }
    out
}

/// The scheme of a store URL (`embedded`, `mongodb`, `redis`, `cassandra`, `memory`), lowercased.
pub fn scheme(url: &str) -> Option<String> {
    let end = url.find(':')?;
    let scheme = &url[..end];
    (!scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+'))
    .then(|| scheme.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact("mongodb://app:s3cret@127.0.0.1:27017/db"),
            "mongodb://app:***@127.0.0.1:27017/db"
        );
        assert_eq!(
            redact("redis://:pw@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact("cassandra://u@h:9042/ks"), "cassandra://u@h:9042/ks");
        assert_eq!(
            redact("mongodb://h/db?password=x&w=1"),
            "mongodb://h/db?password=***&w=1"
        );
        assert_eq!(redact("embedded:data/tern.redb"), "embedded:data/tern.redb");
        assert!(!redact("mongodb://a:p%40ss@h:1/x").contains("p%40ss"));
    }

    #[test]
    fn schemes() {
        assert_eq!(scheme("embedded:x.redb").as_deref(), Some("embedded"));
        assert_eq!(scheme("MongoDB://h").as_deref(), Some("mongodb"));
        assert_eq!(scheme("/tmp/x"), None);
    }
}
