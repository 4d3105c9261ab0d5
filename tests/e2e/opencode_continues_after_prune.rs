//! Interoperability: after this project prunes a turn, the real OpenCode 1.18.34 still exports
//! the session and continues it, and the request it sends the model no longer holds the pruned
//! tool output or reasoning.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under
//! `CI=true`, where it fails.

use crate::opencode_real;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use opencode_real::{http, query_value, MockModel, OpenCode, RequestKind, REPLY_TEXT};
use pruning_engine::{
    Engine, Journal, PartKind, PreviewRequest, PreviewResult, PruneRequest, PruneResult,
};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{json, Value};

const SESSION_TITLE: &str = "fixture: many turns";
/// Turn 5 (unicode bash output, not compacted by OpenCode) is pruned.
const TOOL_CANARY: &str = "TOOL_CANARY_T05";
const REASONING_CANARY: &str = "REASONING_CANARY_T05";
/// Turn 6 stays: its canaries prove the history really reached the model.
const KEPT_TOOL_CANARY: &str = "TOOL_CANARY_T06";
const KEPT_REASONING_CANARY: &str = "REASONING_CANARY_T06";
const PROMPT: &str = "continue";

const EXPORT_TIMEOUT: Duration = Duration::from_secs(30);
const PROMPT_TIMEOUT: Duration = Duration::from_secs(45);

fn fixture_db() -> PathBuf {
    opencode_real::workspace().join("tests/fixtures/opencode-1.18.34/opencode.db")
}

/// Rows of `table` (`part` or `event`) whose `data` contains `needle`.
fn rows_containing(conn: &Connection, table: &str, needle: &str) -> i64 {
    conn.query_row(
        &format!("SELECT count(*) FROM {table} WHERE instr(data, ?1) > 0"),
        [needle],
        |row| row.get(0),
    )
    .expect("count rows")
}

fn canary_rows(db: &Path) -> [(String, i64); 4] {
    let conn = Connection::open(db).expect("open the database");
    let count = |table: &str, needle: &str| {
        (
            format!("{table}:{needle}"),
            rows_containing(&conn, table, needle),
        )
    };
    [
        count("part", TOOL_CANARY),
        count("event", TOOL_CANARY),
        count("part", REASONING_CANARY),
        count("event", REASONING_CANARY),
    ]
}

fn session_id(conn: &Connection) -> String {
    conn.query_row(
        "SELECT id FROM session WHERE title = ?1",
        [SESSION_TITLE],
        |row| row.get(0),
    )
    .expect("the fixture has the many-turns session")
}

fn message_count(conn: &Connection, session: &str) -> i64 {
    conn.query_row(
        "SELECT count(*) FROM message WHERE session_id = ?1",
        [session],
        |row| row.get(0),
    )
    .expect("count messages")
}

/// The assistant message of turn 5: a completed bash tool whose output has the tool canary, a
/// reasoning part with the reasoning canary, and neither compacted by OpenCode.
fn pruned_turn_message(conn: &Connection, session: &str) -> String {
    let sql = "SELECT t.message_id FROM part t JOIN part r ON r.message_id = t.message_id \
               WHERE t.session_id = ?1 \
                 AND json_extract(t.data, '$.type') = 'tool' \
                 AND json_extract(t.data, '$.tool') = 'bash' \
                 AND json_extract(t.data, '$.state.status') = 'completed' \
                 AND json_extract(t.data, '$.state.time.compacted') IS NULL \
                 AND instr(json_extract(t.data, '$.state.output'), ?2) > 0 \
                 AND json_extract(r.data, '$.type') = 'reasoning' \
                 AND instr(json_extract(r.data, '$.text'), ?3) > 0";
    let mut stmt = conn.prepare(sql).expect("prepare");
    let ids: Vec<String> = stmt
        .query_map(
            rusqlite::params![session, TOOL_CANARY, REASONING_CANARY],
            |row| row.get(0),
        )
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(
        ids.len(),
        1,
        "exactly one assistant message holds turn 5's tool and reasoning: {ids:?}"
    );
    ids.into_iter().next().expect("one id")
}

fn tool_part_count(conn: &Connection, session: &str) -> usize {
    conn.query_row(
        "SELECT count(*) FROM part WHERE session_id = ?1 AND json_extract(data, '$.type') = 'tool'",
        [session],
        |row| row.get::<_, i64>(0),
    )
    .expect("count tool parts") as usize
}

