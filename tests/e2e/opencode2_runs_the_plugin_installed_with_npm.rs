//! The real OpenCode 2 (2.1.2 and 2.0.15) loads the plugin from the npm packages
//! `scripts/npm-pack.sh` packs, installed offline into a folder and named in `opencode.json`:
//! `/prune`, `/prune apply` and `/prune undo` run through OpenCode's own command route answer
//! in the session and write receipts the audit holds, without one request to the model;
//! CodeNomad's RPC answers through OpenCode (`POST /api/rpc/codenomad.session-pruning/...`) and
//! its `pruned` event reaches two clients of OpenCode's event stream; the session continues
//! without the pruned output; and the plugin's server stops with OpenCode (docs/plugin.md).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::npm::{install, install_as_the_readme_says, pack};
use crate::common::plugin::{
    add_plugin, audit_holds_once_the_plugin_server_stops, event_lines, events,
    idle_clean_keeps_the_last_turn, plugin_log, streaming_client, wait_until,
};
use crate::opencode_real::{
    canary_turn, opencode2_home, MockModel, ModelRequest, RequestKind, Service,
};

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

const TURN_TIMEOUT: Duration = Duration::from_secs(90);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The session's answers the plugin keeps (`POST /api/rpc/session-prune/answers`), oldest
/// first: `(command, text, final)`.
fn answers(service: &Service<'_>, session: &str) -> Vec<(String, String, bool)> {
    let answer = service.api(
        "POST",
        "/api/rpc/session-prune/answers",
        Some(&json!({"input": {"sessionID": session}})),
    );
    assert_eq!(answer.status, 200, "answers: {}", answer.body);
    answer.json()["output"]["answers"]
        .as_array()
        .expect("answers")
        .iter()
        .map(|entry| {
            (
                entry["command"].as_str().expect("command").to_string(),
                entry["text"].as_str().expect("text").to_string(),
                entry["final"].as_bool().expect("final"),
            )
        })
        .collect()
}

/// Runs `/prune TEXT` through OpenCode's command route; the number of the session's answers
/// before it (the index of its first answer).
fn send_command(service: &Service<'_>, session: &str, text: &str) -> usize {
    let before = answers(service, session).len();
    let answer = service.api(
        "POST",
        &format!("/api/session/{session}/command"),
        Some(&json!({"name": "prune", "text": text})),
    );
    assert_eq!(answer.status, 204, "/prune {text}: {}", answer.body);
    before
}

/// Waits for the session's answer number `index`: `(command, text, final)`.
fn answer_number(
    service: &Service<'_>,
    db: &Path,
    session: &str,
    index: usize,
    timeout: Duration,
) -> (String, String, bool) {
    let mut answer = None;
    let came = wait_until(timeout, || {
        answer = answers(service, session).get(index).cloned();
        answer.is_some()
    });
    assert!(
        came,
        "answer {index} did not come; the plugin's log: {}",
        plugin_log(db)
    );
    answer.unwrap_or_default()
}

/// Runs `/prune TEXT` on an idle session and waits for its one answer.
fn command(service: &Service<'_>, db: &Path, session: &str, text: &str) -> String {
    let index = send_command(service, session, text);
    let (command, answer, final_answer) =
        answer_number(service, db, session, index, ANSWER_TIMEOUT);
    assert_eq!(command, format!("/prune {text}").trim_end());
    assert!(final_answer, "no prune of an idle session waits: {answer}");
    answer
}

/// Sends a prompt whose run holds the session for a few seconds and waits until OpenCode marks
/// it in use (`session_v2.time_suspended`); the newest idle row before it, for `wait_idle`.
fn hold(service: &Service<'_>, db: &Path, session: &str) -> Option<String> {
    let before = service.send_prompt(session, "Hold the session. [[slow:6]]");
    let suspended = || {
        let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
        conn.query_row(
            "SELECT time_suspended IS NOT NULL FROM session_v2 WHERE id = ?1",
            [session],
            |row| row.get::<_, bool>(0),
        )
        .expect("claim")
    };
    assert!(
        wait_until(Duration::from_secs(20), suspended),
        "the run set no time_suspended"
    );
    before
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
    let url = format!("{}/api/event", service.url());
    event_lines(
        streaming_client()
            .get(url)
            .basic_auth("opencode", Some(service.password())),
    )
}

