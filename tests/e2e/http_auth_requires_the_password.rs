//! With a password (SESSION_PRUNE_PASSWORD or --password) every route needs it, as a bearer
//! token or HTTP basic auth: none or a wrong one is 401 with nothing done, the right one is
//! served. Without a password the server refuses to listen beyond loopback.

use crate::common;

use axum::body::Body;
use axum::http::{Method, Request};
use base64::Engine as _;
use common::app::{json_request, App};
use common::cli::{assert_exit, run};
use common::http::{events_path, with_messages, Server, FIXTURE_DIRECTORY, WORKSPACE};
use common::{Fixture, MANY_TURNS, TURN5};
use pruning_server::{Workspace, Workspaces};
use serde_json::json;

const PASSWORD: &str = "correct horse";

/// The router with the password and the test workspace, as `serve --workspace
/// work=DIR --password PASSWORD` runs it.
fn with_password(fx: &Fixture) -> App {
    let workspaces = Workspaces::Given(vec![Workspace {
        id: WORKSPACE.into(),
        directory: FIXTURE_DIRECTORY.into(),
    }]);
    App::with(fx, workspaces, Some(PASSWORD))
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// A request for `path` with an optional `Authorization` header.
fn request(method: Method, path: &str, body: Body, authorization: Option<&str>) -> Request<Body> {
    let mut request = json_request(method, path, body);
    if let Some(value) = authorization {
        request
            .headers_mut()
            .insert("authorization", value.parse().unwrap());
    }
    request
}

/// `GET path` with an optional `Authorization` header; the status and the JSON error, if any.
fn get_with(app: &App, path: &str, authorization: Option<&str>) -> (u16, serde_json::Value) {
    let answer = app.answer(request(Method::GET, path, Body::empty(), authorization));
    if answer.status == 401 {
        let challenge = answer.headers.get("www-authenticate").cloned();
        assert_eq!(
            challenge.unwrap(),
            r#"Basic realm="session-prune", charset="UTF-8""#
        );
    }
    (answer.status, answer.json())
}

#[test]
fn no_or_wrong_credentials_are_401_and_the_right_ones_are_served() {
    let fx = Fixture::new();
    let app = with_password(&fx);
    let health = "/health";
    for wrong in [
        None,
        Some("Bearer correct horse2".to_string()),
        Some("Bearer correct".to_string()),
        Some(basic("me", "wrong")),
        Some(format!("Token {PASSWORD}")),
    ] {
        let (status, body) = get_with(&app, health, wrong.as_deref());
        assert_eq!(status, 401, "{wrong:?}");
        assert!(
            body["error"].as_str().unwrap().contains("password"),
            "{body}"
        );
    }
    for right in [format!("Bearer {PASSWORD}"), basic("anyone", PASSWORD)] {
        let (status, body) = get_with(&app, health, Some(&right));
        assert_eq!(status, 200, "{right}");
        assert_eq!(body["status"], "ok");
    }
    // Every route, the event stream and unknown routes included.
    let (status, _) = get_with(&app, "/openapi.json", None);
    assert_eq!(status, 401);
    let (status, _) = get_with(&app, "/no/such/route", None);
    assert_eq!(status, 401);
    let (status, _) = get_with(&app, &events_path(WORKSPACE), None);
    assert_eq!(status, 401);
    // The stream itself is not read: its status is enough.
    let stream = app.send(request(
        Method::GET,
        &events_path(WORKSPACE),
        Body::empty(),
        Some(&format!("Bearer {PASSWORD}")),
    ));
    assert_eq!(stream.status().as_u16(), 200);
}

#[test]
fn an_unauthenticated_prune_changes_nothing() {
    let (fx, messages) = with_messages("ses_http_auth", 1);
    let app = with_password(&fx);
    let before = (fx.file_digest(), fx.journal_digest());
    let body = json!({
        "sessionID": "ses_http_auth", "messageID": messages[0],
        "revision": "a".repeat(64), "indexes": [0],
    });
    for authorization in [None, Some("Bearer nope")] {
        let prune = request(
            Method::POST,
            &app.route("prune"),
            Body::from(body.to_string()),
            authorization,
        );
        assert_eq!(app.answer(prune).status, 401);
    }
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
    let preview = app.answer(request(
        Method::POST,
        &app.route("preview"),
        Body::from(json!({ "sessionID": MANY_TURNS, "messageID": TURN5 }).to_string()),
        Some(&format!("Bearer {PASSWORD}")),
    ));
    assert_eq!(preview.status, 200);
}

#[test]
fn listening_beyond_loopback_needs_a_password() {
    let fx = Fixture::new();
    let out = run(&fx.db, &["--json", "serve", "--listen", "0.0.0.0:0"]);
    assert_exit(&out, 2);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "error");
    let error = doc["error"].as_str().unwrap();
    assert!(
        error.contains("0.0.0.0:0") && error.contains("SESSION_PRUNE_PASSWORD"),
        "{error}"
    );
    assert!(!fx.journal.exists(), "nothing was opened");

    let out = run(
        &fx.db,
        &["serve", "--password", "", "--listen", "127.0.0.1:0"],
    );
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("the password is empty"));

    // A password that is set but is not UTF-8 is refused, never taken for no password.
    let out = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env(
            "SESSION_PRUNE_PASSWORD",
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"\xff\xfepw"),
        )
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not UTF-8"));

    // With a password it starts.
    let server = Server::start_exactly(
        &fx.db,
        &["--listen".into(), "0.0.0.0:0".into()],
        &[("SESSION_PRUNE_PASSWORD", PASSWORD)],
    );
    let (status, _) = server.stop();
    assert_eq!(status.code(), Some(0));
}
