//! `clean` on damaged or busy databases: damaged times never move the kept turns later,
//! damaged ids are skipped, spill files still named (even by rows stored as BLOB) stay, files
//! an earlier run left are removed when asked, a dry run checks what a prune checks and leaves
//! a WAL untouched, a busy journal blocks, and a failure is exit 1 with the report.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::Value;

/// A clean of every message of every session, spill files included.
const EVERYTHING_WITH_SPILL_FILES: [&str; 5] = [
    "--all",
    "--keep-last-turns",
    "0",
    "--apply",
    "--include-spill-files",
];

fn clean(fx: &Fixture, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json", "clean"];
    all.extend_from_slice(args);
    let out = run(&fx.db, &all);
    let code = out.status.code().unwrap_or(-1);
    (code, json(&out))
}

/// User messages of the many-turns session, oldest first.
fn user_messages(fx: &Fixture) -> Vec<String> {
    let conn = fx.sql();
    let mut stmt = conn
        .prepare(
            "SELECT id FROM message WHERE session_id = ?1 AND json_extract(data, '$.role') = 'user' \
             ORDER BY time_created, id",
        )
        .unwrap();
    let rows = stmt.query_map([MANY_TURNS], |r| r.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn damaged_user_times_never_move_the_kept_turns_later() {
    let fx = Fixture::new();
    let users = user_messages(&fx);
    assert_eq!(users.len(), 10);
    // Text sorts above every number: a naive "last two user turns" would pick these two.
    fx.exec(&format!(
        "UPDATE message SET time_created = '99999999999999z' WHERE id IN ('{}', '{}')",
        users[0], users[1]
    ));
    let (code, report) = clean(&fx, &[MANY_TURNS, "--apply"]);
    assert_eq!(code, 0);
    assert_eq!(report["pruned"], 8, "{report}");
    assert!(fx.rows_containing("part", "TOOL_CANARY_T09") > 0);
    assert!(fx.rows_containing("part", "TOOL_CANARY_T10") > 0);
}

#[test]
fn damaged_ids_and_times_are_skipped_and_the_clean_finishes() {
    let fx = Fixture::new();
    let conn = fx.sql();
    let long = format!("msg_{}", "z".repeat(300));
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = OFF;
         UPDATE message SET id = '{long}' WHERE id = '{a}';
         UPDATE part SET message_id = '{long}' WHERE message_id = '{a}';
         UPDATE message SET time_created = 'abc' WHERE id = '{b}';",
        a = TURN1,
        b = TURN5
    ))
    .unwrap();
    drop(conn);
    let (code, report) = clean(&fx, &[MANY_TURNS, "--keep-last-turns", "0", "--apply"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["skipped"], serde_json::json!({"unplaceable": 2}));
    assert_eq!(report["pruned"], 8);
}

#[test]
fn spill_files_named_by_any_row_stay_and_leftovers_go_when_asked() {
    let fx = Fixture::with_spill_files();
    let spill = fx.dir.path().join("tool-output");
    // The fork's copy of a part that names a spill file is stored as BLOB.
    fx.exec(
        "UPDATE part SET data = CAST(data AS BLOB) WHERE session_id = 'ses_dd9927fe4ffeeLUb9gCpxbS0RI'
           AND instr(data, 'tool_2266d3fe5') > 0",
    );
    // A first clean without spill files leaves them behind.
    let (code, _) = clean(
        &fx,
        &[
            "ses_dd992d334ffeb4iZc8W2NskkWu",
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    );
    assert_eq!(code, 0);
    let (code, report) = clean(&fx, &EVERYTHING_WITH_SPILL_FILES);
    assert_eq!(code, 0, "{report}");
    // The fork's BLOB row still names tool_2266d3fe5...; the V2 row names tool_2266dabfc...
    let mut left: Vec<String> = std::fs::read_dir(&spill)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            "tool_2266d3fe50011bENhLZv7UDh0e",
            "tool_2266dabfc001K1wyrOFb3Qect7"
        ]
    );
    assert_eq!(report["spillFilesRemoved"], 1);
}

#[test]
fn a_dry_run_checks_the_session_and_leaves_a_wal_untouched() {
    let fx = Fixture::new();
    // A WAL with committed frames and no connection open, as a killed OpenCode leaves it;
    // the update also makes the session look in use (updated just now).
    {
        let conn = fx.sql();
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )
        .unwrap();
        conn.execute(
            "UPDATE session SET time_updated = ?1 WHERE id = ?2",
            rusqlite::params![now_ms(), MANY_TURNS],
        )
        .unwrap();
    }
    let wal = fx.db.with_extension("db-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    let before = fx.file_digest();
    let (code, report) = clean(&fx, &[MANY_TURNS, "--keep-last-turns", "0"]);
    assert_eq!(code, 0);
    assert_eq!(report["pruned"], 0);
    assert_eq!(
        report["blocked"],
        serde_json::json!({"maintenance_required": 10})
    );
    for args in [&["--json", "stats"][..], &["--json", "sessions"][..]] {
        assert_exit(&run(&fx.db, args), 0);
    }
    assert_eq!(fx.file_digest(), before);
    assert!(wal.exists());
}

#[test]
fn a_busy_journal_blocks_and_a_failure_is_exit_1_with_the_report() {
    let fx = Fixture::new();
    {
        let _held = pruning_engine::Journal::open(&fx.journal).unwrap();
        let before = fx.file_digest();
        let (code, report) = clean(&fx, &["--all", "--apply"]);
        assert_eq!(code, 3);
        assert_eq!(report["status"], "blocked");
        assert_eq!(fx.file_digest(), before);
    }
    // tool-output is a file, not a folder: the prunes stand, the spill step fails.
    std::fs::write(fx.dir.path().join("tool-output"), b"not a folder").unwrap();
    let (code, report) = clean(&fx, &EVERYTHING_WITH_SPILL_FILES);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["pruned"], 21);
    assert_eq!(report["failed"], 1);
    assert!(report["firstFailure"]
        .as_str()
        .unwrap()
        .starts_with("removing spill files in"));
}

#[test]
fn a_file_that_is_not_an_opencode_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("other.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    for args in [
        &["--json", "vacuum"][..],
        &["--json", "clean", "--all", "--apply"][..],
    ] {
        let out = run(&db, args);
        assert_exit(&out, 1);
        assert!(json(&out)["error"]
            .as_str()
            .unwrap()
            .contains("is not an OpenCode database"));
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
    assert!(!dir.path().join("other.db.prune-journal").exists());
}
