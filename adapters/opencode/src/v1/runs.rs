//! Whether a V1 session's incomplete run may still be alive: the fence's rule for sessions where
//! OpenCode left an assistant message incomplete or a tool part pending or running.
//!
//! OpenCode never completes the message of a run that was killed (the terminal closed during a
//! tool call, say), so such a session would be refused for good. A run is judged abandoned when
//! nothing of its session has been written for at least the store's `abandoned_after`: the
//! newest of the session row's `time_updated`, the times of its messages, parts, V2 message
//! rows, queued prompts and todos, and every event's `$.time`, `$.timestamp` and `created` but
//! the `message.part.removed.1` events' (the events a prune appends, which say nothing of a
//! run). A time that is not a number of ms (text, a number below 1973 in ms, which is a time in
//! seconds) or an event that is not JSON leaves the run judged alive: it never makes a run look
//! older. The run's own messages are never pruned (the planner refuses an incomplete message or
//! an unfinished tool part); the session's completed messages are. Source:
//! docs/ARCHITECTURE.md, "Fence".

use pruning_engine::{BlockedReason, Refusal};
use rusqlite::Connection;

use super::events::PART_REMOVED;
use super::fence::FenceClock;
use crate::row_budget;
use crate::schema::{EventLog, Schema};

/// A run OpenCode left incomplete that the fence admits a prune beside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    /// The incomplete assistant message, or the message of the unfinished tool part.
    pub message_id: String,
    /// The newest write of the session, ms since the Unix epoch.
    pub last_write_ms: i64,
}

/// What the session's rows say of its runs.
pub(crate) enum Runs {
    /// No incomplete assistant message, no pending or running tool part.
    Settled,
    /// A run may be alive: refused.
    Active(Refusal),
    /// A run was left incomplete and the session has been idle long enough.
    Abandoned(Abandoned),
}

/// Judges the runs of session `session_id`, whose `time_updated` is `updated` (ms), at `clock`.
///
/// Errors: SQLite's.
pub(crate) fn judge(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    updated: i64,
    clock: FenceClock,
) -> rusqlite::Result<Runs> {
    let (incomplete, unfinished) = unfinished(conn, session_id)?;
    let Some(message_id) = incomplete.first().or(unfinished.first()).cloned() else {
        return Ok(Runs::Settled);
    };
    let what = match (incomplete.len(), unfinished.len()) {
        (0, tools) => format!("{tools} tool call(s) of the session are pending or running"),
        (messages, 0) => {
            format!("{messages} assistant message(s) of the session are not complete")
        }
        (messages, tools) => format!(
            "{messages} assistant message(s) of the session are not complete and {tools} tool call(s) are pending or running"
        ),
    };
    let Some(threshold) = clock.abandoned_after_ms else {
        return Ok(Runs::Active(
            busy(format!(
                "{what}: a run is active, or was killed (with --abandoned-after never the session stays refused)"
            ))
            .lasting(),
        ));
    };
    let Some(last_write_ms) = last_write(conn, schema, session_id, updated)? else {
        return Ok(Runs::Active(
            busy(format!(
                "{what}, and a time written for the session is not a number: whether the run is alive cannot be told"
            ))
            .lasting(),
        ));
    };
    let idle = clock.now_ms.saturating_sub(last_write_ms);
    if idle >= threshold {
        return Ok(Runs::Abandoned(Abandoned {
            message_id,
            last_write_ms,
        }));
    }
    Ok(Runs::Active(busy(format!(
        "{what}: a run is active, or was killed; nothing of the session was written for {}, and a run idle for {} (--abandoned-after) counts as abandoned: try again in {}",
        span(idle),
        span(threshold),
        span(threshold.saturating_sub(idle))
    ))))
}

/// Where OpenCode writes for a session besides its session row and its events: each table's
/// time columns, read where the table and the column exist (OpenCode 1.2 has no
/// `session_message`; a queued prompt is a `session_input` row, a todo list a `todo` row).
const WRITTEN: [(&str, &[&str]); 5] = [
    ("message", &["time_created", "time_updated"]),
    ("part", &["time_created", "time_updated"]),
    ("session_message", &["time_created", "time_updated"]),
    ("session_input", &["time_created"]),
    ("todo", &["time_created", "time_updated"]),
];

/// The earliest number read as a time in ms: 1973-03-03. A smaller one is a time in seconds (or
/// no time at all), which would make a run written now look decades idle.
const MIN_MS: i64 = 100_000_000_000;

