//! Who may call a server: bearer keys as OpenAI clients send them, compared in constant time,
//! and whether an address reaches other machines. Shared by `serve` and `env-pool serve`.

/// The token of an `Authorization` header value; the scheme is case-insensitive (RFC 9110).
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Compares keys in time that depends only on their lengths, so the answer's timing does not
/// reveal how much of a guess was right.
pub fn same_key(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// Why a request's `Authorization` header does not carry `key`; `None` when it does, or when
/// no key is asked (`key` empty).
pub fn refusal(authorization: Option<&str>, key: &str) -> Option<&'static str> {
    if key.is_empty() {
        return None;
    }
    match authorization {
        None => Some("Missing bearer token (Authorization: Bearer <key>)."),
        Some(v) if bearer(v).is_some_and(|k| same_key(k, key)) => None,
        Some(_) => Some("Incorrect API key provided."),
    }
}

/// Whether `host` is reachable from this machine only.
pub fn loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_keys_compare_whole() {
        assert_eq!(bearer("Bearer k1"), Some("k1"));
        assert_eq!(bearer("bearer  k1 "), Some("k1"));
        assert_eq!(bearer("BEARER k1"), Some("k1"));
        assert_eq!(bearer("Basic k1"), None);
        assert_eq!(bearer("k1"), None);
        assert!(same_key("secret", "secret"));
        assert!(!same_key("secre", "secret"));
        assert!(!same_key("secretx", "secret"));
        assert!(!same_key("Secret", "secret"));
        assert!(!same_key("", "secret"));
        assert_eq!(refusal(None, ""), None);
        assert_eq!(refusal(Some("Bearer secret"), "secret"), None);
        assert!(refusal(None, "secret").unwrap().contains("Missing"));
        assert!(refusal(Some("Bearer nope"), "secret")
            .unwrap()
            .contains("Incorrect"));
    }

    #[test]
    fn loopback_names_this_machine_only() {
        for h in ["127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"] {
            assert!(loopback(h), "{h}");
        }
        for h in ["0.0.0.0", "::", "192.0.2.1", "example.org"] {
            assert!(!loopback(h), "{h}");
        }
    }
}
