//! The removal of one message's migrated OpenCode 1.x rows, inside the write transaction
//! `crate::write` opens: its `message` row and every `part` row of it, deleted where OpenCode 2
//! holds a copy of every message of the session, with a receipt. No event is appended and
//! `event_sequence` is left alone: OpenCode 2 deleted the 1.x events when it migrated the file,
//! and the sequence is its own now.
//!
//! The request's revision is the rows' as stored ([`rows_revision`]: the message row, then its
//! parts by id), so a row OpenCode 1.x wrote since is a `conflict`. Source: docs/ARCHITECTURE.md,
//! "Migrated history".

use pruning_archive::{ArchivedRows, TableRows};
use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::revision::rows_revision;
use pruning_engine::{BlockedReason, MigratedRemoved, Operation, Plan, PruneRequest, Refusal};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension};

use super::V1Rows;
use crate::archive::capture_rows;
use crate::ownership::{self, SessionTable};
use crate::schema::Schema;
use crate::write::{self, Prepared, Written};

/// One stored row: its id and its `data` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredRow {
    /// `id`.
    pub(crate) id: String,
    /// `data`, exactly as stored.
    pub(crate) data: String,
}

/// A message's 1.x rows as read: the `message` row, then its `part` rows by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageRows {
    /// The `message` row.
    pub(crate) message: StoredRow,
    /// Its `part` rows, by id.
    pub(crate) parts: Vec<StoredRow>,
}

impl MessageRows {
    /// [`rows_revision`] of the rows.
    pub(crate) fn revision(&self) -> String {
        rows_revision(
            std::iter::once(&self.message)
                .chain(&self.parts)
                .map(|row| (row.id.as_str(), row.data.as_str())),
        )
    }

    /// Bytes of the rows' `data`.
    pub(crate) fn bytes(&self) -> u64 {
        std::iter::once(&self.message)
            .chain(&self.parts)
            .map(|row| row.data.len() as u64)
            .sum()
    }
}

/// Why a message's 1.x rows cannot be read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unread {
    /// No `message` row of that id in the session.
    Missing,
    /// A row whose id or `data` is not text.
    NotText,
    /// The rows hold more than the 16 MiB a message may (docs/ARCHITECTURE.md, "Rows over the
    /// budget"): not loaded.
    OverBudget(u64),
}

