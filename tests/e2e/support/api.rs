//! The client of OpenCode's own HTTP API (`opencode serve`) in the interop tests: one JSON
//! request at a time with reqwest's blocking client, answered by its status and body.

use std::error::Error;
use std::time::Duration;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::blocking::Client;
use reqwest::header::ACCEPT;
use reqwest::Method;
use serde_json::Value;

/// A response: status code and body.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Body (lossy UTF-8).
    pub body: String,
}

impl Response {
    /// The body as JSON; panics with the body when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "response (HTTP {}) is not JSON ({e}): {}",
                self.status, self.body
            )
        })
    }
}

/// One request `method path_and_query` to `base` (`http://HOST:PORT`), with `body` as JSON when
/// given, on a connection of its own, bounded by `timeout`.
///
/// Errors (as text, naming the request): a method that is not one, no connection, no complete
/// answer within `timeout`.
pub fn http(
    base: &str,
    method: &str,
    path_and_query: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Response, String> {
    send(base, None, method, path_and_query, body, timeout)
}

/// [`http`] with HTTP basic authentication as `user` with `password` (OpenCode 2's service asks
/// for user `opencode` and the password in its `service.json`).
pub fn http_basic(
    base: &str,
    (user, password): (&str, &str),
    method: &str,
    path_and_query: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Response, String> {
    send(
        base,
        Some((user, password)),
        method,
        path_and_query,
        body,
        timeout,
    )
}

fn send(
    base: &str,
    basic: Option<(&str, &str)>,
    method: &str,
    path_and_query: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Response, String> {
    let fail = |e: &dyn Error| {
        let mut text = format!("{method} {path_and_query}: {e}");
        let mut source = e.source();
        while let Some(cause) = source {
            text.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        text
    };
    let verb = Method::from_bytes(method.as_bytes()).map_err(|e| fail(&e))?;
    let client = Client::builder()
        .timeout(timeout)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| fail(&e))?;
    let mut request = client
        .request(verb, format!("{base}{path_and_query}"))
        .header(ACCEPT, "application/json");
    if let Some((user, password)) = basic {
        request = request.basic_auth(user, Some(password));
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().map_err(|e| fail(&e))?;
    let status = response.status().as_u16();
    let body = response.text().map_err(|e| fail(&e))?;
    Ok(Response { status, body })
}

/// What [`query_value`] keeps as it is: unreserved characters and `/`.
const KEPT_IN_QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// Percent-encodes a query value (keeps unreserved characters and `/`).
pub fn query_value(value: &str) -> String {
    utf8_percent_encode(value, KEPT_IN_QUERY).to_string()
}
