//! `clean --apply` on a disk that fills up midway: the report counts exactly the prunes that
//! committed (the receipts in the database), names the full disk and where, exits 1; once there
//! is room, the same command finishes and every committed prune is journaled and announced.
//! Needs a small tmpfs, so root (as CI runs); elsewhere it says it did not run.

use crate::common;

use std::path::Path;

use common::archive::prunes;
use common::cli::{assert_exit, json, run};
use common::small_disk::SmallDisk;

fn receipts_in(db: &Path) -> i64 {
    receipts_in_where(db, "1")
}

/// The receipts whose row satisfies `filter` (0 before the table exists).
fn receipts_in_where(db: &Path, filter: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE name = 'session_prune_receipt'",
        [],
        |row| row.get::<_, i64>(0),
    )
    .and_then(|tables| {
        if tables == 0 {
            Ok(0)
        } else {
            conn.query_row(
                &format!("SELECT count(*) FROM session_prune_receipt WHERE {filter}"),
                [],
                |row| row.get(0),
            )
        }
    })
    .expect("count receipts")
}

#[test]
fn a_clean_that_runs_out_of_disk_counts_its_receipts_and_a_rerun_finishes() {
    let Some(disk) = SmallDisk::mount("3M") else {
        return;
    };
    let db = disk.mount.join("opencode.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode-1.18.34/opencode.db"),
        &db,
    )
    .expect("copy fixture");
    // Leave about 250 KiB free: room for some prunes, not for all.
    std::fs::write(disk.mount.join("filler"), vec![0u8; 700 * 1024]).expect("filler");

    let clean = [
        "--quiet-period",
        "0",
        "--json",
        "clean",
        "--all",
        "--apply",
        "--batch-size",
        "4",
    ];
    let out = run(&db, &clean);
    assert_exit(&out, 1);
    let report = json(&out);
    let receipts = receipts_in(&db);
    assert_eq!(prunes(&report) as i64, receipts, "{report}");
    assert!(
        report["failed"].as_u64().expect("failed") > 0,
        "the disk never filled: {report}"
    );
    let failure = report["firstFailure"].as_str().expect("firstFailure");
    assert!(failure.contains("the disk is full"), "{failure}");
    assert!(
        failure.contains(&disk.mount.display().to_string()),
        "{failure}"
    );

    disk.resize("16M");
    let out = run(&db, &clean);
    assert_exit(&out, 0);
    let rerun = json(&out);
    assert_eq!(rerun["failed"], 0, "{rerun}");
    let receipts = receipts_in(&db);
    let compactions = receipts_in_where(&db, "operation IS NOT NULL");
    assert_eq!(
        receipts - compactions,
        11,
        "every prunable message of the fixture"
    );
    assert!(compactions > 0, "the sessions were compacted");
    let events = run(&db, &["events", "--json"]);
    assert_exit(&events, 0);
    assert_eq!(
        String::from_utf8_lossy(&events.stdout).lines().count() as i64,
        receipts
    );
}
