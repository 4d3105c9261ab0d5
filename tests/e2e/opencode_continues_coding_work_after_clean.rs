//! Interoperability on a database shaped like coding work (`tests/fixtures/opencode-1.18.34-work/`,
//! written by OpenCode 1.18.34): after `clean --all --apply`, the default (compaction and parts),
//! then `clean --all --apply --diffs`, OpenCode 1.18.34 exports every session with the same
//! messages and parts as before but the pruned ones, the diffs of the pruned user messages
//! without their file bodies and the rest as it was; it continues a session, and the model is
//! sent none of the pruned tool output or reasoning (which it was sent before the clean).
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under `CI=true`,
//! where it fails.

use crate::common::cli::document;
use crate::opencode_real;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use opencode_real::{http, query_value, Layout, MockModel, OpenCode, RequestKind};
use rusqlite::Connection;
use serde_json::{json, Value};

const EXPORT_TIMEOUT: Duration = Duration::from_secs(60);
const PROMPT_TIMEOUT: Duration = Duration::from_secs(90);
const PROMPT: &str = "Continue after the clean: say you are done.";

/// Every session's export: session id -> message id -> (info, part id -> part).
type Exported = BTreeMap<String, BTreeMap<String, (Value, BTreeMap<String, Value>)>>;

fn export_all(env: &OpenCode, sessions: &[String]) -> Exported {
    let mut all = Exported::new();
    for session in sessions {
        let out = env.export(session, EXPORT_TIMEOUT);
        assert!(
            out.status.success(),
            "opencode export {session}: {}",
            out.stderr
        );
        let doc: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("export of {session} is not JSON ({e})"));
        let messages = doc["messages"].as_array().expect("messages");
        let by_id = messages
            .iter()
            .map(|m| {
                let parts = m["parts"]
                    .as_array()
                    .expect("parts")
                    .iter()
                    .map(|p| (p["id"].as_str().expect("part id").to_string(), p.clone()))
                    .collect();
                let id = m["info"]["id"].as_str().expect("message id").to_string();
                (id, (m["info"].clone(), parts))
            })
            .collect();
        all.insert(session.clone(), by_id);
    }
    all
}

fn ids(db: &Path, sql: &str) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn.prepare(sql).expect("prepare");
    let rows = stmt.query_map([], |r| r.get(0)).expect("query");
    rows.map(|r| r.expect("id")).collect()
}

/// The part ids and the diffs-pruned messages the receipts name.
fn pruned(db: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let conn = Connection::open(db).expect("open");
    let mut parts = BTreeSet::new();
    let mut stmt = conn
        .prepare("SELECT part_ids FROM session_prune_receipt")
        .expect("prepare");
    for list in stmt
        .query_map([], |r| r.get::<_, String>(0))
        .expect("query")
    {
        let list: Vec<String> = serde_json::from_str(&list.expect("row")).expect("JSON list");
        parts.extend(list);
    }
    let diffs = ids(
        db,
        "SELECT message_id FROM session_prune_receipt \
         WHERE json_extract(operation, '$.kind') = 'diffs'",
    )
    .into_iter()
    .collect();
    (parts, diffs)
}

/// The JSON-escaped texts a pruned part held (a tool's output, a reasoning's text), as a model
/// request body would carry them.
fn pruned_texts(pristine: &Path, parts: &BTreeSet<String>) -> Vec<String> {
    let conn = Connection::open(pristine).expect("open");
    let mut texts = Vec::new();
    for id in parts {
        // A part of a turn made after the pristine copy was taken is not in it.
        let Ok(data) = conn.query_row("SELECT data FROM part WHERE id = ?1", [id], |r| {
            r.get::<_, String>(0)
        }) else {
            continue;
        };
        let part: Value = serde_json::from_str(&data).expect("JSON");
        for text in [&part["state"]["output"], &part["text"]] {
            if let Some(text) = text.as_str().filter(|t| t.len() > 64) {
                let escaped = serde_json::to_string(text).expect("a string");
                texts.push(escaped[1..escaped.len() - 1].to_string());
            }
        }
    }
    texts
}

