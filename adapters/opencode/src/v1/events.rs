//! The V1 `event` table side of a prune: delete the snapshots that carry the removed parts and
//! append one `message.part.removed.1` event per removed part, as OpenCode itself does.
//!
//! Source: OpenCode 1.18.34, observed on `DELETE /session/{id}/message/{mid}/part/{pid}`: in one
//! transaction it sets `event_sequence.seq` to the old value + 1 (a missing row counts as -1, and
//! is inserted), and inserts `event(id = evt_..., aggregate_id = session id, seq, type =
//! 'message.part.removed.1', data = {"sessionID","messageID","partID"})`. OpenCode leaves the
//! older `message.part.updated.1` snapshots; this engine deletes them, since each holds a full
//! copy of the pruned part (docs/ARCHITECTURE.md, "Storage generations": they are most of a large
//! database).

use std::collections::HashSet;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;

use pruning_archive::TableRows;
use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::{BlockedReason, Refusal};

use super::known::Known;
use crate::archive::capture_rows;
use crate::ids;

/// `event.type` of a part snapshot.
pub const PART_UPDATED: &str = "message.part.updated.1";
/// `event.type` of a message snapshot.
pub const MESSAGE_UPDATED: &str = "message.updated.1";
/// `event.type` of a session snapshot.
pub const SESSION_UPDATED: &str = "session.updated.1";
/// `event.type` OpenCode writes when a part is deleted.
pub const PART_REMOVED: &str = "message.part.removed.1";

/// Deletes the snapshots `doomed` of the parts `part_ids` ([`find_snapshots`]'s answer),
/// telling `known` what it deleted. Returns `(rows deleted, bytes of data deleted)`. With
/// `capture`, the deleted rows (all columns) are added to it.
pub fn delete_snapshots(
    conn: &Connection,
    known: &mut Known,
    part_ids: &HashSet<&str>,
    doomed: &[(String, i64)],
    capture: Option<&mut Option<TableRows>>,
) -> rusqlite::Result<(u64, u64)> {
    let mut bytes = 0u64;
    match capture {
        Some(rows) => {
            let mut delete = conn.prepare_cached("DELETE FROM event WHERE id = ?1 RETURNING *")?;
            for (id, len) in doomed {
                capture_rows(&mut delete, "event", [id], rows)?;
                bytes += u64::try_from(*len).unwrap_or(0);
            }
        }
        None => {
            let mut delete = conn.prepare_cached("DELETE FROM event WHERE id = ?1")?;
            for (id, len) in doomed {
                delete.execute([id])?;
                bytes += u64::try_from(*len).unwrap_or(0);
            }
        }
    }
    known.snapshots_deleted(part_ids);
    Ok((doomed.len() as u64, bytes))
}

/// The `message.part.updated.1` events of `session_id` whose `data.part.id` is in `part_ids`
/// (from `known`'s snapshot index of the session), and the snapshots of those parts filed under
/// another aggregate that still exist, as `(event id, bytes of data)`, each once: what a prune
/// of those parts deletes. A snapshot that is not JSON, or whose `part.id` is not a string,
/// names no part.
pub fn find_snapshots(
    conn: &Connection,
    known: &mut Known,
    session_id: &str,
    part_ids: &HashSet<&str>,
) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut doomed: Vec<(String, i64)> = Vec::new();
    {
        let mut stmt = conn
            .prepare_cached("SELECT octet_length(data) FROM event WHERE id = ?1 AND type = ?2")?;
        for id in known.foreign.of_parts(part_ids) {
            let mut rows = stmt.query(params![id, PART_UPDATED])?;
            if let Some(row) = rows.next()? {
                let len = row.get(0)?;
                doomed.push((id, len));
            }
        }
    }
    for (id, len) in known.snapshots_of(conn, session_id, part_ids)? {
        // A snapshot of this session filed here that names another session as the part's
        // owner is also among the foreign ones: counted once.
        if !doomed.iter().any(|(found, _)| *found == id) {
            doomed.push((id, len));
        }
    }
    Ok(doomed)
}

/// The refusal of a prune whose snapshots (`find_snapshots`'s answer) include one over the
/// 16 MiB row budget: it would have to be archived whole, and a prune either removes every
/// snapshot of its parts or refuses (docs/ARCHITECTURE.md, "Rows over the budget").
pub fn over_budget(snapshots: &[(String, i64)]) -> Option<Refusal> {
    let (id, _) = snapshots
        .iter()
        .find(|(_, len)| usize::try_from(*len).map_or(true, |len| len > MAX_MESSAGE_BYTES))?;
    Some(Refusal::new(
        BlockedReason::NotDeletable,
        format!("snapshot {id} of a part to prune holds more than the 16 MiB budget"),
    ))
}

/// Appends one `message.part.removed.1` event per part id, in order, with consecutive seqs after
/// the session's `event_sequence.seq`, and stores the new last seq. Returns the event ids.
pub fn append_removed(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
    part_ids: &[String],
    now_ms: i64,
) -> rusqlite::Result<Vec<String>> {
    let last: Option<i64> = crate::cached::query_row(
        conn,
        "SELECT seq FROM event_sequence WHERE aggregate_id = ?1",
        [session_id],
        |row| row.get(0),
    )
    .optional()?;
    if part_ids.is_empty() {
        return Ok(Vec::new());
    }
    let first = last.unwrap_or(-1) + 1;
    let final_seq = first + part_ids.len() as i64 - 1;
    // The sequence row goes first: `event.aggregate_id` references it.
    crate::cached::execute(
        conn,
        "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?1, ?2) \
         ON CONFLICT (aggregate_id) DO UPDATE SET seq = excluded.seq",
        params![session_id, final_seq],
    )?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut ids_written = Vec::with_capacity(part_ids.len());
    for (seq, part_id) in (first..).zip(part_ids) {
        let id = ids::ascending("evt", now_ms);
        let data = json!({ "sessionID": session_id, "messageID": message_id, "partID": part_id });
        insert.execute(params![id, session_id, seq, PART_REMOVED, data.to_string()])?;
        ids_written.push(id);
    }
    Ok(ids_written)
}
