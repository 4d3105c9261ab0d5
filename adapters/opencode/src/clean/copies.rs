//! What a clean takes of the copies OpenCode keeps besides the parts: each session's superseded
//! snapshots (its compaction), and with `--diffs` the file bodies in the summary diffs of the
//! user messages before the kept turns. Applying is the engine's one write path, as for parts
//! ([`pruning_engine::Engine::prune_many`]); this module only reads.
//!
//! Source: docs/ARCHITECTURE.md, "Copies OpenCode keeps".

use std::time::Duration;

use pruning_engine::{PruneRequest, StoreError};
use rusqlite::Connection;

use crate::clean::{kept_boundary, SkipReason};
use crate::row_budget;
use crate::schema::Schema;
use crate::v1::diffs::{self, NotEmptied};
use crate::v1::events::{MESSAGE_UPDATED, PART_UPDATED, SESSION_UPDATED};
use crate::v1::known::Known;
use crate::values::lenient_text;
use crate::OpenCodeStore;

/// What a clean does with one of the copies: prune it with a request (`R`: one request, or a
/// compaction's requests, one per range), nothing, or leave it alone and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlannedCopy<R = PruneRequest> {
    /// Prune with this request (bound to the revision read).
    Prune(R),
    /// Nothing to take.
    Nothing,
    /// Left alone.
    Skipped {
        /// Why.
        reason: SkipReason,
        /// In words.
        detail: String,
    },
}

fn storage(error: rusqlite::Error) -> StoreError {
    StoreError::Storage(Box::new(error))
}

/// The compaction of session `session_id`, bound to its event log's revision now: one request
/// per range of seqs (`v1::compact::Survey::ranges`, in seq order), read from the survey the
/// store then holds for the requests' writes and dry runs (`v1::known`); nothing where the
/// database keeps no event log (OpenCode before 1.14) or the session has no superseded
/// snapshot; skipped (`read_only`) on read-only media and for a V2 session, whose event log
/// OpenCode's V2 history is projected from.
///
/// Errors: [`StoreError::Storage`].
pub fn compaction(
    store: &OpenCodeStore,
    session_id: &str,
) -> Result<PlannedCopy<Vec<PruneRequest>>, StoreError> {
    let conn = store.connection();
    let schema = store.schema_of(&conn).map_err(storage)?;
    if !schema.has_events() {
        return Ok(PlannedCopy::Nothing);
    }
    let mut known = store.known(&conn, &schema)?;
    conn.execute_batch("BEGIN").map_err(storage)?;
    let planned = compaction_in(&conn, &schema, &mut known, session_id);
    let _ = conn.execute_batch("COMMIT");
    let planned = planned.map_err(storage)?;
    if let (PlannedCopy::Prune(_), Some(cause)) = (&planned, store.media_read_only()) {
        return Ok(PlannedCopy::Skipped {
            reason: SkipReason::ReadOnly,
            detail: format!("the database cannot be written here ({cause})"),
        });
    }
    Ok(planned)
}

/// [`compaction`] inside the read transaction on `conn`.
fn compaction_in(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    session_id: &str,
) -> rusqlite::Result<PlannedCopy<Vec<PruneRequest>>> {
    if schema.has("session_message") {
        let v2: bool = crate::cached::query_row(
            conn,
            "SELECT EXISTS (SELECT 1 FROM session_message WHERE session_id = ?1)",
            [session_id],
            |row| row.get(0),
        )?;
        if v2 {
            return Ok(PlannedCopy::Skipped {
                reason: SkipReason::ReadOnly,
                detail: "a V2 session: its event log is what OpenCode's V2 history is projected \
                         from"
                    .into(),
            });
        }
    }
    let snapshots: bool = crate::cached::query_row(
        conn,
        "SELECT EXISTS (SELECT 1 FROM event WHERE aggregate_id = ?1 AND type IN (?2, ?3, ?4))",
        [session_id, PART_UPDATED, MESSAGE_UPDATED, SESSION_UPDATED],
        |row| row.get(0),
    )?;
    if !snapshots {
        return Ok(PlannedCopy::Nothing);
    }
    // A compaction deletes snapshots but leaves `event_sequence.seq`, the revision: until
    // OpenCode writes to the session again, the next clean's request would be the identical
    // one, answered from its receipt and announced again on every run of a schedule.
    let survey = known.survey_again(conn, session_id)?;
    let ranges = survey.ranges();
    if ranges.is_empty() {
        return Ok(PlannedCopy::Nothing);
    }
    let requests: Result<Vec<PruneRequest>, _> = ranges
        .into_iter()
        .map(|seqs| PruneRequest::compaction(session_id.to_string(), survey.revision.clone(), seqs))
        .collect();
    Ok(match requests {
        Ok(requests) => PlannedCopy::Prune(requests),
        Err(error) => PlannedCopy::Skipped {
            reason: SkipReason::Unplaceable,
            detail: error.to_string(),
        },
    })
}

