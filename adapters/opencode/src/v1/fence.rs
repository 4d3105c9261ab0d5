//! The V1 fence: refuses a prune whenever OpenCode may be using the session or the storage is not
//! what the engine expects. Runs inside the write transaction, so its answer holds until commit.
//!
//! Source: docs/ARCHITECTURE.md, "Fence" (V1 rules) and CodeNomad `claim-fence.ts` (attached
//! databases, triggers, remote event owners). In order:
//! - a layout a V1 write cannot use ([`Schema::v1_write_refusal`]): `unsupported_storage`;
//! - another database attached on the connection, or any trigger: `unsupported_storage` (the
//!   checks both generations share, `crate::write::storage_checks`);
//! - the session missing, or outside the request's scope (moved ownership): `not_deletable`;
//! - a session OpenCode 2 migrated (its V1 rows are a copy it does not read, or a 1.x wrote
//!   to them since: `crate::migrated`): `not_deletable`;
//! - `session.time_compacting` or `session.revert` set: `maintenance_required`;
//! - the session's `time_updated` not a number: `unsupported_storage` (whether OpenCode is
//!   writing it cannot be told);
//! - the session updated within the quiet period: `maintenance_required`;
//! - a message row of the session that is not JSON: `unsupported_storage` (it may be an
//!   assistant message still being written);
//! - any assistant message of the session not complete, or any tool part pending or running:
//!   `maintenance_required`, unless nothing of the session was written for `abandoned_after`
//!   (the run was abandoned: the prune is admitted and its receipt says so, see
//!   [`super::runs`]);
//! - an event log this engine cannot use ([`EventLog::Unusable`]), or the session's event
//!   bookkeeping inconsistent (events but no `event_sequence` row, or a
//!   `event_sequence.seq` behind its newest `event.seq`): `unsupported_storage`, since the
//!   events a prune appends would collide with OpenCode's;
//! - `event_sequence.owner_id` set for the session (events owned by a remote): `unsupported_storage`.
//!
//! Columns an older layout lacks (see [`Schema`]) read as NULL: no compaction, no revert, no
//! remote owner.

use pruning_engine::{BlockedReason, PruneRequest, Refusal, Scope};
use rusqlite::{Connection, OptionalExtension};

use super::known::Known;
use super::runs::{self, Abandoned, Runs};
use crate::ownership::{self, SessionTable};
use crate::row_budget;
use crate::schema::{EventLog, Schema};
use crate::write::{self, Prepared};

/// When the fence checks: now, the quiet period and the abandoned-run threshold, in ms (now
/// since the Unix epoch).
#[derive(Debug, Clone, Copy)]
pub struct FenceClock {
    /// Now, ms since the Unix epoch.
    pub now_ms: i64,
    /// Quiet period, ms: a session updated more recently than this is refused.
    pub quiet_period_ms: i64,
    /// How long nothing of a session must have been written for its incomplete run to count as
    /// abandoned, ms; `None`: never (such a session is always refused).
    pub abandoned_after_ms: Option<i64>,
}

/// The fence's limits, from the store's options, in ms: the quiet period and the abandoned-run
/// threshold (`None`: never).
#[derive(Debug, Clone, Copy)]
pub struct FenceLimits {
    /// See [`FenceClock::quiet_period_ms`].
    pub quiet_period_ms: i64,
    /// See [`FenceClock::abandoned_after_ms`].
    pub abandoned_after_ms: Option<i64>,
}

impl FenceLimits {
    /// These limits at `now_ms` (ms since the Unix epoch).
    pub fn at(self, now_ms: i64) -> FenceClock {
        FenceClock {
            now_ms,
            quiet_period_ms: self.quiet_period_ms,
            abandoned_after_ms: self.abandoned_after_ms,
        }
    }
}

/// What the fence admitted: a prune in a session with no incomplete run (`abandoned: None`),
/// or beside a run OpenCode abandoned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The abandoned run, when there is one.
    pub abandoned: Option<Abandoned>,
}

