//! Which `Host` a request may name. A server without a password listens on loopback only
//! (`serve` refuses another address without one), and so answers only requests for a loopback
//! host: `localhost` (or a name under `.localhost`), an address in `127.0.0.0/8`, or `[::1]`,
//! at any port. A page of another site that makes its own name resolve to 127.0.0.1 (DNS
//! rebinding) reaches the server with its own name in `Host`, and would otherwise read every
//! session and prune them as if it were the server's own page. A request must name its host
//! (HTTP/1.1 requires `Host`), and one sent with an absolute URL names it there too: both must
//! be loopback, since a server may take either. With a password any host is answered: such a
//! page cannot know the password.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::state::AppState;

/// Answers `403` to a request of a server without a password that names no host
/// ([`ApiError::NoHost`]), or whose `Host`, or the authority of its absolute URL, is not a
/// loopback host ([`ApiError::ForeignHost`]); passes every other request on.
pub(crate) async fn loopback_only(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.options().password.is_none() {
        let Some(host) = request.headers().get(header::HOST) else {
            return ApiError::NoHost.into_response();
        };
        let named = String::from_utf8_lossy(host.as_bytes()).into_owned();
        if !is_loopback(&named) {
            return ApiError::ForeignHost(named).into_response();
        }
        if let Some(authority) = request.uri().authority() {
            if !is_loopback(authority.as_str()) {
                return ApiError::ForeignHost(authority.to_string()).into_response();
            }
        }
    }
    next.run(request).await
}

/// Whether a `Host` value (`name[:port]`, `[v6][:port]`) names a loopback host.
fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]:8080`: the address is what the brackets hold.
        Some(rest) => match rest.split_once(']') {
            Some((address, "")) => address,
            Some((address, port)) if port.strip_prefix(':').is_some_and(is_port) => address,
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        },
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A port after a host's colon: 1 to 5 digits.
fn is_port(digits: &str) -> bool {
    (1..=5).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_at_any_port_are_loopback() {
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "app.localhost:3000",
            "127.0.0.1",
            "127.0.0.1:4096",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback(host), "{host}");
        }
    }

    #[test]
    fn other_names_and_malformed_hosts_are_not() {
        for host in [
            "attacker.example",
            "attacker.example:4096",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:80",
            "[::2]:80",
            "[::1]x",
            "[::1",
            "localhost:",
            "localhost:80:80",
            "localhost:123456",
            "",
            "0.0.0.0",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
