//! The walk of a history scan: which session comes next, and the rows of one session in scan
//! order within the horizon, each found by one range of an index that starts with `session_id`.
//!
//! Source: docs/ARCHITECTURE.md, "History scans". OpenCode's `(session_id, time_created, id)`
//! indexes (on `message` and `session_message`) serve the order itself; where a table has only
//! an index on `session_id`, only that session's rows are sorted. The next session is one seek:
//! into the message tables' `session_id` indexes for a scan of everything, into the session
//! tables' primary keys for a scope (each session checked against the scope as the walk reaches
//! it). So a page costs the same whether the database holds a thousand messages or millions;
//! the tests below hold SQLite's query plans to this.

use pruning_engine::history::{Horizon, Position, UNTIMED};
use pruning_engine::Scope;
use rusqlite::{Connection, OptionalExtension};

use crate::ownership::{self, SessionTable};
use crate::schema::Schema;
use crate::values::lenient_text;

/// Which sessions a scan covers.
#[derive(Debug)]
pub(super) enum Sessions<'a> {
    /// Every session that has rows, found through the message tables' indexes on `session_id`
    /// (ids a cursor can name only: UTF-8 text of at most 900 bytes).
    All,
    /// The named session, already checked against the scope.
    One(String),
    /// The sessions of these session tables that `scope` admits, found in id order through
    /// their primary keys (ids a cursor can name only) and checked one at a time.
    Scoped {
        /// The request's scope.
        scope: &'a Scope,
        /// The session tables the database has.
        tables: Vec<SessionTable>,
    },
}

/// Whether `scope` admits session `id`: some session table holds it, and every one that does
/// admits its row (a session id held by both session tables, after an upgrade, is in scope only
/// when both rows are: each generation's messages belong to its own row).
fn in_scope(
    conn: &Connection,
    scope: &Scope,
    tables: &[SessionTable],
    id: &str,
) -> rusqlite::Result<bool> {
    let mut found = false;
    for table in tables {
        if let Some(owner) = ownership::read(conn, *table, id)? {
            if scope.admits(&owner.as_ownership()).is_err() {
                return Ok(false);
            }
            found = true;
        }
    }
    Ok(found)
}

/// One generation's message table in the scan.
#[derive(Debug, Clone, Copy)]
pub(super) struct Table {
    /// `message` or `session_message`.
    pub(super) name: &'static str,
    /// 1 or 2 (see [`Position::generation`]).
    pub(super) generation: u8,
}

/// The message tables of the generations the database holds.
pub(super) fn tables(schema: &Schema) -> Vec<Table> {
    let mut tables = Vec::new();
    if schema.has_v1() {
        tables.push(Table {
            name: "message",
            generation: 1,
        });
    }
    if schema.has_v2() {
        tables.push(Table {
            name: "session_message",
            generation: 2,
        });
    }
    tables
}

/// Whether `table` is declared `WITHOUT ROWID` (it then has no row numbers to fix a horizon).
pub(super) fn without_rowid(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    let sql: Option<Option<String>> = crate::cached::query_row(
        conn,
        "SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?1",
        [table],
        |row| row.get(0),
    )
    .optional()?;
    Ok(sql
        .flatten()
        .is_some_and(|sql| sql.to_ascii_uppercase().contains("WITHOUT ROWID")))
}

/// The highest `rowid` of `generation`'s table now (`None`: no such table, or no row).
pub(super) fn last_row(
    conn: &Connection,
    tables: &[Table],
    generation: u8,
) -> rusqlite::Result<Option<i64>> {
    match tables.iter().find(|t| t.generation == generation) {
        Some(table) => crate::cached::query_row(
            conn,
            &format!("SELECT max(rowid) FROM {}", table.name),
            [],
            |row| row.get(0),
        ),
        None => Ok(None),
    }
}

/// Rows with an integer time below [`UNTIMED`]; the others are "untimed".
const TIMED: &str = "typeof(time_created) = 'integer' AND time_created < 9223372036854775807";
/// Rows whose id a cursor and a request can name (short UTF-8 text); the others are not
/// scanned: paging on a converted id would not move past them.
const NAMED: &str = "session_prune_is_id(id)";

