//! With a password (SESSION_PRUNE_PASSWORD or --password) every route needs it, as a bearer
//! token or HTTP basic auth: none or a wrong one is 401 with nothing done, the right one is
//! served. Without a password the server refuses to listen beyond loopback.

use crate::common;

use base64::Engine as _;
use common::cli::{assert_exit, run};
use common::http::{client, events_path, with_messages, Server, Sse, FIXTURE_DIRECTORY, WORKSPACE};
use common::{Fixture, MANY_TURNS, TURN5};
use serde_json::json;

const PASSWORD: &str = "correct horse";

fn workspace_args() -> Vec<String> {
    vec![
        "--workspace".into(),
        format!("{WORKSPACE}={FIXTURE_DIRECTORY}"),
    ]
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// `GET url` with an optional `Authorization` header; the status and the JSON error, if any.
fn get_with(url: &str, authorization: Option<&str>) -> (u16, serde_json::Value) {
    let mut request = client().get(url);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    if status == 401 {
        let challenge = response.headers().get("www-authenticate").cloned();
        assert_eq!(
            challenge.unwrap(),
            r#"Basic realm="session-prune", charset="UTF-8""#
        );
    }
    (
        status,
        serde_json::from_str(&response.text().unwrap()).unwrap(),
    )
}

#[test]
fn no_or_wrong_credentials_are_401_and_the_right_ones_are_served() {
    let fx = Fixture::new();
    let server = Server::start_exactly(
        &fx.db,
        &workspace_args(),
        &[("SESSION_PRUNE_PASSWORD", PASSWORD)],
    );
    let health = server.url("/health");
    for wrong in [
        None,
        Some("Bearer correct horse2".to_string()),
        Some("Bearer correct".to_string()),
        Some(basic("me", "wrong")),
        Some(format!("Token {PASSWORD}")),
    ] {
        let (status, body) = get_with(&health, wrong.as_deref());
        assert_eq!(status, 401, "{wrong:?}");
        assert!(
            body["error"].as_str().unwrap().contains("password"),
            "{body}"
        );
    }
    for right in [format!("Bearer {PASSWORD}"), basic("anyone", PASSWORD)] {
        let (status, body) = get_with(&health, Some(&right));
        assert_eq!(status, 200, "{right}");
        assert_eq!(body["status"], "ok");
    }
    // Every route, the event stream and unknown routes included.
    let (status, _) = get_with(&server.url("/openapi.json"), None);
    assert_eq!(status, 401);
    let (status, _) = get_with(&server.url("/no/such/route"), None);
    assert_eq!(status, 401);
    let (status, _) = Sse::open_with(&server.address, &events_path(WORKSPACE), None, None);
    assert_eq!(status, 401);
    let (status, _) = Sse::open_with(
        &server.address,
        &events_path(WORKSPACE),
        None,
        Some(&format!("Bearer {PASSWORD}")),
    );
    assert_eq!(status, 200);
}

#[test]
fn an_unauthenticated_prune_changes_nothing() {
    let (fx, messages) = with_messages("ses_http_auth", 1);
    let server = Server::start_exactly(
        &fx.db,
        &[workspace_args(), vec!["--password".into(), PASSWORD.into()]].concat(),
        &[],
    );
    let before = (fx.file_digest(), fx.journal_digest());
    let body = json!({
        "sessionID": "ses_http_auth", "messageID": messages[0],
        "revision": "a".repeat(64), "indexes": [0],
    });
    for authorization in [None, Some("Bearer nope")] {
        let mut request = client().post(server.route("prune")).body(body.to_string());
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        assert_eq!(request.send().unwrap().status().as_u16(), 401);
    }
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
    let preview = client()
        .post(server.route("preview"))
        .header("authorization", format!("Bearer {PASSWORD}"))
        .body(json!({ "sessionID": MANY_TURNS, "messageID": TURN5 }).to_string())
        .send()
        .unwrap();
    assert_eq!(preview.status().as_u16(), 200);
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
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_session-prune"))
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
