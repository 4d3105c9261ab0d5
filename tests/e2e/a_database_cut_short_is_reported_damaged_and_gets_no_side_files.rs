//! A database file cut short (a copy taken mid-write, a disk that filled up) is found from its
//! own header before SQLite opens it: `audit` reports it as `database_damaged` (exit 1, its
//! report, not an error), every other command refuses it in the same words, and no command
//! makes a `-wal`, `-shm` or journal beside it or changes a byte of it.

use crate::common;

use common::cli::{assert_exit, json, run};

/// A copy of the real fixture cut to 600,000 of its bytes, alone in a folder: the folder and
/// the path of the copy.
fn cut_short() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    let whole = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34/opencode.db"),
    )
    .unwrap();
    assert!(whole.len() > 600_000);
    std::fs::write(&db, &whole[..600_000]).unwrap();
    (dir, db)
}

/// The names of the files in `dir`.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn audit_reports_a_database_cut_short_as_damaged_and_leaves_no_file_beside_it() {
    let (dir, db) = cut_short();
    let before = std::fs::read(&db).unwrap();
    let out = run(&db, &["--json", "audit"]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(report["ok"], false);
    assert_eq!(report["receipts"], 0);
    let discrepancies = report["discrepancies"].as_array().expect("discrepancies");
    assert_eq!(discrepancies.len(), 1, "{report}");
    assert_eq!(discrepancies[0]["kind"], "database_damaged");
    let detail = discrepancies[0]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("the file is cut short: its header counts ")
            && detail.contains("and the file holds 600000. Nothing was read or written"),
        "{detail}"
    );
    // The text report names it too.
    let text = run(&db, &["audit"]);
    assert_exit(&text, 1);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("the file is cut short"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    assert_eq!(files(dir.path()), vec!["opencode.db"]);
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn every_command_refuses_a_database_cut_short_and_makes_no_file_beside_it() {
    let (dir, db) = cut_short();
    let before = std::fs::read(&db).unwrap();
    for args in [
        &["sessions"][..],
        &["stats"],
        &["receipts"],
        &["events"],
        &["--quiet-period", "0", "clean", "--all"],
        &["--quiet-period", "0", "clean", "--all", "--apply"],
        &["vacuum"],
    ] {
        let out = run(&db, args);
        assert_exit(&out, 1);
        let words = String::from_utf8_lossy(&out.stderr);
        assert!(
            words.contains("is damaged: the file is cut short: its header counts"),
            "{args:?}: {words}"
        );
        assert_eq!(files(dir.path()), vec!["opencode.db"], "{args:?}");
        assert_eq!(std::fs::read(&db).unwrap(), before, "{args:?}");
    }
}

#[test]
fn audit_reports_a_database_cut_short_beside_a_wal_as_damaged() {
    // A WAL that holds commits: the header check stands aside (the WAL could hold the pages
    // past the end), and SQLite's short read is the damage.
    let source = tempfile::tempdir().unwrap();
    let db = source.path().join("opencode.db");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34/opencode.db"),
        &db,
    )
    .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; \
         UPDATE session SET title = title || ' (renamed)';",
    )
    .unwrap();
    let (dir, cut) = {
        let dir = tempfile::tempdir().unwrap();
        let cut = dir.path().join("opencode.db");
        let whole = std::fs::read(&db).unwrap();
        std::fs::write(&cut, &whole[..600_000]).unwrap();
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        let mut cut_wal = cut.clone().into_os_string();
        cut_wal.push("-wal");
        std::fs::copy(&wal, &cut_wal).unwrap();
        assert!(std::fs::metadata(&cut_wal).unwrap().len() > 0);
        (dir, cut)
    };
    drop(conn);
    let out = run(&cut, &["--json", "audit"]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(
        report["discrepancies"][0]["kind"], "database_damaged",
        "{report}"
    );
    drop(dir);
}
