//! Interoperability of restore: the real OpenCode 1.18.34 runs a tool whose output holds a
//! canary; `clean --apply --archive` prunes it (and the fixture's other complete turns), and
//! OpenCode, continuing the session, no longer sends the canary to the model. `restore` of every
//! receipt then puts back, byte for byte, every part row and every `message.part.updated.1`
//! snapshot the clean removed and takes the clean's `message.part.removed.1` events out; the
//! audit holds; OpenCode exports the session with the tool output again, and when it continues
//! the session its next request to the model holds the canary again.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under
//! `CI=true`, where it fails.

use crate::common::cli::{assert_exit, json, run};
use crate::common::MANY_TURNS;
use crate::opencode_real;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use opencode_real::{http, query_value, MockModel, ModelRequest, OpenCode, RequestKind};
use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;
use serde_json::{json, Value};

const PROMPT_TIMEOUT: Duration = Duration::from_secs(60);
const EXPORT_TIMEOUT: Duration = Duration::from_secs(30);
/// What the tool prints: the shell computes it, so that neither the prompt nor the tool call's
/// input holds it, only the tool's output.
const CANARY: &str = "RESTORED_OUTPUT_42_CANARY";
const TOOL_PROMPT: &str = "[[bash:echo RESTORED_OUTPUT_$((6*7))_CANARY]]";
/// A canary of the fixture's own turn 5 (its bash output), pruned and restored too.
const FIXTURE_CANARY: &str = "TOOL_CANARY_T05";
/// Global flags of every command here: the session was just written by OpenCode (no quiet
/// period), and the fixture's killed runs are left alone.
const GLOBAL: [&str; 4] = ["--quiet-period", "0", "--abandoned-after", "never"];

/// Every row of `table` matching `filter`, all columns with their exact values, by `id`.
fn rows_by_id(db: &Path, table: &str, filter: &str) -> BTreeMap<String, Vec<SqlValue>> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare(&format!("SELECT id, * FROM {table} WHERE {filter}"))
        .expect("prepare");
    let width = stmt.column_count();
    let rows = stmt
        .query_map([], |row| {
            let values = (1..width)
                .map(|i| row.get::<_, SqlValue>(i))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((row.get::<_, String>(0)?, values))
        })
        .expect("query");
    rows.collect::<rusqlite::Result<_>>().expect("rows")
}

fn parts(db: &Path) -> BTreeMap<String, Vec<SqlValue>> {
    rows_by_id(db, "part", "1")
}

fn snapshots(db: &Path) -> BTreeMap<String, Vec<SqlValue>> {
    rows_by_id(db, "event", "type = 'message.part.updated.1'")
}

fn removals(db: &Path) -> BTreeMap<String, Vec<SqlValue>> {
    rows_by_id(db, "event", "type = 'message.part.removed.1'")
}

/// Rows of `table` whose `data` holds `needle`.
fn rows_holding(db: &Path, table: &str, needle: &str) -> i64 {
    Connection::open(db)
        .expect("open")
        .query_row(
            &format!("SELECT count(*) FROM {table} WHERE instr(data, ?1) > 0"),
            [needle],
            |row| row.get(0),
        )
        .expect("count")
}

/// `session-prune` with [`GLOBAL`] and `args` on `db`: exit `code`, its JSON document.
fn session_prune(db: &Path, args: &[&str], code: i32) -> Value {
    let mut all: Vec<&str> = GLOBAL.to_vec();
    all.push("--json");
    all.extend_from_slice(args);
    let out = run(db, &all);
    assert_exit(&out, code);
    json(&out)
}

/// Starts `opencode serve`, sends `text` as a prompt to the many-turns session, checks the turn
/// ended with a reply, stops the server, and returns the chat requests the model received for
/// the session during the turn.
fn prompt(env: &OpenCode, mock: &MockModel, text: &str) -> Vec<ModelRequest> {
    let asked_before = mock.requests().len();
    let mut server = env.serve();
    let path = format!(
        "/session/{MANY_TURNS}/message?directory={}",
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let body = json!({
        "parts": [{"type": "text", "text": text}],
        "model": {"providerID": "fixture", "modelID": "fixture"}
    });
    let reply = http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT)
        .unwrap_or_else(|e| panic!("prompting: {e}\n{}", server.log()));
    assert_eq!(reply.status, 200, "{}\n{}", reply.body, server.log());
    let reply = reply.json();
    assert_eq!(reply["info"]["role"], "assistant", "{reply}");
    assert!(
        reply["info"].get("error").is_none(),
        "the turn failed: {reply}"
    );
    let log = server.log();
    server.stop();
    assert!(!log.contains("ERROR"), "{log}");
    let chats: Vec<ModelRequest> = mock.requests()[asked_before..]
        .iter()
        .filter(|r| r.kind == RequestKind::Chat && r.session_id() == Some(MANY_TURNS))
        .cloned()
        .collect();
    assert!(!chats.is_empty(), "the model was asked for the session");
    chats
}

/// The ids of the messages of `rows` (part rows: `message_id` is their second column).
fn message_ids(rows: &BTreeMap<String, Vec<SqlValue>>) -> BTreeSet<String> {
    rows.values()
        .map(|row| match &row[1] {
            SqlValue::Text(id) => id.clone(),
            other => panic!("message_id {other:?}"),
        })
        .collect()
}