/// Reads the 1.x rows of `message_id` of `session_id` within the 16 MiB budget (their sizes
/// are read first; nothing over it is loaded).
///
/// Errors: SQLite's.
pub(crate) fn read_rows(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Result<MessageRows, Unread>> {
    let size: Option<(i64, i64)> = crate::cached::query_row(
        conn,
        "SELECT coalesce(octet_length(m.data), 0), \
                (SELECT coalesce(sum(octet_length(p.data)), 0) FROM part p WHERE p.message_id = m.id) \
         FROM message m WHERE m.id = ?1 AND m.session_id = ?2",
        [message_id, session_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()?;
    let Some((message_bytes, part_bytes)) = size else {
        return Ok(Err(Unread::Missing));
    };
    let total = u64::try_from(message_bytes.saturating_add(part_bytes)).unwrap_or(0);
    if total > MAX_MESSAGE_BYTES as u64 {
        return Ok(Err(Unread::OverBudget(total)));
    }
    let text = |value: ValueRef<'_>| match value {
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok().map(str::to_string),
        _ => None,
    };
    let message = crate::cached::query_row(
        conn,
        "SELECT id, data FROM message WHERE id = ?1 AND session_id = ?2",
        [message_id, session_id],
        |row| Ok((text(row.get_ref(0)?), text(row.get_ref(1)?))),
    )?;
    let (Some(id), Some(data)) = message else {
        return Ok(Err(Unread::NotText));
    };
    let mut parts = Vec::new();
    let mut stmt =
        conn.prepare_cached("SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id")?;
    let mut rows = stmt.query([message_id])?;
    while let Some(row) = rows.next()? {
        let (Some(id), Some(data)) = (text(row.get_ref(0)?), text(row.get_ref(1)?)) else {
            return Ok(Err(Unread::NotText));
        };
        parts.push(StoredRow { id, data });
    }
    Ok(Ok(MessageRows {
        message: StoredRow { id, data },
        parts,
    }))
}

/// The revision a removal of the 1.x rows of `message_id` is bound to now; `None` when they
/// cannot be read whole ([`read_rows`]). What a clean plans from and a restore compares.
///
/// Errors: SQLite's.
pub(crate) fn revision_of(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Result<String, Unread>> {
    Ok(read_rows(conn, session_id, message_id)?.map(|rows| rows.revision()))
}

/// The revision of no rows at all: what a message's 1.x rows are after their removal.
pub(crate) fn removed_revision() -> String {
    rows_revision(std::iter::empty())
}

/// A planned removal: the rows as read, and the plan its receipt records.
pub(crate) struct MigratedPlan {
    /// The rows.
    pub(crate) rows: MessageRows,
    /// Revisions (the rows' before, no rows' after), bytes, the operation.
    pub(crate) plan: Plan,
}

/// Why a session's 1.x rows may be removed, or the refusal that says why not: OpenCode 2
/// finished its migration, and holds a copy of every 1.x message of the session.
///
/// Errors: SQLite's.
pub(crate) fn session_admits(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
) -> rusqlite::Result<Result<(), Refusal>> {
    let refuse = |reason, detail: String| Ok(Err(Refusal::new(reason, detail)));
    if !super::possible(schema) {
        return refuse(
            BlockedReason::NotDeletable,
            "the file holds no OpenCode 2 history beside OpenCode 1.x tables: there is no migrated copy to remove".into(),
        );
    }
    if !super::completed(conn, schema)? {
        return refuse(
            BlockedReason::MaintenanceRequired,
            "OpenCode 2 has not recorded its migration of the 1.x history as completed (kv migration.v1-v2): start OpenCode 2 once and let it finish, then try again".into(),
        );
    }
    Ok(match super::v1_rows(conn, schema, session_id)? {
        V1Rows::Copy => Ok(()),
        V1Rows::Live => Err(Refusal::new(
            BlockedReason::NotDeletable,
            format!(
                "OpenCode 2 did not migrate session {session_id} (a 1.x wrote it after OpenCode 2's first start, or it is not in session_v2): its 1.x rows are its only history"
            ),
        )),
        V1Rows::Diverged { rows } => Err(Refusal::new(
            BlockedReason::NotDeletable,
            format!(
                "OpenCode 2 migrated session {session_id}, but an OpenCode 1.x wrote to it since: {rows} of its 1.x row(s) have no copy there, and its 1.x rows are left as they are"
            ),
        )),
    })
}

/// Everything before the first write, inside the caller's transaction, in order: the storage
/// checks both generations share (`unsupported_storage`), the 1.x session there and inside the
/// request's scope (`not_deletable`), [`session_admits`], the receipt of an identical request,
/// the rows read whole (`not_deletable`: missing, not text, over the 16 MiB budget), the message
/// copied by OpenCode 2 (`not_deletable`), the revision (`conflict`).
///
/// Errors: SQLite's.
pub(crate) fn prepare(
    conn: &Connection,
    schema: &Schema,
    request: &PruneRequest,
    request_key: &str,
) -> rusqlite::Result<Prepared<MigratedPlan>> {
    let refuse = |reason, detail: String| Ok(Prepared::Refuse(Refusal::new(reason, detail)));
    let (session_id, message_id) = (request.session_id.as_str(), request.message_id.as_str());
    if let Some(refusal) = write::storage_checks(conn)? {
        return Ok(Prepared::Refuse(refusal));
    }
    let session_known = schema.has("session")
        && crate::cached::query_row(
            conn,
            "SELECT count(*) > 0 FROM session WHERE id = ?1",
            [session_id],
            |row| row.get::<_, bool>(0),
        )?;
    if !session_known {
        return refuse(
            BlockedReason::NotDeletable,
            ownership::missing_session(session_id),
        );
    }
    if let Some(refusal) = ownership::check(conn, SessionTable::Shared, session_id, &request.scope)?
    {
        return Ok(Prepared::Refuse(refusal));
    }
    if let Err(refusal) = session_admits(conn, schema, session_id)? {
        return Ok(Prepared::Refuse(refusal));
    }
    if let Some(replayed) = write::replayed(conn, request_key, request)? {
        return Ok(replayed);
    }
    let rows = match read_rows(conn, session_id, message_id)? {
        Ok(rows) => rows,
        Err(Unread::Missing) => {
            return refuse(
                BlockedReason::NotDeletable,
                format!("session {session_id} has no OpenCode 1.x message {message_id}"),
            )
        }
        Err(Unread::NotText) => {
            return refuse(
                BlockedReason::NotDeletable,
                format!("a row of message {message_id} is not stored as text"),
            )
        }
        Err(Unread::OverBudget(bytes)) => {
            return refuse(
                BlockedReason::NotDeletable,
                format!(
                    "message {message_id} and its parts hold {bytes} bytes, over the 16 MiB budget"
                ),
            )
        }
    };
    let copied: bool = crate::cached::query_row(
        conn,
        &format!(
            "SELECT count(*) > 0 FROM message m WHERE m.id = ?1 AND m.session_id = ?2 AND {}",
            super::copied("m")
        ),
        [message_id, session_id],
        |row| row.get(0),
    )?;
    if !copied {
        return refuse(
            BlockedReason::NotDeletable,
            format!("OpenCode 2 holds no copy of message {message_id}"),
        );
    }
    let revision = rows.revision();
    if revision != request.revision {
        return refuse(
            BlockedReason::Conflict,
            format!("the OpenCode 1.x rows of message {message_id} changed since they were read: read them again"),
        );
    }
    let part_ids: Vec<String> = rows.parts.iter().map(|part| part.id.clone()).collect();
    Ok(Prepared::Plan(MigratedPlan {
        plan: Plan {
            remove: Vec::new(),
            revision_before: revision,
            revision_after: removed_revision(),
            bytes: rows.bytes(),
            operation: Some(Operation::MigratedV1(MigratedRemoved {
                parts: u32::try_from(part_ids.len()).unwrap_or(u32::MAX),
                part_ids,
            })),
        },
        rows,
    }))
}

/// Deletes the planned rows, each by its id and its exact `data` (one row each, else
/// `conflict`); with `capture`, the rows as they were ([`capture_ahead`]).
///
/// Errors: SQLite's.
pub(crate) fn write(
    conn: &Connection,
    request: &PruneRequest,
    planned: &MigratedPlan,
    capture: bool,
) -> rusqlite::Result<Result<Written, Refusal>> {
    let removed_rows = if capture {
        Some(capture_ahead(conn, request)?)
    } else {
        None
    };
    let conflict = || {
        Ok(Err(Refusal::new(
            BlockedReason::Conflict,
            "the OpenCode 1.x rows changed while they were being removed",
        )))
    };
    for part in &planned.rows.parts {
        let deleted = crate::cached::execute(
            conn,
            "DELETE FROM part WHERE id = ?1 AND message_id = ?2 AND data = ?3",
            params![part.id, request.message_id, part.data],
        )?;
        if deleted != 1 {
            return conflict();
        }
    }
    let deleted = crate::cached::execute(
        conn,
        "DELETE FROM message WHERE id = ?1 AND session_id = ?2 AND data = ?3",
        params![
            request.message_id,
            request.session_id,
            planned.rows.message.data
        ],
    )?;
    if deleted != 1 {
        return conflict();
    }
    let Some(Operation::MigratedV1(removed)) = &planned.plan.operation else {
        return conflict();
    };
    Ok(Ok(Written {
        part_ids: Vec::new(),
        operation: Some(Operation::MigratedV1(removed.clone())),
        bytes_removed: planned.rows.bytes(),
        removed_rows,
    }))
}

/// The rows the removal of `request` deletes, every column as stored, as its archive entry
/// keeps them: the `message` row, then its `part` rows by id (read inside the caller's
/// transaction).
///
/// Errors: SQLite's.
pub(crate) fn capture_ahead(
    conn: &Connection,
    request: &PruneRequest,
) -> rusqlite::Result<ArchivedRows> {
    let mut message: Option<TableRows> = None;
    let mut select =
        conn.prepare_cached("SELECT * FROM message WHERE id = ?1 AND session_id = ?2")?;
    capture_rows(
        &mut select,
        "message",
        params![request.message_id, request.session_id],
        &mut message,
    )?;
    let mut parts: Option<TableRows> = None;
    let mut select = conn.prepare_cached("SELECT * FROM part WHERE message_id = ?1 ORDER BY id")?;
    capture_rows(&mut select, "part", params![request.message_id], &mut parts)?;
    Ok(ArchivedRows {
        tables: message.into_iter().chain(parts).collect(),
    })
}