/// The export after the clean against the one before: the same sessions and messages; every
/// part but the pruned ones, as it was; each message's info as it was, but the pruned diffs'
/// file bodies, emptied.
fn assert_exported_as_before(
    before: &Exported,
    after: &Exported,
    parts: &BTreeSet<String>,
    diffs: &BTreeSet<String>,
) {
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (session, messages) in before {
        let now = &after[session];
        assert_eq!(
            messages.keys().collect::<Vec<_>>(),
            now.keys().collect::<Vec<_>>(),
            "messages of {session}"
        );
        for (id, (info, old_parts)) in messages {
            let (new_info, new_parts) = &now[id];
            let mut expected = info.clone();
            if diffs.contains(id) {
                for entry in expected["summary"]["diffs"]
                    .as_array_mut()
                    .expect("the diffs of a pruned message")
                {
                    entry["patch"] = json!("");
                }
            }
            assert_eq!(new_info, &expected, "info of {id}");
            let kept: BTreeMap<&String, &Value> = old_parts
                .iter()
                .filter(|(part, _)| !parts.contains(*part))
                .collect();
            let new: BTreeMap<&String, &Value> = new_parts.iter().collect();
            assert_eq!(new, kept, "parts of {id}");
        }
    }
}

/// Prompts `session` once; returns the chat requests OpenCode sent the model for it.
fn prompt(env: &OpenCode, mock: &MockModel, session: &str) -> Vec<opencode_real::ModelRequest> {
    let seen = mock.requests().len();
    let mut server = env.serve();
    let path = format!(
        "/session/{session}/message?directory={}",
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let body = json!({
        "parts": [{"type": "text", "text": PROMPT}],
        "model": env.layout().prompt_model()
    });
    let reply = http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT)
        .unwrap_or_else(|e| panic!("prompting OpenCode failed: {e}\n{}", server.log()));
    assert_eq!(reply.status, 200, "{}\n{}", reply.body, server.log());
    let reply = reply.json();
    assert_eq!(reply["info"]["finish"], "stop", "{reply}");
    server.stop();
    mock.requests()
        .into_iter()
        .skip(seen)
        .filter(|r| r.kind == RequestKind::Chat && r.session_id() == Some(session))
        .collect()
}

#[test]
fn opencode_exports_and_continues_coding_work_after_each_clean() {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let fixture = opencode_real::workspace().join("tests/fixtures/opencode-1.18.34-work");
    let mock = MockModel::start();
    let env = OpenCode::with_layout(&bin, &mock.base_url(), Layout::work());
    let db = env.copy_fixture(&fixture);
    env.relocate_sessions();
    assert!(env.adopt_project(), "the work tree is a git repo");
    let sessions = ids(&db, "SELECT id FROM session ORDER BY id");
    // The session continued: the one with the most messages.
    let continued: String = ids(
        &db,
        "SELECT session_id FROM message GROUP BY session_id ORDER BY count(*) DESC LIMIT 1",
    )
    .remove(0);

    // Before any clean, a prompt sends the model the tool outputs the clean then prunes.
    let first = prompt(&env, &mock, &continued);
    assert!(!first.is_empty());
    let pristine = env.root().join("pristine.db");
    std::fs::copy(&db, &pristine).expect("keep the pristine database");
    let mut before = export_all(&env, &sessions);

    for extra in [&[][..], &["--diffs"][..]] {
        let report = document(&db, &[&["clean", "--all", "--apply"][..], extra].concat());
        assert_eq!(report["status"], "cleaned", "{report}");
        assert_eq!(report["failed"], 0, "{report}");
        if extra.is_empty() {
            assert_eq!(report["compaction"]["sessions"], 8, "{report}");
            assert!(report["pruned"].as_u64().unwrap() > 0, "{report}");
        } else {
            assert!(report["diffs"]["pruned"].as_u64().unwrap() > 0, "{report}");
        }
        let (parts, diffs) = pruned(&db);
        let texts = pruned_texts(&pristine, &parts);
        assert!(!texts.is_empty());
        if extra.is_empty() {
            assert!(
                first
                    .iter()
                    .any(|request| texts.iter().any(|t| request.body.contains(t.as_str()))),
                "before the clean the model was sent what it prunes"
            );
        }
        let after = export_all(&env, &sessions);
        assert_exported_as_before(&before, &after, &parts, &diffs);
        let requests = prompt(&env, &mock, &continued);
        assert!(!requests.is_empty());
        for request in &requests {
            for text in &texts {
                assert!(
                    !request.body.contains(text.as_str()),
                    "the model was sent pruned content after clean {extra:?}"
                );
            }
        }
        // The next clean is compared with the sessions as they are now, this prompt's turn
        // included.
        before = export_all(&env, &sessions);
    }
    let log = env.log_files();
    for line in log.lines().filter(|l| l.contains("ERROR")) {
        let lower = line.to_lowercase();
        assert!(
            !lower.contains("database") && !lower.contains("sqlite"),
            "OpenCode logged a database error: {line}"
        );
    }
}