/// The scan's walk over the sessions in scope, within one horizon.
pub(super) struct Walk<'a> {
    /// The message tables of the generations the database holds.
    pub(super) tables: Vec<Table>,
    /// The sessions in scope.
    pub(super) sessions: Sessions<'a>,
    /// Where the scan ends.
    pub(super) horizon: Horizon,
}

impl Walk<'_> {
    /// Up to `want` rows after `after` (from the first when `None`), in scan order: the rest of
    /// `after`'s session, then the next sessions' rows, one session at a time.
    pub(super) fn page(
        &self,
        conn: &Connection,
        after: Option<&Position>,
        want: usize,
    ) -> rusqlite::Result<Vec<Position>> {
        let mut rows = Vec::new();
        if let Some(after) = after {
            if self.admits(conn, &after.session_id)? {
                rows = self.session_rows(conn, &after.session_id, Some(after), want)?;
            }
        }
        let mut session = after.map(|a| a.session_id.clone());
        while rows.len() < want {
            let Some(next) = self.next_session(conn, session.as_deref())? else {
                break;
            };
            let more = self.session_rows(conn, &next, None, want - rows.len())?;
            rows.extend(more);
            session = Some(next);
        }
        Ok(rows)
    }

    /// Whether the scan covers session `id`.
    fn admits(&self, conn: &Connection, id: &str) -> rusqlite::Result<bool> {
        match &self.sessions {
            Sessions::All => Ok(true),
            Sessions::One(session) => Ok(session == id),
            Sessions::Scoped { scope, tables } => in_scope(conn, scope, tables, id),
        }
    }

    /// The first session of the scan after `after` (from the first when `None`).
    fn next_session(
        &self,
        conn: &Connection,
        after: Option<&str>,
    ) -> rusqlite::Result<Option<String>> {
        match &self.sessions {
            Sessions::All => {
                let keys: Vec<(&str, &str)> =
                    self.tables.iter().map(|t| (t.name, "session_id")).collect();
                first_id(conn, &keys, after)
            }
            Sessions::One(session) => Ok(after
                .is_none_or(|a| a < session.as_str())
                .then(|| session.clone())),
            Sessions::Scoped { scope, tables } => {
                let keys: Vec<(&str, &str)> = tables.iter().map(|t| (t.name(), "id")).collect();
                let mut after = after.map(str::to_string);
                loop {
                    let Some(next) = first_id(conn, &keys, after.as_deref())? else {
                        return Ok(None);
                    };
                    if in_scope(conn, scope, tables, &next)? {
                        return Ok(Some(next));
                    }
                    after = Some(next);
                }
            }
        }
    }

    /// Up to `limit` rows of `session` after `after` (a position in that session, or `None`
    /// for its first row), over both generations.
    fn session_rows(
        &self,
        conn: &Connection,
        session: &str,
        after: Option<&Position>,
        limit: usize,
    ) -> rusqlite::Result<Vec<Position>> {
        let mut rows = Vec::new();
        for table in &self.tables {
            if let Some(last_row) = self.horizon.last_row(table.generation) {
                rows.extend(table_rows(conn, *table, session, after, last_row, limit)?);
            }
        }
        rows.sort();
        rows.truncate(limit);
        Ok(rows)
    }
}

/// One table's first `limit` rows of `session` after `after` and numbered up to `last_row`:
/// first the timed rows by (time, id), then the untimed ones by id.
fn table_rows(
    conn: &Connection,
    table: Table,
    session: &str,
    after: Option<&Position>,
    last_row: i64,
    limit: usize,
) -> rusqlite::Result<Vec<Position>> {
    let g = table.generation;
    // Within one (time, id), the lower generation comes first: a row of this table is after
    // `after` when its (time, id) is greater, or equal with a greater generation.
    let lower_op = |a: &Position| if g > a.generation { ">=" } else { ">" };
    let lim = i64::try_from(limit).unwrap_or(i64::MAX);
    let position = |time_created, message_id| Position {
        session_id: session.to_string(),
        time_created,
        message_id,
        generation: g,
    };
    let mut found = Vec::new();
    if after.is_none_or(|a| a.time_created < UNTIMED) {
        let mut binds: Vec<(&str, rusqlite::types::Value)> = vec![
            (":session", session.to_string().into()),
            (":last", last_row.into()),
            (":lim", lim.into()),
        ];
        let resume = after.map(|a| {
            binds.push((":at", a.time_created.into()));
            binds.push((":aid", a.message_id.clone().into()));
            lower_op(a)
        });
        let sql = timed_sql(table.name, resume);
        for (time_created, message_id) in query(conn, &sql, &binds)? {
            found.push(position(time_created, message_id));
        }
    }
    if found.len() < limit {
        let mut binds: Vec<(&str, rusqlite::types::Value)> = vec![
            (":session", session.to_string().into()),
            (":last", last_row.into()),
            (":lim", lim.into()),
        ];
        let resume = after.filter(|a| a.time_created == UNTIMED).map(|a| {
            binds.push((":aid", a.message_id.clone().into()));
            lower_op(a)
        });
        let sql = untimed_sql(table.name, resume);
        for (_, message_id) in query(conn, &sql, &binds)? {
            found.push(position(UNTIMED, message_id));
        }
    }
    Ok(found)
}

