//! The migrated round trip, for each OpenCode 2 release (2.0.15, 2.1.2): a database the real
//! OpenCode 1.18.34 wrote (`tests/fixtures/opencode-1.18.34-matrix/`), migrated by the real 2.x
//! at its first start, then `clean --all --migrated-v1 --archive --keep-last-turns 0 --apply`:
//!
//! - the dry run says what the apply does (the same sessions, messages, parts and bytes);
//! - every 1.x row of every session OpenCode 2 holds a whole copy of is gone, and only those;
//!   every text OpenCode 2 reads (user, assistant, compaction summary) is byte for byte the same;
//! - `audit` holds, `vacuum` leaves a smaller file;
//! - OpenCode 2 continues the migrated multi-turn session and exports it: its next request
//!   carries the migrated text and none of the pruned tool output;
//! - one session's removals restored put its 1.x rows back byte for byte.
//!
//! The binaries come from `scripts/install-opencode.sh 2.x` (see `support/binary.rs`);
//! without one a test prints why and returns, except under `CI=true`.

use crate::common::cli::{json, run};
use crate::opencode_real;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use opencode_real::{
    binary_of, configure_service, run_bounded, Layout, MockModel, OpenCode, RequestKind, Service,
};
use rusqlite::Connection;
use serde_json::Value;

const MIGRATION_TIMEOUT: Duration = Duration::from_secs(120);
const TURN_TIMEOUT: Duration = Duration::from_secs(90);
const EXPORT_TIMEOUT: Duration = Duration::from_secs(60);

fn fixture() -> PathBuf {
    opencode_real::workspace().join("tests/fixtures/opencode-1.18.34-matrix")
}

/// The fixture's manifest.
fn manifest_of(fixture: &Path) -> Value {
    let text = std::fs::read_to_string(fixture.join("manifest.json")).expect("manifest");
    serde_json::from_str(&text).expect("manifest JSON")
}

/// Every row of `table` as text, ordered by id, by session.
fn rows_by_session(conn: &Connection, table: &str) -> BTreeMap<String, Vec<String>> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT session_id, quote(id) || '|' || quote(session_id) || '|' || \
                    quote(time_created) || '|' || quote(time_updated) || '|' || quote(data) \
             FROM {table} ORDER BY id"
        ))
        .expect("select rows");
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let rows = stmt
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows");
    for row in rows {
        let (session, text): (String, String) = row.expect("row");
        found.entry(session).or_default().push(text);
    }
    found
}

/// The texts OpenCode 2 reads of each `session_message` row: the `text` of the row and of its
/// content items of type `text`, and a compaction's `summary`, by row id.
fn texts(conn: &Connection) -> BTreeMap<String, Vec<String>> {
    let mut stmt = conn
        .prepare("SELECT id, data FROM session_message ORDER BY id")
        .expect("select");
    let rows = stmt
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .expect("rows");
    let mut found = BTreeMap::new();
    for row in rows {
        let (id, data) = row.expect("row");
        let value: Value = serde_json::from_str(&data).expect("JSON row");
        let mut texts = Vec::new();
        for key in ["text", "summary"] {
            if let Some(text) = value[key].as_str() {
                texts.push(text.to_string());
            }
        }
        for item in value["content"].as_array().into_iter().flatten() {
            if item["type"] == "text" {
                texts.push(item["text"].as_str().unwrap_or_default().to_string());
            }
        }
        found.insert(id, texts);
    }
    found
}

/// The 1.x sessions whose every message has an OpenCode 2 copy: a `session_message` row of
/// its id in the session, or, for a compaction summary, the `compaction` row of its parent.
fn wholly_copied(conn: &Connection) -> BTreeSet<String> {
    let mut stmt = conn
        .prepare("SELECT id, session_id, data FROM message")
        .expect("select");
    let mut per_session: BTreeMap<String, bool> = BTreeMap::new();
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        })
        .expect("rows");
    for row in rows {
        let (id, session, data) = row.expect("row");
        let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
        let copy_of = |id: &str, kind: Option<&str>| -> bool {
            conn.query_row(
                "SELECT count(*) > 0 FROM session_message WHERE id = ?1 AND session_id = ?2 \
                 AND (?3 IS NULL OR type = ?3)",
                rusqlite::params![id, session, kind],
                |row| row.get(0),
            )
            .expect("copy")
        };
        let copied = copy_of(&id, None)
            || (value["summary"] == true
                && copy_of(
                    value["parentID"].as_str().unwrap_or_default(),
                    Some("compaction"),
                ));
        let in_v2: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM session_v2 WHERE id = ?1",
                [&session],
                |row| row.get(0),
            )
            .expect("session_v2");
        *per_session.entry(session).or_insert(in_v2) &= copied;
    }
    per_session
        .into_iter()
        .filter(|(_, whole)| *whole)
        .map(|(session, _)| session)
        .collect()
}

fn clean(db: &Path, apply: bool) -> Value {
    let mut args = vec![
        "--json",
        "--quiet-period",
        "0",
        "--abandoned-after",
        "1m",
        "clean",
        "--all",
        "--migrated-v1",
        "--keep-last-turns",
        "0",
    ];
    if apply {
        args.extend(["--apply", "--archive"]);
    }
    let out = run(db, &args);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    report
}

