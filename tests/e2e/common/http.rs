//! Running `session-prune serve` in tests and talking to it as clients do, with reqwest: plain
//! requests, and a Server-Sent Events reader that reads only when the test asks (a subscriber
//! that stops reading really stops: nothing more is taken from its socket). Tests of the
//! answers themselves use the router in this process (`super::app`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{generate, Fixture};

/// The workspace id the tests give the fixture's directory.
pub const WORKSPACE: &str = "work";
/// The fixture's sessions' directory.
pub const FIXTURE_DIRECTORY: &str = "/tmp/oc-cache/run/work";
/// A workspace whose directory holds none of the fixture's sessions.
pub const OTHER_WORKSPACE: &str = "elsewhere";

/// A running `session-prune serve` on a free loopback port.
pub struct Server {
    child: Option<Child>,
    stdout: BufReader<ChildStdout>,
    /// `127.0.0.1:PORT`.
    pub address: String,
    pub db: PathBuf,
}

impl Server {
    /// Serves `db` with the test workspaces (`work` = the fixture's directory, `elsewhere` =
    /// `/elsewhere`) and a 100 ms heartbeat, plus `args`.
    pub fn start(db: &Path, args: &[&str]) -> Self {
        let mut all = vec![
            "--workspace".to_string(),
            format!("{WORKSPACE}={FIXTURE_DIRECTORY}"),
            "--workspace".to_string(),
            format!("{OTHER_WORKSPACE}=/elsewhere"),
            "--heartbeat".to_string(),
            "100ms".to_string(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        Self::start_exactly(db, &all, &[])
    }

    /// Serves `db` with exactly `args` after `serve --json` (and `--listen 127.0.0.1:0` unless
    /// `args` has a `--listen`), and `env`.
    pub fn start_exactly(db: &Path, args: &[String], env: &[(&str, &str)]) -> Self {
        Self::start_command(crate::common::cli::session_prune(), db, args, env)
    }

    /// [`Server::start_exactly`] with `command` as the binary (a measurement runs the release
    /// build).
    pub fn start_command(
        mut command: std::process::Command,
        db: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Self {
        command
            .arg("--db")
            .arg(db)
            .args(["serve", "--json"])
            .args(args)
            .env_remove("SESSION_PRUNE_PASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if !args.iter().any(|a| a == "--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("read the listening line");
        let doc: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("serve did not start; it printed {line:?}"));
        assert_eq!(doc["status"], "listening", "{doc}");
        assert_eq!(
            doc["page"].as_str(),
            Some(format!("{}/", doc["url"].as_str().expect("url")).as_str()),
            "{doc}"
        );
        Self {
            address: doc["address"].as_str().expect("address").to_string(),
            child: Some(child),
            stdout,
            db: db.to_path_buf(),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// The route of `name` (`preview`, `prune`, ...) in the test workspace.
    pub fn route(&self, name: &str) -> String {
        self.url(&format!(
            "/api/workspaces/{WORKSPACE}/session-pruning/{name}"
        ))
    }

    /// Sends SIGTERM and waits (at most 60 s) for the process to end; returns its exit status
    /// and what it printed after the listening line.
    pub fn stop(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        let pid = i32::try_from(child.id()).expect("pid");
        // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "serve did not stop within 60 s");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).expect("stdout");
        (status, rest)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A blocking HTTP client with a generous timeout.
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client")
}

/// `POST url` with `body`; returns the status and the body text.
pub fn post(url: &str, body: &str) -> (u16, String) {
    let response = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .expect("POST");
    (response.status().as_u16(), response.text().expect("body"))
}

/// `GET url`; returns the status and the body text.
pub fn get(url: &str) -> (u16, String) {
    let response = client().get(url).send().expect("GET");
    (response.status().as_u16(), response.text().expect("body"))
}

/// Parses a JSON answer.
pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Previews `message` through the API and prunes all its technical parts; returns the prune
/// answer.
pub fn prune_all(server: &Server, session: &str, message: &str) -> Value {
    prune_all_keeping_request(server, session, message).1
}

/// [`prune_all`], returning also the prune's request body (to send again as an identical
/// retry).
pub fn prune_all_keeping_request(server: &Server, session: &str, message: &str) -> (String, Value) {
    let request = prune_all_request(server, session, message);
    let (status, body) = post(&server.route("prune"), &request);
    assert_eq!(status, 200, "{body}");
    let pruned = parse(&body);
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    (request, pruned)
}

/// The body of a prune of every technical part of `message`, from its preview through the API
/// (nothing is pruned).
pub fn prune_all_request(server: &Server, session: &str, message: &str) -> String {
    let (status, body) = post(
        &server.route("preview"),
        &serde_json::json!({ "sessionID": session, "messageID": message }).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let preview = parse(&body);
    assert_eq!(preview["status"], "preview", "{preview}");
    let indexes: Vec<Value> = preview["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .map(|p| p["index"].clone())
        .collect();
    serde_json::json!({
        "sessionID": session, "messageID": message,
        "revision": preview["revision"], "indexes": indexes,
    })
    .to_string()
}

/// The fixture with `n` prunable messages `msg_http_0000`, ... (one bash tool part of 200
/// bytes of output and a text each) in a new session `session` of the fixture's directory.
pub fn with_messages(session: &str, n: usize) -> (Fixture, Vec<String>) {
    let fx = Fixture::new();
    let conn = fx.sql();
    conn.execute_batch("BEGIN").expect("begin");
    generate::add_session(&conn, session);
    let ids: Vec<String> = (0..n).map(|i| format!("msg_http_{i:04}")).collect();
    for id in &ids {
        generate::insert_message(&conn, session, id, 1, 200);
    }
    conn.execute_batch("COMMIT").expect("commit");
    (fx, ids)
}

/// The event stream route of `workspace`.
pub fn events_path(workspace: &str) -> String {
    format!("/api/workspaces/{workspace}/session-pruning/events")
}

/// Every prune candidate of `session` in the test workspace, following the history cursor to
/// the end (a page may end early on a loaded machine: it stops after about 40 ms).
pub fn prune_candidates(server: &Server, session: &str) -> Vec<Value> {
    let mut candidates = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        // An optional field is left out, never sent as null.
        let mut body = serde_json::json!({ "sessionID": session, "purpose": "prune" });
        if let Some(cursor) = &cursor {
            body["cursor"] = cursor.clone().into();
        }
        let (status, page) = post(&server.route("history"), &body.to_string());
        assert_eq!(status, 200, "{page}");
        let page = parse(&page);
        candidates.extend(
            page["candidates"]
                .as_array()
                .expect("candidates")
                .iter()
                .cloned(),
        );
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return candidates,
        }
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    /// `event:`.
    pub event: String,
    /// `id:`, as a number.
    pub id: Option<u64>,
    /// `data:`, parsed.
    pub data: Value,
}

/// An event stream, read only when the test asks.
pub struct Sse {
    reader: BufReader<reqwest::blocking::Response>,
}

impl Sse {
    /// Opens `path` on `address` with an optional `Last-Event-ID` header and reads the
    /// response head. Panics unless the status is 200.
    pub fn open(address: &str, path: &str, last_event_id: Option<u64>) -> Self {
        let mut request = client()
            .get(format!("http://{address}{path}"))
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = request.send().expect("open the event stream");
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(
            response
                .headers()
                .get("transfer-encoding")
                .map(|v| v.as_bytes()),
            Some(&b"chunked"[..]),
            "an event stream is sent chunked"
        );
        Self {
            reader: BufReader::new(response),
        }
    }

    /// The next event, or `None` at the end of the stream. Panics after 120 s of silence, or
    /// when the connection drops before the end of the body.
    pub fn next(&mut self) -> Option<SseEvent> {
        let (mut event, mut id, mut data) = (String::from("message"), None, String::new());
        let mut seen_field = false;
        loop {
            let mut line = String::new();
            let read = self.reader.read_line(&mut line).expect("read event stream");
            if read == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if seen_field {
                    let data = serde_json::from_str(&data)
                        .unwrap_or_else(|_| panic!("event data is not JSON: {data:?}"));
                    return Some(SseEvent { event, id, data });
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            seen_field = true;
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => event = value.to_string(),
                "id" => id = Some(value.parse().expect("numeric id")),
                "data" => {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(value);
                }
                _ => {}
            }
        }
    }

    /// The next event that is not a heartbeat.
    pub fn next_not_heartbeat(&mut self) -> Option<SseEvent> {
        loop {
            match self.next() {
                Some(event) if event.event == "heartbeat" => continue,
                other => return other,
            }
        }
    }
}

impl Sse {
    /// Reads what is left of the stream; whether the server then ended the body properly (the
    /// last, empty chunk) rather than dropping the connection (which fails the read).
    pub fn ended_cleanly(&mut self) -> bool {
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }
}
