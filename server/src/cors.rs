//! Cross-origin access from browsers (CORS): the origins `serve --allow-origin` names, and the
//! layer that answers their preflights and marks the answers to them (tower-http's). Without
//! an allowed origin no CORS header is sent: a browser shows a page of another origin nothing.

use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// An origin as a browser sends it in `Origin`: `http` or `https`, `://`, a host and an
/// optional port, and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin(HeaderValue);

impl Origin {
    /// Parses `text` (e.g. `http://localhost:5173`); `None` for anything with a path, a
    /// trailing slash, a user, a query, or another scheme.
    pub fn parse(text: &str) -> Option<Self> {
        let uri: axum::http::Uri = text.parse().ok()?;
        let scheme = uri.scheme_str()?;
        let authority = uri.authority()?;
        let plain = matches!(scheme, "http" | "https")
            && !authority.as_str().contains('@')
            && !authority.host().is_empty()
            && format!("{scheme}://{authority}") == text;
        if !plain {
            return None;
        }
        HeaderValue::from_str(text).ok().map(Self)
    }

    /// Whether a request's `Origin` header value is this origin (ASCII case aside: a browser
    /// sends scheme and host in lowercase).
    pub(crate) fn names(&self, origin: &HeaderValue) -> bool {
        self.0.as_bytes().eq_ignore_ascii_case(origin.as_bytes())
    }
}

/// The CORS policy for `origins`: the methods the API has (`GET`, `POST`), the headers its
/// clients send (the password in `Authorization`, JSON bodies, the event stream's
/// `Last-Event-ID`), preflights cached for 10 minutes. No credentials mode: the password
/// travels in `Authorization`, which a page sets itself.
pub(crate) fn layer(origins: &[Origin]) -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins.iter().map(|o| o.0.clone())))
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("last-event-id"),
        ])
        .max_age(Duration::from_secs(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_scheme_host_and_port_is_an_origin() {
        for good in [
            "http://localhost:5173",
            "https://example.com",
            "http://127.0.0.1:8080",
            "http://[::1]:3000",
        ] {
            assert!(Origin::parse(good).is_some(), "{good}");
        }
        for bad in [
            "",
            "localhost:5173",
            "http://localhost:5173/",
            "http://localhost/app",
            "ftp://x.org",
            "http://user@x.org",
            "http://x.org?q=1",
            "*",
            "null",
            "http://",
        ] {
            assert!(Origin::parse(bad).is_none(), "{bad}");
        }
    }
}