/// Checks that every `tool` message of a chat request answers a call of an earlier assistant
/// message (a pruned call must not leave an orphaned result, which providers reject), and
/// returns how many tool results were sent.
fn tool_results_paired(request: &Value) -> usize {
    let mut calls = Vec::new();
    let mut results = 0;
    for message in request["messages"].as_array().expect("request messages") {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            calls.push(call["id"].as_str().expect("tool call id").to_string());
        }
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().expect("tool_call_id");
            assert!(
                calls.iter().any(|c| c == id),
                "tool result {id} answers no earlier call"
            );
            results += 1;
        }
    }
    results
}

fn prune_turn(db: &Path, journal: &Path, session: &str, message: &str) {
    let store = OpenCodeStore::open(db, StoreOptions::default()).expect("open the store");
    let engine = Engine::open(store, Journal::open(journal).expect("open the journal"))
        .expect("open the engine");
    let preview = engine
        .preview(&PreviewRequest::new(session.into(), message.into()).expect("preview request"))
        .expect("preview");
    let PreviewResult::Preview {
        revision, parts, ..
    } = preview
    else {
        panic!("preview of turn 5 is blocked: {preview:?}");
    };
    let kinds: Vec<PartKind> = parts.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [PartKind::Reasoning, PartKind::Tool],
        "turn 5's technical parts: {parts:?}"
    );

    let request = PruneRequest::all_technical(session.into(), message.into(), revision)
        .expect("prune request");
    let outcome = engine.prune(&request).expect("prune");
    match &outcome.result {
        PruneResult::Pruned {
            message_id,
            removed_count,
            ..
        } => {
            assert_eq!(message_id, message);
            assert_eq!(
                *removed_count, 2,
                "the reasoning and the bash tool part are removed"
            );
        }
        PruneResult::Blocked { reason } => {
            panic!("prune refused: {reason} ({:?})", outcome.refusal)
        }
    }
    // Dropping the engine closes the store's connection before OpenCode opens the database.
    drop(engine);
}

fn export_json(env: &OpenCode, session: &str, expected_messages: i64, message: &str) {
    let out = env.export(session, EXPORT_TIMEOUT);
    assert!(
        out.status.success(),
        "opencode export exited with {}\nstderr:\n{}",
        out.status,
        out.stderr
    );
    let exported: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("export output is not JSON ({e}):\n{}", out.stdout));
    assert_eq!(exported["info"]["id"], session);
    let messages = exported["messages"]
        .as_array()
        .expect("export has messages");
    assert_eq!(
        messages.len() as i64,
        expected_messages,
        "exported message count"
    );
    let pruned = messages
        .iter()
        .find(|m| m["info"]["id"] == message)
        .expect("the pruned message is still exported");
    let types: Vec<&str> = pruned["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter_map(|p| p["type"].as_str())
        .collect();
    assert_eq!(
        types,
        ["step-start", "step-finish"],
        "what is left of turn 5"
    );
    for canary in [TOOL_CANARY, REASONING_CANARY] {
        assert!(!out.stdout.contains(canary), "export still holds {canary}");
    }
    for canary in [KEPT_TOOL_CANARY, KEPT_REASONING_CANARY] {
        assert!(
            out.stdout.contains(canary),
            "export lost the unpruned {canary}"
        );
    }
}

