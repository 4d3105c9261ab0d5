//! What a clean takes of the copies OpenCode keeps besides the parts: each session's superseded
//! snapshots (its compaction), with `--diffs` the file bodies in the summary diffs of the
//! user messages before the kept turns, and with `--migrated-v1` the OpenCode 1.x rows of the
//! sessions OpenCode 2 migrated (`crate::migrated`). Applying is the engine's one write path, as for parts
//! ([`pruning_engine::Engine::prune_many`]); this module only reads.
//!
//! Source: docs/ARCHITECTURE.md, "Copies OpenCode keeps".

use std::time::Duration;

use pruning_engine::{PruneRequest, StoreError};
use rusqlite::Connection;

use crate::clean::{kept_boundary, SkipReason};
use crate::row_budget;
use crate::schema::Schema;
use crate::txn::ReadTxn;
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
/// snapshot (a V2 session of OpenCode 2 keeps no snapshot events: nothing to compact);
/// skipped (`read_only`) on read-only media and for a session with V2 rows that has snapshot
/// events (OpenCode 1.18's), whose event log OpenCode's V2 history is projected from.
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
    let txn = ReadTxn::begin(&conn).map_err(storage)?;
    let planned = compaction_in(&conn, &schema, &mut known, session_id);
    txn.end();
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
    let snapshots: bool = crate::cached::query_row(
        conn,
        "SELECT EXISTS (SELECT 1 FROM event WHERE aggregate_id = ?1 AND type IN (?2, ?3, ?4))",
        [session_id, PART_UPDATED, MESSAGE_UPDATED, SESSION_UPDATED],
        |row| row.get(0),
    )?;
    if !snapshots {
        return Ok(PlannedCopy::Nothing);
    }
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
/// None where the database has no V1 tables, and none that OpenCode 2 holds a copy of.
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
        let Some(before) = kept_boundary(
            &conn,
            &schema,
            true,
            schema.has_v2(),
            session_id,
            keep_last_turns,
        )?
        else {
            return Ok(Vec::new());
        };
        let cutoff = match older_than {
            Some(age) => now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)),
            None => i64::MAX,
        };
        let before = before.min(cutoff);
        let data = row_budget::data("", "message");
        let live = super::live_v1(&schema);
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id FROM message m WHERE session_id = ?1 \
               AND CASE WHEN json_valid({data}) THEN json_extract({data}, '$.role') = 'user' END \
               AND typeof(time_created) = 'integer' AND time_created < ?2 {live} \
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
/// (`read_only`), or when its bodies were put back by `restore` and not emptied since
/// (`restored`, unless `include_restored`).
///
/// Errors: [`StoreError::Storage`].
pub fn plan_diffs(
    store: &OpenCodeStore,
    session_id: &str,
    message_id: &str,
    include_restored: bool,
) -> Result<PlannedCopy, StoreError> {
    let conn = store.connection();
    let txn = ReadTxn::begin(&conn).map_err(storage)?;
    let found = diffs::row_bodies(&conn, session_id, message_id).and_then(|found| {
        let put_back = !include_restored
            && found
                .as_ref()
                .is_some_and(|found| found.as_ref().is_ok_and(|emptied| emptied.entries > 0))
            && crate::receipts::restored(
                &conn,
                session_id,
                message_id,
                crate::receipts::Restorable::Diffs,
            )?;
        Ok((found, put_back))
    });
    txn.end();
    let (found, put_back) = found.map_err(storage)?;
    if put_back {
        return Ok(PlannedCopy::Skipped {
            reason: SkipReason::Restored,
            detail: super::RESTORED.into(),
        });
    }
    let planned = match found {
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

/// The removal of session `session_id`'s OpenCode 1.x rows that OpenCode 2 migrated, in one read
/// transaction: one request per 1.x message, oldest first (by `time_created`, then id), each
/// bound to its rows' revision, or skipped (`oversize`: over the 16 MiB budget; `malformed`:
/// not text). Nothing where the session's 1.x rows are its live history (OpenCode 2 did not
/// migrate it) or it has none; skipped whole (`not_a_copy`) where OpenCode 2 has not finished
/// its migration or a 1.x wrote to the session since, and (`read_only`) on read-only media.
///
/// Errors: [`StoreError::Storage`].
pub fn plan_migrated(
    store: &OpenCodeStore,
    session_id: &str,
) -> Result<PlannedCopy<Vec<PlannedCopy>>, StoreError> {
    let conn = store.connection();
    let schema = store.schema_of(&conn).map_err(storage)?;
    if !crate::migrated::possible(&schema) {
        return Ok(PlannedCopy::Nothing);
    }
    let txn = ReadTxn::begin(&conn).map_err(storage)?;
    let planned = plan_migrated_in(&conn, &schema, session_id);
    txn.end();
    let planned = planned.map_err(storage)?;
    if let (PlannedCopy::Prune(_), Some(cause)) = (&planned, store.media_read_only()) {
        return Ok(PlannedCopy::Skipped {
            reason: SkipReason::ReadOnly,
            detail: format!("the database cannot be written here ({cause})"),
        });
    }
    Ok(planned)
}

/// [`plan_migrated`] inside the read transaction on `conn`.
fn plan_migrated_in(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
) -> rusqlite::Result<PlannedCopy<Vec<PlannedCopy>>> {
    use crate::migrated::remove::{self, Unread};
    use crate::migrated::V1Rows;
    let not_a_copy = |detail: String| PlannedCopy::Skipped {
        reason: SkipReason::NotACopy,
        detail,
    };
    match crate::migrated::v1_rows(conn, schema, session_id)? {
        V1Rows::Live => return Ok(PlannedCopy::Nothing),
        V1Rows::Diverged { rows } => {
            return Ok(not_a_copy(format!(
                "a 1.x wrote to it since the migration: {rows} of its OpenCode 1.x row(s) have no copy in OpenCode 2"
            )))
        }
        V1Rows::Copy => {}
    }
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM message WHERE session_id = ?1 \
         ORDER BY CAST(time_created AS INTEGER), id",
    )?;
    let ids: Vec<String> = stmt
        .query_map([session_id], |row| Ok(lenient_text(row.get_ref(0)?)))?
        .collect::<rusqlite::Result<_>>()?;
    if ids.is_empty() {
        return Ok(PlannedCopy::Nothing);
    }
    if !crate::migrated::completed(conn, schema)? {
        return Ok(not_a_copy(
            "OpenCode 2 has not recorded its migration of the 1.x history as completed".into(),
        ));
    }
    let mut planned = Vec::with_capacity(ids.len());
    for message_id in ids {
        let skipped = |reason, detail: String| PlannedCopy::Skipped { reason, detail };
        planned.push(match remove::read_rows(conn, session_id, &message_id)? {
            Ok(rows) => match PruneRequest::migrated_v1(
                session_id.to_string(),
                message_id.clone(),
                rows.revision(),
            ) {
                Ok(request) => PlannedCopy::Prune(request),
                Err(error) => skipped(SkipReason::Unplaceable, error.to_string()),
            },
            Err(Unread::OverBudget(bytes)) => skipped(
                SkipReason::Oversize,
                format!("{bytes} bytes, over the 16 MiB budget"),
            ),
            Err(Unread::NotText) => {
                skipped(SkipReason::Malformed, "a row is not stored as text".into())
            }
            Err(Unread::Missing) => continue,
        });
    }
    Ok(PlannedCopy::Prune(planned))
}

/// The emptying of the output OpenCode 2 keeps in each `shell` row of session `session_id` (a
/// command the user ran), oldest first: one request per row created before the session's last
/// `keep_last_turns` user turns (and with `older_than`, at least that long before `now_ms`, ms
/// since the Unix epoch) whose command finished and whose output is not empty yet, bound to the
/// revision of its `output`. None where the file has no OpenCode 2 rows.
///
/// Errors: [`StoreError::Storage`].
pub fn plan_shell_outputs(
    store: &OpenCodeStore,
    session_id: &str,
    keep_last_turns: u32,
    older_than: Option<Duration>,
    now_ms: i64,
) -> Result<Vec<PlannedCopy>, StoreError> {
    let conn = store.connection();
    let schema = store.schema_of(&conn).map_err(storage)?;
    if !schema.has_v2() {
        return Ok(Vec::new());
    }
    let txn = ReadTxn::begin(&conn).map_err(storage)?;
    let planned = (|| -> rusqlite::Result<Vec<PlannedCopy>> {
        let Some(before) = kept_boundary(
            &conn,
            &schema,
            schema.has_v1(),
            true,
            session_id,
            keep_last_turns,
        )?
        else {
            return Ok(Vec::new());
        };
        let cutoff = match older_than {
            Some(age) => now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)),
            None => i64::MAX,
        };
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM session_message WHERE session_id = ?1 AND type = 'shell' \
               AND typeof(time_created) = 'integer' AND time_created < ?2 \
             ORDER BY time_created, id",
        )?;
        let ids: Vec<String> = stmt
            .query_map(rusqlite::params![session_id, before.min(cutoff)], |row| {
                Ok(lenient_text(row.get_ref(0)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut planned = Vec::with_capacity(ids.len());
        for id in ids {
            planned.push(match crate::v2::shell::read(&conn, session_id, &id)? {
                Err(unread) => {
                    use crate::v2::shell::Unread;
                    let reason = match unread {
                        Unread::OverBudget => SkipReason::Oversize,
                        Unread::Running => SkipReason::RunningTool,
                        Unread::NotShell | Unread::Malformed | Unread::NoOutput => {
                            SkipReason::Malformed
                        }
                    };
                    PlannedCopy::Skipped {
                        reason,
                        detail: unread.refusal(&id).detail,
                    }
                }
                Ok(row)
                    if row.output.get("output").and_then(serde_json::Value::as_str) == Some("") =>
                {
                    PlannedCopy::Nothing
                }
                Ok(row) => {
                    let revision =
                        pruning_engine::revision::revision(std::slice::from_ref(&row.output));
                    match PruneRequest::shell_output(session_id.to_string(), id, revision) {
                        Ok(request) => PlannedCopy::Prune(request),
                        Err(error) => PlannedCopy::Skipped {
                            reason: SkipReason::Unplaceable,
                            detail: error.to_string(),
                        },
                    }
                }
            });
        }
        Ok(planned)
    })();
    txn.end();
    let planned = planned.map_err(storage)?;
    if let Some(cause) = store.media_read_only() {
        return Ok(planned
            .into_iter()
            .map(|planned| match planned {
                PlannedCopy::Prune(_) => PlannedCopy::Skipped {
                    reason: SkipReason::ReadOnly,
                    detail: format!("the database cannot be written here ({cause})"),
                },
                other => other,
            })
            .collect());
    }
    Ok(planned)
}
