//! Shared steps of the archive and restore tests: the fixture releases, a clean and a prune that
//! archive, restores, the receipts a restore can take, the archive beside a database, and
//! digests of everything a refusal must leave as it was (database, WAL, journal, archive).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use pruning_engine::{IntentState, Journal};
use pruning_journal::Selection;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::cli::{assert_exit, json, run};
use super::Fixture;

/// Every fixture database of the repository.
pub const FIXTURES: [&str; 9] = [
    "opencode-1.2.27",
    "opencode-1.2.27-upgraded-1.18.34",
    "opencode-1.3.2",
    "opencode-1.14.48",
    "opencode-1.14.48-upgraded-1.18.34",
    "opencode-1.15.13",
    "opencode-1.17.19",
    "opencode-1.18.34",
    "opencode-1.18.34-matrix",
];

/// A copy of `tests/fixtures/NAME/opencode.db` in a new temporary folder.
pub fn fixture_named(name: &str) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("opencode.db");
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("opencode.db");
    std::fs::copy(&source, &db).expect("copy fixture");
    let journal = dir.path().join("opencode.db.prune-journal");
    Fixture::at(dir, db, journal)
}

/// `clean SESSIONS --apply --archive` (every session when `sessions` is empty), keeping no turn,
/// with no quiet period and abandoned runs refused: its JSON report (exit 0).
pub fn clean_archived(db: &Path, sessions: &[&str]) -> Value {
    clean_archived_with(db, sessions, &[])
}

/// [`clean_archived`] with `extra` flags of `clean` (`--no-compact`, say).
pub fn clean_archived_with(db: &Path, sessions: &[&str], extra: &[&str]) -> Value {
    let mut args = vec![
        "--json",
        "--quiet-period",
        "0",
        "--abandoned-after",
        "never",
        "clean",
    ];
    if sessions.is_empty() {
        args.push("--all");
    } else {
        args.extend_from_slice(sessions);
    }
    args.extend(["--apply", "--archive", "--keep-last-turns", "0"]);
    args.extend_from_slice(extra);
    let out = run(db, &args);
    assert_exit(&out, 0);
    json(&out)
}

/// The prunes a clean's JSON report counts as committed now: messages pruned, sessions
/// compacted, user messages whose diffs were emptied (one receipt, and one archive entry, each).
pub fn prunes(report: &Value) -> u64 {
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    count(&report["pruned"])
        + count(&report["compaction"]["sessions"])
        + count(&report["diffs"]["pruned"])
}

/// `--json --quiet-period 0 restore RECEIPT`, expected to exit `code`: its JSON answer.
pub fn restore(db: &Path, receipt: &str, code: i32) -> Value {
    let out = run(db, &["--json", "--quiet-period", "0", "restore", receipt]);
    assert_exit(&out, code);
    json(&out)
}

/// The ids `sql` selects (one text column) from the database.
pub fn ids(db: &Path, sql: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("open");
    let mut stmt = conn.prepare(sql).expect("select");
    let found = stmt
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<rusqlite::Result<Vec<String>>>()
        .expect("ids");
    found
}

/// The receipts of prunes (not restores), newest first: the order restores undo them in (a
/// clean compacts first, and a compaction's snapshots go back once the prunes after it put back
/// the newer snapshots that supersede them).
pub fn prune_receipts(db: &Path) -> Vec<String> {
    if !has_restores_column(db) {
        return ids(
            db,
            "SELECT id FROM session_prune_receipt ORDER BY rowid DESC",
        );
    }
    ids(
        db,
        "SELECT id FROM session_prune_receipt WHERE restores IS NULL ORDER BY rowid DESC",
    )
}

/// The receipts of prunes no restore undid yet, newest first (see [`prune_receipts`]).
pub fn unrestored(db: &Path) -> Vec<String> {
    if !has_restores_column(db) {
        return prune_receipts(db);
    }
    ids(
        db,
        "SELECT id FROM session_prune_receipt r WHERE restores IS NULL AND NOT EXISTS \
         (SELECT 1 FROM session_prune_receipt u WHERE u.restores = r.id) ORDER BY rowid DESC",
    )
}

fn has_restores_column(db: &Path) -> bool {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info('session_prune_receipt') WHERE name = 'restores'",
        [],
        |row| row.get::<_, i64>(0),
    )
    .expect("columns")
        > 0
}

/// The archive beside the fixture's database.
pub fn archive_path(fx: &Fixture) -> PathBuf {
    fx.dir.path().join("opencode.db.prune-archive")
}

/// SHA-256 of the archive file.
pub fn archive_digest(fx: &Fixture) -> String {
    hex::encode(Sha256::digest(
        std::fs::read(archive_path(fx)).expect("archive"),
    ))
}

