//! `serve --allow-origin ORIGIN` on a real server: a browser's preflight from an allowed origin
//! is answered without the password, and every answer to that origin carries its CORS headers,
//! refusals included, while the password is still required; another origin, or a server with no
//! `--allow-origin`, gets no CORS header at all. A malformed origin is bad input (exit 2).

use crate::common;

use common::cli::{assert_exit, run};
use common::http::{client, events_path, Server, WORKSPACE};
use common::*;
use reqwest::blocking::Response;

const ALLOWED: &str = "http://localhost:5173";
const OTHER: &str = "http://evil.example";
const PASSWORD: &str = "open sesame";

fn allow_origin(response: &Response) -> Option<String> {
    response
        .headers()
        .get("access-control-allow-origin")
        .map(|v| v.to_str().expect("ASCII").to_string())
}

fn preflight(server: &Server, origin: &str) -> Response {
    client()
        .request(reqwest::Method::OPTIONS, server.route("prune"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .expect("preflight")
}

fn workspaces(server: &Server, origin: &str, password: bool) -> Response {
    let mut request = client()
        .get(server.url("/api/workspaces"))
        .header("origin", origin);
    if password {
        request = request.bearer_auth(PASSWORD);
    }
    request.send().expect("GET")
}

#[test]
fn an_allowed_origin_gets_its_headers_and_still_needs_the_password() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &["--allow-origin", ALLOWED, "--password", PASSWORD]);

    let answer = preflight(&server, ALLOWED);
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(allow_origin(&answer).as_deref(), Some(ALLOWED));
    let methods = answer.headers()["access-control-allow-methods"]
        .to_str()
        .expect("ASCII")
        .to_ascii_uppercase();
    assert!(
        methods.contains("POST") && methods.contains("GET"),
        "{methods}"
    );
    let headers = answer.headers()["access-control-allow-headers"]
        .to_str()
        .expect("ASCII")
        .to_ascii_lowercase();
    for needed in ["authorization", "content-type", "last-event-id"] {
        assert!(headers.contains(needed), "{headers}");
    }
    assert_eq!(allow_origin(&preflight(&server, OTHER)), None);

    let with = workspaces(&server, ALLOWED, true);
    assert_eq!(with.status().as_u16(), 200);
    assert_eq!(allow_origin(&with).as_deref(), Some(ALLOWED));
    let without = workspaces(&server, ALLOWED, false);
    assert_eq!(
        without.status().as_u16(),
        401,
        "the password is still required"
    );
    assert_eq!(allow_origin(&without).as_deref(), Some(ALLOWED));
    let other = workspaces(&server, OTHER, true);
    assert_eq!(other.status().as_u16(), 200);
    assert_eq!(allow_origin(&other), None);

    // The event stream too.
    let stream = client()
        .get(server.url(&events_path(WORKSPACE)))
        .header("origin", ALLOWED)
        .bearer_auth(PASSWORD)
        .send()
        .expect("events");
    assert_eq!(stream.status().as_u16(), 200);
    assert_eq!(allow_origin(&stream).as_deref(), Some(ALLOWED));
    drop(stream);
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn without_allow_origin_no_origin_gets_a_cors_header() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    assert_eq!(allow_origin(&preflight(&server, ALLOWED)), None);
    let answer = client()
        .get(server.url("/api/workspaces"))
        .header("origin", ALLOWED)
        .send()
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(allow_origin(&answer), None);
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn a_malformed_origin_is_bad_input() {
    let fx = Fixture::new();
    for bad in [
        "localhost:5173",
        "http://localhost:5173/",
        "http://localhost/app",
        "*",
    ] {
        let out = run(&fx.db, &["serve", "--allow-origin", bad]);
        assert_exit(&out, 2);
        let words = String::from_utf8_lossy(&out.stderr);
        assert!(words.contains("--allow-origin"), "{bad}: {words}");
    }
    assert!(!fx.journal.exists(), "nothing was opened");
}
