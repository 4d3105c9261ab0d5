//! `events --follow --url`, the client a TUI runs: it prints every event of a server's stream
//! once, in order; when the server restarts it reconnects and prints exactly the prunes it
//! missed; killed and started again with its `--cursor-file`, it goes on after the last event
//! it printed. A request the server refuses (the password, the workspace) ends it with exit 2
//! and its cursor file untouched.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common;
use common::http::{
    parse, post, prune_all, prune_all_keeping_request, with_messages, Server, FIXTURE_DIRECTORY,
    WORKSPACE,
};

const SESSION: &str = "ses_tui_follow";
const PASSWORD: &str = "tui-secret";

/// Serves `db` on `listen`, with [`PASSWORD`] when `guarded`.
fn serve(db: &Path, listen: &str, guarded: bool) -> Server {
    let env: &[(&str, &str)] = if guarded {
        &[("SESSION_PRUNE_PASSWORD", PASSWORD)]
    } else {
        &[]
    };
    Server::start_exactly(
        db,
        &[
            "--workspace".into(),
            format!("{WORKSPACE}={FIXTURE_DIRECTORY}"),
            "--heartbeat".into(),
            "100ms".into(),
            "--listen".into(),
            listen.into(),
        ],
        env,
    )
}

/// A running client and the lines it prints.
struct Client {
    child: Child,
    lines: Receiver<String>,
}

impl Client {
    fn start(url: &str, cursor_file: &Path, password: &str, json: bool) -> Self {
        let mut command = crate::common::cli::session_prune();
        command
            .args(["events", "--follow", "--url", url, "--cursor-file"])
            .arg(cursor_file)
            .env("SESSION_PRUNE_PASSWORD", password)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if json {
            command.arg("--json");
        }
        let mut child = command.spawn().expect("start the client");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    fn next_line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the client printed nothing within 60 s")
    }

