//! Store URLs: the scheme decides the adapter; passwords never reach a message.

/// `url` with any password replaced by `***`, for messages and logs.
///
/// `mongodb://app:s3cret@127.0.0.1:27017/db` becomes `mongodb://app:***@127.0.0.1:27017/db`;
/// a password in a query parameter (`?password=...`, or any parameter whose
/// name ends in `password`, `pass` or `pwd`) is masked too. The userinfo ends at
/// the last `@` before the query, so a password holding an unencoded `/` or
/// `@` is masked whole.
pub fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    // From the end, so that the earlier ranges stay valid.
    for range in password_ranges(url).into_iter().rev() {
        out.replace_range(range, "***");
    }
    out
}

/// `text` (a driver's message about `url`) with every password of `url`
/// replaced by `***`, as written and percent-decoded.
///
/// For the text of a driver's error about a connection, which tern does not
/// control: `redis://:s3cret@h/0` and `failed for s3cret` give `failed for ***`.
pub fn scrub(text: &str, url: &str) -> String {
    let mut out = text.to_owned();
    for range in password_ranges(url) {
        let written = &url[range];
        for form in [written.to_owned(), percent_decode(written)] {
            if !form.is_empty() {
                out = out.replace(&form, "***");
            }
        }
    }
    out
}

/// Where the passwords of `url` are: in the userinfo, and in the values of
/// password parameters. In order, without overlap.
fn password_ranges(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return ranges;
    };
    let query_start = url[scheme_end..]
        .find('?')
        .map_or(url.len(), |i| scheme_end + i);
    if let Some(at) = url[scheme_end..query_start].rfind('@') {
        let userinfo = &url[scheme_end..scheme_end + at];
        if let Some(colon) = userinfo.find(':') {
            ranges.push(scheme_end + colon + 1..scheme_end + at);
        }
    }
    let mut start = query_start + 1;
    while start < url.len() {
        let end = url[start..].find('&').map_or(url.len(), |i| start + i);
        if let Some((name, _)) = url[start..end].split_once('=') {
            let name = name.to_ascii_lowercase();
            if ["password", "pass", "pwd"]
                .iter()
                .any(|p| name.ends_with(p))
            {
                ranges.push(start + name.len() + 1..end);
            }
        }
        start = end + 1;
    }
    ranges
}

/// `%XX` sequences decoded (user names, passwords, file paths in a store
/// URL); anything malformed is kept as written.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

/// The `name=value` pairs of a store URL's query (the part after `?`), in
/// order, as written (decode values with [`percent_decode`] where they may hold
/// reserved characters); empty pairs are skipped and a pair without `=` has an
/// empty value (`?cluster` is `cluster=`).
pub fn query_pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

/// A boolean option's value: `1`, `true`, `yes` or `0`, `false`, `no`
/// (ASCII case ignored); `None` for anything else.
pub fn flag(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Some(true),
        "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// The message for an option of a store URL that the store does not know:
/// names the option (never its value, which may be a password) and lists the
/// known ones.
pub fn unknown_option(name: &str, known: &[&str]) -> String {
    format!("unknown option {name:?}; known: {}", known.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn query_pairs_flags_and_unknown_options() {
        let pairs: Vec<_> = query_pairs("a=1&&cluster&p=x%2Fy&e=").collect();
        assert_eq!(
            pairs,
            vec![("a", "1"), ("cluster", ""), ("p", "x%2Fy"), ("e", "")]
        );
        for (v, want) in [("1", Some(true)), ("TRUE", Some(true)), ("yes", Some(true))] {
            assert_eq!(flag(v), want, "{v}");
        }
        for (v, want) in [
            ("0", Some(false)),
            ("No", Some(false)),
            ("", None),
            ("2", None),
        ] {
            assert_eq!(flag(v), want, "{v}");
        }
        let m = unknown_option("pasword", &["user", "password"]);
        assert_eq!(m, "unknown option \"pasword\"; known: user, password");
    }

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
        // A password with an unencoded `/` or `@`: masked whole.
        assert_eq!(redact("mongodb://a:s3/cr@t@h:1/x"), "mongodb://a:***@h:1/x");
        assert_eq!(
            redact("mongodb://h/db?tlsCertificateKeyFilePassword=pw&pwd=x"),
            "mongodb://h/db?tlsCertificateKeyFilePassword=***&pwd=***"
        );
        assert_eq!(redact("mongodb://h:1/db?w=1"), "mongodb://h:1/db?w=1");
        assert_eq!(redact("redis://h:1/?pass"), "redis://h:1/?pass");
    }

    #[test]
    fn scrub_masks_the_password_in_a_driver_text() {
        let url = "mongodb://app:p%40ss@h:1/db?password=other";
        let text = "auth failed for app:p%40ss (p@ss), then other";
        assert_eq!(scrub(text, url), "auth failed for app:*** (***), then ***");
        assert_eq!(scrub("no password here", "redis://h:1"), "no password here");
        assert_eq!(percent_decode("a%2"), "a%2");
    }

    #[test]
    fn schemes() {
        assert_eq!(scheme("embedded:x.redb").as_deref(), Some("embedded"));
        assert_eq!(scheme("MongoDB://h").as_deref(), Some("mongodb"));
        assert_eq!(scheme("/tmp/x"), None);
    }
}
