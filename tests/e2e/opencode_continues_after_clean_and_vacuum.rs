//! Interoperability of the bulk job: after `clean --all --apply` and `vacuum`, the real
//! OpenCode 1.18.34 still exports every session with its text, continues every session that
//! can be continued, and sends the model none of the pruned tool output or reasoning.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under
//! `CI=true`, where it fails.

use crate::opencode_real;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use opencode_real::{http, query_value, MockModel, OpenCode, RequestKind};
use rusqlite::Connection;
use serde_json::{json, Value};

const EXPORT_TIMEOUT: Duration = Duration::from_secs(30);
const PROMPT_TIMEOUT: Duration = Duration::from_secs(45);
/// Canaries of turns 1 to 8 of the many-turns session: pruned with the rest of its history.
const PRUNED: [&str; 2] = ["TOOL_CANARY_T05", "REASONING_CANARY_T05"];

/// Runs `session-prune --db DB ARGS --json` and returns its JSON document.
fn session_prune(db: &Path, args: &[&str]) -> Value {
    let out = crate::common::cli::session_prune()
        .arg("--db")
        .arg(db)
        .arg("--json")
        .args(args)
        .output()
        .expect("run session-prune");
    assert!(
        out.status.success(),
        "session-prune {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// Every V1 text part, `id -> data`.
fn text_parts(db: &Path) -> BTreeMap<String, String> {
    let conn = Connection::open(db).expect("open the database");
    let mut stmt = conn
        .prepare("SELECT id, data FROM part WHERE json_extract(data, '$.type') = 'text'")
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// V1 sessions whose assistant messages are all complete (the killed runs' are not, and
/// OpenCode would resume them rather than answer a new prompt).
fn continuable_sessions(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).expect("open the database");
    let mut stmt = conn
        .prepare(
            "SELECT s.id FROM session s WHERE EXISTS (SELECT 1 FROM message m WHERE m.session_id = s.id) \
               AND NOT EXISTS (SELECT 1 FROM message m WHERE m.session_id = s.id \
                 AND json_extract(m.data, '$.role') = 'assistant' \
                 AND json_extract(m.data, '$.time.completed') IS NULL) \
             ORDER BY s.id",
        )
        .expect("prepare");
    let rows = stmt.query_map([], |r| r.get(0)).expect("query");
    rows.map(|r| r.expect("row")).collect()
}

#[test]
fn opencode_continues_after_clean_and_vacuum() {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let mock = MockModel::start();
    let env = OpenCode::new(&bin, &mock.base_url());
    let db = env.install_database(
        &opencode_real::workspace().join("tests/fixtures/opencode-1.18.34/opencode.db"),
    );
    let texts = text_parts(&db);
    let size_before = std::fs::metadata(&db).expect("size").len();

    let report = session_prune(
        &db,
        &["clean", "--all", "--keep-last-turns", "0", "--apply"],
    );
    assert_eq!(report["status"], "cleaned", "{report}");
    assert_eq!(report["pruned"], 21, "{report}");
    let vacuumed = session_prune(&db, &["vacuum"]);
    assert_eq!(vacuumed["status"], "vacuumed", "{vacuumed}");
    let size_after = std::fs::metadata(&db).expect("size").len();
    assert!(size_after < size_before, "{size_before} -> {size_after}");
    assert_eq!(text_parts(&db), texts, "every text part byte-identical");

    // Every session still exports, with its text and without the pruned canaries.
    let conn = Connection::open(&db).expect("open");
    let mut stmt = conn
        .prepare("SELECT id FROM session ORDER BY id")
        .expect("prepare");
    let sessions: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    drop(stmt);
    drop(conn);
    assert_eq!(sessions.len(), 10);
    for session in &sessions {
        let out = env.export(session, EXPORT_TIMEOUT);
        assert!(
            out.status.success(),
            "opencode export {session}: {}\n{}",
            out.status,
            out.stderr
        );
        let exported: Value = serde_json::from_str(&out.stdout).expect("export is JSON");
        assert_eq!(exported["info"]["id"], session.as_str());
        for canary in PRUNED {
            assert!(
                !out.stdout.contains(canary),
                "{session} still exports {canary}"
            );
        }
    }

    // Every session that can be continued answers a new prompt, from history without the
    // pruned content.
    let continuable = continuable_sessions(&db);
    assert!(continuable.len() >= 6, "{continuable:?}");
    let mut server = env.serve();
    for session in &continuable {
        let path = format!(
            "/session/{session}/message?directory={}",
            query_value(env.work_dir().to_str().expect("UTF-8 path"))
        );
        let body = json!({
            "parts": [{"type": "text", "text": "continue"}],
            "model": {"providerID": "fixture", "modelID": "fixture"}
        });
        let reply = http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT)
            .unwrap_or_else(|e| panic!("prompting {session}: {e}\n{}", server.log()));
        assert_eq!(
            reply.status,
            200,
            "{session}: {}\n{}",
            reply.body,
            server.log()
        );
        let reply = reply.json();
        assert_eq!(reply["info"]["finish"], "stop", "{session}: {reply}");
    }
    server.stop();
    let requests = mock.requests();
    for request in &requests {
        for canary in PRUNED {
            assert!(
                !request.body.contains(canary),
                "the model was sent {canary}"
            );
        }
    }
    let chats = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Chat)
        .count();
    assert!(chats >= continuable.len(), "{chats} chat requests");
}
