//! SQL functions this engine registers on its own connection (never in the database file).
//!
//! `session_prune_contains(text, needle)`: 1 when `needle` occurs in `text`, else 0 (NULL
//! counts as absent). The fence and the snapshot scan use it to skip rows before parsing their
//! JSON; SQLite's own `instr` compares at every position, while `memchr::memmem` searches
//! whole blocks at a time, which matters when a session holds megabytes of tool output.
//!
//! `session_prune_count(text, needle)`: how many times `needle` occurs in `text`, not
//! overlapping (0 for NULL): the foreign-snapshot scan tells a snapshot that names its own
//! aggregate twice (as the event and as the part) from one that names it once.
//!
//! `session_prune_is_id(value)`: 1 when `value` is text of valid UTF-8 of at most 900 bytes, else
//! 0: what a history scan can name in its cursor and a request can address (a contract id is
//! at most 256 characters).
//!
//! `session_prune_abridged(table, rowid)` and `session_prune_uncut_bytes(text)`: reading a row
//! over the 16 MiB row budget without loading it (`row_budget`).

use memchr::memmem;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

/// Name of the substring test.
pub const CONTAINS: &str = "session_prune_contains";
/// Name of the occurrence count.
pub const COUNT: &str = "session_prune_count";
/// Name of the id test.
pub const IS_ID: &str = "session_prune_is_id";
/// Longest id, in bytes, a history scan visits.
pub const MAX_ID_BYTES: usize = 900;

/// Registers the functions on `conn`.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    super::row_budget::register(conn)?;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function(CONTAINS, 2, flags, |ctx| {
        let haystack = bytes_of(ctx.get_raw(0));
        let needle = bytes_of(ctx.get_raw(1));
        Ok(match (haystack, needle) {
            (Some(h), Some(n)) => i64::from(memmem::find(h, n).is_some()),
            _ => 0,
        })
    })?;
    conn.create_scalar_function(COUNT, 2, flags, |ctx| {
        let haystack = bytes_of(ctx.get_raw(0));
        let needle = bytes_of(ctx.get_raw(1));
        Ok(match (haystack, needle) {
            (Some(h), Some(n)) if !n.is_empty() => memmem::find_iter(h, n).count() as i64,
            _ => 0,
        })
    })?;
    conn.create_scalar_function(IS_ID, 1, flags, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Text(bytes) => {
                i64::from(bytes.len() <= MAX_ID_BYTES && std::str::from_utf8(bytes).is_ok())
            }
            _ => 0,
        })
    })
}

fn bytes_of(value: ValueRef<'_>) -> Option<&[u8]> {
    match value {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => Some(bytes),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_matches_substrings_and_treats_null_as_absent() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let q = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(
            q("SELECT session_prune_contains('a \"running\" b', 'running')"),
            1
        );
        assert_eq!(
            q("SELECT session_prune_contains('completed', 'running')"),
            0
        );
        assert_eq!(q("SELECT session_prune_contains(NULL, 'x')"), 0);
        assert_eq!(q("SELECT session_prune_contains('é✓', '✓')"), 1);
    }

    #[test]
    fn an_id_is_short_utf8_text() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let q = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(q("SELECT session_prune_is_id('msg_ü🚀')"), 1);
        assert_eq!(q("SELECT session_prune_is_id(CAST(x'6dff' AS TEXT))"), 0);
        assert_eq!(q("SELECT session_prune_is_id(x'6d73')"), 0);
        assert_eq!(q("SELECT session_prune_is_id(12)"), 0);
        assert_eq!(q("SELECT session_prune_is_id(printf('%.901c', 'x'))"), 0);
    }
}
