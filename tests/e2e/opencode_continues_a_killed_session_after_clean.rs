//! A session OpenCode was killed in, mid-tool, after completed turns: once it has been idle past
//! `--abandoned-after`, `clean` prunes its completed turns and leaves the killed run as it is,
//! and the real OpenCode 1.18.34, started again, continues the session with a new prompt
//! without sending the model any pruned content.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under
//! `CI=true`, where it fails.

use crate::common::cli::{assert_exit, json, run};
use crate::common::MANY_TURNS;
use crate::opencode_real;

use std::path::Path;
use std::time::{Duration, Instant};

use opencode_real::{http, query_value, MockModel, OpenCode};
use rusqlite::Connection;
use serde_json::json;

const PROMPT_TIMEOUT: Duration = Duration::from_secs(45);
/// How long the killed run's tool is given to start.
const TOOL_START_TIMEOUT: Duration = Duration::from_secs(60);
/// The canaries of the many-turns session's turns 1 to 10 (tool output and reasoning), which
/// OpenCode sends the model when the session is continued without a clean (measured: the
/// later turns' are not in its request).
fn pruned_canaries() -> Vec<String> {
    (1..=10)
        .flat_map(|turn| {
            [
                format!("TOOL_CANARY_T{turn:02}"),
                format!("REASONING_CANARY_T{turn:02}"),
            ]
        })
        .collect()
}
/// Two days, in ms: how far the session's times are set back.
const AGE_MS: i64 = 2 * 24 * 60 * 60 * 1000;

/// The id of the many-turns session's message holding a running `bash` part, if any.
fn running_message(db: &Path) -> Option<String> {
    let conn = Connection::open(db).ok()?;
    conn.query_row(
        "SELECT message_id FROM part WHERE session_id = ?1 \
           AND json_extract(data, '$.tool') = 'bash' \
           AND json_extract(data, '$.state.status') = 'running'",
        [MANY_TURNS],
        |row| row.get(0),
    )
    .ok()
}

/// The stored text of a message and of its parts, in id order.
fn rows_of(db: &Path, message: &str) -> String {
    let conn = Connection::open(db).expect("open");
    conn.query_row(
        "SELECT (SELECT data FROM message WHERE id = ?1) || \
                (SELECT group_concat(id || data, '|') FROM \
                   (SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id))",
        [message],
        |row| row.get(0),
    )
    .expect("rows")
}

/// Sets every time OpenCode wrote for the many-turns session back by [`AGE_MS`].
fn age_session(db: &Path) {
    let conn = Connection::open(db).expect("open");
    conn.execute_batch(&format!(
        "UPDATE session SET time_created = time_created - {AGE_MS},
                            time_updated = time_updated - {AGE_MS} WHERE id = '{MANY_TURNS}';
         UPDATE message SET time_created = time_created - {AGE_MS},
                            time_updated = time_updated - {AGE_MS} WHERE session_id = '{MANY_TURNS}';
         UPDATE part SET time_created = time_created - {AGE_MS},
                         time_updated = time_updated - {AGE_MS} WHERE session_id = '{MANY_TURNS}';
         UPDATE event SET data = json_set(data, '$.time', json_extract(data, '$.time') - {AGE_MS})
           WHERE aggregate_id = '{MANY_TURNS}' AND json_type(data, '$.time') IN ('integer', 'real');
         UPDATE event SET data = json_set(data, '$.timestamp',
                                          json_extract(data, '$.timestamp') - {AGE_MS})
           WHERE aggregate_id = '{MANY_TURNS}'
             AND json_type(data, '$.timestamp') IN ('integer', 'real');"
    ))
    .expect("age the session");
}

#[test]
fn opencode_continues_a_session_killed_mid_tool_after_clean() {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let mock = MockModel::start();
    let env = OpenCode::new(&bin, &mock.base_url());
    let db = env.install_database(
        &opencode_real::workspace().join("tests/fixtures/opencode-1.18.34/opencode.db"),
    );
    let path = format!(
        "/session/{MANY_TURNS}/message?directory={}",
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let prompt = |text: &str| {
        json!({
            "parts": [{"type": "text", "text": text}],
            "model": {"providerID": "fixture", "modelID": "fixture"}
        })
    };

    // OpenCode runs a tool that takes minutes, and is killed while it runs.
    let mut server = env.serve();
    let (url, killed_path, body) = (
        server.url().to_string(),
        path.clone(),
        prompt("[[bash:sleep 300]]"),
    );
    let pending = std::thread::spawn(move || {
        http(
            &url,
            "POST",
            &killed_path,
            Some(&body),
            Duration::from_secs(120),
        )
    });
    let started = Instant::now();
    let killed = loop {
        if let Some(message) = running_message(&db) {
            break message;
        }
        assert!(
            started.elapsed() < TOOL_START_TIMEOUT,
            "the tool never ran\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    server.stop();
    let _ = pending.join();

    // A day later (the session's times set back two days), the clean prunes its completed turns.
    age_session(&db);
    let killed_rows = rows_of(&db, &killed);
    let cleaned = run(
        &db,
        &[
            "--json",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    );
    assert_exit(&cleaned, 0);
    let report = json(&cleaned);
    assert_eq!(report["status"], "cleaned", "{report}");
    assert_eq!(report["abandonedRuns"], 1, "{report}");
    assert_eq!(
        report["blocked"].get("maintenance_required"),
        None,
        "{report}"
    );
    assert_eq!(
        rows_of(&db, &killed),
        killed_rows,
        "the killed run is left as it is"
    );

    // OpenCode continues the session; the model sees none of the pruned content.
    let asked_before = mock.requests().len();
    let mut server = env.serve();
    let reply = http(
        server.url(),
        "POST",
        &path,
        Some(&prompt("continue")),
        PROMPT_TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("prompting: {e}\n{}", server.log()));
    assert_eq!(reply.status, 200, "{}\n{}", reply.body, server.log());
    let log = server.log();
    server.stop();
    assert!(!log.contains("ERROR"), "{log}");
    let requests = mock.requests();
    assert!(requests.len() > asked_before, "the model was asked");
    for request in &requests[asked_before..] {
        for canary in pruned_canaries() {
            assert!(
                !request.body.contains(&canary),
                "the model was sent {canary}"
            );
        }
    }
}
