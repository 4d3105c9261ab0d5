//! Statements the write path runs for every message, prepared once per connection: SQLite
//! parses a statement in about as long as it takes to run a small one, and a clean runs the
//! same dozen statements thousands of times.

use rusqlite::{Connection, Params, Row};

/// How many prepared statements a connection keeps (rusqlite's default is 16; the write path
/// and the scans use a few dozen).
pub const STATEMENT_CACHE: usize = 128;

/// [`Connection::query_row`] through the connection's statement cache.
pub fn query_row<T, P, F>(conn: &Connection, sql: &str, params: P, f: F) -> rusqlite::Result<T>
where
    P: Params,
    F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
{
    conn.prepare_cached(sql)?.query_row(params, f)
}

/// [`Connection::execute`] through the connection's statement cache.
pub fn execute<P: Params>(conn: &Connection, sql: &str, params: P) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}
