//! The V1 side of a prune, inside the write transaction `crate::write` opens:
//! everything before the first write (the schema profile's V1 write refusal, the V1 fence, the
//! receipt lookup, the read, the planner), then the writes: the selected part rows deleted,
//! each matching the exact text read, and the `event` rewrite. A prune a clean planned at the
//! same data version skips the read and the planner and deletes the rows it planned (see
//! `super::known::PlannedPrune`).
//!
//! Source: docs/ARCHITECTURE.md, "The write path of one prune", step 4, and "Storage
//! generations" (V1).

use std::collections::HashSet;

use pruning_archive::{ArchivedRows, TableRows};
use pruning_engine::{BlockedReason, Plan, PruneCommand, PruneRequest, Refusal};
use rusqlite::{params, Connection};

use super::events;
use super::fence::{self, Admission, FenceClock};
use super::known::Known;
use super::read;
use super::runs::Abandoned;
use crate::archive::{capture_rows, last_data_len, sort_by_id};
use crate::schema::Schema;
use crate::write::{Prepared, Written};

/// `storage` column of receipts written for V1 messages.
pub(crate) const STORAGE: &str = "v1";

/// A planned V1 prune: the part rows it deletes and the planner's decision.
pub(crate) struct V1Plan {
    /// The rows of the parts at `plan.remove`, in that order.
    pub(crate) doomed: Vec<Doomed>,
    /// The planner's decision.
    pub(crate) plan: Plan,
    /// The abandoned run the fence admitted the prune beside, if any.
    pub(crate) abandoned: Option<Abandoned>,
}

/// One part row a prune deletes.
pub(crate) struct Doomed {
    /// `part.id`.
    pub(crate) id: String,
    /// How the delete makes sure the row is the one planned: the exact text read in this
    /// transaction (compare-and-swap), or nothing to compare when a clean planned the prune at
    /// the same data version and the row cannot have changed since.
    pub(crate) expect: Expect,
}

/// See [`Doomed::expect`].
pub(crate) enum Expect {
    /// The row's `data` as read (empty when read with [`read::Texts::Skip`]: a dry run), and its
    /// length in bytes.
    Text { data: String, len: usize },
    /// Unchanged since a clean planned the prune at this data version.
    Unchanged,
}

/// What [`prepare`] does with a prune a clean planned for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlanUse {
    /// Takes it out (a prune, or a dry run): every prune of the message takes it.
    Take,
    /// Uses it and leaves it for the prune (an archive entry written ahead of the prune).
    Peek,
}

/// Everything before the first write: the schema profile, the fence, the receipt lookup, the
/// read, the planner. Runs inside the caller's transaction (a write transaction for a prune, a
/// read one for a dry run). `clock` is when the fence checks; `texts` says whether the part
/// rows' text is kept (a prune's deletes compare it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    request_key: &str,
    clock: FenceClock,
    texts: read::Texts,
    plans: PlanUse,
) -> rusqlite::Result<Prepared<V1Plan>> {
    let abandoned = match fence::admit(conn, schema, known, request, request_key, clock)? {
        Admission::Admitted(abandoned) => abandoned,
        Admission::Answered(answer) => return Ok(answer),
    };
    let planned = match plans {
        PlanUse::Take => known.take_planned(&request.session_id, &request.message_id),
        PlanUse::Peek => known
            .peek_planned(&request.session_id, &request.message_id)
            .cloned(),
    };
    if let Some(planned) = planned.filter(|planned| {
        planned.selection == request.selection && planned.plan.revision_before == request.revision
    }) {
        let doomed = planned
            .part_ids
            .into_iter()
            .map(|id| Doomed {
                id,
                expect: Expect::Unchanged,
            })
            .collect::<Vec<_>>();
        if let Some(refusal) = snapshots_over_budget(conn, schema, known, request, &doomed)? {
            return Ok(Prepared::Refuse(refusal));
        }
        return Ok(Prepared::Plan(V1Plan {
            doomed,
            plan: planned.plan,
            abandoned,
        }));
    }
    let loaded = match read::read_message(conn, &request.session_id, &request.message_id, texts)? {
        Ok(loaded) => loaded,
        Err(refusal) => return Ok(Prepared::Refuse(refusal)),
    };
    match loaded.message.plan(&request.selection, &request.revision) {
        Ok(plan) => {
            let mut rows: Vec<Option<read::PartRow>> = loaded.rows.into_iter().map(Some).collect();
            let doomed = plan
                .remove
                .iter()
                .filter_map(|&index| rows.get_mut(index).and_then(Option::take))
                .map(|row| Doomed {
                    id: row.id,
                    expect: Expect::Text {
                        data: row.data,
                        len: row.len,
                    },
                })
                .collect::<Vec<_>>();
            if let Some(refusal) = snapshots_over_budget(conn, schema, known, request, &doomed)? {
                return Ok(Prepared::Refuse(refusal));
            }
            Ok(Prepared::Plan(V1Plan {
                doomed,
                plan,
                abandoned,
            }))
        }
        Err(refusal) => Ok(Prepared::Refuse(refusal)),
    }
}

