//! The real OpenCode 2 (2.1.2 and 2.0.15) loads the plugin from the npm packages
//! `scripts/npm-pack.sh` packs, installed offline into a folder and named in `opencode.json`:
//! `/prune`, `/prune apply` and `/prune undo` run through OpenCode's own command route answer
//! in the session and write receipts the audit holds, without one request to the model;
//! CodeNomad's RPC answers through OpenCode (`POST /api/rpc/codenomad.session-pruning/...`) and
//! its `pruned` event reaches two clients of OpenCode's event stream; the session continues
//! without the pruned output; and the plugin's server stops with OpenCode (docs/plugin.md).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::cli::{json, run};
use crate::common::npm::{install, pack};
use crate::opencode_real::{opencode2_home, RequestKind, Service};

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

const TURN_TIMEOUT: Duration = Duration::from_secs(90);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Names the installed plugin folder in the home's config, with `options`.
fn add_plugin(config: &Path, plugin: &Path, options: &Value) {
    let mut document: Value =
        serde_json::from_str(&std::fs::read_to_string(config).expect("read config"))
            .expect("config JSON");
    document["plugin"] = json!([[plugin.to_str().expect("utf-8 path"), options]]);
    std::fs::write(config, document.to_string()).expect("write config");
}

/// The session's answers from the plugin: the texts of its `synthetic` rows, oldest first.
fn answers(db: &Path, session: &str) -> Vec<String> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    let mut statement = conn
        .prepare(
            "SELECT data FROM session_message WHERE session_id = ?1 AND type = 'synthetic' \
             ORDER BY seq",
        )
        .expect("prepare");
    let rows = statement
        .query_map([session], |row| row.get::<_, String>(0))
        .expect("query");
    rows.map(|data| {
        let data: Value = serde_json::from_str(&data.expect("row")).expect("synthetic JSON");
        data["text"].as_str().unwrap_or_default().to_string()
    })
    .collect()
}

/// Runs `/prune TEXT` through OpenCode's command route and waits for its answer.
fn command(service: &Service<'_>, db: &Path, session: &str, text: &str) -> String {
    let before = answers(db, session).len();
    let answer = service.api(
        "POST",
        &format!("/api/session/{session}/command"),
        Some(&json!({"name": "prune", "text": text})),
    );
    assert_eq!(answer.status, 204, "/prune {text}: {}", answer.body);
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    loop {
        let now = answers(db, session);
        if now.len() > before {
            return now[before].clone();
        }
        assert!(
            Instant::now() < deadline,
            "/prune {text} did not answer; the plugin's log: {}",
            std::fs::read_to_string(plugin_log(db)).unwrap_or_default()
        );
        thread::sleep(Duration::from_millis(200));
    }
}

/// The plugin's log beside the database.
fn plugin_log(db: &Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".session-prune-plugin.log");
    name.into()
}

/// Rows of the session's assistant messages that hold `text`.
fn rows_holding(db: &Path, session: &str, text: &str) -> i64 {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    conn.query_row(
        "SELECT count(*) FROM session_message WHERE session_id = ?1 AND type = 'assistant' \
         AND instr(data, ?2) > 0",
        (session, text),
        |row| row.get(0),
    )
    .expect("count")
}

/// A client of OpenCode's event stream (`GET /api/event`): the `data:` lines it received.
fn subscribe(service: &Service<'_>) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let received = Arc::clone(&lines);
    let url = format!("{}/api/event", service.url());
    let password = service.password().to_string();
    thread::spawn(move || {
        let client = reqwest::blocking::Client::builder()
            .timeout(None)
            .build()
            .expect("client");
        let Ok(answer) = client
            .get(url)
            .basic_auth("opencode", Some(password))
            .send()
        else {
            return;
        };
        for line in BufReader::new(answer).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data:") {
                received.lock().expect("lock").push(data.trim().to_string());
            }
        }
    });
    lines
}

fn pruned_events(lines: &Mutex<Vec<String>>, message: &str) -> usize {
    lines
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            event["type"] == "rpc.codenomad.session-pruning.pruned"
                && event["data"]["messageID"] == message
        })
        .count()
}

