//! No write of any kind on a file that is not sound: damaged pages, a damaged freelist, an
//! index out of step with its table, or a `-wal` and `-shm` another process still holds after
//! they were deleted. Each refusal says what was found and what to do, and leaves the
//! database, the journal and the archive as they were; read commands say "damaged" in words
//! of their own, never SQLite's; `audit` reports `database_damaged`.

use std::process::Output;

use crate::common;

use common::archive::archive_digest;
use common::cli::{json, run, run_with_stdin};
use common::faults::{behind_the_index, damage_freelist, damage_pages};
use common::*;

/// Everything a write may touch, as bytes: the database with its WAL, the journal, the
/// archive ("" when there is none).
fn state(fx: &Fixture) -> (String, String, String) {
    let archive = if common::archive::archive_of(&fx.db).exists() {
        archive_digest(fx)
    } else {
        String::new()
    };
    (fx.file_digest(), fx.journal_digest(), archive)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fixture with one archived prune (a receipt to restore), the revision of another message
/// and the candidates `history --purpose prune` offers, taken while the file was sound.
struct Prepared {
    fx: Fixture,
    receipt: String,
    revision: String,
    candidates: Vec<u8>,
}

fn prepared() -> Prepared {
    let fx = Fixture::new();
    let pruned = common::cli::prune_all(&fx.db, MANY_TURNS, TURN1);
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    // Part 1 of TURN5, archived: a receipt restore can take.
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &revision_of(&fx, TURN5),
            "--indexes",
            "1",
            "--archive",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let receipt = receipt_of(&fx);
    let revision = revision_of(&fx, TURN5);
    let history = run(
        &fx.db,
        &["--json", "history", MANY_TURNS, "--purpose", "prune"],
    );
    assert_eq!(history.status.code(), Some(0));
    // Every write above is checkpointed into the file: the faults below are made at rest.
    fx.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    Prepared {
        fx,
        receipt,
        revision,
        candidates: history.stdout,
    }
}

/// The revision `preview` gives message `message` of the many-turns session.
fn revision_of(fx: &Fixture, message: &str) -> String {
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "preview",
            MANY_TURNS,
            message,
        ],
    );
    json(&out)["revision"].as_str().unwrap().to_string()
}

/// The newest receipt's id.
fn receipt_of(fx: &Fixture) -> String {
    fx.sql()
        .query_row(
            "SELECT id FROM session_prune_receipt ORDER BY rowid DESC LIMIT 1",
            [],
            |row| row.get(0),
        )
        .unwrap()
}

/// Every command that writes, or predicts a write, on the prepared fixture: each exits 1 with
/// `words` on stderr, and nothing changes.
fn every_write_refuses(p: &Prepared, words: &[&str]) {
    let fx = &p.fx;
    let before = state(fx);
    let quiet = ["--quiet-period", "0"];
    let writes: Vec<Vec<&str>> = vec![
        vec!["clean", "--all", "--keep-last-turns", "0", "--apply"],
        vec![
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
            "--archive",
        ],
        vec!["clean", "--all", "--keep-last-turns", "0"],
        vec![
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &p.revision,
            "--all-technical",
        ],
        vec![
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &p.revision,
            "--all-technical",
            "--dry-run",
        ],
        vec!["restore", &p.receipt],
        vec!["restore", &p.receipt, "--dry-run"],
        vec!["vacuum"],
        vec!["vacuum", "--force"],
    ];
    for args in &writes {
        let out = run(&fx.db, &[&quiet[..], args].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        for word in words {
            assert!(stderr(&out).contains(word), "{args:?}: {}", stderr(&out));
        }
        assert_eq!(state(fx), before, "{args:?} changed something");
    }
    let batch = run_with_stdin(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "prune-batch",
            MANY_TURNS,
            "--candidates",
            "-",
        ],
        &p.candidates,
    );
    assert_eq!(batch.status.code(), Some(1), "{}", stderr(&batch));
    for word in words {
        assert!(stderr(&batch).contains(word), "{}", stderr(&batch));
    }
    assert_eq!(state(fx), before, "prune-batch changed something");
}