/// The archive beside `db`: `<db>.prune-archive`.
pub fn archive_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push(".prune-archive");
    PathBuf::from(name)
}

/// The message's revision now, from `preview --json`.
pub fn revision(db: &Path, session: &str, message: &str) -> String {
    let out = run(db, &["--json", "preview", session, message]);
    assert_exit(&out, 0);
    json(&out)["revision"]
        .as_str()
        .expect("revision")
        .to_string()
}

/// `prune --archive` of `message` (the parts at `indexes`, or every technical part with
/// `None`) with no quiet period; returns the new receipt's id.
pub fn prune_archived(db: &Path, session: &str, message: &str, indexes: Option<&str>) -> String {
    let revision = revision(db, session, message);
    let mut args = vec![
        "--quiet-period",
        "0",
        "prune",
        session,
        message,
        "--revision",
        &revision,
        "--archive",
    ];
    match indexes {
        Some(indexes) => args.extend_from_slice(&["--indexes", indexes]),
        None => args.push("--all-technical"),
    }
    let out = run(db, &args);
    assert_exit(&out, 0);
    receipt_ids(db).pop().expect("a receipt")
}

/// `restore RECEIPT --json` with no quiet period.
pub fn restore_out(db: &Path, receipt: &str) -> Output {
    run(db, &["--json", "--quiet-period", "0", "restore", receipt])
}

/// The receipt ids, oldest first.
pub fn receipt_ids(db: &Path) -> Vec<String> {
    let out = run(db, &["--json", "receipts"]);
    assert_exit(&out, 0);
    json(&out)
        .as_array()
        .expect("receipts")
        .iter()
        .map(|r| r["receiptID"].as_str().expect("receiptID").to_string())
        .collect()
}

/// SHA-256 of the database, its WAL and its archive (a missing file counts as empty) and of
/// what the journal holds (its intents and events; a writable open of the journal rewrites
/// some of its bytes by itself): equal digests mean none of them changed.
pub fn everything_digest(db: &Path) -> String {
    digest(db, true)
}

/// SHA-256 of the database, its WAL and its archive: what a refusal journaled as refused
/// leaves as it was.
pub fn rows_digest(db: &Path) -> String {
    digest(db, false)
}

fn digest(db: &Path, with_journal: bool) -> String {
    let mut hasher = Sha256::new();
    let mut wal = db.as_os_str().to_os_string();
    wal.push("-wal");
    let mut journal = db.as_os_str().to_os_string();
    journal.push(".prune-journal");
    for file in [db.to_path_buf(), PathBuf::from(wal), archive_of(db)] {
        hasher.update(std::fs::read(&file).unwrap_or_default());
        hasher.update(b"/");
    }
    let journal = PathBuf::from(journal);
    if with_journal && journal.exists() {
        let journal = pruning_engine::Journal::open_read_only(&journal).expect("journal");
        let intents = journal.intents().expect("intents");
        let events = journal.events_after(0, 10_000).expect("events");
        hasher.update(format!("{intents:?}/{events:?}").as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// `audit --json` on `db`: its exit code and report.
pub fn audit_report(db: &Path) -> (i32, serde_json::Value) {
    let out = run(db, &["--json", "audit"]);
    (out.status.code().unwrap_or(-1), json(&out))
}

/// Every row of `table` (every column, with its SQLite type and bytes), ordered by id; none
/// when there is no such table.
pub fn table_rows(db: &Path, table: &str) -> Vec<Vec<rusqlite::types::Value>> {
    let conn = rusqlite::Connection::open(db).expect("open");
    let exists: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [table],
            |row| row.get(0),
        )
        .expect("schema");
    if exists == 0 {
        return Vec::new();
    }
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY id"))
        .expect("select");
    let width = stmt.column_count();
    let found = stmt
        .query_map([], |row| {
            (0..width)
                .map(|i| row.get::<_, rusqlite::types::Value>(i))
                .collect()
        })
        .expect("query")
        .collect::<rusqlite::Result<Vec<Vec<rusqlite::types::Value>>>>()
        .expect("rows");
    found
}

/// The states of the journal's restore intents for `receipt`, in the journal's order.
pub fn restore_intents(fx: &Fixture, receipt: &str) -> Vec<IntentState> {
    let journal = Journal::open_read_only(&fx.journal).expect("journal");
    journal
        .intents()
        .expect("intents")
        .into_iter()
        .filter(|intent| {
            matches!(intent.selection, Selection::Restore(id) if id.to_string() == receipt)
        })
        .map(|intent| intent.state)
        .collect()
}