/// The newest write of the session, ms since the Unix epoch: the newest of `updated` (the
/// session row's `time_updated`), the [`WRITTEN`] times of its rows, and its events' `$.time`,
/// `$.timestamp` and `created` (but `message.part.removed.1`'s). `None` when one of those is
/// not a number of ms (SQL NULL in a column, or a key a JSON event lacks, is no time), or an
/// event of the session is not JSON.
fn last_write(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    updated: i64,
) -> rusqlite::Result<Option<i64>> {
    let mut newest = updated;
    let mut fold = |(max, odd): (Option<f64>, i64)| {
        if odd > 0 {
            return false;
        }
        newest = newest.max(max.map_or(i64::MIN, as_ms));
        true
    };
    for (table, columns) in WRITTEN {
        if !schema.has_column(table, "session_id") {
            continue;
        }
        for column in columns.iter().filter(|c| schema.has_column(table, c)) {
            let sql = format!(
                "SELECT max(CASE WHEN typeof({column}) IN ('integer', 'real') THEN {column} END), \
                        count(*) FILTER (WHERE typeof({column}) NOT IN ('integer', 'real', 'null') \
                          OR (typeof({column}) IN ('integer', 'real') AND {column} < {MIN_MS})) \
                 FROM {table} WHERE session_id = ?1"
            );
            let found = crate::cached::query_row(conn, &sql, [session_id], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
            if !fold(found) {
                return Ok(None);
            }
        }
    }
    if let EventLog::Present { .. } = schema.event_log() {
        let event = row_budget::data("", "event");
        for key in ["$.time", "$.timestamp"] {
            // CASE, not AND or OR: SQLite may evaluate both sides of those, and the JSON
            // functions fail on text that is not JSON.
            let found = crate::cached::query_row(
                conn,
                &format!(
                    "SELECT max(CASE WHEN json_valid({event}) THEN \
                                  CASE WHEN json_type({event}, '{key}') IN ('integer', 'real') \
                                    THEN json_extract({event}, '{key}') END END), \
                            count(*) FILTER (WHERE CASE WHEN json_valid({event}) \
                                THEN json_type({event}, '{key}') NOT IN ('integer', 'real') \
                                  OR (json_type({event}, '{key}') IN ('integer', 'real') \
                                      AND json_extract({event}, '{key}') < {MIN_MS}) \
                                ELSE 1 END) \
                     FROM event WHERE aggregate_id = ?1 AND type <> ?2"
                ),
                [session_id, PART_REMOVED],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            if !fold(found) {
                return Ok(None);
            }
        }
        if schema.has_column("event", "created") {
            let found = crate::cached::query_row(
                conn,
                &format!(
                    "SELECT max(CASE WHEN typeof(created) IN ('integer', 'real') THEN created END), \
                            count(*) FILTER (WHERE typeof(created) NOT IN ('integer', 'real', 'null') \
                              OR (typeof(created) IN ('integer', 'real') AND created < {MIN_MS})) \
                     FROM event WHERE aggregate_id = ?1 AND type <> ?2"
                ),
                [session_id, PART_REMOVED],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            if !fold(found) {
                return Ok(None);
            }
        }
    }
    Ok(Some(newest))
}

/// A time read as a number, in whole ms (fractions dropped, saturating).
fn as_ms(value: f64) -> i64 {
    value as i64
}

/// `90000` -> `1m 30s`: a span of ms in words.
fn span(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    let (days, hours, minutes, seconds) =
        (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60);
    let mut parts = Vec::new();
    for (n, unit) in [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")] {
        if n > 0 {
            parts.push(format!("{n}{unit}"));
        }
    }
    if parts.is_empty() {
        "0s".to_string()
    } else {
        parts.join(" ")
    }
}

fn busy(detail: impl Into<String>) -> Refusal {
    Refusal::new(BlockedReason::MaintenanceRequired, detail)
}

/// The session's incomplete assistant messages and the messages of its pending or running tool
/// parts, each newest first (by `time_created`, then id).
fn unfinished(conn: &Connection, session_id: &str) -> rusqlite::Result<(Vec<String>, Vec<String>)> {
    let incomplete: Vec<String> = {
        let message = row_budget::data("", "message");
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id FROM message WHERE session_id = ?1 \
               AND json_extract({message}, '$.role') = 'assistant' \
               AND NOT coalesce(json_type({message}, '$.time.completed') IN ('integer', 'real') \
                        AND json_extract({message}, '$.time.completed') > 0, 0) \
             ORDER BY time_created DESC, id DESC"
        ))?;
        let ids = stmt.query_map([session_id], |row| row.get(0))?;
        ids.collect::<rusqlite::Result<_>>()?
    };
    // Substring test first: a part whose text never spells `pending` or `running` cannot hold
    // those statuses (JSON writers spell ASCII letters out), so most parts are skipped without
    // parsing their JSON.
    let unfinished: Vec<String> = {
        let part = row_budget::data("", "part");
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT message_id FROM part WHERE session_id = ?1 \
               AND (session_prune_contains({part}, 'running') \
                    OR session_prune_contains({part}, 'pending')) \
               AND CASE WHEN json_valid({part}) \
                    THEN json_extract({part}, '$.type') = 'tool' \
                         AND json_extract({part}, '$.state.status') IN ('pending', 'running') \
                    ELSE 1 END \
             ORDER BY time_created DESC, id DESC"
        ))?;
        let ids = stmt.query_map([session_id], |row| row.get(0))?;
        ids.collect::<rusqlite::Result<_>>()?
    };
    Ok((incomplete, unfinished))
}

/// The messages of the session's runs: its incomplete assistant messages and the messages of its
/// pending or running tool parts. What a compaction beside an abandoned run leaves alone.
///
/// Errors: SQLite's.
pub(crate) fn unfinished_messages(
    conn: &Connection,
    session_id: &str,
) -> rusqlite::Result<std::collections::HashSet<String>> {
    let (incomplete, unfinished) = unfinished(conn, session_id)?;
    Ok(incomplete.into_iter().chain(unfinished).collect())
}
