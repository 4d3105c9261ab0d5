//! The routes that write (prune, prune-batch, restore, the schedule's pause) on a real server
//! take only a request no page of another origin can make its browser send: a body declared
//! `application/json` (415 for the types a browser sends without a CORS preflight, and for none),
//! from no origin, the server's own, or one `--allow-origin` names (403 for any other, `null`
//! included), password or not. Each refusal leaves the database and the journal byte for byte
//! as they were; the same requests sent properly are carried out.

use crate::common;

use common::archive::prune_archived;
use common::http::{client, parse, prune_all_request, prune_candidates, Server, WORKSPACE};
use common::*;
use serde_json::{json, Value};

const ALLOWED: &str = "http://localhost:5173";
const PASSWORD: &str = "open sesame";

/// The body types a browser sends from any page without asking first, and no type at all.
const FORGEABLE: [Option<&str>; 4] = [
    Some("text/plain"),
    Some("application/x-www-form-urlencoded"),
    Some("multipart/form-data; boundary=x"),
    None,
];

/// One request to a writing route, valid but for what the test changes.
struct Write {
    name: &'static str,
    path: String,
    body: String,
}

/// A valid request to each writing route: a prune and a batch of the first two prune
/// candidates of `MANY_TURNS`, the restore of `receipt`, the schedule's pause.
fn writes(server: &Server, receipt: &str) -> Vec<Write> {
    let candidates = prune_candidates(server, MANY_TURNS);
    assert!(candidates.len() >= 2, "{candidates:?}");
    let message = candidates[0]["messageID"].as_str().expect("id");
    let route = |name: &str| format!("/api/workspaces/{WORKSPACE}/session-pruning/{name}");
    vec![
        Write {
            name: "prune",
            path: route("prune"),
            body: prune_all_request(server, MANY_TURNS, message),
        },
        Write {
            name: "prune-batch",
            path: route("prune-batch"),
            body: json!({ "sessionID": MANY_TURNS, "candidates": [candidates[1].clone()] })
                .to_string(),
        },
        Write {
            name: "restore",
            path: route("restore"),
            body: json!({ "receiptID": receipt }).to_string(),
        },
        Write {
            name: "upkeep",
            path: "/api/session-pruning/upkeep".into(),
            body: r#"{"paused":true}"#.into(),
        },
    ]
}

/// Sends `write` with the content type, `Origin` and password given; the status and the JSON
/// answer.
fn send(
    server: &Server,
    write: &Write,
    content_type: Option<&str>,
    origin: Option<&str>,
    password: bool,
) -> (u16, Value) {
    let mut request = client()
        .post(server.url(&write.path))
        .body(write.body.clone());
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    if password {
        request = request.bearer_auth(PASSWORD);
    }
    let answer = request.send().expect("POST");
    let status = answer.status().as_u16();
    (status, parse(&answer.text().expect("body")))
}

/// The server's own origin, as a browser names it for a page the server served.
fn own_origin(server: &Server) -> String {
    server.url("")
}

/// A fixture with one archived prune (whose receipt the restore names).
fn fixture() -> (Fixture, String) {
    let fx = Fixture::new();
    let receipt = prune_archived(&fx.db, MANY_TURNS, TURN5, None);
    (fx, receipt)
}

