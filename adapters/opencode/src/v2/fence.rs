//! The V2 fence: refuses a prune of a `session_message` row whenever a run, a compaction or a
//! revert may hold the session, or the storage is not what CodeNomad's V2 fence expects. Runs
//! inside the write transaction (`BEGIN IMMEDIATE`): a run's claim committed before it is seen
//! here, and a claim attempted during it waits for the prune (the ordering guarantee).
//!
//! Source: docs/ARCHITECTURE.md, "Fence" (V2 rules) and CodeNomad `claim-fence.ts`, in order:
//! - another database attached, or any trigger: `unsupported_storage` (the checks
//!   both generations share, `crate::write::storage_checks`);
//! - no `session_v2` table, or one without `time_suspended`: `unsupported_storage`;
//! - the session missing, or outside the request's scope (moved ownership): `not_deletable`;
//! - `time_suspended`, `time_compacting` or `revert` set: `maintenance_required`;
//! - no `event_sequence` row for the session, `owner_id` set, or any `event` row retained for the
//!   session: `unsupported_storage` (rewriting V2 events waits until a real opencode2 build shows
//!   how it replays them).

use pruning_engine::{BlockedReason, Refusal, Scope};
use rusqlite::{Connection, OptionalExtension};

use crate::ownership::{self, SessionTable};
use crate::schema::Schema;

/// Runs the V2 fence for `session_id`. `Ok(Some(refusal))` refuses; SQL errors are returned for
/// the caller to map.
pub fn check(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    scope: &Scope,
) -> rusqlite::Result<Option<Refusal>> {
    let unsupported = |detail: String| {
        Ok(Some(Refusal::new(
            BlockedReason::UnsupportedStorage,
            detail,
        )))
    };
    if let Some(refusal) = crate::write::storage_checks(conn)? {
        return Ok(Some(refusal));
    }
    if !schema.has("session_v2") {
        return unsupported(
            "V2 messages live in the shared session table here (OpenCode 1.18), which has no time_suspended run claim: V2 pruning needs session_v2".into(),
        );
    }
    let has_claim_column: bool = crate::cached::query_row(
        conn,
        "SELECT count(*) > 0 FROM pragma_table_info('session_v2') WHERE name = 'time_suspended'",
        [],
        |row| row.get(0),
    )?;
    if !has_claim_column {
        return unsupported(
            "session_v2 has no time_suspended column: an OpenCode build this version does not know"
                .into(),
        );
    }
    let session: Option<(Option<i64>, Option<i64>, Option<String>)> = crate::cached::query_row(
        conn,
        "SELECT time_suspended, time_compacting, revert FROM session_v2 WHERE id = ?1",
        [session_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )
    .optional()?;
    let Some((suspended, compacting, revert)) = session else {
        return Ok(Some(Refusal::new(
            BlockedReason::NotDeletable,
            ownership::missing_session(session_id),
        )));
    };
    if let Some(refusal) = ownership::check(conn, SessionTable::V2, session_id, scope)? {
        return Ok(Some(refusal));
    }
    let busy = |detail: &str| {
        Ok(Some(Refusal::new(
            BlockedReason::MaintenanceRequired,
            detail,
        )))
    };
    if suspended.is_some() {
        return busy("a run holds the session (time_suspended is set); try again when it ends");
    }
    if compacting.is_some() {
        return busy("a compaction of the session is in progress");
    }
    if revert.is_some() {
        return busy("the session has a staged revert; finish or undo it in OpenCode");
    }
    if !schema.has_events() {
        return unsupported("the database has no event_sequence table".into());
    }
    let owner: Option<Option<String>> = crate::cached::query_row(
        conn,
        "SELECT owner_id FROM event_sequence WHERE aggregate_id = ?1",
        [session_id],
        |row| row.get(0),
    )
    .optional()?;
    match owner {
        None => return unsupported(format!("session {session_id} has no event_sequence row")),
        Some(Some(owner)) => {
            return unsupported(format!("the session's events are owned by remote {owner}"))
        }
        Some(None) => {}
    }
    let retained: i64 = crate::cached::query_row(
        conn,
        "SELECT count(*) FROM event WHERE aggregate_id = ?1",
        [session_id],
        |row| row.get(0),
    )?;
    if retained > 0 {
        return unsupported(format!(
            "the session retains {retained} event row(s); rewriting V2 events is not supported yet"
        ));
    }
    Ok(None)
}
