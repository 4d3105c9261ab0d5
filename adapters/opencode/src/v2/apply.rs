//! The V2 side of a prune, inside the write transaction `crate::write` opens:
//! everything before the write (fence, receipt lookup, read, planner) and the write itself, a
//! compare-and-swap of `data.content` on the exact row text.
//!
//! Source: CodeNomad `transaction.ts`: `UPDATE session_message SET data = json_set(data,
//! '$.content', json(?)) WHERE session_id = ? AND id = ? AND data = ?`; one changed row or
//! `conflict`. Nothing else in the row changes (`seq`, ids, tokens, cost, snapshot). Runs inside
//! the caller's `BEGIN IMMEDIATE`.

use std::collections::HashSet;

use pruning_engine::revision::stringify;
use pruning_engine::{BlockedReason, Plan, PruneRequest, Refusal, StoredMessage};
use rusqlite::{params, Connection};
use serde_json::Value;

use pruning_archive::{ArchivedRows, TableRows};

use super::fence;
use crate::archive::capture_rows;
use crate::schema::Schema;
use crate::v1::fence::FenceClock;
use crate::v1::runs::Abandoned;
use crate::write::{self, Prepared, Written};

/// `storage` column of receipts written for V2 messages.
pub(crate) const STORAGE: &str = "v2";

/// A planned V2 prune: the row as read and what to remove.
#[derive(Debug, Clone)]
pub(crate) struct V2Plan {
    /// `session_message.data` exactly as read.
    pub(crate) data: String,
    /// The message as read.
    pub(crate) message: StoredMessage,
    /// The planner's decision.
    pub(crate) plan: Plan,
    /// The run OpenCode 2 abandoned that the fence admitted the prune beside.
    pub(crate) abandoned: Option<Abandoned>,
}

/// Fence (at `clock`), receipt lookup, read and planner for a V2 message, inside the caller's
/// transaction.
pub(crate) fn prepare(
    conn: &Connection,
    schema: &Schema,
    request: &PruneRequest,
    request_key: &str,
    clock: FenceClock,
) -> rusqlite::Result<Prepared<V2Plan>> {
    let abandoned = match fence::check(conn, schema, &request.session_id, &request.scope, clock)? {
        Ok(abandoned) => abandoned,
        Err(refusal) => return Ok(Prepared::Refuse(refusal)),
    };
    if let Some(replayed) = write::replayed(conn, request_key, request)? {
        return Ok(replayed);
    }
    let (message, data) = match super::load(conn, &request.session_id, &request.message_id)? {
        Ok(loaded) => loaded,
        Err(refusal) => return Ok(Prepared::Refuse(refusal)),
    };
    match message.plan(&request.selection, &request.revision) {
        Ok(plan) => Ok(Prepared::Plan(V2Plan {
            data,
            message,
            plan,
            abandoned,
        })),
        Err(refusal) => Ok(Prepared::Refuse(refusal)),
    }
}

/// Writes the pruned content. Returns the removed parts' ids (their `id`, or `#index` when a
/// part has none) and the bytes the row shrank by, or a `conflict` refusal when the row changed.
/// With `capture`, the row as it was before (all columns) is returned too ([`capture_row`]).
pub(crate) fn write(
    conn: &Connection,
    request: &PruneRequest,
    planned: &V2Plan,
    capture: bool,
) -> rusqlite::Result<Result<Written, Refusal>> {
    let removed_rows = if capture {
        Some(capture_row(conn, request)?)
    } else {
        None
    };
    let removed: HashSet<usize> = planned.plan.remove.iter().copied().collect();
    let kept: Vec<Value> = planned
        .message
        .parts
        .iter()
        .enumerate()
        .filter(|(i, _)| !removed.contains(i))
        .map(|(_, part)| part.value.clone())
        .collect();
    let content = stringify(&Value::Array(kept));
    let changed = crate::cached::execute(
        conn,
        "UPDATE session_message SET data = json_set(data, '$.content', json(?1)) \
         WHERE session_id = ?2 AND id = ?3 AND data = ?4",
        params![
            content,
            request.session_id,
            request.message_id,
            planned.data
        ],
    )?;
    if changed != 1 {
        return Ok(Err(Refusal::new(
            BlockedReason::Conflict,
            "the message changed while it was being pruned",
        )));
    }
    let after: i64 = crate::cached::query_row(
        conn,
        "SELECT octet_length(data) FROM session_message WHERE id = ?1",
        [&request.message_id],
        |row| row.get(0),
    )?;
    let part_ids = planned
        .plan
        .remove
        .iter()
        .map(|&i| {
            planned.message.parts[i]
                .value
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("#{i}"), str::to_string)
        })
        .collect();
    let shrunk = (planned.data.len() as u64).saturating_sub(u64::try_from(after).unwrap_or(0));
    Ok(Ok(Written {
        operation: None,
        part_ids,
        bytes_removed: shrunk,
        removed_rows,
    }))
}

/// The message's `session_message` row, all of its columns, as the archive keeps a V2 prune:
/// the row before its content was rewritten (read inside the caller's transaction).
pub(crate) fn capture_row(
    conn: &Connection,
    request: &PruneRequest,
) -> rusqlite::Result<ArchivedRows> {
    let mut rows: Option<TableRows> = None;
    let mut select =
        conn.prepare_cached("SELECT * FROM session_message WHERE session_id = ?1 AND id = ?2")?;
    capture_rows(
        &mut select,
        "session_message",
        params![request.session_id, request.message_id],
        &mut rows,
    )?;
    Ok(ArchivedRows {
        tables: rows.into_iter().collect(),
    })
}