/// The least id in the `(table, column)` pairs past `after` (from the first when `None`) that
/// a cursor can name.
fn first_id(
    conn: &Connection,
    keys: &[(&str, &str)],
    after: Option<&str>,
) -> rusqlite::Result<Option<String>> {
    let mut first: Option<String> = None;
    for (table, column) in keys {
        // The first of all is at or past the empty text, the least text there is.
        let sql = first_id_sql(table, column, after.is_none());
        let mut stmt = conn.prepare_cached(&sql)?;
        stmt.raw_bind_parameter(1, after.unwrap_or(""))?;
        let mut found = stmt.raw_query();
        if let Some(row) = found.next()? {
            let id = lenient_text(row.get_ref(0)?);
            first = Some(match first {
                Some(least) => least.min(id),
                None => id,
            });
        }
    }
    Ok(first)
}

/// The first `column` value of `table` at or past `?1` (`inclusive`), or past it, that a cursor
/// can name: a seek into an index that starts with `column`, then its first entries.
fn first_id_sql(table: &str, column: &str, inclusive: bool) -> String {
    let op = if inclusive { ">=" } else { ">" };
    format!(
        "SELECT {column} FROM {table} WHERE {column} {op} ?1 AND session_prune_is_id({column}) \
         ORDER BY {column} LIMIT 1"
    )
}

/// The timed rows of session `:session` in `table` numbered up to `:last`, by (time, id), at
/// most `:lim`; with `resume` (`>` or `>=`), only those whose (time, id) compares so to
/// `(:at, :aid)`.
fn timed_sql(table: &str, resume: Option<&str>) -> String {
    let bound = resume.map_or_else(String::new, |op| {
        format!(" AND (time_created, id) {op} (:at, :aid)")
    });
    format!(
        "SELECT time_created, id FROM {table} \
         WHERE session_id = :session AND {TIMED} AND {NAMED} AND rowid <= :last{bound} \
         ORDER BY time_created, id LIMIT :lim"
    )
}

/// The untimed rows of session `:session` in `table` numbered up to `:last`, by id, at most
/// `:lim`; with `resume` (`>` or `>=`), only those whose id compares so to `:aid`.
fn untimed_sql(table: &str, resume: Option<&str>) -> String {
    let bound = resume.map_or_else(String::new, |op| format!(" AND id {op} :aid"));
    format!(
        "SELECT 0, id FROM {table} \
         WHERE session_id = :session AND NOT ({TIMED}) AND {NAMED} AND rowid <= :last{bound} \
         ORDER BY id LIMIT :lim"
    )
}

