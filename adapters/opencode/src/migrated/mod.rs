//! The V1 history OpenCode 2 migrated: at its first start on a 1.x file, OpenCode 2 copies every
//! V1 session into `session_v2` (same id) and its messages into `session_message`, then never
//! reads the V1 `session`, `message` and `part` rows again; they stay in the file, byte for
//! byte. This module owns which V1 rows are such a copy.
//!
//! Source: docs/opencode-versions.md, "OpenCode 2" (measured with 2.0.15 and 2.1.2):
//! - a V1 session is migrated when `session_v2` holds a row of its id (OpenCode 2 imports once:
//!   a session a 1.x wrote after that has no such row and is live V1 history);
//! - a V1 message is copied when `session_message` holds a row of its id in its session, or,
//!   for the summary a compaction's assistant wrote (`summary: true`), when the `compaction`
//!   row OpenCode 2 made of the pair has the id of its user message (`parentID`);
//! - the migration is done when `kv` holds `migration.v1-v2` with `"phase":"completed"`; that
//!   row's `time_updated` is when it finished, and the migration writes no 1.x row, so a 1.x row
//!   (session, message or part) created or updated after it was written by a 1.x since, and is
//!   in no copy.
//!
//! `remove` deletes such a copy, message by message (`clean --migrated-v1`).

pub(crate) mod remove;

use rusqlite::{Connection, OptionalExtension};

use super::row_budget;
use super::schema::Schema;

/// The `kv` key under which OpenCode 2 records its migration of the V1 history.
pub(crate) const MIGRATION_KEY: &str = "migration.v1-v2";

/// Whether the file can hold migrated V1 history: V1 tables beside OpenCode 2's `session_v2`
/// and `session_message`.
pub(crate) fn possible(schema: &Schema) -> bool {
    schema.has_v1() && schema.has("session_v2") && schema.has_v2()
}

/// SQL condition: the session whose id is the expression `session_id` is one OpenCode 2
/// migrated (its V1 rows are a copy OpenCode 2 does not read). `0` in a file that cannot hold
/// migrated history.
pub(crate) fn in_migrated_session(schema: &Schema, session_id: &str) -> String {
    if possible(schema) {
        format!("{session_id} IN (SELECT id FROM session_v2)")
    } else {
        "0".to_string()
    }
}

/// SQL condition on the V1 `message` row aliased `m`: OpenCode 2 holds a copy of it (see the
/// module's rules). Only meaningful where [`possible`].
pub(crate) fn copied(m: &str) -> String {
    let data = row_budget::data(m, "message");
    format!(
        "(EXISTS (SELECT 1 FROM session_message c WHERE c.id = {m}.id AND c.session_id = {m}.session_id) \
          OR (CASE WHEN json_valid({data}) THEN json_extract({data}, '$.role') = 'assistant' \
                AND json_type({data}, '$.summary') = 'true' END \
              AND EXISTS (SELECT 1 FROM session_message c \
                  WHERE c.session_id = {m}.session_id AND c.type = 'compaction' \
                    AND c.id = CASE WHEN json_valid({data}) THEN json_extract({data}, '$.parentID') END)))"
    )
}

/// Whether OpenCode 2 recorded its migration of the V1 history as completed (`kv`
/// `migration.v1-v2` whose value's `phase` is `completed`). `false` without a `kv` table.
pub(crate) fn completed(conn: &Connection, schema: &Schema) -> rusqlite::Result<bool> {
    if !schema.has("kv") {
        return Ok(false);
    }
    let phase: Option<Option<String>> = crate::cached::query_row(
        conn,
        "SELECT CASE WHEN json_valid(value) THEN json_extract(value, '$.phase') END \
         FROM kv WHERE key = ?1",
        [MIGRATION_KEY],
        |row| row.get(0),
    )
    .optional()?;
    Ok(phase.flatten().as_deref() == Some("completed"))
}

/// When OpenCode 2 recorded its migration as finished: the `time_updated` of its `kv` row, in
/// ms since the Unix epoch; `None` without one (or one whose time is not a number).
fn finished_at(conn: &Connection, schema: &Schema) -> rusqlite::Result<Option<i64>> {
    if !schema.has("kv") {
        return Ok(None);
    }
    Ok(crate::cached::query_row(
        conn,
        "SELECT CASE typeof(time_updated) WHEN 'integer' THEN time_updated END \
         FROM kv WHERE key = ?1",
        [MIGRATION_KEY],
        |row| row.get::<_, Option<i64>>(0),
    )
    .optional()?
    .flatten())
}

/// What a session's V1 rows are to OpenCode 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum V1Rows {
    /// Live history: the file holds no OpenCode 2 copy of the session.
    Live,
    /// A copy: OpenCode 2 holds every one of the session's V1 messages, and reads none of
    /// these rows.
    Copy,
    /// OpenCode 2 migrated the session, but a 1.x wrote to its V1 rows since: messages without
    /// a copy, or rows created or updated after the migration finished (neither live for
    /// OpenCode 2 nor a copy).
    Diverged {
        /// V1 messages without a copy, and V1 rows (session, messages, parts) written after the
        /// migration.
        rows: u64,
    },
}

/// What the V1 rows of `session_id` are (see [`V1Rows`]). A row whose times are not numbers
/// counts as written since: whether it was cannot be told.
pub(crate) fn v1_rows(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
) -> rusqlite::Result<V1Rows> {
    if !possible(schema) {
        return Ok(V1Rows::Live);
    }
    let migrated: bool = crate::cached::query_row(
        conn,
        "SELECT count(*) > 0 FROM session_v2 WHERE id = ?1",
        [session_id],
        |row| row.get(0),
    )?;
    if !migrated {
        return Ok(V1Rows::Live);
    }
    let uncopied: i64 = crate::cached::query_row(
        conn,
        &format!(
            "SELECT count(*) FROM message m WHERE m.session_id = ?1 AND NOT {}",
            copied("m")
        ),
        [session_id],
        |row| row.get(0),
    )?;
    let since = match finished_at(conn, schema)? {
        None => 0,
        Some(finished) => {
            // Written after `finished`, or at a time that is not a number.
            let after = |table: &str, key: &str| {
                format!(
                    "SELECT count(*) FROM {table} WHERE {key} = ?1 \
                       AND (typeof(time_created) <> 'integer' OR time_created > ?2 \
                            OR typeof(time_updated) <> 'integer' OR time_updated > ?2)"
                )
            };
            let mut since = 0i64;
            for (table, key) in [
                ("session", "id"),
                ("message", "session_id"),
                ("part", "session_id"),
            ] {
                if table == "session"
                    && !(schema.has_column("session", "time_created")
                        && schema.has_column("session", "time_updated"))
                {
                    continue;
                }
                if table != "session" && !schema.has_column(table, "time_updated") {
                    continue;
                }
                since += crate::cached::query_row(
                    conn,
                    &after(table, key),
                    rusqlite::params![session_id, finished],
                    |row| row.get::<_, i64>(0),
                )?;
            }
            since
        }
    };
    Ok(match uncopied.max(0) + since.max(0) {
        0 => V1Rows::Copy,
        n => V1Rows::Diverged { rows: n as u64 },
    })
}