    fn next(&self) -> Value {
        let line = self.next_line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn event(id: u64, message: &str, pruned: &Value) -> Value {
    json!({
        "id": id,
        "event": "rpc.codenomad.session-pruning.pruned",
        "data": { "sessionID": SESSION, "messageID": message, "revision": pruned["revision"] },
    })
}

/// The `databaseID` `server` reports.
fn database_of(server: &Server) -> String {
    let (status, body) = common::http::get(&server.url("/health"));
    assert_eq!(status, 200, "{body}");
    parse(&body)["databaseID"]
        .as_str()
        .expect("databaseID")
        .to_string()
}

/// Waits (at most 60 s) until the cursor file holds `text`.
fn kept(cursor_file: &Path, text: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(cursor_file).ok().as_deref() != Some(text) {
        assert!(
            std::time::Instant::now() < deadline,
            "the cursor file does not hold {text:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn events_url(server: &Server, workspace: &str) -> String {
    server.url(&format!(
        "/api/workspaces/{workspace}/session-pruning/events"
    ))
}

#[test]
fn the_client_prints_each_event_once_across_server_restarts_and_its_own() {
    let (fx, messages) = with_messages(SESSION, 9);
    let cursor_file = fx.dir.path().join("tui.cursor");
    let server = serve(&fx.db, "127.0.0.1:0", false);
    let address = server.address.clone();
    let url = events_url(&server, WORKSPACE);
    let client = Client::start(&url, &cursor_file, "", true);

    let first = prune_all(&server, SESSION, &messages[0]);
    let second = prune_all(&server, SESSION, &messages[1]);
    assert_eq!(client.next(), event(1, &messages[0], &first));
    assert_eq!(client.next(), event(2, &messages[1], &second));

    // The server goes away; two prunes are made without it; it comes back on the same port.
    let (status, _) = server.stop();
    assert_eq!(status.code(), Some(0));
    let third = common::cli::prune_all(&fx.db, SESSION, &messages[2]);
    let fourth = common::cli::prune_all(&fx.db, SESSION, &messages[3]);
    let server = serve(&fx.db, &address, false);
    assert_eq!(client.next(), event(3, &messages[2], &third));
    assert_eq!(client.next(), event(4, &messages[3], &fourth));
    let fifth = prune_all(&server, SESSION, &messages[4]);
    assert_eq!(client.next(), event(5, &messages[4], &fifth));
    // The client keeps an id after it printed its event (a client killed in between prints
    // that event again when started again: never a gap).
    let database = database_of(&server);
    kept(&cursor_file, &format!("5 {database} 1\n"));
    drop(client);

    // A prune while no client runs; a new client with the same cursor file prints it, then
    // the next live one, and nothing else.
    let sixth = prune_all(&server, SESSION, &messages[5]);
    let client = Client::start(&url, &cursor_file, "", true);
    assert_eq!(client.next(), event(6, &messages[5], &sixth));
    let (request, seventh) = prune_all_keeping_request(&server, SESSION, &messages[6]);
    assert_eq!(client.next(), event(7, &messages[6], &seventh));
    // An identical retry of the newest prune is announced again: printed as such, with no id,
    // and the cursor stays.
    let (status, again) = post(&server.route("prune"), &request);
    assert_eq!((status, parse(&again)), (200, seventh.clone()));
    let mut repeated = event(7, &messages[6], &seventh);
    repeated["id"] = Value::Null;
    assert_eq!(client.next(), repeated);
    let eighth = prune_all(&server, SESSION, &messages[7]);
    assert_eq!(client.next(), event(8, &messages[7], &eighth));
    kept(&cursor_file, &format!("8 {database} 1\n"));
    drop(client);

    // A cursor past the journal's last event (another journal's): one resync, then live.
    std::fs::write(&cursor_file, "99\n").unwrap();
    let client = Client::start(&url, &cursor_file, "", true);
    assert_eq!(
        client.next(),
        json!({ "id": 8, "event": "resync", "data": { "firstKept": 1, "resumeAfter": 8 } })
    );
    kept(&cursor_file, &format!("8 {database} 1\n"));
    drop(client);

    // Text lines, for a person: the same events from the start of the journal; a resync in
    // words.
    let text_cursor = fx.dir.path().join("text.cursor");
    let client = Client::start(&url, &text_cursor, "", false);
    assert_eq!(
        client.next_line(),
        format!(
            "#1 rpc.codenomad.session-pruning.pruned session {SESSION} message {} revision {}",
            messages[0],
            first["revision"].as_str().unwrap()
        )
    );
    drop(client);
    std::fs::write(&text_cursor, "99\n").unwrap();
    let client = Client::start(&url, &text_cursor, "", false);
    assert_eq!(
        client.next_line(),
        "resync: the server's journal does not go on from #99 (it keeps the events from #1 on: \
         older ones were trimmed, or it is another journal): reload everything; following on \
         after #8"
    );
    let ninth = prune_all(&server, SESSION, &messages[8]);
    assert_eq!(
        client.next_line(),
        format!(
            "#9 rpc.codenomad.session-pruning.pruned session {SESSION} message {} revision {}",
            messages[8],
            ninth["revision"].as_str().unwrap()
        )
    );
    drop(server);
}

#[test]
fn the_client_resyncs_when_the_server_comes_back_with_another_database() {
    let (first, messages) = with_messages(SESSION, 2);
    let cursor_file = first.dir.path().join("tui.cursor");
    let server = serve(&first.db, "127.0.0.1:0", false);
    let address = server.address.clone();
    let url = events_url(&server, WORKSPACE);
    let client = Client::start(&url, &cursor_file, "", true);
    let pruned = prune_all(&server, SESSION, &messages[0]);
    assert_eq!(client.next(), event(1, &messages[0], &pruned));
    let was = database_of(&server);
    kept(&cursor_file, &format!("1 {was} 1\n"));
    server.stop();

    // Another database, whose journal has three events of its own, on the same address.
    let (second, others) = with_messages(SESSION, 4);
    for message in &others[..3] {
        common::cli::prune_all(&second.db, SESSION, message);
    }
    let server = serve(&second.db, &address, false);
    let now = database_of(&server);
    assert_ne!(now, was);
    assert_eq!(
        client.next(),
        json!({ "id": 3, "event": "resync", "data": { "databaseID": now, "resumeAfter": 3 } })
    );
    let fourth = prune_all(&server, SESSION, &others[3]);
    assert_eq!(client.next(), event(4, &others[3], &fourth));
    kept(&cursor_file, &format!("4 {now} 1\n"));
    drop(client);

    // A client started again against the first database's file knows it too.
    server.stop();
    let server = serve(&first.db, &address, false);
    let client = Client::start(&url, &cursor_file, "", false);
    assert_eq!(
        client.next_line(),
        format!(
            "resync: the server now serves another database ({was}, was {now}), whose events \
             are numbered anew, so #4 means nothing there: reload everything; following on \
             after #1"
        )
    );
    kept(&cursor_file, &format!("1 {was} 1\n"));
    drop(server);
}

#[test]
fn the_client_follows_a_new_journal_epoch_and_keeps_it_in_its_cursor_file() {
    let (fx, messages) = with_messages(SESSION, 4);
    let cursor_file = fx.dir.path().join("tui.cursor");
    let server = serve(&fx.db, "127.0.0.1:0", false);
    let address = server.address.clone();
    let url = events_url(&server, WORKSPACE);
    let client = Client::start(&url, &cursor_file, "", true);
    let first = prune_all(&server, SESSION, &messages[0]);
    let second = prune_all(&server, SESSION, &messages[1]);
    assert_eq!(client.next(), event(1, &messages[0], &first));
    assert_eq!(client.next(), event(2, &messages[1], &second));
    let database = database_of(&server);
    kept(&cursor_file, &format!("2 {database} 1\n"));
    server.stop();

    // The journal is lost; a new epoch numbers its events after #2, and a prune is made while
    // the server is away.
    std::fs::remove_file(&fx.journal).unwrap();
    let started = common::cli::run(&fx.db, &["journal", "new-epoch"]);
    common::cli::assert_exit(&started, 0);
    let third = common::cli::prune_all(&fx.db, SESSION, &messages[2]);

    // The client's id is where the epoch starts: it goes on with nothing missed, and keeps the
    // new epoch.
    let server = serve(&fx.db, &address, false);
    assert_eq!(client.next(), event(3, &messages[2], &third));
    kept(&cursor_file, &format!("3 {database} 2\n"));
    drop(client);

    // A cursor of the old epoch older than where the new one starts: one resync, then live.
    std::fs::write(&cursor_file, format!("1 {database} 1\n")).unwrap();
    let client = Client::start(&url, &cursor_file, "", true);
    assert_eq!(
        client.next(),
        json!({ "id": 3, "event": "resync", "data": { "firstKept": 3, "resumeAfter": 3 } })
    );
    kept(&cursor_file, &format!("3 {database} 2\n"));
    let fourth = prune_all(&server, SESSION, &messages[3]);
    assert_eq!(client.next(), event(4, &messages[3], &fourth));
    kept(&cursor_file, &format!("4 {database} 2\n"));
    drop(server);
}

#[test]
fn a_request_the_server_refuses_ends_the_client_with_exit_2_and_its_cursor_kept() {
    let (fx, _) = with_messages(SESSION, 1);
    let server = serve(&fx.db, "127.0.0.1:0", true);
    let cursor_file = fx.dir.path().join("tui.cursor");
    std::fs::write(&cursor_file, "3\n").unwrap();
    for (url, password, words) in [
        (
            events_url(&server, WORKSPACE),
            "wrong",
            "answered 401: the server does not take this password (SESSION_PRUNE_PASSWORD)",
        ),
        (
            events_url(&server, WORKSPACE),
            "",
            "answered 401: the server needs its password: set SESSION_PRUNE_PASSWORD",
        ),
        (
            events_url(&server, "nowhere"),
            PASSWORD,
            "answered 404: there is no workspace nowhere",
        ),
        (
            server.url("/health"),
            PASSWORD,
            "answered 200: the answer is not an event stream",
        ),
    ] {
        let out = crate::common::cli::session_prune()
            .args(["events", "--follow", "--url", &url, "--cursor-file"])
            .arg(&cursor_file)
            .arg("--json")
            .env("SESSION_PRUNE_PASSWORD", password)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url} {password}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["status"], "error");
        assert_eq!(doc["exitCode"], 2);
        assert!(
            doc["error"].as_str().unwrap().contains(words),
            "{url} {password}: {doc}"
        );
        assert_eq!(std::fs::read_to_string(&cursor_file).unwrap(), "3\n");
    }
}

#[test]
fn bad_flags_are_refused_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.cursor");
    std::fs::write(&bad, "seven\n").unwrap();
    for (args, words) in [
        (
            vec!["--url", "https://127.0.0.1:1/events"],
            "https is not spoken here",
        ),
        (vec!["--url", "not a url"], "--url not a url: "),
        (vec!["--url", "ftp://host/events"], "give an http:// URL"),
        (
            vec![
                "--url",
                "http://127.0.0.1:1/e",
                "--cursor-file",
                bad.to_str().unwrap(),
            ],
            "it holds `seven`, not an event id",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:1/e",
                "--cursor-file",
                "/nonexistent/folder/c",
            ],
            "its folder /nonexistent/folder does not exist",
        ),
    ] {
        let out = crate::common::cli::session_prune()
            .args(["events", "--follow", "--json"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            doc["error"].as_str().unwrap().contains(words),
            "{args:?}: {doc}"
        );
    }
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), "seven\n");
    // A password no header can carry, as `serve` refuses it.
    for password in ["a\nb", " padded"] {
        let out = crate::common::cli::session_prune()
            .args([
                "events",
                "--follow",
                "--json",
                "--url",
                "http://127.0.0.1:1/e",
            ])
            .env("SESSION_PRUNE_PASSWORD", password)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{password:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            doc["error"]
                .as_str()
                .unwrap()
                .contains("no Authorization header can carry it"),
            "{doc}"
        );
    }
    // --url needs --follow (a stream has no end to print up to), --cursor-file needs --url.
    for args in [
        vec!["events", "--url", "http://127.0.0.1:1/e"],
        vec!["events", "--follow", "--cursor-file", "c"],
    ] {
        let out = crate::common::cli::session_prune()
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