/// What the fence needs besides the connection.
#[derive(Debug, Clone, Copy)]
pub struct FenceInput<'a> {
    /// The session to prune in.
    pub session_id: &'a str,
    /// The sessions the request may touch.
    pub scope: &'a Scope,
    /// When it checks.
    pub clock: FenceClock,
}

/// Runs the fence: `Ok(Err(refusal))` refuses, `Ok(Ok(admitted))` lets the prune go on. SQL
/// errors (a missing column, say) are returned for the caller to map to `unsupported_storage`.
///
/// Where the session's fence already passed at `known`'s data version (no other connection
/// committed since, see [`Known`]), only what may differ since is checked again: the request's
/// scope and the quiet period at `input.clock.now_ms`. Every other check reads what only another
/// connection could have changed (this store's connection is its own: nothing attaches a
/// database to it after it is opened).
pub fn check(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    input: FenceInput<'_>,
) -> rusqlite::Result<Result<Admitted, Refusal>> {
    if let Some((updated, abandoned)) = known.fence_passed(input.session_id) {
        if let Some(refusal) =
            ownership::check(conn, SessionTable::Shared, input.session_id, input.scope)?
        {
            return Ok(Err(refusal));
        }
        if let Some(refusal) = quiet_period(updated, input) {
            return Ok(Err(refusal));
        }
        return Ok(Ok(Admitted { abandoned }));
    }
    Ok(match full_check(conn, schema, input)? {
        Checked::Refused(refusal) => Err(refusal),
        Checked::Passed { updated, abandoned } => {
            known.record_fence_pass(input.session_id, updated, abandoned.clone());
            Ok(Admitted { abandoned })
        }
    })
}

/// What [`admit`] decided: go on beside the abandoned run the fence admitted, if any, or answer
/// with `P`'s refusal or the receipt of an identical request.
pub(crate) enum Admission<P> {
    /// Go on.
    Admitted(Option<Abandoned>),
    /// The answer, nothing to write.
    Answered(Prepared<P>),
}

/// The checks every V1 write opens with (a prune of parts, of diffs, a compaction), in order:
/// the schema profile's V1 write refusal (`unsupported_storage`), the fence ([`check`]), the
/// receipt of an identical request (`super::super::write::replayed`). Inside the caller's
/// transaction; `request_key` is lowercase hex.
///
/// Errors: SQLite's.
pub(crate) fn admit<P>(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    request_key: &str,
    clock: FenceClock,
) -> rusqlite::Result<Admission<P>> {
    if let Some(why) = schema.v1_write_refusal() {
        return Ok(Admission::Answered(Prepared::Refuse(Refusal::new(
            BlockedReason::UnsupportedStorage,
            why,
        ))));
    }
    let input = FenceInput {
        session_id: &request.session_id,
        scope: &request.scope,
        clock,
    };
    let abandoned = match check(conn, schema, known, input)? {
        Ok(admitted) => admitted.abandoned,
        Err(refusal) => return Ok(Admission::Answered(Prepared::Refuse(refusal))),
    };
    if let Some(replayed) = write::replayed(conn, request_key, request)? {
        return Ok(Admission::Answered(replayed));
    }
    Ok(Admission::Admitted(abandoned))
}

/// What [`full_check`] decided.
enum Checked {
    /// Refused.
    Refused(Refusal),
    /// Every check passed; the session's `time_updated` (ms), and the abandoned run admitted.
    Passed {
        updated: i64,
        abandoned: Option<Abandoned>,
    },
}

impl From<Refusal> for Checked {
    fn from(refusal: Refusal) -> Self {
        Checked::Refused(refusal)
    }
}