/// [`events::over_budget`] of the snapshots of the parts `doomed`, as the known index has them:
/// so that a dry run refuses what the prune will (which looks again after catching up).
fn snapshots_over_budget(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    doomed: &[Doomed],
) -> rusqlite::Result<Option<Refusal>> {
    if !schema.has_events() {
        return Ok(None);
    }
    let ids: HashSet<&str> = doomed.iter().map(|row| row.id.as_str()).collect();
    let snapshots = events::find_snapshots(conn, known, &request.session_id, &ids)?;
    Ok(events::over_budget(&snapshots))
}

/// The V1 writes of a planned prune (read with [`read::Texts::Keep`], or planned by a clean):
/// deletes the selected part rows, each matching the text read when there is one (`conflict`
/// when one changed or is gone), then, where the schema has an event log, deletes their
/// snapshots (found through `known`, with those filed under another session) and appends one
/// `message.part.removed.1` event per removed part. With `capture`, the rows deleted are
/// returned too ([`captured`]'s order).
pub(crate) fn write(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    command: &PruneCommand<'_>,
    planned: &V1Plan,
    capture: bool,
) -> rusqlite::Result<Result<Written, Refusal>> {
    let request = command.request;
    let mut part_ids = Vec::with_capacity(planned.doomed.len());
    let mut bytes_removed = 0u64;
    let mut part_rows: Option<TableRows> = None;
    for row in &planned.doomed {
        let deleted = if capture {
            delete_captured(
                conn,
                &row.id,
                &request.message_id,
                &row.expect,
                &mut part_rows,
            )?
        } else {
            delete(conn, &row.id, &request.message_id, &row.expect)?
        };
        let Some(len) = deleted else {
            return Ok(Err(Refusal::new(
                BlockedReason::Conflict,
                format!("part {} changed while it was being pruned", row.id),
            )));
        };
        bytes_removed += len;
        part_ids.push(row.id.clone());
    }
    let mut event_rows: Option<TableRows> = None;
    if schema.has_events() {
        let doomed: HashSet<&str> = part_ids.iter().map(String::as_str).collect();
        // Inside the write transaction: the rows appended since the store's last look.
        known.foreign.catch_up(conn)?;
        let snapshots = events::find_snapshots(conn, known, &request.session_id, &doomed)?;
        if let Some(refusal) = events::over_budget(&snapshots) {
            return Ok(Err(refusal));
        }
        let capture_events = capture.then_some(&mut event_rows);
        let (_, snapshot_bytes) =
            events::delete_snapshots(conn, known, &doomed, &snapshots, capture_events)?;
        bytes_removed += snapshot_bytes;
        events::append_removed(
            conn,
            &request.session_id,
            &request.message_id,
            &part_ids,
            command.now_ms,
        )?;
        known.foreign.after_own_writes(conn)?;
    }
    Ok(Ok(Written {
        operation: None,
        part_ids,
        bytes_removed,
        removed_rows: capture.then(|| captured(part_rows, event_rows)),
    }))
}