/// The V1 user messages of session `session_id` whose diffs a clean looks at, oldest first (by
/// `time_created`, then id): those created before the session's last `keep_last_turns` user
/// turns, and with `older_than` at least that long before `now_ms` (ms since the Unix epoch).
/// None where the database has no V1 tables.
///
/// Errors: [`StoreError::Storage`].
pub fn diffs_candidates(
    store: &OpenCodeStore,
    session_id: &str,
    keep_last_turns: u32,
    older_than: Option<Duration>,
    now_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let conn = store.connection();
    let schema = store.schema_of(&conn).map_err(storage)?;
    if !schema.has_v1() {
        return Ok(Vec::new());
    }
    let listed = || -> rusqlite::Result<Vec<String>> {
        let Some(before) =
            kept_boundary(&conn, true, schema.has_v2(), session_id, keep_last_turns)?
        else {
            return Ok(Vec::new());
        };
        let cutoff = match older_than {
            Some(age) => now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)),
            None => i64::MAX,
        };
        let before = before.min(cutoff);
        let data = row_budget::data("", "message");
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id FROM message WHERE session_id = ?1 \
               AND CASE WHEN json_valid({data}) THEN json_extract({data}, '$.role') = 'user' END \
               AND typeof(time_created) = 'integer' AND time_created < ?2 \
             ORDER BY time_created, id"
        ))?;
        let ids = stmt.query_map(rusqlite::params![session_id, before], |row| {
            Ok(lenient_text(row.get_ref(0)?))
        })?;
        ids.collect()
    };
    listed().map_err(storage)
}

/// Plans the diffs prune of one user message, in one read transaction: a request bound to its
/// diffs revision when its row holds file bodies to empty, nothing when it holds none, skipped
/// when its row is not JSON (`malformed`), not JSON as `JSON.stringify` writes it
/// (`not_stringified`), over the 16 MiB budget (`oversize`) or cannot be written here
/// (`read_only`).
///
/// Errors: [`StoreError::Storage`].
pub fn plan_diffs(
    store: &OpenCodeStore,
    session_id: &str,
    message_id: &str,
) -> Result<PlannedCopy, StoreError> {
    let conn = store.connection();
    conn.execute_batch("BEGIN").map_err(storage)?;
    let found = diffs::row_bodies(&conn, session_id, message_id);
    let _ = conn.execute_batch("COMMIT");
    let planned = match found.map_err(storage)? {
        None => PlannedCopy::Nothing,
        Some(Err(NotEmptied::NotJson)) => PlannedCopy::Skipped {
            reason: SkipReason::Malformed,
            detail: "the message row is not a JSON object".into(),
        },
        Some(Err(NotEmptied::NotStringified)) => PlannedCopy::Skipped {
            reason: SkipReason::NotStringified,
            detail: "the message row is not JSON as OpenCode's JSON.stringify writes it".into(),
        },
        Some(Err(NotEmptied::Oversize)) => PlannedCopy::Skipped {
            reason: SkipReason::Oversize,
            detail: "the message row holds more than the 16 MiB budget".into(),
        },
        Some(Ok(emptied)) if emptied.entries == 0 => PlannedCopy::Nothing,
        Some(Ok(emptied)) => match PruneRequest::diffs(
            session_id.to_string(),
            message_id.to_string(),
            emptied.revisions.0,
        ) {
            Ok(request) => PlannedCopy::Prune(request),
            Err(error) => PlannedCopy::Skipped {
                reason: SkipReason::Unplaceable,
                detail: error.to_string(),
            },
        },
    };
    if let (PlannedCopy::Prune(_), Some(cause)) = (&planned, store.media_read_only()) {
        return Ok(PlannedCopy::Skipped {
            reason: SkipReason::ReadOnly,
            detail: format!("the database cannot be written here ({cause})"),
        });
    }
    Ok(planned)
}