#[test]
fn opencode_continues_after_prune() {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let started = Instant::now();
    let mock = MockModel::start();
    let env = OpenCode::new(&bin, &mock.base_url());
    let db = env.install_database(&fixture_db());
    eprintln!(
        "OpenCode env at {} (work tree {} the fixture's project)",
        env.root().display(),
        if env.work_is_fixture_project() {
            "is"
        } else {
            "is NOT"
        }
    );

    // 1. The turn to prune, and where its canaries are before the prune.
    let conn = Connection::open(&db).expect("open the copied fixture");
    let session = session_id(&conn);
    let message = pruned_turn_message(&conn, &session);
    let messages_before = message_count(&conn, &session);
    let tool_parts_before = tool_part_count(&conn, &session);
    drop(conn);
    for (place, rows) in canary_rows(&db) {
        assert!(
            rows > 0,
            "before the prune {place} is in {rows} rows; the fixture changed?"
        );
    }

    // 2. Prune it.
    prune_turn(&db, &env.root().join("journal.redb"), &session, &message);
    for (place, rows) in canary_rows(&db) {
        assert_eq!(rows, 0, "after the prune {place} is still in {rows} rows");
    }
    let conn = Connection::open(&db).expect("open the pruned database");
    assert_eq!(
        message_count(&conn, &session),
        messages_before,
        "a prune removes no message"
    );
    assert!(
        rows_containing(&conn, "part", KEPT_TOOL_CANARY) > 0,
        "turn 6 must stay"
    );
    let tool_parts = tool_part_count(&conn, &session);
    assert_eq!(
        tool_parts,
        tool_parts_before - 1,
        "only turn 5's tool part is gone"
    );
    drop(conn);
    eprintln!("[{:?}] pruned turn 5 ({message})", started.elapsed());

    // 3. OpenCode exports the pruned session.
    export_json(&env, &session, messages_before, &message);
    eprintln!("[{:?}] opencode export ok", started.elapsed());

    // 4. OpenCode continues the session against the mock model.
    let mut server = env.serve();
    eprintln!(
        "[{:?}] opencode serve at {}",
        started.elapsed(),
        server.url()
    );
    let path = format!(
        "/session/{session}/message?directory={}",
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let body = json!({
        "parts": [{"type": "text", "text": PROMPT}],
        "model": {"providerID": "fixture", "modelID": "fixture"}
    });
    let reply =
        http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT).unwrap_or_else(|e| {
            panic!(
                "prompting OpenCode failed: {e}\nserver log:\n{}",
                server.log()
            )
        });
    assert_eq!(
        reply.status,
        200,
        "POST {path}: {}\nserver log:\n{}",
        reply.body,
        server.log()
    );
    let reply = reply.json();
    assert_eq!(reply["info"]["role"], "assistant", "reply: {reply}");
    assert!(
        reply["info"].get("error").is_none(),
        "the turn failed: {reply}"
    );
    assert_eq!(reply["info"]["finish"], "stop", "reply: {reply}");
    let reply_text: Vec<&str> = reply["parts"]
        .as_array()
        .expect("reply parts")
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(reply_text, [REPLY_TEXT], "reply: {reply}");
    let reply_id = reply["info"]["id"].as_str().expect("reply id").to_string();
    server.stop();
    eprintln!(
        "[{:?}] OpenCode answered the prompt; server stopped",
        started.elapsed()
    );

    // 5. What OpenCode sent the model. No request may hold the pruned turn's output or
    // reasoning; the one chat request for this session (OpenCode names it in the
    // `x-opencode-session-id` header) ends with the prompt and carries the rest of the history.
    let requests = mock.requests();
    for request in &requests {
        for canary in [TOOL_CANARY, REASONING_CANARY] {
            assert!(
                !request.body.contains(canary),
                "{} {} ({:?}) sent the pruned {canary} to the model",
                request.method,
                request.path,
                request.kind
            );
        }
    }
    let continued: Vec<_> = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Chat && r.session_id() == Some(session.as_str()))
        .collect();
    assert_eq!(
        continued.len(),
        1,
        "one chat request continues the session; requests: {:?}",
        requests
            .iter()
            .map(|r| (&r.method, &r.path, r.kind, r.session_id()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        continued[0].last_user_text().as_deref(),
        Some(PROMPT),
        "the request ends with the prompt"
    );
    assert_eq!(
        tool_results_paired(&continued[0].json()),
        tool_parts,
        "one tool result per remaining tool part, none for the pruned call"
    );
    let sent = &continued[0].body;
    for kept in [
        KEPT_TOOL_CANARY,
        KEPT_REASONING_CANARY,
        "Turn 06 of 10",
        "Turn 05 of 10",
    ] {
        assert!(
            sent.contains(kept),
            "the request lacks {kept}: the history was not sent"
        );
    }

    // 6. The reply is stored after the prune: a new user and assistant message.
    let conn = Connection::open(&db).expect("open the database after OpenCode");
    assert_eq!(message_count(&conn, &session), messages_before + 2);
    let stored_text: Option<String> = conn
        .query_row(
            "SELECT json_extract(p.data, '$.text') FROM part p JOIN message m ON m.id = p.message_id \
             WHERE m.id = ?1 AND m.session_id = ?2 \
               AND json_extract(m.data, '$.role') = 'assistant' \
               AND json_extract(p.data, '$.type') = 'text'",
            [&reply_id, &session],
            |row| row.get(0),
        )
        .optional()
        .expect("query the reply");
    assert_eq!(
        stored_text.as_deref(),
        Some(REPLY_TEXT),
        "the reply is stored"
    );
    drop(conn);
    for (place, rows) in canary_rows(&db) {
        assert_eq!(
            rows, 0,
            "after OpenCode ran, {place} is back in {rows} rows"
        );
    }
    eprintln!("[{:?}] done", started.elapsed());
}
