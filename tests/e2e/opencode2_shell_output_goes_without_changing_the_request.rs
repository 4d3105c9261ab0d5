//! A command the user runs in OpenCode 2 (`POST /api/session/{id}/shell`) is kept twice: its
//! whole output in a `shell` row, which OpenCode 2 shows, and its last 2,000 lines in the
//! `synthetic` row that tells the model of it. A clean empties the `shell` row's output and
//! leaves the `synthetic` row: the real OpenCode 2 then sends the model the same request, byte
//! for byte; `stats` counts both; the audit holds; a restore puts the row back byte for byte.

use crate::common::cli::{clean_everything, json, run};
use crate::opencode_real;

use std::path::Path;
use std::time::{Duration, Instant};

use opencode_real::{next_request, opencode2_home, Service};
use rusqlite::Connection;
use serde_json::json;

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// The session's `shell` rows, as stored.
fn shell_rows(db: &Path, session: &str) -> Vec<(String, String)> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare(
            "SELECT id, data FROM session_message WHERE session_id = ?1 AND type = 'shell' \
             ORDER BY seq",
        )
        .expect("select");
    let rows = stmt
        .query_map([session], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .map(|row| row.expect("row"))
        .collect();
    rows
}

fn shell_output_goes(version: &str) {
    let Some((mock, home)) = opencode2_home(version) else {
        return;
    };
    let db = home.database();
    let session = {
        let mut service = Service::start(&home);
        let session = service.session_with_turns("the user ran a command", 1, TURN_TIMEOUT);
        service.call(
            "POST",
            &format!("/api/session/{session}/shell"),
            Some(&json!({"command": "seq -f 'USER_SHELL_LINE_%g' 1 3000"})),
        );
        let deadline = Instant::now() + TURN_TIMEOUT;
        while !shell_rows(&db, &session)
            .iter()
            .any(|(_, data)| data.contains("\"completed\""))
        {
            assert!(
                Instant::now() < deadline,
                "{version}: the command did not finish"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        service.turn(&session, "What did it print? [[say:seen]]", TURN_TIMEOUT);
        service.stop();
        session
    };
    let stats = json(&run(&db, &["--json", "stats", "--exact"]));
    assert_eq!(
        stats["technical"]["shellOutput"]["count"], 1,
        "{version}: {stats}"
    );
    assert!(stats["technical"]["shellOutput"]["bytes"].as_u64() > Some(30_000));
    assert_eq!(stats["technical"]["shellSent"]["count"], 1, "{stats}");
    let rows_before = shell_rows(&db, &session);

    let pristine = home.root().join("pristine.db");
    std::fs::copy(&db, &pristine).expect("keep the pristine database");
    let without_clean = next_request(&home, &mock, &session, "continue");
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{side}", db.display()));
    }
    std::fs::copy(&pristine, &db).expect("put the pristine database back");
    // Only the shell row: no message part is big enough for --min-bytes, no reasoning.
    let (code, report) = clean_everything(
        &db,
        &["--archive", "--min-bytes", "1000000000", "--no-reasoning"],
    );
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["pruned"], 0, "{report}");
    assert_eq!(report["shellOutput"]["emptied"], 1, "{version}: {report}");
    let emptied = shell_rows(&db, &session);
    let row: serde_json::Value = serde_json::from_str(&emptied[0].1).expect("JSON row");
    assert_eq!(row["output"]["output"], "", "{row}");
    assert_eq!(row["output"]["size"], 61_893, "{row}");
    let with_clean = next_request(&home, &mock, &session, "continue");
    assert!(
        with_clean.contains("USER_SHELL_LINE_3000"),
        "the synthetic row is sent"
    );
    assert_eq!(with_clean, without_clean, "{version}: the request changed");

    let audit = run(&db, &["audit"]);
    assert_eq!(audit.status.code(), Some(0), "{audit:?}");
    let receipts = json(&run(&db, &["--json", "receipts"]));
    let receipt = receipts
        .as_array()
        .expect("receipts")
        .iter()
        .find(|r| r["operation"]["kind"] == "shellOutput")
        .expect("the shell output's receipt")["receiptID"]
        .as_str()
        .expect("id")
        .to_string();
    // The turn `ask` added since wrote other rows, not the shell row: it goes back whole.
    let out = run(&db, &["--quiet-period", "0", "restore", &receipt]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(shell_rows(&db, &session), rows_before);

    // A row this engine and SQLite would read apart (its output given twice) is left whole; a
    // command still running is left for later.
    let id = &rows_before[0].0;
    let conn = Connection::open(&db).expect("open");
    let doubled = rows_before[0].1.replacen(
        "\"output\":{\"output\":",
        "\"output\":{\"output\":\"first\",\"output\":",
        1,
    );
    conn.execute(
        "UPDATE session_message SET data = ?1 WHERE id = ?2",
        [&doubled, id],
    )
    .expect("a key given twice");
    drop(conn);
    let (code, report) = clean_everything(&db, &["--min-bytes", "1000000000", "--no-reasoning"]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["shellOutput"]["emptied"], 0, "{report}");
    assert_eq!(
        report["shellOutput"]["blocked"]["unsupported_storage"], 1,
        "{report}"
    );
    assert_eq!(shell_rows(&db, &session)[0].1, doubled);
    let running = rows_before[0]
        .1
        .replacen("\"status\":\"exited\"", "\"status\":\"running\"", 1);
    assert_ne!(running, rows_before[0].1);
    let conn = Connection::open(&db).expect("open");
    conn.execute(
        "UPDATE session_message SET data = ?1 WHERE id = ?2",
        [&running, id],
    )
    .expect("a running command");
    drop(conn);
    let (code, report) = clean_everything(&db, &["--min-bytes", "1000000000", "--no-reasoning"]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        report["shellOutput"]["skipped"]["running_tool"], 1,
        "{report}"
    );
    assert_eq!(shell_rows(&db, &session)[0].1, running);
    let audit = run(&db, &["audit"]);
    assert_eq!(audit.status.code(), Some(0), "{audit:?}");
}

#[test]
fn opencode_2_1_2_shell_output_goes_without_changing_the_request() {
    shell_output_goes("2.1.2");
}

#[test]
fn opencode_2_0_15_shell_output_goes_without_changing_the_request() {
    shell_output_goes("2.0.15");
}
