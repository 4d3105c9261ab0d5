//! A V1 database of a chosen size, generated from a real fixture's rows: each copy of the
//! fixture's `session`, `message`, `part`, `event_sequence` and `event` rows gets its ids renamed
//! (every `ses_`, `msg_`, `prt_` and `evt_` id inside any text gains a suffix), so copies are
//! independent sessions whose snapshots and receipts match as in the original.

use std::path::Path;
use std::time::Instant;

use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::Connection;

const TABLES: [&str; 5] = ["session", "message", "part", "event_sequence", "event"];

/// `text` with every OpenCode id (`ses_`, `msg_`, `prt_`, `evt_` then 26 letters or digits)
/// followed by `suffix`.
pub fn rename(text: &str, suffix: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 64);
    let mut copied = 0;
    let mut i = 0;
    while i + 30 <= bytes.len() {
        let prefix = &bytes[i..i + 4];
        let is_id = matches!(prefix, b"ses_" | b"msg_" | b"prt_" | b"evt_")
            && bytes[i + 4..i + 30].iter().all(u8::is_ascii_alphanumeric)
            && bytes.get(i + 30).is_none_or(|b| !b.is_ascii_alphanumeric());
        if is_id {
            out.push_str(&text[copied..i + 30]);
            out.push_str(suffix);
            copied = i + 30;
            i += 30;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Generates `target_mb` MB of V1 rows in `db`, from the fixture `tests/fixtures/opencode-1.18.34`.
pub fn generate(db: &Path, target_mb: u64) {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode-1.18.34/opencode.db");
    generate_from(db, &fixture, target_mb);
}

/// Generates `target_mb` MB of V1 rows in `db`, from the database `fixture` (copied first).
pub fn generate_from(db: &Path, fixture: &Path, target_mb: u64) {
    std::fs::copy(fixture, db).expect("copy the fixture");
    let conn = Connection::open(db).expect("open");
    conn.create_scalar_function(
        "scale_rename",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let suffix: String = ctx.get(1)?;
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(bytes) => {
                    SqlValue::Text(rename(&String::from_utf8_lossy(bytes), &suffix))
                }
                ValueRef::Integer(n) => SqlValue::Integer(n),
                ValueRef::Real(x) => SqlValue::Real(x),
                ValueRef::Blob(bytes) => SqlValue::Blob(bytes.to_vec()),
                ValueRef::Null => SqlValue::Null,
            })
        },
    )
    .expect("function");
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA foreign_keys = OFF;")
        .expect("pragmas");
    conn.execute(
        "ATTACH DATABASE ?1 AS src",
        [fixture.to_str().expect("UTF-8")],
    )
    .expect("attach");
    let inserts: Vec<String> = TABLES
        .iter()
        .map(|table| {
            let mut stmt = conn
                .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                .expect("columns");
            let columns: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .expect("columns")
                .map(Result::unwrap)
                .collect();
            let renamed: Vec<String> = columns
                .iter()
                .map(|c| format!("scale_rename(\"{c}\", ?1)"))
                .collect();
            format!(
                "INSERT INTO main.{table} ({}) SELECT {} FROM src.{table}",
                columns
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect::<Vec<_>>()
                    .join(", "),
                renamed.join(", ")
            )
        })
        .collect();
    let started = Instant::now();
    let mut copy = 0u64;
    while std::fs::metadata(db).map(|m| m.len()).unwrap_or(0) < target_mb * 1_000_000 {
        copy += 1;
        let suffix = format!("x{copy}");
        conn.execute_batch("BEGIN").expect("begin");
        for insert in &inserts {
            conn.execute(insert, [&suffix]).expect("copy rows");
        }
        conn.execute_batch("COMMIT").expect("commit");
        if copy % 50 == 0 {
            eprintln!(
                "generated {copy} copies, {} MB, {:?}",
                std::fs::metadata(db).map(|m| m.len()).unwrap_or(0) / 1_000_000,
                started.elapsed()
            );
        }
    }
    conn.execute_batch("DETACH DATABASE src; PRAGMA wal_checkpoint(TRUNCATE);")
        .expect("finish");
}
