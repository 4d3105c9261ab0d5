//! The real OpenCode 1.19.5 loads the plugin from the npm packages `scripts/npm-pack.sh`
//! packs, installed offline into a folder and named in `opencode.json`: `/prune`,
//! `/prune apply` and `/prune undo` run through OpenCode's own command route
//! (`POST /session/{id}/command`) answer with a message the model is never sent and a toast,
//! write receipts the audit holds, and call the model not once; each prune the plugin's server
//! announces shows a toast that says to reload (an open 1.x view does not re-read a message
//! changed beside it, and its part routes would race a restore); the session continues
//! (docs/plugin.md).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::npm::{install, pack};
use crate::common::plugin::{
    add_plugin, audit_holds_once_the_plugin_server_stops, event_lines, events,
    idle_clean_keeps_the_last_turn, streaming_client, wait_until,
};
use crate::opencode_real::{
    binary_of, canary_turn, http, query_value, MockModel, OpenCode, RequestKind, Server,
};

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

const VERSION: &str = "1.19.5";
const PROMPT_TIMEOUT: Duration = Duration::from_secs(90);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The `?directory=` of every request: the work tree OpenCode runs in.
fn directory(env: &OpenCode) -> String {
    query_value(env.work_dir().to_str().expect("utf-8 path"))
}

/// Sends `text` as a prompt and waits for the turn to end.
fn prompt(env: &OpenCode, server: &Server, session: &str, text: &str) {
    let body =
        json!({"parts": [{"type": "text", "text": text}], "model": env.layout().prompt_model()});
    let path = format!("/session/{session}/message?directory={}", directory(env));
    let reply = http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT)
        .unwrap_or_else(|e| panic!("prompt: {e}\n{}", server.log()));
    assert_eq!(reply.status, 200, "{}\n{}", reply.body, server.log());
}

/// Sends `text` as a prompt, waits for the turn, and returns the chat request it made.
fn prompt_and_capture(
    env: &OpenCode,
    server: &Server,
    mock: &MockModel,
    session: &str,
    text: &str,
) -> crate::opencode_real::ModelRequest {
    let before = mock.requests().len();
    prompt(env, server, session, text);
    mock.requests()[before..]
        .iter()
        .find(|r| r.kind == RequestKind::Chat)
        .cloned()
        .expect("the turn's model request")
}

/// The texts of the session's parts the plugin wrote (`ignored` text parts), oldest first.
fn answers(db: &Path, session: &str) -> Vec<String> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    let mut statement = conn
        .prepare(
            "SELECT data FROM part WHERE session_id = ?1 \
             AND json_extract(data, '$.type') = 'text' \
             AND json_extract(data, '$.ignored') = 1 ORDER BY time_created, id",
        )
        .expect("prepare");
    let rows = statement
        .query_map([session], |row| row.get::<_, String>(0))
        .expect("query");
    rows.map(|data| {
        let data: Value = serde_json::from_str(&data.expect("row")).expect("part JSON");
        data["text"].as_str().unwrap_or_default().to_string()
    })
    .collect()
}

/// Runs `/prune TEXT` through OpenCode's command route and waits for its answer.
fn command(env: &OpenCode, server: &Server, session: &str, text: &str) -> String {
    let db = env.database();
    let before = answers(&db, session).len();
    let path = format!("/session/{session}/command?directory={}", directory(env));
    let body = json!({"command": "prune", "arguments": text});
    let reply = http(server.url(), "POST", &path, Some(&body), ANSWER_TIMEOUT)
        .unwrap_or_else(|e| panic!("/prune {text}: {e}\n{}", server.log()));
    // The plugin stops the command after answering, so that it never reaches the model: the
    // route answers 500 (docs/plugin.md, "Where the answer appears").
    assert_eq!(reply.status, 500, "/prune {text}: {}", reply.body);
    let mut answer = None;
    let answered = wait_until(ANSWER_TIMEOUT, || {
        answer = answers(&db, session).get(before).cloned();
        answer.is_some()
    });
    assert!(
        answered,
        "/prune {text} did not answer: HTTP {} {}\n{}",
        reply.status,
        reply.body,
        server.log()
    );
    answer.unwrap_or_default()
}

/// Rows of the session's parts that hold `text`.
fn parts_holding(db: &Path, session: &str, text: &str) -> i64 {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    conn.query_row(
        "SELECT count(*) FROM part WHERE session_id = ?1 AND instr(data, ?2) > 0",
        (session, text),
        |row| row.get(0),
    )
    .expect("count")
}

/// A client of OpenCode's event stream (`GET /event`): the `data:` lines it received.
fn subscribe(env: &OpenCode, server: &Server) -> Arc<Mutex<Vec<String>>> {
    let url = format!("{}/event?directory={}", server.url(), directory(env));
    event_lines(streaming_client().get(url))
}

