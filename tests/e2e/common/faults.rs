//! Faults built into a copy of a real database, as they are met in the field: pages
//! overwritten in the middle of the file, a freelist pointer that names a page in use, an
//! index out of step with its table.
#![allow(dead_code)]

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use rusqlite::Connection;

/// SQLite's page size of the fixtures (bytes).
const PAGE: u64 = 4096;

/// Overwrites pages `first..first + count` (1-based page numbers) with a byte pattern no
/// b-tree page has; the header (page 1) stays intact.
pub fn damage_pages(db: &Path, first: u64, count: u64) {
    assert!(first > 1, "page 1 holds the header");
    let mut file = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    file.seek(SeekFrom::Start((first - 1) * PAGE)).unwrap();
    file.write_all(&vec![0xA5; (count * PAGE) as usize])
        .unwrap();
    file.sync_all().unwrap();
}

/// Points the header's first freelist trunk page at `page` (a page in use) and counts one free
/// page: SQLite's freelist is then damaged while every b-tree reads.
pub fn damage_freelist(db: &Path, page: u32) {
    let mut file = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    // Offsets 32 and 36 of the header: the first trunk page and the number of free pages.
    file.seek(SeekFrom::Start(32)).unwrap();
    file.write_all(&page.to_be_bytes()).unwrap();
    file.write_all(&1u32.to_be_bytes()).unwrap();
    file.sync_all().unwrap();
}

/// Runs `dml` on `db` while SQLite does not keep index `index` up to date (its definition is
/// made partial, `WHERE 0`, and put back after), leaving the index out of step with its
/// table as a write through another schema would. The database must be at rest (no WAL).
pub fn behind_the_index(db: &Path, index: &str, dml: &str) {
    let conn = Connection::open(db).unwrap();
    let sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?1",
            [index],
            |row| row.get(0),
        )
        .unwrap();
    conn.execute_batch("PRAGMA writable_schema = ON").unwrap();
    conn.execute(
        "UPDATE sqlite_schema SET sql = ?1 || ' WHERE 0' WHERE name = ?2",
        [&sql, index],
    )
    .unwrap();
    drop(conn);
    let conn = Connection::open(db).unwrap();
    conn.execute_batch(dml).unwrap();
    conn.execute_batch("PRAGMA writable_schema = ON").unwrap();
    conn.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE name = ?2",
        [&sql, index],
    )
    .unwrap();
    drop(conn);
    let conn = Connection::open(db).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check(1)", [], |row| row.get(0))
        .unwrap();
    assert!(check.contains(index), "{check}");
}