fn the_plugin_prunes_from_inside(version: &str) {
    let Some(packed) = pack() else { return };
    let Some((mock, home)) = opencode2_home(version) else {
        return;
    };
    let prefix = tempfile::tempdir().expect("tempdir");
    install(prefix.path(), &[&packed.launcher, &packed.binary]);
    let plugin = prefix.path().join("node_modules/session-prune");
    add_plugin(
        &home.root().join("config/opencode/opencode.json"),
        &plugin,
        &json!({"keepLastTurns": 1, "quietPeriod": "0"}),
    );
    let db = home.database();
    let mut service = Service::start(&home);
    let session = service.session_with_turns("pruned from inside", 3, TURN_TIMEOUT);
    let requests = mock.requests().len();

    let preview = command(&service, &db, &session, "");
    assert!(
        preview.starts_with("session-prune: a clean of this session would prune "),
        "{preview}"
    );
    assert!(
        preview.contains("OpenCode still sends it to the model"),
        "{preview}"
    );
    assert_eq!(
        rows_holding(&db, &session, "TOOL_CANARY_1"),
        1,
        "a preview changes nothing"
    );

    let applied = command(&service, &db, &session, "apply");
    assert!(applied.starts_with("session-prune: pruned "), "{applied}");
    for pruned in ["TOOL_CANARY_1", "TOOL_CANARY_2", "REASONING_CANARY_1"] {
        assert_eq!(rows_holding(&db, &session, pruned), 0, "{pruned} is pruned");
    }
    assert_eq!(
        rows_holding(&db, &session, "TOOL_CANARY_3"),
        1,
        "the last turn is kept"
    );

    let undone = command(&service, &db, &session, "undo");
    assert!(undone.starts_with("session-prune: put back "), "{undone}");
    assert!(
        rows_holding(&db, &session, "TOOL_CANARY_2")
            + rows_holding(&db, &session, "REASONING_CANARY_2")
            >= 1,
        "the newest prune (a message of turn 2) is back: {undone}"
    );
    let stats = command(&service, &db, &session, "stats");
    assert!(
        stats.starts_with("session-prune: the database is "),
        "{stats}"
    );
    assert_eq!(
        mock.requests().len(),
        requests,
        "no /prune command called the model"
    );

    // CodeNomad's client path: preview then prune through OpenCode's RPC route, the event to
    // two clients of OpenCode's own event stream.
    let first = subscribe(&service);
    let second = subscribe(&service);
    let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    let message: String = conn
        .query_row(
            "SELECT id FROM session_message WHERE session_id = ?1 AND type = 'assistant' \
             AND (instr(data, 'TOOL_CANARY_2') > 0 OR instr(data, 'REASONING_CANARY_2') > 0) \
             ORDER BY seq LIMIT 1",
            [&session],
            |row| row.get(0),
        )
        .expect("the restored message");
    drop(conn);
    thread::sleep(Duration::from_millis(500));
    let rpc = |method: &str, input: Value| {
        let answer = service.api(
            "POST",
            &format!("/api/rpc/codenomad.session-pruning/{method}"),
            Some(&json!({ "input": input })),
        );
        assert_eq!(answer.status, 200, "{method}: {}", answer.body);
        answer.json()["output"].clone()
    };
    let preview = rpc(
        "preview",
        json!({"sessionID": session, "messageID": message}),
    );
    assert_eq!(preview["status"], "preview", "{preview}");
    let indexes: Vec<u64> = preview["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .map(|part| part["index"].as_u64().expect("index"))
        .collect();
    let request = json!({
        "sessionID": session, "messageID": message,
        "revision": preview["revision"], "indexes": indexes,
    });
    let pruned = rpc("prune", request.clone());
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    assert_eq!(
        rpc("prune", request),
        pruned,
        "an identical retry answers the same"
    );
    let invalid = service.api(
        "POST",
        "/api/rpc/codenomad.session-pruning/preview",
        Some(&json!({"input": {"sessionID": session, "messageID": message, "content": []}})),
    );
    assert_ne!(
        invalid.status, 200,
        "a key the contract does not have is refused: {}",
        invalid.body
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while (pruned_events(&first, &message) == 0 || pruned_events(&second, &message) == 0)
        && Instant::now() < deadline
    {
        thread::sleep(Duration::from_millis(100));
    }
    assert!(
        pruned_events(&first, &message) >= 1,
        "the first client got the event"
    );
    assert!(
        pruned_events(&second, &message) >= 1,
        "the second client got the event"
    );

    // The session continues, and the model is sent none of what was pruned.
    let before = mock.requests().len();
    service.turn(
        &session,
        "Turn 4: go on. [[say:text_canary_4]]",
        TURN_TIMEOUT,
    );
    let next = mock.requests()[before..]
        .iter()
        .find(|r| r.kind == RequestKind::Chat && r.session_id() == Some(session.as_str()))
        .cloned()
        .expect("the continued turn's model request");
    for pruned in ["TOOL_CANARY_1", "TOOL_CANARY_2", "REASONING_CANARY_1"] {
        assert!(!next.body.contains(pruned), "{pruned} was sent");
    }
    eprintln!(
        "the plugin's answers are sent to the model: {}",
        next.body.contains("session-prune: pruned ")
    );

    // The plugin's server stops with OpenCode: the journal is free, and the audit holds.
    service.stop();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = run(&db, &["audit", "--json"]);
        if out.status.code() == Some(0) {
            let report = json(&out);
            assert_eq!(report["ok"], true, "{report}");
            assert!(report["receipts"].as_u64() >= Some(3), "{report}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the plugin's server still holds the journal: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn opencode_2_1_2_runs_prune_from_its_command_route_and_serves_codenomads_rpc() {
    the_plugin_prunes_from_inside("2.1.2");
}

#[test]
fn opencode_2_0_15_runs_prune_from_its_command_route_and_serves_codenomads_rpc() {
    the_plugin_prunes_from_inside("2.0.15");
}