/// The messages of the toasts a client of the event stream saw.
fn toasts(lines: &Mutex<Vec<String>>) -> Vec<String> {
    events(lines)
        .into_iter()
        .filter(|event| event["type"] == "tui.toast.show")
        .map(|event| {
            event["properties"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// A real OpenCode 1.19.5 serving with the plugin installed from the packed tarballs and
/// `options`, and a session of 3 canary turns.
struct WithPlugin {
    mock: MockModel,
    env: OpenCode,
    server: Server,
    session: String,
    _prefix: tempfile::TempDir,
}

fn with_plugin(options: &Value) -> Option<WithPlugin> {
    let packed = pack()?;
    let bin = binary_of(VERSION)?;
    let mock = MockModel::start();
    let env = OpenCode::new(&bin, &mock.base_url());
    let prefix = tempfile::tempdir().expect("tempdir");
    install(prefix.path(), &[&packed.launcher, &packed.binary]);
    add_plugin(
        &env.root().join("config/opencode/opencode.json"),
        &prefix.path().join("node_modules/session-prune"),
        options,
    );
    let server = env.serve();
    let created = http(
        server.url(),
        "POST",
        &format!("/session?directory={}", directory(&env)),
        Some(&json!({"title": "pruned from inside"})),
        ANSWER_TIMEOUT,
    )
    .expect("create a session");
    assert_eq!(created.status, 200, "{}", created.body);
    let session = created.json()["id"].as_str().expect("id").to_string();
    for n in 1..=3 {
        prompt(&env, &server, &session, &canary_turn(n));
    }
    Some(WithPlugin {
        mock,
        env,
        server,
        session,
        _prefix: prefix,
    })
}

#[test]
fn opencode_1_19_5_runs_prune_from_its_command_route() {
    let Some(WithPlugin {
        mock,
        env,
        mut server,
        session,
        _prefix,
    }) = with_plugin(&json!({"keepLastTurns": 1, "quietPeriod": "0"}))
    else {
        return;
    };
    let db = env.database();
    let watcher = subscribe(&env, &server);
    std::thread::sleep(Duration::from_millis(500));
    let requests = mock.requests().len();

    let preview = command(&env, &server, &session, "");
    assert!(
        preview.starts_with("session-prune: a clean of this session would prune "),
        "{preview}"
    );
    assert_eq!(
        parts_holding(&db, &session, "TOOL_CANARY_1"),
        1,
        "a preview changes nothing"
    );

    let applied = command(&env, &server, &session, "apply");
    assert!(applied.starts_with("session-prune: pruned "), "{applied}");
    for pruned in ["TOOL_CANARY_1", "TOOL_CANARY_2", "REASONING_CANARY_1"] {
        assert_eq!(
            parts_holding(&db, &session, pruned),
            0,
            "{pruned} is pruned"
        );
    }
    assert_eq!(
        parts_holding(&db, &session, "TOOL_CANARY_3"),
        1,
        "the last turn is kept"
    );

    let undone = command(&env, &server, &session, "undo");
    assert!(
        undone.starts_with(
            "session-prune: put back 4 parts of 2 messages: what the last prune here took."
        ),
        "{undone}"
    );
    assert_eq!(
        mock.requests().len(),
        requests,
        "no /prune command called the model"
    );
    // Open views are told to reload: one toast for the prunes and restores that came
    // together, not one per message.
    wait_until(Duration::from_secs(10), || {
        toasts(&watcher)
            .iter()
            .any(|toast| toast.contains("reload"))
    });
    let seen = toasts(&watcher);
    assert!(
        seen.iter()
            .any(|toast| toast.starts_with("session-prune: pruned ")),
        "{seen:?}"
    );
    let reloads = seen.iter().filter(|toast| toast.contains("reload")).count();
    assert!((1..=2).contains(&reloads), "{seen:?}");

    // The session continues with what was put back, and the model is sent no answer (the idle
    // test below shows a pruned output is not sent).
    let next = prompt_and_capture(
        &env,
        &server,
        &mock,
        &session,
        "Turn 4: go on. [[say:text_canary_4]]",
    );
    assert!(
        next.body.contains("TOOL_CANARY_1"),
        "what was put back is sent"
    );
    assert!(
        !next.body.contains("session-prune: "),
        "an answer was sent to the model"
    );

    // The plugin's server stops with OpenCode: the journal is free, and the audit holds.
    server.stop();
    audit_holds_once_the_plugin_server_stops(&db, 2);
}

#[test]
fn opencode_1_19_5_cleans_each_session_that_goes_idle() {
    let Some(WithPlugin {
        mock,
        env,
        mut server,
        session,
        _prefix,
    }) = with_plugin(&json!({"idleClean": "apply", "keepLastTurns": 1, "quietPeriod": "0"}))
    else {
        return;
    };
    let db = env.database();
    idle_clean_keeps_the_last_turn(
        |text| parts_holding(&db, &session, text),
        || {
            prompt_and_capture(
                &env,
                &server,
                &mock,
                &session,
                "Turn 4: go on. [[say:text_canary_4]]",
            )
            .body
        },
        PROMPT_TIMEOUT,
    );
    server.stop();
}

/// The pid of the server the plugin registered beside the database, if any.
fn registered_pid(db: &Path) -> Option<i64> {
    let text =
        std::fs::read_to_string(format!("{}.session-prune-serve.json", db.display())).ok()?;
    serde_json::from_str::<Value>(&text).ok()?["pid"].as_i64()
}

fn alive(pid: i64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_second_opencode_of_the_same_database_attaches_and_starts_a_server_when_the_first_ends() {
    let Some(WithPlugin {
        mock: _mock,
        env,
        server: mut first,
        session,
        _prefix,
    }) = with_plugin(&json!({"keepLastTurns": 1, "quietPeriod": "0"}))
    else {
        return;
    };
    let db = env.database();
    let started = registered_pid(&db).expect("the first OpenCode's plugin registered its server");
    let mut second = env.serve();
    let answer = command(&env, &second, &session, "");
    assert!(
        answer.starts_with("session-prune: a clean of this session would prune "),
        "{answer}"
    );
    assert_eq!(
        registered_pid(&db),
        Some(started),
        "the second attached to the first's server"
    );

    first.stop();
    wait_until(Duration::from_secs(15), || !(alive(started)));
    assert!(
        !alive(started),
        "the server stops with the OpenCode that started it"
    );
    let answer = command(&env, &second, &session, "apply");
    assert!(answer.starts_with("session-prune: pruned "), "{answer}");
    let restarted = registered_pid(&db).expect("the second registered its own server");
    assert_ne!(restarted, started);
    assert!(alive(restarted));
    second.stop();
}