/// The rows a V1 prune removed as its archive entry holds them: the part rows in plan order,
/// then the snapshot events by id; a table none were removed from is left out.
pub(crate) fn captured(parts: Option<TableRows>, events: Option<TableRows>) -> ArchivedRows {
    let mut events = events;
    if let Some(events) = events.as_mut() {
        sort_by_id(events);
    }
    ArchivedRows {
        tables: [parts, events]
            .into_iter()
            .flatten()
            .filter(|table| !table.rows.is_empty())
            .collect(),
    }
}

/// Deletes one planned part row, returning its `data` bytes; `None` when not exactly one row
/// matched (a conflict).
fn delete(
    conn: &Connection,
    id: &str,
    message_id: &str,
    expect: &Expect,
) -> rusqlite::Result<Option<u64>> {
    Ok(match expect {
        Expect::Text { data, len } => {
            let mut delete = conn.prepare_cached(
                "DELETE FROM part WHERE id = ?1 AND message_id = ?2 AND data = ?3",
            )?;
            (delete.execute(params![id, message_id, data])? == 1).then_some(*len as u64)
        }
        Expect::Unchanged => {
            let mut delete = conn.prepare_cached(
                "DELETE FROM part WHERE id = ?1 AND message_id = ?2 \
                 RETURNING octet_length(data)",
            )?;
            // Exactly one row, as the compare-and-swap delete asks: a layout without the
            // primary key can hold two rows under one id, and then this is a conflict (the
            // transaction rolls back what the statement deleted).
            let lengths: Vec<Option<i64>> = delete
                .query_map(params![id, message_id], |found| found.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            match lengths.as_slice() {
                [len] => Some(len.unwrap_or(0).max(0) as u64),
                _ => None,
            }
        }
    })
}

/// [`delete`] that adds the deleted row, all of its columns, to `rows`.
fn delete_captured(
    conn: &Connection,
    id: &str,
    message_id: &str,
    expect: &Expect,
    rows: &mut Option<TableRows>,
) -> rusqlite::Result<Option<u64>> {
    Ok(match expect {
        Expect::Text { data, len } => {
            let mut delete = conn.prepare_cached(
                "DELETE FROM part WHERE id = ?1 AND message_id = ?2 AND data = ?3 RETURNING *",
            )?;
            (capture_rows(&mut delete, "part", params![id, message_id, data], rows)? == 1)
                .then_some(*len as u64)
        }
        Expect::Unchanged => {
            let mut delete = conn
                .prepare_cached("DELETE FROM part WHERE id = ?1 AND message_id = ?2 RETURNING *")?;
            (capture_rows(&mut delete, "part", params![id, message_id], rows)? == 1)
                .then(|| rows.as_ref().map_or(0, last_data_len))
        }
    })
}

/// The rows the prune of `planned` would remove, read (not removed) inside the caller's
/// transaction, in [`captured`]'s order: what an archive entry written ahead of the prune holds.
/// `None` when a planned part row is not there exactly once (the prune will be a conflict).
pub(crate) fn capture_ahead(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    planned: &V1Plan,
) -> rusqlite::Result<Option<ArchivedRows>> {
    let mut part_rows: Option<TableRows> = None;
    let mut select = conn.prepare_cached("SELECT * FROM part WHERE id = ?1 AND message_id = ?2")?;
    for row in &planned.doomed {
        if capture_rows(
            &mut select,
            "part",
            params![row.id, request.message_id],
            &mut part_rows,
        )? != 1
        {
            return Ok(None);
        }
    }
    let mut event_rows: Option<TableRows> = None;
    if schema.has_events() {
        let ids: HashSet<&str> = planned.doomed.iter().map(|row| row.id.as_str()).collect();
        known.foreign.catch_up(conn)?;
        let snapshots = events::find_snapshots(conn, known, &request.session_id, &ids)?;
        let mut select = conn.prepare_cached("SELECT * FROM event WHERE id = ?1")?;
        for (id, _) in &snapshots {
            capture_rows(&mut select, "event", [id], &mut event_rows)?;
        }
    }
    Ok(Some(captured(part_rows, event_rows)))
}
