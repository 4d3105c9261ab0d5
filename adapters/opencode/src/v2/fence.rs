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
//! - `time_compacting` or `revert` set: `maintenance_required`;
//! - `time_suspended` set (a run holds the session): `maintenance_required`, unless the run was
//!   abandoned: OpenCode 2 stopped or killed mid-run leaves the claim set, and OpenCode 2 is not
//!   running it now. Judged as a V1 killed run is (docs/ARCHITECTURE.md, "Fence"): nothing of
//!   the session written for the store's `abandoned_after`, and then no other process holding
//!   the database's files (read from `/proc` at that moment: an OpenCode 2 that starts resumes
//!   the runs it finds suspended). The prune is then admitted, and its receipt says so;
//! - no `event_sequence` row for the session, `owner_id` set, or any `event` row retained for the
//!   session: `unsupported_storage` (rewriting V2 events waits until a real opencode2 build shows
//!   how it replays them).

use std::path::Path;

use pruning_engine::{BlockedReason, Refusal, Scope};
use rusqlite::{Connection, OptionalExtension};

use crate::ownership::{self, SessionTable};
use crate::schema::Schema;
use crate::v1::fence::{seconds, FenceClock};
use crate::v1::runs::Abandoned;

/// Runs the V2 fence for `session_id` at `clock`: `Ok(Err(refusal))` refuses, `Ok(Ok(run))`
/// admits, beside the abandoned run `run` when there is one; SQL errors are returned for the
/// caller to map.
pub fn check(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    scope: &Scope,
    clock: FenceClock,
) -> rusqlite::Result<Result<Option<Abandoned>, Refusal>> {
    Ok(match refusal(conn, schema, session_id, scope)? {
        Some(refusal) => Err(refusal),
        None => match suspended_run(conn, session_id, clock)? {
            Ok(run) => Ok(run),
            Err(refusal) => Err(refusal),
        },
    })
}

/// Every check of the fence but the run claim's, in order; `Some` refuses.
fn refusal(
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
            "OpenCode 2 messages live in the session table OpenCode 1.17 to 1.19 share here, which has no time_suspended run claim: their prunes need OpenCode 2's own session_v2".into(),
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
    let session: Option<(Option<i64>, Option<String>)> = crate::cached::query_row(
        conn,
        "SELECT time_compacting, revert FROM session_v2 WHERE id = ?1",
        [session_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()?;
    let Some((compacting, revert)) = session else {
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

/// The run claim: none (`Ok(None)`), a run that may be alive (`Err`, `maintenance_required`), or
/// one OpenCode 2 abandoned (`Ok(Some(run))`, see the module's rule). A time that is not a
/// number of ms (text, a real, below 10^11: seconds) leaves the run judged alive.
fn suspended_run(
    conn: &Connection,
    session_id: &str,
    clock: FenceClock,
) -> rusqlite::Result<Result<Option<Abandoned>, Refusal>> {
    let busy = |detail: String| Err(Refusal::new(BlockedReason::MaintenanceRequired, detail));
    // The claim, and the newest write of the session: its row, its messages, and its children
    // (a subagent's session), each a number of ms or NULL when any is not.
    let found: Option<(Option<i64>, Option<i64>)> = crate::cached::query_row(
        conn,
        "WITH times(t) AS ( \
             SELECT time_suspended FROM session_v2 WHERE id = ?1 \
             UNION ALL SELECT time_updated FROM session_v2 WHERE id = ?1 OR parent_id = ?1 \
             UNION ALL SELECT time_created FROM session_message WHERE session_id = ?1 \
             UNION ALL SELECT time_updated FROM session_message WHERE session_id = ?1) \
         SELECT (SELECT time_suspended FROM session_v2 WHERE id = ?1), \
                CASE WHEN (SELECT count(*) FROM times \
                           WHERE typeof(t) <> 'integer' OR t < 100000000000) = 0 \
                     THEN (SELECT max(t) FROM times) END",
        [session_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()?;
    let Some((Some(suspended), last_write)) = found else {
        return Ok(Ok(None));
    };
    let claimed = seconds(clock.now_ms.saturating_sub(suspended));
    let Some(after) = clock.abandoned_after_ms else {
        return Ok(busy(format!(
            "a run holds the session (time_suspended is set, {claimed} ago); try again when it ends"
        )));
    };
    let Some(last_write) = last_write else {
        return Ok(busy(
            "a run holds the session (time_suspended is set), and a time of the session is not a number of ms: whether the run is alive cannot be told".into(),
        ));
    };
    let idle = clock.now_ms.saturating_sub(last_write);
    if idle < after {
        return Ok(busy(format!(
            "a run holds the session (time_suspended is set, {claimed} ago; its last write {} ago); try again when it ends (a run OpenCode 2 was stopped or killed in is taken once nothing of the session was written for {}, --abandoned-after, while no OpenCode has the database open)",
            seconds(idle),
            seconds(after)
        )));
    }
    // By the file itself, not its path: a process may hold it through a hard link or another
    // mount of its folder.
    let holders: Vec<String> = conn
        .path()
        .filter(|path| !path.is_empty())
        .map(|path| crate::schema::holders::holding_by_inode(Path::new(path)))
        .unwrap_or_default()
        .into_iter()
        .map(crate::schema::holders::process_named)
        .collect();
    if !holders.is_empty() {
        return Ok(busy(format!(
            "a run holds the session (time_suspended is set, {claimed} ago), and {} has the database open: OpenCode 2 resumes a run it finds suspended, so it may be running it; try again when it ends, or stop OpenCode (`opencode service stop`)",
            holders.join(", ")
        )));
    }
    // The run's own message: the newest assistant row that is not complete (the planner never
    // prunes it), else the session's newest row.
    let message_id: Option<String> = crate::cached::query_row(
        conn,
        "SELECT id FROM session_message WHERE session_id = ?1 \
         ORDER BY (type = 'assistant' AND CASE WHEN json_valid(data) \
                     THEN json_type(data, '$.time.completed') IS NULL ELSE 1 END) DESC, \
                  time_created DESC, id DESC LIMIT 1",
        [session_id],
        |row| row.get(0),
    )
    .optional()?;
    Ok(Ok(Some(Abandoned {
        message_id: message_id.unwrap_or_default(),
        last_write_ms: last_write,
    })))
}
