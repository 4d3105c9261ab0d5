//! Which requests may write (docs/http.md, "Requests a page cannot forge"): the routes that
//! prune, restore or change the schedule take a body sent as `application/json` from no
//! origin, the server's own, or one `serve --allow-origin` names.
//!
//! A browser sends a page's `POST` to any server without asking first (no CORS preflight) when
//! its body is `text/plain`, `application/x-www-form-urlencoded` or `multipart/form-data`, or
//! has no type: the answer is withheld from the page, but the write would be done. A JSON body
//! it sends only after a preflight, which a server without `--allow-origin` never admits. And a
//! browser names the page's origin in `Origin` on every `POST`, its own server's included, so
//! a write from a page of another origin is refused by name, password or not. A client that is
//! not a browser (curl, CodeNomad's server) sends no `Origin`.

use axum::http::{header, HeaderMap};

use super::error::ApiError;
use super::state::AppState;

/// Passes a request to a writing route only when its body is declared `application/json`
/// (parameters such as `charset` allowed) and its `Origin`, when it has one, is the server's
/// own (its authority is the request's `Host`) or one of
/// [`crate::ServerOptions::allowed_origins`].
///
/// Errors: [`ApiError::ForeignOrigin`] (403) for another origin, `null` included, or more than
/// one `Origin`; [`ApiError::NotJson`] (415) for a body of another type, none, or more than one
/// `Content-Type` (no browser sends two; a request that does is judged by neither). Checked
/// before the body is read: nothing is journaled or written.
pub(crate) fn refuse_forgeable(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let mut origins = headers.get_all(header::ORIGIN).iter();
    if let (Some(first), Some(_)) = (origins.next(), origins.next()) {
        return Err(ApiError::ForeignOrigin(format!(
            "{} and another",
            String::from_utf8_lossy(first.as_bytes())
        )));
    }
    if headers.get_all(header::CONTENT_TYPE).iter().count() > 1 {
        return Err(ApiError::NotJson);
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = headers
            .get(header::HOST)
            .is_some_and(|host| is_own_origin(origin.as_bytes(), host.as_bytes()));
        let allowed = state
            .options()
            .allowed_origins
            .iter()
            .any(|allowed| allowed.names(origin));
        if !own && !allowed {
            return Err(ApiError::ForeignOrigin(
                String::from_utf8_lossy(origin.as_bytes()).into_owned(),
            ));
        }
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if json {
        Ok(())
    } else {
        Err(ApiError::NotJson)
    }
}

/// Whether `origin` (`scheme://authority`) is the origin of the server a request with `Host:
/// host` reached: an `http` or `https` origin whose authority is `host` (ASCII case aside).
fn is_own_origin(origin: &[u8], host: &[u8]) -> bool {
    let authority = origin
        .strip_prefix(b"http://")
        .or_else(|| origin.strip_prefix(b"https://"));
    authority.is_some_and(|authority| !host.is_empty() && authority.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::is_own_origin;

    #[test]
    fn an_origin_is_the_servers_own_when_its_authority_is_the_host() {
        assert!(is_own_origin(b"http://127.0.0.1:4096", b"127.0.0.1:4096"));
        assert!(is_own_origin(b"https://Prune.Local", b"prune.local"));
        assert!(is_own_origin(b"http://[::1]:80", b"[::1]:80"));
    }

    #[test]
    fn another_authority_scheme_or_null_is_not() {
        assert!(!is_own_origin(b"http://127.0.0.1:4097", b"127.0.0.1:4096"));
        assert!(!is_own_origin(b"http://evil.example", b"127.0.0.1:4096"));
        assert!(!is_own_origin(b"null", b"null"));
        assert!(!is_own_origin(b"ftp://127.0.0.1", b"127.0.0.1"));
        assert!(!is_own_origin(b"http://127.0.0.1", b""));
        assert!(!is_own_origin(b"http://127.0.0.1:4096/", b"127.0.0.1:4096"));
    }
}
