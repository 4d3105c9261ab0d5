//! A server without a password answers only requests that name a loopback host: a page of
//! another site that resolves its own name to 127.0.0.1 (DNS rebinding) gets `403` for every
//! route, the page included, and prunes nothing, as does a request that names no host or names
//! another in an absolute URL; with a password any `Host` is answered.

use crate::common;

use common::http::{client, parse, Server, FIXTURE_DIRECTORY, WORKSPACE};
use common::{Fixture, MANY_TURNS, TURN5};
use serde_json::json;

/// `method url` with `Host: host` (and the password, if any); the status and the body.
fn with_host(
    method: &str,
    url: &str,
    host: &str,
    password: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut request = match method {
        "GET" => client().get(url),
        _ => client()
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string()),
    };
    request = request.header("host", host);
    if let Some(password) = password {
        request = request.bearer_auth(password);
    }
    let response = request.send().expect("request");
    (response.status().as_u16(), response.text().expect("body"))
}

#[test]
fn a_foreign_host_is_refused_on_every_route_and_prunes_nothing() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    let port = server.address.rsplit_once(':').unwrap().1.to_string();
    let preview = format!("/api/workspaces/{WORKSPACE}/session-pruning/preview");
    let prune = format!("/api/workspaces/{WORKSPACE}/session-pruning/prune");
    let ask = json!({ "sessionID": MANY_TURNS, "messageID": TURN5 }).to_string();

    // The server's own names are answered.
    for host in ["127.0.0.1", "localhost", "[::1]"] {
        let (status, _) = with_host(
            "GET",
            &server.url("/health"),
            &format!("{host}:{port}"),
            None,
            "",
        );
        assert_eq!(status, 200, "{host}");
    }
    let (status, answer) = with_host("POST", &server.url(&preview), "localhost", None, &ask);
    assert_eq!(status, 200, "{answer}");
    let answer = parse(&answer);
    let body = json!({
        "sessionID": MANY_TURNS, "messageID": TURN5,
        "revision": answer["revision"], "indexes": [1, 2],
    })
    .to_string();

    // Another name is refused, whatever the route.
    let (database, journal) = (fx.file_digest(), fx.journal_digest());
    let foreign = format!("attacker.example:{port}");
    for (method, path, body) in [
        ("GET", "/".to_string(), ""),
        ("GET", "/health".to_string(), ""),
        ("GET", "/api/workspaces".to_string(), ""),
        ("POST", preview.clone(), ask.as_str()),
        ("POST", prune.clone(), body.as_str()),
    ] {
        let (status, text) = with_host(method, &server.url(&path), &foreign, None, body);
        assert_eq!(status, 403, "{method} {path}: {text}");
        assert_eq!(
            parse(&text)["error"],
            format!(
                "this server has no password and answers only requests for localhost, \
                 127.0.0.1 or [::1], not for {foreign}: open it at http://127.0.0.1:PORT/, or \
                 set a password (`SESSION_PRUNE_PASSWORD`) to serve it under another name"
            ),
            "{method} {path}"
        );
    }
    assert_eq!(fx.file_digest(), database);
    assert_eq!(fx.journal_digest(), journal);
    drop(server);
}

#[test]
fn with_a_password_any_host_is_answered() {
    let fx = Fixture::new();
    let server = Server::start_exactly(
        &fx.db,
        &[
            "--workspace".into(),
            format!("{WORKSPACE}={FIXTURE_DIRECTORY}"),
        ],
        &[("SESSION_PRUNE_PASSWORD", "s3cret")],
    );
    let (status, _) = with_host(
        "GET",
        &server.url("/health"),
        "proxy.example",
        Some("s3cret"),
        "",
    );
    assert_eq!(status, 200);
    // Without the password it is the password that is missing.
    let (status, _) = with_host("GET", &server.url("/health"), "proxy.example", None, "");
    assert_eq!(status, 401);
}

/// Sends `request_line` and `headers` (each ending `\r\n`) with `body` on a connection of its
/// own, as a client that is not a browser can; the status and the whole answer.
fn raw(server: &Server, request_line: &str, headers: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(&server.address).expect("connect");
    let request = format!(
        "{request_line}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status: {answer}"));
    (status, answer)
}

#[test]
fn a_request_naming_no_host_or_a_foreign_one_in_its_url_is_refused_and_prunes_nothing() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    let prune = format!("/api/workspaces/{WORKSPACE}/session-pruning/prune");
    let (status, answer) = with_host(
        "POST",
        &server.url(&format!(
            "/api/workspaces/{WORKSPACE}/session-pruning/preview"
        )),
        "localhost",
        None,
        &json!({ "sessionID": MANY_TURNS, "messageID": TURN5 }).to_string(),
    );
    assert_eq!(status, 200, "{answer}");
    let body = json!({
        "sessionID": MANY_TURNS, "messageID": TURN5,
        "revision": parse(&answer)["revision"], "indexes": [1, 2],
    })
    .to_string();
    let (database, journal) = (fx.file_digest(), fx.journal_digest());

    // HTTP/1.0 and HTTP/1.1 without `Host`.
    for version in ["HTTP/1.0", "HTTP/1.1"] {
        let (status, answer) = raw(&server, &format!("POST {prune} {version}"), "", &body);
        assert_eq!(status, 403, "{version}: {answer}");
        assert!(
            answer.contains("answers only requests that name their host"),
            "{version}: {answer}"
        );
    }
    // An absolute URL of another host, with a loopback `Host`.
    let (status, answer) = raw(
        &server,
        &format!("POST http://attacker.example{prune} HTTP/1.1"),
        "Host: 127.0.0.1\r\n",
        &body,
    );
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("not for attacker.example"), "{answer}");
    // The same absolute URL naming the server itself is answered.
    let (status, answer) = raw(
        &server,
        "GET http://127.0.0.1/health HTTP/1.1",
        "Host: 127.0.0.1\r\n",
        "",
    );
    assert_eq!(status, 200, "{answer}");

    assert_eq!(fx.file_digest(), database);
    assert_eq!(fx.journal_digest(), journal);
    drop(server);
}
