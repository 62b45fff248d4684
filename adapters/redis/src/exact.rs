//! Whether every number of a JSON text survives tern's reading of it: an
//! integer must fit tern's 64-bit int, any other number must come back as the
//! same decimal value from the 64-bit float it parses to (written in its
//! shortest form: `1.50` as `1.5` and `1e2` as `100.0` do;
//! `3.14159265358979323846`, `123456789012345678901234` and `1e-400` do not).
//! Reading such a text into
//! tern's values and writing it back would lose digits silently, so the
//! adapter keeps a hash field holding one as its text and refuses a
//! JSON-string entity holding one (see `codec::decode_field` and
//! `codec::entity_from_json`).

/// Whether every number in `json` (a text that parsed as JSON) is held
/// exactly by the value tern reads it as.
pub(crate) fn numbers_exact(json: &str) -> bool {
    let bytes = json.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // Skip the string, escapes included.
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                if !number_exact(&json[start..i]) {
                    return false;
                }
            }
            _ => i += 1,
        }
    }
    true
}

/// Whether the JSON number `token` survives: an integer in an `i64`, any other
/// number as the `f64` it parses to, whose shortest form, as the adapter
/// writes it back (`serde_json`'s), has its value.
///
/// The form must be the writer's own: where two shortest forms are equally
/// near the float (`600000000000000.2` and `…0.3` for the float
/// `600000000000000.25`), `serde_json` and Rust's `{:e}` may pick different
/// ones, and the check would pass a number written back with other digits.
fn number_exact(token: &str) -> bool {
    if !token.contains(['.', 'e', 'E']) {
        return token.parse::<i64>().is_ok();
    }
    match token.parse::<f64>() {
        Ok(f) if f.is_finite() => {
            decimal(token) == decimal(&serde_json::Value::from(f).to_string())
        }
        _ => false,
    }
}

/// A decimal number's value as (negative, significant digits without leading
/// or trailing zeros, exponent such that the value is `0.<digits> × 10^exp`);
/// zero has no digits and exponent 0. `None` for an exponent out of range.
pub(crate) fn decimal(token: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match token.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, token),
    };
    let (mantissa, exp) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = int.chars().chain(frac.chars()).collect();
    let lead = digits.len() - digits.trim_start_matches('0').len();
    let significant = digits.trim_matches('0');
    if significant.is_empty() {
        return Some((negative, String::new(), 0));
    }
    let point = i64::try_from(int.len()).ok()? - i64::try_from(lead).ok()?;
    Some((negative, significant.to_owned(), point.checked_add(exp)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_a_float_or_an_int_holds_are_exact() {
        for text in [
            "5",
            "-0",
            "1.50",
            "1e2",
            "1E+2",
            "0.1",
            "-0.0",
            "100.000",
            "9223372036854775807",
            "-9223372036854775808",
            "1.7976931348623157e308",
            "5e-324",
            "[1, 2.5, {\"a\": -3e-1}]",
            "\"3.14159265358979323846 in a string\"",
            "{\"k\\\"1.23456789012345678901\": 0.5}",
            "true",
        ] {
            assert!(numbers_exact(text), "{text}");
        }
    }

    #[test]
    fn numbers_that_would_lose_digits_are_not() {
        for text in [
            "3.14159265358979323846",
            "123456789012345678901234",
            "9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "1e-400",
            "0.30000000000000000001",
            // The float nearest is 600000000000000.25, written back as ….2.
            "600000.0000000003E9",
            "[1, 2.000000000000000000001]",
            "{\"a\": {\"b\": 12345678901234567890.5}}",
        ] {
            assert!(!numbers_exact(text), "{text}");
        }
    }
}