#[test]
fn a_write_whose_body_a_page_could_send_without_a_preflight_is_415_and_changes_nothing() {
    let (fx, receipt) = fixture();
    let server = Server::start(&fx.db, &["--auto-clean", "1h"]);
    let writes = writes(&server, &receipt);
    let before = (fx.file_digest(), fx.journal_digest());
    for write in &writes {
        for content_type in FORGEABLE {
            let origin = own_origin(&server);
            for origin in [None, Some(origin.as_str())] {
                let (status, answer) = send(&server, write, content_type, origin, false);
                assert_eq!(status, 415, "{} {content_type:?}: {answer}", write.name);
                assert_eq!(
                    answer["error"], "send the body as JSON, with `Content-Type: application/json`",
                    "{} {content_type:?}",
                    write.name
                );
            }
        }
    }
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn a_write_from_a_page_of_another_origin_is_403_password_or_not() {
    let (fx, receipt) = fixture();
    let writes = {
        let server = Server::start(&fx.db, &[]);
        let writes = writes(&server, &receipt);
        server.stop();
        writes
    };
    let another_port = "http://127.0.0.1:1";
    for password in [false, true] {
        let args: &[&str] = if password {
            &[
                "--auto-clean",
                "1h",
                "--allow-origin",
                ALLOWED,
                "--password",
                PASSWORD,
            ]
        } else {
            &["--auto-clean", "1h"]
        };
        let server = Server::start(&fx.db, args);
        let before = (fx.file_digest(), fx.journal_digest());
        for write in &writes {
            for origin in ["http://evil.example", "null", another_port] {
                let json = Some("application/json");
                let (status, answer) = send(&server, write, json, Some(origin), password);
                assert_eq!(status, 403, "{} from {origin}: {answer}", write.name);
                let words = answer["error"].as_str().expect("error");
                let opening = format!("a page of {origin} may not write through this server");
                assert!(words.starts_with(&opening), "{words}");
                assert!(words.contains("--allow-origin ORIGIN"), "{words}");
            }
            // Whatever the body's type: the origin is looked at first.
            let evil = Some("http://evil.example");
            let (status, _) = send(&server, write, Some("text/plain"), evil, password);
            assert_eq!(status, 403, "{}", write.name);
        }
        assert_eq!(
            (fx.file_digest(), fx.journal_digest()),
            before,
            "password {password}"
        );
        let (status, _) = server.stop();
        assert!(status.success());
    }
}

#[test]
fn the_same_writes_from_no_origin_the_servers_own_or_an_allowed_one_are_carried_out() {
    let (fx, receipt) = fixture();
    let server = Server::start(&fx.db, &["--auto-clean", "1h", "--allow-origin", ALLOWED]);
    let writes = writes(&server, &receipt);
    let own = own_origin(&server);
    let json = Some("application/json; charset=utf-8");
    let from = [Some(own.as_str()), Some(ALLOWED), None, Some(own.as_str())];
    let mut answers = Vec::new();
    for (write, origin) in writes.iter().zip(from) {
        let (status, answer) = send(&server, write, json, origin, false);
        assert_eq!(status, 200, "{} from {origin:?}: {answer}", write.name);
        answers.push(answer);
    }
    assert_eq!(answers[0]["status"], "pruned", "{}", answers[0]);
    assert_eq!(
        answers[1]["results"][0]["result"]["status"], "pruned",
        "{}",
        answers[1]
    );
    assert_eq!(answers[2]["status"], "restored", "{}", answers[2]);
    assert_eq!(answers[3]["paused"], true, "{}", answers[3]);
    // A route that only reads is answered to any page as before (its browser withholds the
    // answer from a page the CORS rules do not name).
    let (status, preview) = send(
        &server,
        &Write {
            name: "preview",
            path: format!("/api/workspaces/{WORKSPACE}/session-pruning/preview"),
            body: json!({ "sessionID": MANY_TURNS, "messageID": TURN5 }).to_string(),
        },
        Some("text/plain"),
        Some("http://evil.example"),
        false,
    );
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["status"], "preview", "{preview}");
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn a_write_with_two_origins_or_two_content_types_is_refused_and_changes_nothing() {
    let (fx, receipt) = fixture();
    let server = Server::start(&fx.db, &["--auto-clean", "1h"]);
    let writes = writes(&server, &receipt);
    let before = (fx.file_digest(), fx.journal_digest());
    let own = own_origin(&server);
    for write in &writes {
        // The server's own origin first, another after: no browser sends two.
        let answer = client()
            .post(server.url(&write.path))
            .header("content-type", "application/json")
            .header("origin", own.as_str())
            .header("origin", "http://evil.example")
            .body(write.body.clone())
            .send()
            .expect("POST");
        assert_eq!(answer.status().as_u16(), 403, "{}", write.name);
        let answer = client()
            .post(server.url(&write.path))
            .header("content-type", "application/json")
            .header("content-type", "text/plain")
            .body(write.body.clone())
            .send()
            .expect("POST");
        assert_eq!(answer.status().as_u16(), 415, "{}", write.name);
    }
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
    server.stop();
}
