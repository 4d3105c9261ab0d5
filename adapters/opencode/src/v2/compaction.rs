//! Where OpenCode 2 cuts a compacted session's history when it rebuilds the model's context: the
//! rows older than the cut are never sent again, so pruning them cannot change the next request
//! (`clean --before-compaction`).
//!
//! Source: docs/opencode-versions.md, "OpenCode 2", measured by the model requests of 2.0.15 and
//! 2.1.2. A `compaction` row with `status: "completed"` replaces what came before it with its
//! `summary`, and keeps some recent history, in one of three shapes that can sit in one file:
//! - 2.1.2's own: `metadata.keepID` names the oldest message it still sends (the rows from it to
//!   the compaction are sent again with every request): the cut is that message;
//! - 2.0.15's own: a `recent` transcript of the last turns, which it (and 2.1.2) sends: the cut is
//!   the compaction row itself (the rows before it are only in the transcript, never sent);
//! - made from a 1.x compaction by the migration: `metadata.recent` (2.1.2) or `recent` (2.0.15):
//!   the cut is the compaction row.
//!
//! The newest completed compaction of the session decides (by `seq`); one whose `keepID` names
//! no row of the session cuts nothing (then the whole history may be sent).

use rusqlite::{Connection, OptionalExtension};

/// The `seq` below which the session's rows are never sent to the model again; `None` when the
/// session has no completed compaction, or its cut names no row of the session.
///
/// Errors: SQLite's.
pub(crate) fn cut(conn: &Connection, session_id: &str) -> rusqlite::Result<Option<i64>> {
    let newest: Option<(i64, Option<String>)> = crate::cached::query_row(
        conn,
        "SELECT seq, CASE WHEN json_valid(data) AND json_type(data, '$.metadata.keepID') = 'text' \
                     THEN json_extract(data, '$.metadata.keepID') END \
         FROM session_message \
         WHERE session_id = ?1 AND type = 'compaction' AND typeof(seq) = 'integer' \
           AND CASE WHEN json_valid(data) THEN json_extract(data, '$.status') = 'completed' END \
         ORDER BY seq DESC LIMIT 1",
        [session_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()?;
    let Some((compaction, keep)) = newest else {
        return Ok(None);
    };
    let Some(keep) = keep else {
        return Ok(Some(compaction));
    };
    crate::cached::query_row(
        conn,
        "SELECT seq FROM session_message \
         WHERE session_id = ?1 AND id = ?2 AND typeof(seq) = 'integer' AND seq < ?3",
        rusqlite::params![session_id, keep, compaction],
        |row| row.get(0),
    )
    .optional()
}