/// How many events of `kind` about `message` (its `data.messageID`) or `session` (its
/// `data.sessionID`) a client received.
fn events_about(lines: &Mutex<Vec<String>>, kind: &str, key: &str, id: &str) -> usize {
    events(lines)
        .iter()
        .filter(|event| event["type"] == kind && event["data"][key] == id)
        .count()
}

fn pruned_events(lines: &Mutex<Vec<String>>, message: &str) -> usize {
    events_about(
        lines,
        "rpc.codenomad.session-pruning.pruned",
        "messageID",
        message,
    )
}

/// `POST /api/rpc/codenomad.session-pruning/METHOD {"input": INPUT}` through OpenCode: the
/// method's `output`, after checking the answer is 200.
fn rpc(service: &Service<'_>, method: &str, input: Value) -> Value {
    let answer = service.api(
        "POST",
        &format!("/api/rpc/codenomad.session-pruning/{method}"),
        Some(&json!({ "input": input })),
    );
    assert_eq!(answer.status, 200, "{method}: {}", answer.body);
    answer.json()["output"].clone()
}

/// The prune request of every part a preview through the RPC offers of `message`.
fn prune_everything(service: &Service<'_>, session: &str, message: &str) -> Value {
    let preview = rpc(
        service,
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
    assert!(!indexes.is_empty(), "{preview}");
    json!({
        "sessionID": session, "messageID": message,
        "revision": preview["revision"], "indexes": indexes,
    })
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
    let watcher = subscribe(&service);
    thread::sleep(Duration::from_millis(500));

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

    // Stats, with the plugin's turns kept, counts what the preview takes.
    let previewed = preview
        .split(", keeping")
        .next()
        .and_then(|head| head.rsplit(", ").next())
        .expect("the preview's bytes")
        .to_string();
    let stats = command(&service, &db, &session, "stats");
    assert!(
        stats.contains(&format!(
            "This session: /prune apply would take {previewed} now."
        )),
        "{previewed}: {stats}"
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

    let extra = command(&service, &db, &session, "apply apply");
    assert!(
        extra.starts_with("session-prune: /prune apply takes nothing after it, not \"apply\""),
        "{extra}"
    );
    let receipts = command(&service, &db, &session, "receipts");
    assert!(
        receipts.starts_with("session-prune: this session's 2 prunes, newest first"),
        "{receipts}"
    );
    let bad = command(&service, &db, &session, "undo not-a-receipt");
    assert!(
        bad.starts_with("session-prune: not-a-receipt is no receipt ID"),
        "{bad}"
    );
    let undone = command(&service, &db, &session, "undo");
    assert!(
        undone.starts_with(
            "session-prune: put back 4 parts of 2 messages: what the last prune here took."
        ),
        "{undone}"
    );
    for back in ["TOOL_CANARY_1", "TOOL_CANARY_2", "REASONING_CANARY_1"] {
        assert_eq!(
            rows_holding(&db, &session, back),
            1,
            "{back} is back: {undone}"
        );
    }
    let stats = command(&service, &db, &session, "stats");
    assert!(
        stats.contains(
            "This session: /prune apply would take 0 B now (2 messages put back by /prune undo \
             are left alone)."
        ),
        "{stats}"
    );
    assert!(
        stats.starts_with("session-prune: the database is "),
        "{stats}"
    );
    assert_eq!(
        mock.requests().len(),
        requests,
        "no /prune command called the model"
    );
    assert_eq!(
        events_about(&watcher, "rpc.session-prune.answer", "sessionID", &session),
        8,
        "each answer reached a client of OpenCode's event stream"
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
    let request = prune_everything(&service, &session, &message);
    // Refused while a run holds the session, nothing announced; admitted once it settles.
    let held = hold(&service, &db, &session);
    assert_eq!(
        rpc(&service, "prune", request.clone()),
        json!({"status": "blocked", "reason": "maintenance_required"})
    );
    service.wait_idle(&session, held.as_deref(), TURN_TIMEOUT);
    assert_eq!(
        pruned_events(&first, &message),
        0,
        "a refusal is not announced"
    );
    let pruned = rpc(&service, "prune", request.clone());
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    assert_eq!(
        rpc(&service, "prune", request.clone()),
        pruned,
        "an identical retry answers the same"
    );
    // OpenCode checks each input against the method's schema before the plugin sees it.
    for (method, input) in [
        ("preview", json!({"sessionID": session, "messageID": 5})),
        (
            "prune",
            json!({"sessionID": session, "messageID": message, "revision": "0".repeat(63),
                   "indexes": [0]}),
        ),
        (
            "prune",
            json!({"sessionID": session, "messageID": message,
                   "revision": request["revision"], "indexes": []}),
        ),
    ] {
        let refused = service.api(
            "POST",
            &format!("/api/rpc/codenomad.session-pruning/{method}"),
            Some(&json!({ "input": input })),
        );
        assert_eq!(refused.status, 400, "{method} {input}: {}", refused.body);
        assert_eq!(
            refused.json()["type"],
            "rpc.invalid_input",
            "{}",
            refused.body
        );
    }
    // The outline pages by numbers, and takes back the checkpoints it gave.
    let outline = rpc(
        &service,
        "outline",
        json!({"sessionID": session, "after": -1, "known": []}),
    );
    assert_eq!(outline["status"], "outline", "{outline}");
    let again = rpc(
        &service,
        "outline",
        json!({"sessionID": session, "known": outline["checkpoints"]}),
    );
    assert_eq!(again["status"], "outline", "{again}");
    // A bound only the server checks (a revision's lowercase hex) is answered as the contract's
    // invalid request, not as a failure of the plugin.
    let upper = request["revision"]
        .as_str()
        .expect("revision")
        .to_uppercase();
    let refused = service.api(
        "POST",
        "/api/rpc/codenomad.session-pruning/prune",
        Some(
            &json!({"input": {"sessionID": session, "messageID": message,
                               "revision": upper, "indexes": [0]}}),
        ),
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.json()["type"],
        "invalid_request",
        "{}",
        refused.body
    );
    wait_until(Duration::from_secs(10), || {
        pruned_events(&first, &message) > 0 && pruned_events(&second, &message) > 0
    });
    assert!(
        pruned_events(&first, &message) >= 1,
        "the first client got the event"
    );
    assert!(
        pruned_events(&second, &message) >= 1,
        "the second client got the event"
    );

    // The session continues, and the model is sent none of what was pruned.
    let next = turn_and_capture(
        &service,
        &mock,
        &session,
        "Turn 4: go on. [[say:text_canary_4]]",
    );
    // Pruned through the RPC: not sent; put back by /prune undo: sent again.
    assert_eq!(rows_holding(&db, &session, "TOOL_CANARY_2"), 0);
    assert!(
        !next.body.contains("TOOL_CANARY_2"),
        "the pruned output was sent"
    );
    assert!(
        next.body.contains("TOOL_CANARY_1"),
        "what was put back is sent"
    );
    assert!(
        !next.body.contains("session-prune: "),
        "no answer of the plugin is sent to the model"
    );

    // `/prune apply` while a run holds the session: the answer says it waits, and the prune
    // follows when the session settles (the held turn is the last one, and is kept).
    let held = hold(&service, &db, &session);
    let index = send_command(&service, &session, "apply");
    let (_, waiting, final_answer) = answer_number(&service, &db, &session, index, ANSWER_TIMEOUT);
    assert!(!final_answer, "{waiting}");
    assert!(
        waiting.contains("wait: OpenCode is using this session"),
        "{waiting}"
    );
    assert_eq!(
        rows_holding(&db, &session, "TOOL_CANARY_3"),
        1,
        "nothing is pruned while held"
    );
    service.wait_idle(&session, held.as_deref(), TURN_TIMEOUT);
    let (_, settled, final_answer) =
        answer_number(&service, &db, &session, index + 1, TURN_TIMEOUT);
    assert!(final_answer, "{settled}");
    assert!(
        settled.starts_with("session-prune (after the session settled): pruned "),
        "{settled}"
    );
    assert_eq!(rows_holding(&db, &session, "TOOL_CANARY_3"), 0, "{settled}");

    // The plugin's server stops with OpenCode: the journal is free, and the audit holds.
    service.stop();
    audit_holds_once_the_plugin_server_stops(&db, 3);

    // After OpenCode starts again, the plugin starts its server again: a tool call of a new
    // turn is pruned through the RPC and announced on OpenCode's stream.
    let service = Service::start(&home);
    service.turn(&session, &canary_turn(6), TURN_TIMEOUT);
    service.turn(
        &session,
        "Turn 7: go on. [[say:text_canary_7]]",
        TURN_TIMEOUT,
    );
    let watcher = subscribe(&service);
    thread::sleep(Duration::from_millis(500));
    let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    let message: String = conn
        .query_row(
            "SELECT id FROM session_message WHERE session_id = ?1 AND type = 'assistant' \
             AND instr(data, 'TOOL_CANARY_6') > 0 ORDER BY seq LIMIT 1",
            [&session],
            |row| row.get(0),
        )
        .expect("turn 6's message");
    drop(conn);
    // A fork made before the prune keeps its own copy.
    let fork = service.call(
        "POST",
        &format!("/api/session/{session}/fork"),
        Some(&json!({})),
    );
    let fork = fork["data"]["id"]
        .as_str()
        .expect("the fork's id")
        .to_string();
    assert_eq!(
        rows_holding(&db, &fork, "TOOL_CANARY_6"),
        1,
        "the fork holds turn 6"
    );
    let request = prune_everything(&service, &session, &message);
    let pruned = rpc(&service, "prune", request.clone());
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    assert_eq!(rpc(&service, "prune", request), pruned);
    assert_eq!(rows_holding(&db, &session, "TOOL_CANARY_6"), 0);
    assert_eq!(
        rows_holding(&db, &fork, "TOOL_CANARY_6"),
        1,
        "the fork keeps its copy"
    );
    wait_until(Duration::from_secs(10), || {
        pruned_events(&watcher, &message) > 0
    });
    assert!(
        pruned_events(&watcher, &message) >= 1,
        "announced after the restart"
    );
}

#[test]
fn opencode_2_1_2_runs_prune_from_its_command_route_and_serves_codenomads_rpc() {
    the_plugin_prunes_from_inside("2.1.2");
}

#[test]
fn opencode_2_0_15_runs_prune_from_its_command_route_and_serves_codenomads_rpc() {
    the_plugin_prunes_from_inside("2.0.15");
}

/// The plugin's own server, as its registration beside the database names it: `(url, password)`.
fn plugin_server(db: &Path) -> (String, String) {
    let mut name = db.as_os_str().to_owned();
    name.push(".session-prune-serve.json");
    let registration: Value =
        serde_json::from_str(&std::fs::read_to_string(PathBuf::from(name)).expect("registration"))
            .expect("registration JSON");
    (
        registration["url"].as_str().expect("url").to_string(),
        registration["password"]
            .as_str()
            .expect("password")
            .to_string(),
    )
}

/// When each run of `session` began and ended (ms since epoch), from the `created` of OpenCode's
/// `session.execution.*` events a client of its stream received.
fn runs(lines: &Mutex<Vec<String>>, session: &str) -> Vec<(i64, i64)> {
    let mut runs = Vec::new();
    let mut started = None;
    for event in events(lines)
        .iter()
        .filter(|event| event["data"]["sessionID"] == session)
    {
        let created = event["created"].as_i64().expect("created");
        match event["type"].as_str().unwrap_or_default() {
            "session.execution.started" => started = Some(created),
            "session.execution.succeeded" | "session.execution.failed" => {
                runs.push((started.take().expect("a run that started"), created));
            }
            _ => {}
        }
    }
    runs
}

#[test]
fn opencode_2_1_2_cleans_each_session_that_goes_idle_and_never_during_a_run() {
    let Some(packed) = pack() else { return };
    let Some((mock, home)) = opencode2_home("2.1.2") else {
        return;
    };
    // Installed by the README's line.
    let user = tempfile::tempdir().expect("tempdir");
    let plugin = install_as_the_readme_says(user.path(), &packed);
    add_plugin(
        &home.root().join("config/opencode/opencode.json"),
        &plugin,
        &json!({"idleClean": "apply", "keepLastTurns": 1, "quietPeriod": "0"}),
    );
    let db = home.database();
    let mut service = Service::start(&home);
    let watcher = subscribe(&service);
    thread::sleep(Duration::from_millis(500));
    // Each turn's prompt is sent as soon as the previous run ends, while its idle clean runs.
    let session = service.session_with_turns("cleaned when idle", 3, TURN_TIMEOUT);

    idle_clean_keeps_the_last_turn(
        |text| rows_holding(&db, &session, text),
        || {
            turn_and_capture(
                &service,
                &mock,
                &session,
                "Turn 4: go on. [[say:text_canary_4]]",
            )
            .body
        },
        TURN_TIMEOUT,
    );
    let idle: Vec<(String, String, bool)> = answers(&service, &session)
        .into_iter()
        .filter(|(command, _, _)| command == "idle /prune apply")
        .collect();
    assert!(idle.len() >= 3, "an answer per idle clean: {idle:?}");

    // No prune of the session committed while one of its runs was going on.
    let (url, password) = plugin_server(&db);
    let receipts: Value = reqwest::blocking::Client::new()
        .get(format!(
            "{url}/api/workspaces/opencode/session-pruning/receipts?sessionID={session}"
        ))
        .bearer_auth(password)
        .send()
        .expect("receipts")
        .json()
        .expect("receipts JSON");
    let committed: Vec<i64> = receipts
        .as_array()
        .expect("receipts")
        .iter()
        .map(|receipt| receipt["committedAtMs"].as_i64().expect("committedAtMs"))
        .collect();
    let runs = runs(&watcher, &session);
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert!(committed.len() >= 3, "{receipts}");
    for at in &committed {
        assert!(
            !runs.iter().any(|(start, end)| start < at && at < end),
            "a prune committed at {at} during a run: {runs:?}"
        );
    }
    service.stop();
}

#[test]
fn opencode_2_1_2_answers_prune_with_the_package_a_missing_binary_needs() {
    let Some(packed) = pack() else { return };
    let Some((_mock, home)) = opencode2_home("2.1.2") else {
        return;
    };
    // The launcher alone: the platform package that holds the binary is not installed.
    let prefix = tempfile::tempdir().expect("tempdir");
    install(prefix.path(), &[&packed.launcher]);
    let plugin = prefix.path().join("node_modules/session-prune");
    assert!(!prefix
        .path()
        .join("node_modules/session-prune-linux-x64-gnu")
        .exists());
    add_plugin(
        &home.root().join("config/opencode/opencode.json"),
        &plugin,
        &json!({"quietPeriod": -5, "keepLastTurns": 1e20}),
    );
    let db = home.database();
    let mut service = Service::start(&home);
    let session = service.create_session("no binary");
    let answer = command(&service, &db, &session, "");
    assert!(
        answer.starts_with(
            "session-prune: the package session-prune-linux-x64-gnu, which holds the binary \
             for linux-x64-gnu, is not installed"
        ),
        "{answer}"
    );
    let log = plugin_log(&db);
    assert!(log.contains("session-prune-linux-x64-gnu"), "{log}");
    // Options it does not understand are named, and their defaults used.
    assert!(
        log.contains("quietPeriod must be a duration such as \"30s\", \"2m\" or a number of seconds, not -5; using the default"),
        "{log}"
    );
    assert!(
        log.contains("keepLastTurns must be a whole number from 0 to 4294967295, not 100000000000000000000; using the default"),
        "{log}"
    );
    service.stop();
}

/// A turn whose shell output is about 30 KB, so that a compaction keeps only the last turns.
fn big_turn(n: u32) -> String {
    format!(
        "Turn {n}. [[bash:seq -f 'output line %g of turn {n}' 1 1200]] \
         [[reason:thinking about turn {n}]] [[say:text_canary_{n}]]"
    )
}

/// Takes a turn of `text` in `session` and returns the one chat request it made.
fn turn_and_capture(
    service: &Service<'_>,
    mock: &MockModel,
    session: &str,
    text: &str,
) -> ModelRequest {
    let from = mock.requests().len();
    service.turn(session, text, TURN_TIMEOUT);
    let chats: Vec<ModelRequest> = mock.requests()[from..]
        .iter()
        .filter(|r| r.kind == RequestKind::Chat && r.session_id() == Some(session))
        .cloned()
        .collect();
    assert_eq!(chats.len(), 1, "one chat request per prompt");
    chats.into_iter().next().expect("the turn's chat request")
}

/// The `messages` of a chat request.
fn messages(request: &ModelRequest) -> Vec<Value> {
    request.json()["messages"]
        .as_array()
        .expect("messages")
        .clone()
}

#[test]
fn opencode_2_1_2_prune_old_takes_only_what_the_model_is_no_longer_sent() {
    let Some(packed) = pack() else { return };
    let Some((mock, home)) = opencode2_home("2.1.2") else {
        return;
    };
    let prefix = tempfile::tempdir().expect("tempdir");
    install(prefix.path(), &[&packed.launcher, &packed.binary]);
    add_plugin(
        &home.root().join("config/opencode/opencode.json"),
        &prefix.path().join("node_modules/session-prune"),
        &json!({"keepLastTurns": 0, "quietPeriod": "0"}),
    );
    let db = home.database();
    let mut service = Service::start(&home);
    let session = service.create_session("compacted");
    for n in 1..=6 {
        service.turn(&session, &big_turn(n), TURN_TIMEOUT);
    }
    let early = command(&service, &db, &session, "old");
    assert_eq!(
        early,
        "session-prune: nothing is older than this session's last compaction (or it has none \
         yet); /prune apply takes what is before the last turns."
    );
    service.compact(&session, TURN_TIMEOUT);
    let before_prune = messages(&turn_and_capture(
        &service,
        &mock,
        &session,
        "Turn 7: go on. [[say:text_canary_7]]",
    ));

    let answer = command(&service, &db, &session, "old");
    assert!(answer.starts_with("session-prune: pruned "), "{answer}");
    assert!(
        answer.contains(
            "All of it was older than the last compaction: the model is sent the same as before."
        ),
        "{answer}"
    );
    assert_eq!(
        rows_holding(&db, &session, "output line 1 of turn 1"),
        0,
        "{answer}"
    );
    assert_eq!(
        rows_holding(&db, &session, "output line 1 of turn 6"),
        1,
        "what the compaction kept stays: {answer}"
    );

    // The next request repeats the one before the prune, message for message, and goes on.
    let after_prune = messages(&turn_and_capture(
        &service,
        &mock,
        &session,
        "Turn 8: go on. [[say:text_canary_8]]",
    ));
    assert!(after_prune.len() > before_prune.len());
    assert_eq!(
        after_prune[..before_prune.len()],
        before_prune[..],
        "the messages sent before the prune are sent again unchanged"
    );
    service.stop();
}
