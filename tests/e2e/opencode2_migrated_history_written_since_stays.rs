//! The 1.x rows of a session OpenCode 2 migrated are only a copy until a 1.x writes to them
//! again (a downgrade, a second machine): on a database the real 1.18.34 wrote and the real
//! 2.1.2 migrated, a part added to a session after the migration, or a part of another one
//! written again, keeps that session's 1.x rows out of `clean --migrated-v1` (`not_a_copy`,
//! nothing of it removed); and a removal is put back by `restore` even after a 1.x wrote to the
//! session since, or OpenCode 2 deleted its own copy.

use crate::common::cli::{clean_everything, json, run};
use crate::opencode_real;

use std::path::Path;
use std::time::Duration;

use opencode_real::{binary_of, configure_service, Layout, MockModel, OpenCode, Service};
use rusqlite::Connection;
use serde_json::Value;

const MIGRATION_TIMEOUT: Duration = Duration::from_secs(120);

/// Every 1.x row of `session` (its messages and parts), as stored.
fn rows(db: &Path, session: &str) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut found = Vec::new();
    for table in ["message", "part"] {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT quote(id) || quote(time_created) || quote(time_updated) || quote(data) \
                 FROM {table} WHERE session_id = ?1 ORDER BY id"
            ))
            .expect("select");
        let texts = stmt
            .query_map([session], |row| row.get::<_, String>(0))
            .expect("rows");
        found.extend(texts.map(|text| text.expect("row")));
    }
    found
}

fn now_ms() -> i64 {
    crate::common::now_ms()
}

#[test]
fn rows_a_1_x_wrote_after_the_migration_keep_their_session_out_of_the_removal() {
    let Some(bin) = binary_of("2.1.2") else {
        return;
    };
    let fixture = opencode_real::workspace().join("tests/fixtures/opencode-1.18.34-matrix");
    let text = std::fs::read_to_string(fixture.join("manifest.json")).expect("manifest");
    let manifest: Value = serde_json::from_str(&text).expect("manifest JSON");
    let session = |scenario: &str| {
        manifest["scenarios"][scenario]["session"]
            .as_str()
            .expect("a session")
            .to_string()
    };
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
    let db = home.copy_fixture(&fixture);
    home.relocate_sessions();
    {
        let mut service = Service::start(&home);
        service.wait_migration(MIGRATION_TIMEOUT);
        service.stop();
    }
    let (added, edited, removed) = (
        session("b_multi_turn"),
        session("d_compaction"),
        session("a_tool_call"),
    );
    let original = rows(&db, &removed);
    // A 1.x writes again: a new part in one session, a part written again in another.
    let conn = Connection::open(&db).expect("open");
    let newest: String = conn
        .query_row(
            "SELECT id FROM message WHERE session_id = ?1 ORDER BY time_created DESC LIMIT 1",
            [&added],
            |row| row.get(0),
        )
        .expect("a message");
    conn.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
         VALUES ('prt_written_since', ?1, ?2, ?3, ?3, '{\"type\":\"text\",\"text\":\"new\"}')",
        rusqlite::params![newest, added, now_ms()],
    )
    .expect("a part written since");
    conn.execute(
        "UPDATE part SET time_updated = ?2 WHERE id = \
           (SELECT id FROM part WHERE session_id = ?1 ORDER BY id LIMIT 1)",
        rusqlite::params![edited, now_ms()],
    )
    .expect("a part written again");
    drop(conn);
    let (added_before, edited_before) = (rows(&db, &added), rows(&db, &edited));

    let (code, report) = clean_everything(&db, &["--migrated-v1", "--archive"]);
    assert_eq!(code, Some(0), "{report}");
    assert!(
        report["migratedV1"]["skippedSessions"]["not_a_copy"].as_u64() >= Some(2),
        "{report}"
    );
    assert_eq!(rows(&db, &added), added_before);
    assert_eq!(rows(&db, &edited), edited_before);
    assert!(rows(&db, &removed).is_empty(), "{removed} was not removed");

    // A 1.x writes to the removed session again, and OpenCode 2 deletes its own copy: the
    // removal is still put back, row for row.
    let conn = Connection::open(&db).expect("open");
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) \
         VALUES ('msg_written_since', ?1, ?2, ?2, '{\"role\":\"user\"}')",
        rusqlite::params![removed, now_ms()],
    )
    .expect("a message written since");
    conn.execute(
        "DELETE FROM session_message WHERE session_id = ?1",
        [&removed],
    )
    .expect("OpenCode 2's copy deleted");
    drop(conn);
    let out = run(&db, &["--json", "receipts", "--session", &removed]);
    let receipts: Vec<String> = json(&out)
        .as_array()
        .expect("receipts")
        .iter()
        .filter(|r| r["operation"]["kind"] == "migratedV1")
        .map(|r| r["receiptID"].as_str().expect("id").to_string())
        .collect();
    assert!(!receipts.is_empty());
    for receipt in &receipts {
        let out = run(&db, &["--quiet-period", "0", "restore", receipt]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let mut expected = original.clone();
    expected.extend(
        rows(&db, &removed)
            .into_iter()
            .filter(|row| row.starts_with("'msg_written_since'")),
    );
    expected.sort();
    let mut now = rows(&db, &removed);
    now.sort();
    assert_eq!(now, expected);
    let audit = run(&db, &["audit"]);
    assert_eq!(audit.status.code(), Some(0), "{audit:?}");
}
