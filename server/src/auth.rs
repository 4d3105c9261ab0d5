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
    /// A password that can travel in an `Authorization` header; `None` for an empty one, one
    /// with spaces at either end (HTTP drops them from a header) or one with control
    /// characters (no header may carry them).
    pub fn new(password: String) -> Option<Self> {
        let usable = !password.is_empty()
            && password.trim() == password
            && !password.chars().any(char::is_control);
        usable.then_some(Self(password))
    }

    /// Whether the request's `Authorization` header carries this password (compared as bytes,
    /// so a UTF-8 password works in both forms). A missing, malformed or wrong header is
    /// `false`.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers
            .get(AUTHORIZATION)
            .map(|v| v.as_bytes().trim_ascii())
        else {
            return false;
        };
        let Some(space) = value.iter().position(|&b| b == b' ') else {
            return false;
        };
        let (scheme, credentials) = (&value[..space], value[space..].trim_ascii());
        if scheme.eq_ignore_ascii_case(b"bearer") {
            return self.matches(credentials);
        }
        if scheme.eq_ignore_ascii_case(b"basic") {
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
        assert!(Password::new(" padded ".into()).is_none());
        assert!(Password::new("line\nbreak".into()).is_none());
    }

    #[test]
    fn a_utf8_password_works_as_a_bearer_token() {
        let password = Password::new("pässwört".into()).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_bytes("Bearer pässwört".as_bytes()).unwrap(),
        );
        assert!(password.admits(&headers));
    }
}
