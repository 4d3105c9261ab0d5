//! `serve` logs on stderr one line per request it refuses or fails (an HTTP error, a contract
//! answer `blocked`, a request that is not HTTP), and none for one it answers: as text by
//! default, as one JSON object a line with `--log-format json`. A client's text is a field of
//! its own: quoted and escaped in text, exact in JSON. Scripts read the JSON lines' keys.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::http::{FIXTURE_DIRECTORY, WORKSPACE};
use crate::common::Fixture;

/// Sends one HTTP/1.1 request and returns the answer's status.
fn request(address: &str, method: &str, path: &str, body: &str) -> u16 {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"))
}

/// A message id a client may send: a newline, a terminal escape, a quote and what looks like
/// a field of the log line.
const HOSTILE: &str = "msg_x\n\u{1b}[2J\" reason=pruned";

/// Sends `raw` as it is and returns the answer's status line.
fn raw_request(address: &str, raw: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(raw).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

/// Serves the fixture with `args`, makes the requests of these tests, stops the server with
/// SIGTERM, and returns its stderr.
fn log_of_requests(args: &[&str]) -> String {
    let fx = Fixture::new();
    let log = fx.dir.path().join("serve.log");
    let mut child = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .args(["serve", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(format!("{WORKSPACE}={FIXTURE_DIRECTORY}"))
        .args(args)
        .env_remove("SESSION_PRUNE_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let address = line
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let preview = format!("/api/workspaces/{WORKSPACE}/session-pruning/preview");
    assert_eq!(request(&address, "GET", "/health", ""), 200);
    assert_eq!(request(&address, "GET", "/nope", ""), 404);
    assert_eq!(request(&address, "POST", &preview, "{bad"), 400);
    let unknown = r#"{"sessionID":"ses_nope","messageID":"msg_nope"}"#;
    assert_eq!(request(&address, "POST", &preview, unknown), 200);
    let hostile =
        serde_json::to_string(&json!({"sessionID": "ses_nope", "messageID": HOSTILE})).unwrap();
    assert_eq!(request(&address, "POST", &preview, &hostile), 200);
    assert_eq!(
        raw_request(&address, b"GARBAGE\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn json_log_lines_name_each_refusal_and_nothing_else() {
    let log = log_of_requests(&["--log-format", "json"]);
    let lines: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("{line}")))
        .collect();
    let without_time: Vec<Value> = lines
        .iter()
        .map(|line| {
            let mut line = line.clone();
            let time = line.as_object_mut().unwrap().remove("timestamp").unwrap();
            assert!(time.as_str().unwrap().ends_with('Z'), "{time}");
            line
        })
        .collect();
    assert_eq!(
        without_time,
        vec![
            json!({"level": "WARN", "message": "refused", "method": "GET", "path": "/nope", "status": 404}),
            json!({"level": "WARN", "message": "refused", "method": "POST",
                   "path": format!("/api/workspaces/{WORKSPACE}/session-pruning/preview"), "status": 400}),
            json!({"level": "WARN", "message": "blocked", "route": "preview",
                   "messageID": "msg_nope", "reason": "not_deletable",
                   "detail": "there is no session ses_nope and no message msg_nope in this database"}),
            // The client's text, exactly, as a value of its own.
            json!({"level": "WARN", "message": "blocked", "route": "preview",
                   "messageID": HOSTILE, "reason": "not_deletable",
                   "detail": format!("there is no session ses_nope and no message {HOSTILE} in this database")}),
            json!({"level": "WARN", "message": "refused: a request that is not HTTP",
                   "error": "invalid HTTP method parsed"}),
        ],
        "{log}"
    );
}

#[test]
fn text_log_lines_are_one_per_refusal() {
    let log = log_of_requests(&[]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 5, "{log}");
    assert!(
        lines[0].ends_with(" WARN refused method=GET path=\"/nope\" status=404"),
        "{log}"
    );
    assert!(lines[1].contains(" WARN refused method=POST "), "{log}");
    assert!(lines[1].ends_with(" status=400"), "{log}");
    assert!(
        lines[2].ends_with(
            " WARN blocked route=\"preview\" messageID=\"msg_nope\" reason=not_deletable \
             detail=\"there is no session ses_nope and no message msg_nope in this database\""
        ),
        "{log}"
    );
    // A client's text is quoted and escaped: one line, no terminal control, no forged field.
    let quoted = r#"messageID="msg_x\n\u{1b}[2J\" reason=pruned""#;
    assert!(
        lines[3].contains(&format!(
            " WARN blocked route=\"preview\" {quoted} reason=not_deletable "
        )),
        "{log}"
    );
    assert!(!log.contains('\u{1b}'), "{log}");
    assert!(
        lines[4].ends_with(
            " WARN refused: a request that is not HTTP error=\"invalid HTTP method parsed\""
        ),
        "{log}"
    );
}

#[test]
fn an_unknown_log_format_is_refused_with_exit_2() {
    let fx = Fixture::new();
    let out = crate::common::cli::run(&fx.db, &["serve", "--log-format", "yaml"]);
    crate::common::cli::assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("[possible values: text, json]"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}
