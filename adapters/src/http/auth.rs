//! Authentication: with a password set, every request must carry it, as a bearer token
//! (`Authorization: Bearer PASSWORD`) or as the password of HTTP basic auth (any user name).
//! Comparisons take the same time whatever the guess.

use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use base64::Engine as _;
use subtle::ConstantTimeEq;

/// The server's password. Never printed (its `Debug` hides it).
#[derive(Clone)]
pub struct Password(String);

impl Password {
    /// A password; `None` for an empty one (which could not protect anything).
    pub fn new(password: String) -> Option<Self> {
        (!password.is_empty()).then_some(Self(password))
    }

    /// Whether the request's `Authorization` header carries this password. A missing,
    /// malformed or wrong header is `false`.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
        else {
            return false;
        };
        let Some((scheme, credentials)) = value.split_once(' ') else {
            return false;
        };
        let credentials = credentials.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return self.matches(credentials.as_bytes());
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credentials) else {
                return false;
            };
            // RFC 7617: user-id ":" password; the user name is not checked.
            return match decoded.iter().position(|&b| b == b':') {
                Some(colon) => self.matches(&decoded[colon + 1..]),
                None => false,
            };
        }
        false
    }

    fn matches(&self, given: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(given).into()
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    fn basic(user_and_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_and_password)
        )
    }

    #[test]
    fn bearer_and_basic_carry_the_password() {
        let password = Password::new("s3cret:x".into()).unwrap();
        assert!(password.admits(&with("Bearer s3cret:x")));
        assert!(password.admits(&with("bearer  s3cret:x ")));
        assert!(password.admits(&with(&basic("anyone:s3cret:x"))));
        assert!(password.admits(&with(&basic(":s3cret:x"))));
    }

    #[test]
    fn anything_else_is_refused() {
        let password = Password::new("s3cret".into()).unwrap();
        assert!(!password.admits(&HeaderMap::new()));
        assert!(!password.admits(&with("Bearer s3cre")));
        assert!(!password.admits(&with("Bearer s3cret2")));
        assert!(!password.admits(&with("s3cret")));
        assert!(!password.admits(&with("Token s3cret")));
        assert!(!password.admits(&with(&basic("s3cret"))));
        assert!(!password.admits(&with("Basic !!!")));
        assert!(Password::new(String::new()).is_none());
    }
}