/// `audit --json` exits 1 and names `database_damaged` first.
fn audit_reports_damage(fx: &Fixture) {
    let out = run(&fx.db, &["--json", "audit"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["ok"], false);
    assert_eq!(
        report["discrepancies"][0]["kind"], "database_damaged",
        "{report}"
    );
}

/// A read command either answers (exit 0) or says the file is damaged, in words without
/// SQLite's own.
fn reads_never_show_sqlite_text(fx: &Fixture) {
    for args in [
        vec!["sessions"],
        vec!["stats"],
        vec!["messages", MANY_TURNS],
        vec!["receipts"],
        vec!["events"],
    ] {
        let out = run(&fx.db, &args);
        let text = stderr(&out);
        match out.status.code() {
            Some(0) => {}
            Some(1) => assert!(text.contains("is damaged"), "{args:?}: {text}"),
            other => panic!("{args:?} exited {other:?}: {text}"),
        }
        for raw in ["malformed", "Error code", "error code"] {
            assert!(!text.contains(raw), "{args:?}: {text}");
        }
    }
}

#[test]
fn damaged_pages_stop_every_write_and_audit_reports_them() {
    let p = prepared();
    p.fx.skip_audit();
    damage_pages(&p.fx.db, 260, 4);
    every_write_refuses(
        &p,
        &[
            "is damaged",
            "SQLite reports",
            ".recover",
            "Nothing was written",
        ],
    );
    reads_never_show_sqlite_text(&p.fx);
    audit_reports_damage(&p.fx);
}

#[test]
fn a_damaged_freelist_stops_every_write_and_audit_reports_it() {
    let p = prepared();
    p.fx.skip_audit();
    damage_freelist(&p.fx.db, 27);
    every_write_refuses(&p, &["is damaged", "Freelist", ".recover"]);
    audit_reports_damage(&p.fx);
}

#[test]
fn an_index_out_of_step_stops_every_write_and_names_the_index() {
    let p = prepared();
    p.fx.skip_audit();
    // Two more parts of TURN5 that the message index does not list: a prune through the
    // index would leave them.
    behind_the_index(
        &p.fx.db,
        "part_message_id_id_idx",
        &format!(
            "INSERT INTO part SELECT id || 'x', message_id, session_id, time_created, \
             time_updated, data FROM part WHERE message_id = '{TURN5}' LIMIT 2"
        ),
    );
    every_write_refuses(&p, &["is damaged", "part_message_id_id_idx", "REINDEX"]);
    audit_reports_damage(&p.fx);
    let out = run(&p.fx.db, &["--json", "audit"]);
    let detail = json(&out)["discrepancies"][0]["detail"].to_string();
    assert!(detail.contains("part_message_id_id_idx"), "{detail}");
}

#[test]
fn a_stale_event_index_stops_every_write() {
    let p = prepared();
    p.fx.skip_audit();
    behind_the_index(
        &p.fx.db,
        "event_aggregate_type_seq_idx",
        "DELETE FROM event WHERE rowid IN (SELECT rowid FROM event ORDER BY rowid LIMIT 3)",
    );
    every_write_refuses(
        &p,
        &["is damaged", "event_aggregate_type_seq_idx", "REINDEX"],
    );
    audit_reports_damage(&p.fx);
}

#[test]
fn a_wal_deleted_under_another_process_stops_every_write() {
    let p = prepared();
    // This test process plays the other one (OpenCode): it has the database open, with its
    // -wal and -shm, when a cleanup deletes both.
    let holder = p.fx.sql();
    holder
        .query_row("SELECT count(*) FROM session", [], |row| {
            row.get::<_, i64>(0)
        })
        .unwrap();
    let wal = p.fx.db.with_extension("db-wal");
    let shm = p.fx.db.with_extension("db-shm");
    assert!(wal.exists() && shm.exists());
    std::fs::remove_file(&wal).unwrap();
    std::fs::remove_file(&shm).unwrap();
    let pid = std::process::id().to_string();
    every_write_refuses(
        &p,
        &[
            "cannot be written safely",
            &pid,
            "-wal deleted",
            "Stop that process",
        ],
    );
    // Refused before SQLite opened the file: no new -wal or -shm beside the ones still in use.
    assert!(!wal.exists() && !shm.exists());
    drop(holder);
    // Once the holder is gone, the file is whole again and writes go on.
    let out = run(
        &p.fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_server_on_a_damaged_file_answers_reads_and_refuses_every_prune() {
    use common::app::App;
    use common::http::{parse, with_messages};
    let session = "ses_damaged_beneath_a_server";
    let (fx, messages) = with_messages(session, 1);
    fx.skip_audit();
    fx.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    // The pages damaged are the fixture's own; the session above lies beyond them.
    damage_pages(&fx.db, 260, 4);
    let before = (fx.file_digest(), fx.journal_digest());
    let app = App::start(&fx);
    let (status, preview) = app.post(
        &app.route("preview"),
        &serde_json::json!({ "sessionID": session, "messageID": messages[0] }).to_string(),
    );
    assert_eq!(status, 200, "{preview}");
    let preview = parse(&preview);
    assert_eq!(preview["status"], "preview");
    let (status, answer) = app.post(
        &app.route("prune"),
        &serde_json::json!({
            "sessionID": session, "messageID": messages[0],
            "revision": preview["revision"], "indexes": [preview["parts"][0]["index"]],
        })
        .to_string(),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        parse(&answer),
        serde_json::json!({ "status": "blocked", "reason": "unsupported_storage" })
    );
    drop(app);
    assert_eq!(fx.file_digest(), before.0);
}

#[test]
fn a_file_sqlite_does_not_take_for_a_database_is_named_so_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    // A header page of zeros, as a disk that lost the file's first page leaves it.
    std::fs::write(&db, vec![0u8; 4096]).unwrap();
    for args in [
        vec!["sessions"],
        vec!["stats"],
        vec!["--quiet-period", "0", "clean", "--all", "--apply"],
        vec!["vacuum"],
    ] {
        let out = run(&db, &args);
        // Input no command can use, as an empty file: exit 2, whatever the command.
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let text = stderr(&out);
        assert!(
            text.contains(
                "is not an SQLite database (it does not begin with SQLite's header), or that \
                 header is damaged: nothing was read or written"
            ),
            "{args:?}: {text}"
        );
        assert!(!text.contains("Error code") && !text.contains("file is not a database"));
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(files.len(), 1, "{args:?} created files");
        assert_eq!(std::fs::read(&db).unwrap(), vec![0u8; 4096]);
    }
}