/// Runs `sql` with `binds`; rows are `(time, id)`, the id read leniently (the scan's queries
/// keep only ids that are UTF-8 text, which reads exactly).
fn query(
    conn: &Connection,
    sql: &str,
    binds: &[(&str, rusqlite::types::Value)],
) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut stmt = conn.prepare_cached(sql)?;
    for (name, value) in binds {
        if let Some(index) = stmt.parameter_index(name)? {
            stmt.raw_bind_parameter(index, value)?;
        }
    }
    let mut rows = stmt.raw_query();
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        found.push((row.get(0)?, lenient_text(row.get_ref(1)?)));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    //! What a page costs, counted by SQLite's own plans: every query of a scan reads one
    //! session's range of an index or seeks the next session, never the whole table.

    use super::*;

    /// OpenCode 1.18.34's `message` and `session_message` with their indexes, as it creates
    /// them (docs/opencode-versions.md), and the session tables' keys.
    const OPENCODE: &str = "
        CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL,
          directory text NOT NULL);
        CREATE TABLE session_v2 (id text PRIMARY KEY, project_id text NOT NULL,
          directory text NOT NULL);
        CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
          time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
        CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
        CREATE TABLE session_message (id text PRIMARY KEY, session_id text NOT NULL,
          type text NOT NULL, seq integer NOT NULL, time_created integer NOT NULL,
          time_updated integer NOT NULL, data text NOT NULL);
        CREATE UNIQUE INDEX session_message_session_seq_idx ON session_message (session_id, seq);
        CREATE INDEX session_message_session_type_seq_idx ON session_message (session_id, type, seq);
        CREATE INDEX session_message_session_time_created_id_idx
          ON session_message (session_id, time_created, id);
        CREATE INDEX session_message_time_created_idx ON session_message (time_created);";

    fn plan(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        // Parameters left unbound are NULL: the plan does not depend on their values.
        let mut rows = stmt.raw_query();
        let mut details = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            details.push(row.get::<_, String>(3).unwrap());
        }
        details
    }

    fn connection(ddl: &str) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        crate::sql_functions::register(&conn).unwrap();
        conn.execute_batch(ddl).unwrap();
        conn
    }

    #[test]
    fn with_opencodes_indexes_every_query_is_an_index_range_and_nothing_is_sorted() {
        let conn = connection(OPENCODE);
        for (table, index, session_index) in [
            (
                "message",
                "message_session_time_created_id_idx",
                "message_session_time_created_id_idx",
            ),
            (
                "session_message",
                "session_message_session_time_created_id_idx",
                "session_message_session_seq_idx",
            ),
        ] {
            let search = |index: &str, constraint: &str| {
                format!("SEARCH {table} USING COVERING INDEX {index} ({constraint})")
            };
            for inclusive in [true, false] {
                assert_eq!(
                    plan(&conn, &first_id_sql(table, "session_id", inclusive)),
                    [search(session_index, "session_id>?")]
                );
            }
            assert_eq!(
                plan(&conn, &timed_sql(table, None)),
                [search(index, "session_id=? AND time_created<?")]
            );
            for op in [">", ">="] {
                assert_eq!(
                    plan(&conn, &timed_sql(table, Some(op))),
                    [search(
                        index,
                        "session_id=? AND (time_created,id)>(?,?) AND time_created<?"
                    )]
                );
            }
            // Rows whose time is not an integer are found among the session's entries and
            // sorted by id: one session's entries, read once when its timed rows run out.
            for resume in [None, Some(">"), Some(">=")] {
                assert_eq!(
                    plan(&conn, &untimed_sql(table, resume)),
                    [
                        search(index, "session_id=?"),
                        "USE TEMP B-TREE FOR ORDER BY".to_string()
                    ]
                );
            }
        }
    }

    #[test]
    fn the_next_session_in_a_scope_is_a_seek_into_the_session_tables_keys() {
        let conn = connection(OPENCODE);
        for table in ["session", "session_v2"] {
            for inclusive in [true, false] {
                assert_eq!(
                    plan(&conn, &first_id_sql(table, "id", inclusive)),
                    [format!(
                        "SEARCH {table} USING COVERING INDEX sqlite_autoindex_{table}_1 (id>?)"
                    )]
                );
            }
        }
    }

    #[test]
    fn with_an_index_on_session_id_alone_only_one_sessions_rows_are_sorted() {
        let conn = connection(
            "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
               time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
             CREATE INDEX message_session_idx ON message (session_id);",
        );
        let rows_of_one_session = [
            "SEARCH message USING INDEX message_session_idx (session_id=? AND rowid<?)".to_string(),
            "USE TEMP B-TREE FOR ORDER BY".to_string(),
        ];
        for inclusive in [true, false] {
            assert_eq!(
                plan(&conn, &first_id_sql("message", "session_id", inclusive)),
                ["SEARCH message USING COVERING INDEX message_session_idx (session_id>?)"]
            );
        }
        for resume in [None, Some(">"), Some(">=")] {
            assert_eq!(
                plan(&conn, &timed_sql("message", resume)),
                rows_of_one_session
            );
            assert_eq!(
                plan(&conn, &untimed_sql("message", resume)),
                rows_of_one_session
            );
        }
    }
}
