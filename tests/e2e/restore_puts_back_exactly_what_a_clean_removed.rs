//! A clean with `--archive` on a database of each OpenCode release, then a restore of every
//! receipt (newest first), gives every OpenCode table back row for row, byte for byte: V1 parts,
//! their snapshot events (1.17 and 1.18) and the `message.part.removed.1` events the prunes
//! appended taken out again. Only `event_sequence` keeps counting (the numbers of the events a
//! restore deleted stay used, as those of the snapshots a prune deletes do). The audit holds
//! after the restores, and a clean prunes the restored messages again.

use crate::common;

use std::path::Path;

use common::archive::{audit_report, receipt_ids, restore_out};
use common::cli::{assert_exit, run};
use rusqlite::types::Value;
use rusqlite::Connection;

const RELEASES: &[&str] = &[
    "opencode-1.2.27",
    "opencode-1.3.2",
    "opencode-1.14.48",
    "opencode-1.17.19",
    "opencode-1.18.34",
    "opencode-1.19.5",
    "opencode-1.2.27-upgraded-1.18.34",
    "opencode-1.14.48-upgraded-1.18.34",
];

/// Tables the prunes and restores may leave changed: the receipts and the event sequence.
const OWN_OR_COUNTING: &[&str] = &[
    "session_prune_receipt",
    "session_prune_meta",
    "event_sequence",
];

/// Every row of every other table, in a stable order.
fn tables(db: &Path) -> Vec<(String, Vec<Vec<Value>>)> {
    let conn = Connection::open(db).expect("open");
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("tables")
        .query_map([], |r| r.get(0))
        .expect("tables")
        .collect::<Result<_, _>>()
        .expect("tables");
    names
        .into_iter()
        .filter(|name| !OWN_OR_COUNTING.contains(&name.as_str()))
        .map(|name| {
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM \"{name}\""))
                .expect("select");
            let width = stmt.column_count();
            let mut rows: Vec<Vec<Value>> = stmt
                .query_map([], |row| {
                    (0..width).map(|i| row.get::<_, Value>(i)).collect()
                })
                .expect("rows")
                .collect::<Result<_, _>>()
                .expect("rows");
            rows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            (name, rows)
        })
        .collect()
}

/// An archived clean of everything; with `extra` flags (`--include-restored`: also what a
/// restore put back).
fn clean(db: &Path, extra: &[&str]) {
    let mut args = vec![
        "--quiet-period",
        "0",
        "--abandoned-after",
        "never",
        "clean",
        "--all",
        "--apply",
        "--archive",
        "--keep-last-turns",
        "0",
    ];
    args.extend_from_slice(extra);
    assert_exit(&run(db, &args), 0);
}

#[test]
fn every_release_gets_every_row_back_from_the_archive() {
    for release in RELEASES {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("opencode.db");
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(release)
            .join("opencode.db");
        std::fs::copy(source, &db).expect("copy fixture");
        let original = tables(&db);

        clean(&db, &[]);
        let pruned = receipt_ids(&db);
        // Compactions name no message: a later clean compacts again what a restore put back.
        let compactions = rusqlite::Connection::open(&db)
            .expect("open")
            .query_row(
                "SELECT count(*) FROM session_prune_receipt \
                 WHERE json_extract(operation, '$.kind') = 'compaction'",
                [],
                |row| row.get::<_, i64>(0),
            )
            .expect("count") as usize;
        assert!(!pruned.is_empty(), "{release}: nothing pruned");
        assert_ne!(tables(&db), original, "{release}");
        for receipt in pruned.iter().rev() {
            assert_exit(&restore_out(&db, receipt), 0);
        }
        assert_eq!(tables(&db), original, "{release}");
        let (code, report) = audit_report(&db);
        assert_eq!(code, 0, "{release}: {report}");

        // What a restore put back is left alone by a clean, unless it asks for it.
        clean(&db, &[]);
        assert_eq!(
            receipt_ids(&db).len(),
            pruned.len() * 2 + compactions,
            "{release}"
        );
        clean(&db, &["--include-restored"]);
        assert_eq!(receipt_ids(&db).len(), pruned.len() * 3, "{release}");
        let (code, report) = audit_report(&db);
        assert_eq!(code, 0, "{release}: {report}");
    }
}