#[test]
fn opencode_continues_a_restored_session_with_its_tool_output() {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let mock = MockModel::start();
    let env = OpenCode::new(&bin, &mock.base_url());
    let db = env.install_database(
        &opencode_real::workspace().join("tests/fixtures/opencode-1.18.34/opencode.db"),
    );

    // OpenCode runs the tool; its output (the canary) is stored in the part and its snapshots.
    let first = prompt(&env, &mock, TOOL_PROMPT);
    assert!(
        !first[0].body.contains(CANARY),
        "the canary is the tool's output, not the prompt's"
    );
    assert!(
        first.last().expect("a request").body.contains(CANARY),
        "the tool's output is sent back to the model"
    );
    assert_eq!(rows_holding(&db, "part", CANARY), 1);
    assert!(rows_holding(&db, "event", CANARY) > 0, "snapshots hold it");
    let parts_before = parts(&db);
    let snapshots_before = snapshots(&db);
    let removals_before = removals(&db);

    // The archiving clean prunes it, and OpenCode no longer sends it.
    let report = session_prune(
        &db,
        &[
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
            "--archive",
        ],
        0,
    );
    assert_eq!(report["status"], "cleaned", "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    assert!(report["archiveBytes"].as_u64().expect("archiveBytes") > 0);
    for table in ["part", "event"] {
        assert_eq!(rows_holding(&db, table, CANARY), 0, "{table}");
        assert_eq!(rows_holding(&db, table, FIXTURE_CANARY), 0, "{table}");
    }
    let receipts: Vec<String> = {
        let conn = Connection::open(&db).expect("open");
        let mut stmt = conn
            .prepare("SELECT id FROM session_prune_receipt ORDER BY chain_seq")
            .expect("prepare");
        let ids = stmt.query_map([], |row| row.get(0)).expect("query");
        ids.collect::<rusqlite::Result<_>>().expect("ids")
    };
    // A receipt per pruned message, and one per compacted session (the compactions first).
    assert_eq!(
        receipts.len() as u64,
        report["pruned"].as_u64().unwrap() + report["compaction"]["sessions"].as_u64().unwrap()
    );
    assert!(
        report["compaction"]["sessions"].as_u64().unwrap() > 0,
        "{report}"
    );
    let continued = prompt(&env, &mock, "continue");
    for request in &continued {
        assert!(
            !request.body.contains(CANARY),
            "the model was sent {CANARY}"
        );
        assert!(!request.body.contains(FIXTURE_CANARY));
    }
    let parts_continued = parts(&db);

    // Before the restores, every prune's entry reads back to its hash.
    let audit = session_prune(&db, &["audit"], 0);
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(audit["archive"]["checked"], receipts.len(), "{audit}");

    // Restore every receipt, newest first: a compaction's snapshots go back once the prunes
    // after it put back the newer snapshots that supersede them.
    for receipt in receipts.iter().rev() {
        let restored = session_prune(&db, &["restore", receipt], 0);
        assert_eq!(restored["status"], "restored", "{restored}");
    }
    // After them, no restored prune's entry is asked for.
    let audit = session_prune(&db, &["audit"], 0);
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(audit["archive"]["checked"], 0, "{audit}");

    // Byte for byte: every part and snapshot of before the clean is back, the clean's removal
    // events are gone; the rest is what OpenCode wrote when it continued the session.
    let parts_now = parts(&db);
    for (id, row) in &parts_before {
        assert_eq!(parts_now.get(id), Some(row), "part {id}");
    }
    let added: BTreeMap<String, Vec<SqlValue>> = parts_now
        .iter()
        .filter(|(id, _)| !parts_before.contains_key(*id))
        .map(|(id, row)| (id.clone(), row.clone()))
        .collect();
    let continued_added: BTreeMap<String, Vec<SqlValue>> = parts_continued
        .iter()
        .filter(|(id, _)| !parts_before.contains_key(*id))
        .map(|(id, row)| (id.clone(), row.clone()))
        .collect();
    assert_eq!(
        added, continued_added,
        "only the continued turn's parts are new"
    );
    assert!(message_ids(&added).is_disjoint(&message_ids(&parts_before)));
    let snapshots_now = snapshots(&db);
    for (id, row) in &snapshots_before {
        assert_eq!(snapshots_now.get(id), Some(row), "snapshot event {id}");
    }
    assert_eq!(
        removals(&db),
        removals_before,
        "the clean's removal events are gone"
    );
    assert_eq!(rows_holding(&db, "part", CANARY), 1);

    // OpenCode exports the session with the tool output.
    let out = env.export(MANY_TURNS, EXPORT_TIMEOUT);
    assert!(out.status.success(), "opencode export: {}", out.stderr);
    let exported: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("export is not JSON ({e}): {}", out.stdout));
    let outputs: Vec<&str> = exported["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .flat_map(|m| m["parts"].as_array().expect("parts"))
        .filter(|p| p["type"] == "tool")
        .filter_map(|p| p["state"]["output"].as_str())
        .filter(|output| output.contains(CANARY))
        .collect();
    assert_eq!(outputs.len(), 1, "the restored tool part is exported");
    assert!(out.stdout.contains(FIXTURE_CANARY));

    // And it sends the model the tool output again.
    let again = prompt(&env, &mock, "continue again");
    let request = again.first().expect("a chat request");
    assert!(
        request.body.contains(CANARY),
        "the model was not sent {CANARY}"
    );
    assert!(request.body.contains(FIXTURE_CANARY));
}