/// A refusal while the session was updated within the quiet period before `input.clock.now_ms`.
fn quiet_period(updated: i64, input: FenceInput<'_>) -> Option<Refusal> {
    let quiet_left = updated
        .saturating_add(input.clock.quiet_period_ms)
        .saturating_sub(input.clock.now_ms);
    (quiet_left > 0).then(|| {
        busy(format!(
            "the session was updated {} ago, within the {} quiet period (OpenCode may still be writing it); try again in {}",
            seconds(input.clock.now_ms.saturating_sub(updated)),
            seconds(input.clock.quiet_period_ms),
            seconds(quiet_left)
        ))
    })
}

/// Every check of the fence, in order.
fn full_check(
    conn: &Connection,
    schema: &Schema,
    input: FenceInput<'_>,
) -> rusqlite::Result<Checked> {
    if let Some(refusal) = crate::write::storage_checks(conn)? {
        return Ok(refusal.into());
    }

    let sql = format!(
        "SELECT {} IS NOT NULL, {} IS NOT NULL, \
                CASE typeof(time_updated) WHEN 'integer' THEN time_updated \
                  WHEN 'real' THEN CAST(time_updated AS INTEGER) END \
         FROM session WHERE id = ?1",
        schema.column_or_null("session", "time_compacting"),
        schema.column_or_null("session", "revert"),
    );
    let session: Option<(bool, bool, Option<i64>)> =
        crate::cached::query_row(conn, &sql, [input.session_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let Some((compacting, revert, updated)) = session else {
        return Ok(Checked::Refused(Refusal::new(
            BlockedReason::NotDeletable,
            ownership::missing_session(input.session_id),
        )));
    };
    if let Some(refusal) =
        ownership::check(conn, SessionTable::Shared, input.session_id, input.scope)?
    {
        return Ok(refusal.into());
    }
    if let Some(refusal) = migrated(conn, schema, input.session_id)? {
        return Ok(refusal.into());
    }
    if compacting {
        return Ok(Checked::Refused(busy(
            "a compaction of the session is in progress",
        )));
    }
    if revert {
        return Ok(Checked::Refused(busy(
            "the session has a staged revert; finish or undo it in OpenCode",
        )));
    }
    let Some(updated) = updated else {
        return Ok(Checked::Refused(Refusal::new(
            BlockedReason::UnsupportedStorage,
            "the session's time_updated is not a number: whether OpenCode is writing it cannot be told, so it is left alone",
        )));
    };
    if let Some(refusal) = quiet_period(updated, input) {
        return Ok(refusal.into());
    }

    // A row that is not JSON may be an assistant message still being written: the session's
    // state cannot be told, so it is refused as storage this engine does not understand.
    let damaged: i64 = crate::cached::query_row(
        conn,
        &format!(
            "SELECT count(*) FROM message WHERE session_id = ?1 AND NOT json_valid({})",
            row_budget::data("", "message")
        ),
        [input.session_id],
        |row| row.get(0),
    )?;
    if damaged > 0 {
        return Ok(Checked::Refused(Refusal::new(
            BlockedReason::UnsupportedStorage,
            format!("{damaged} message row(s) of the session are not valid JSON: whether a run is active cannot be told, so the damaged session is left alone"),
        )));
    }
    let abandoned = match runs::judge(conn, schema, input.session_id, updated, input.clock)? {
        Runs::Settled => None,
        Runs::Active(refusal) => return Ok(Checked::Refused(refusal)),
        Runs::Abandoned(run) => Some(run),
    };

    let refusal = match schema.event_log() {
        EventLog::Absent => None,
        EventLog::Unusable(why) => Some(Refusal::new(BlockedReason::UnsupportedStorage, why)),
        EventLog::Present { owner_column } => {
            event_bookkeeping(conn, input.session_id, owner_column)?
        }
    };
    Ok(match refusal {
        Some(refusal) => refusal.into(),
        None => Checked::Passed { updated, abandoned },
    })
}

/// A refusal (`not_deletable`) of a V1 write to a session OpenCode 2 migrated: OpenCode 2 reads
/// the session from its own rows and owns its event sequence, so a V1 prune there would change
/// nothing it reads and append events to a sequence that is no longer V1's.
fn migrated(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
) -> rusqlite::Result<Option<Refusal>> {
    use crate::migrated::V1Rows;
    let refuse = |detail: String| Some(Refusal::new(BlockedReason::NotDeletable, detail));
    Ok(match crate::migrated::v1_rows(conn, schema, session_id)? {
        V1Rows::Live => None,
        V1Rows::Copy => refuse(
            "OpenCode 2 migrated this session and reads it from its own rows: these V1 rows are a copy it never reads again (`clean --migrated-v1` removes them)".into(),
        ),
        V1Rows::Diverged { rows } => refuse(format!(
            "OpenCode 2 migrated this session, and an OpenCode 1.x wrote to its 1.x rows since ({rows} row(s) OpenCode 2 has no copy of): its 1.x rows are left as they are"
        )),
    })
}

/// Whether the session's event bookkeeping lets a prune append its events (the fence's check,
/// [`event_bookkeeping`]); `false` when it cannot be read (failing closed).
pub(crate) fn events_consistent(conn: &Connection, schema: &Schema, session_id: &str) -> bool {
    match schema.event_log() {
        EventLog::Absent => true,
        EventLog::Unusable(_) => false,
        EventLog::Present { owner_column } => {
            matches!(event_bookkeeping(conn, session_id, owner_column), Ok(None))
        }
    }
}

/// The session's event bookkeeping, as OpenCode keeps it: `event_sequence.seq` is the session's
/// last event seq, so a session with events has a sequence row at or past its newest event. A
/// session with neither has no events yet (OpenCode counts a missing row as -1). A sequence row
/// with `owner_id` set belongs to a remote.
fn event_bookkeeping(
    conn: &Connection,
    session_id: &str,
    owner_column: bool,
) -> rusqlite::Result<Option<Refusal>> {
    let sql = format!(
        "SELECT (SELECT max(seq) FROM event WHERE aggregate_id = ?1 AND typeof(seq) = 'integer'), \
                (SELECT count(*) FROM event_sequence WHERE aggregate_id = ?1), \
                (SELECT CASE typeof(seq) WHEN 'integer' THEN seq END \
                   FROM event_sequence WHERE aggregate_id = ?1), \
                (SELECT CAST({} AS TEXT) FROM event_sequence WHERE aggregate_id = ?1)",
        if owner_column { "owner_id" } else { "NULL" }
    );
    let (newest, rows, seq, owner): (Option<i64>, i64, Option<i64>, Option<String>) =
        crate::cached::query_row(conn, &sql, [session_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?;
    let unsupported = |detail: String| {
        Ok(Some(Refusal::new(
            BlockedReason::UnsupportedStorage,
            detail,
        )))
    };
    if let Some(owner) = owner {
        return unsupported(format!("the session's events are owned by remote {owner}"));
    }
    match (newest, rows, seq) {
        (Some(newest), 0, _) => unsupported(format!(
            "OpenCode's event bookkeeping of the session is inconsistent: it has events up to seq {newest} but no event_sequence row, so new events would collide; left alone"
        )),
        (Some(newest), _, Some(seq)) if seq < newest => unsupported(format!(
            "OpenCode's event bookkeeping of the session is inconsistent: event_sequence.seq is {seq}, behind its newest event (seq {newest}), so new events would collide; left alone"
        )),
        (_, _, None) if rows > 0 => unsupported(
            "OpenCode's event bookkeeping of the session is inconsistent: its event_sequence.seq is not a number; left alone".into(),
        ),
        _ => Ok(None),
    }
}

/// `1500` -> `1.5 s`.
/// A duration in ms as seconds, in words (`90.0 s`).
pub(crate) fn seconds(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn busy(detail: impl Into<String>) -> Refusal {
    Refusal::new(BlockedReason::MaintenanceRequired, detail)
}