fn migrated_round_trip(version: &str) {
    let Some(bin) = binary_of(version) else {
        return;
    };
    let source = fixture();
    let manifest = manifest_of(&source);
    let mock = MockModel::start();
    let home = OpenCode::with_layout(
        &bin,
        &mock.base_url(),
        Layout::generated(
            manifest["generator"]["work_dir"]
                .as_str()
                .expect("work_dir"),
        ),
    );
    configure_service(&home, &mock.base_url());
    let db = home.copy_fixture(&source);
    home.relocate_sessions();
    {
        let mut service = Service::start(&home);
        service.wait_migration(MIGRATION_TIMEOUT);
        service.stop();
    }
    let conn = Connection::open(&db).expect("open");
    let v1_messages = rows_by_session(&conn, "message");
    let v1_parts = rows_by_session(&conn, "part");
    let texts_before = texts(&conn);
    let copied = wholly_copied(&conn);
    assert!(copied.len() >= 3, "{version}: {copied:?}");
    let expected: usize = copied.iter().map(|s| v1_messages[s].len()).sum();
    let left_alone: BTreeSet<&String> = v1_messages
        .keys()
        .filter(|s| !copied.contains(*s))
        .collect();
    let size_before = std::fs::metadata(&db).expect("size").len();

    let dry = clean(&db, false);
    let applied = clean(&db, true);
    assert_eq!(applied["migratedV1"]["messages"], expected, "{applied}");
    assert_eq!(dry["migratedV1"], applied["migratedV1"], "{dry}\n{applied}");
    assert_eq!(applied["migratedV1"]["sessions"], copied.len(), "{applied}");
    let keys = |session: Option<&str>| -> BTreeSet<String> {
        let out = run(&db, &["--json", "receipts"]);
        json(&out)
            .as_array()
            .expect("receipts")
            .iter()
            .filter(|r| r["operation"]["kind"] == "migratedV1")
            .filter(|r| session.is_none_or(|s| r["sessionID"] == s))
            .map(|r| r["messageID"].as_str().expect("id").to_string())
            .collect()
    };
    assert_eq!(keys(None).len(), expected);

    let after_messages = rows_by_session(&conn, "message");
    for session in &copied {
        assert_eq!(after_messages.get(session), None, "{version}: {session}");
    }
    for session in &left_alone {
        assert_eq!(
            after_messages.get(*session),
            v1_messages.get(*session),
            "{version}: {session} is not wholly copied and keeps its rows"
        );
    }
    assert_eq!(
        texts(&conn),
        texts_before,
        "{version}: a text OpenCode 2 reads changed"
    );
    drop(conn);

    let audit = run(&db, &["audit"]);
    assert_eq!(
        audit.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&audit.stdout)
    );
    let vacuum = run(&db, &["vacuum"]);
    assert_eq!(vacuum.status.code(), Some(0), "{vacuum:?}");
    let size_after = std::fs::metadata(&db).expect("size").len();
    assert!(
        size_after < size_before / 2,
        "{size_before} -> {size_after}"
    );

    // OpenCode 2 continues the migrated multi-turn session and exports it.
    let continued = manifest["scenarios"]["b_multi_turn"]["session"]
        .as_str()
        .expect("the multi-turn session")
        .to_string();
    assert!(copied.contains(&continued), "{version}: {continued}");
    let migrated_text = texts_before
        .iter()
        .filter(|(id, _)| {
            v1_messages[&continued]
                .iter()
                .any(|row| row.starts_with(&format!("'{id}'")))
        })
        .flat_map(|(_, texts)| texts.iter())
        .find(|text| text.contains("TEXT_CANARY_"))
        .cloned()
        .expect("a migrated text canary");
    let canary: String = migrated_text
        .split_whitespace()
        .find(|word| word.starts_with("TEXT_CANARY_"))
        .expect("canary")
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string();
    {
        let mut service = Service::start(&home);
        let before = mock.requests().len();
        service.turn(
            &continued,
            "Go on after the clean. [[say:done]]",
            TURN_TIMEOUT,
        );
        let next = mock.requests()[before..]
            .iter()
            .find(|r| r.kind == RequestKind::Chat && r.session_id() == Some(continued.as_str()))
            .cloned()
            .expect("the continued turn's request");
        assert!(next.body.contains(&canary), "{version}: {canary} not sent");
        assert!(
            !next.body.contains("TOOL_CANARY_"),
            "{version}: a pruned tool output was sent"
        );
        let mut export = home.command();
        export.args(["session", "export", &continued]);
        let exported = run_bounded(&mut export, EXPORT_TIMEOUT).expect("export");
        assert!(exported.status.success(), "{exported:?}");
        assert!(
            exported.stdout.contains(&canary),
            "{version}: export lacks {canary}"
        );
        service.stop();
    }

    // One session's removals restored: its 1.x rows come back byte for byte.
    let restored = copied.iter().next().expect("a session").clone();
    let out = run(&db, &["--json", "receipts", "--session", &restored]);
    let receipts: Vec<String> = json(&out)
        .as_array()
        .expect("receipts")
        .iter()
        .filter(|r| r["operation"]["kind"] == "migratedV1")
        .map(|r| r["receiptID"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(receipts.len(), v1_messages[&restored].len());
    for receipt in &receipts {
        let out = run(&db, &["--quiet-period", "0", "restore", receipt]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let conn = Connection::open(&db).expect("open");
    assert_eq!(
        rows_by_session(&conn, "message").get(&restored),
        v1_messages.get(&restored)
    );
    assert_eq!(
        rows_by_session(&conn, "part").get(&restored),
        v1_parts.get(&restored)
    );
    let audit = run(&db, &["audit"]);
    assert_eq!(audit.status.code(), Some(0), "{audit:?}");
}

#[test]
fn opencode_2_1_2_migrated_history_is_removed_and_put_back() {
    migrated_round_trip("2.1.2");
}

#[test]
fn opencode_2_0_15_migrated_history_is_removed_and_put_back() {
    migrated_round_trip("2.0.15");
}
