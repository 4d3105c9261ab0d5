//! The diffs prune of a V1 user message, inside the write transaction `crate::write`
//! opens: the file bodies in the entries of the message's `summary.diffs` emptied, in the
//! message row and in its newest `message.updated.1` snapshot, each by a compare-and-swap on
//! the text read, with a receipt.
//!
//! OpenCode writes one entry per file a turn changed, `{file, patch, additions, deletions,
//! status}`, where `patch` is a unified diff with the whole file as context (releases before
//! 1.3 keep `before` and `after`, the whole file twice), and rewrites the user message with all
//! of them after every step of the turn. What it shows without the bodies stays: the file
//! names, the counts, the status. Each body is set to `""`, so that every reader that expects a
//! string still finds one; nothing else in either row changes, byte for byte: the rows are
//! `JSON.stringify` output, which [`stringify`] writes again exactly, and a row it would not
//! write again exactly is refused (`unsupported_storage`) rather than rewritten.
//!
//! The request's revision is the diffs revision of the message row (its `summary.diffs`,
//! [`diffs_revision`]): the content revision of a user message does not cover its summary.
//! Source: docs/ARCHITECTURE.md, "Copies OpenCode keeps".

use pruning_archive::{ArchivedRows, TableRows};
use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::revision::{diffs_revision, stringify};
use pruning_engine::{
    BlockedReason, DiffsPruned, Operation, Plan, PruneCommand, PruneRequest, Refusal,
};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::fence::{self, Admission, FenceClock};
use super::known::Known;
use super::runs::Abandoned;
use crate::archive::capture_rows;
use crate::schema::Schema;
use crate::write::{Prepared, Written};

/// The keys of a `summary.diffs` entry that hold file bodies.
pub const BODY_KEYS: [&str; 3] = ["patch", "before", "after"];

/// Where the diffs are in a message row's `data`.
const ROW_DIFFS: &str = "/summary/diffs";
/// Where the diffs are in a `message.updated.1` event's `data`.
const SNAPSHOT_DIFFS: &str = "/info/summary/diffs";

/// A text with the file bodies of its diffs emptied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emptied {
    /// The text before.
    pub before: String,
    /// The text after.
    pub after: String,
    /// Entries with at least one body emptied.
    pub entries: u32,
    /// [`diffs_revision`] of the diffs before and after.
    pub revisions: (String, String),
}

impl Emptied {
    /// Bytes the text shrinks by.
    pub fn bytes(&self) -> u64 {
        (self.before.len() - self.after.len()) as u64
    }
}

/// Why a text's diffs cannot be emptied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotEmptied {
    /// Not a JSON object.
    NotJson,
    /// A JSON object that [`stringify`] does not write back byte for byte (not written by
    /// OpenCode's `JSON.stringify`): rewriting it would change more than the bodies.
    NotStringified,
    /// More than the 16 MiB a message may hold.
    Oversize,
}

/// `text` (a JSON object) with every non-empty string under [`BODY_KEYS`] of the entries of the
/// array at `pointer` set to `""`. `Ok` with `entries == 0` when there is no such array or no
/// body to empty.
pub fn empty_bodies(text: &str, pointer: &str) -> Result<Emptied, NotEmptied> {
    let mut value: Value = match serde_json::from_str(text) {
        Ok(value @ Value::Object(_)) => value,
        _ => return Err(NotEmptied::NotJson),
    };
    let revision_of = |value: &Value| {
        diffs_revision(
            value
                .pointer(pointer)
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice),
        )
    };
    let before_revision = revision_of(&value);
    let has_body = |entry: &serde_json::Map<String, Value>| {
        BODY_KEYS
            .iter()
            .any(|key| matches!(entry.get(*key), Some(Value::String(body)) if !body.is_empty()))
    };
    let entries = value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map_or(0, |list| {
            list.iter()
                .filter_map(Value::as_object)
                .filter(|entry| has_body(entry))
                .count()
        });
    if entries == 0 {
        return Ok(Emptied {
            before: text.to_string(),
            after: text.to_string(),
            entries: 0,
            revisions: (before_revision.clone(), before_revision),
        });
    }
    // Only the bodies may change: the text must be what JSON.stringify wrote, so that writing
    // the emptied value again changes nothing else.
    if stringify(&value) != text {
        return Err(NotEmptied::NotStringified);
    }
    if let Some(list) = value.pointer_mut(pointer).and_then(Value::as_array_mut) {
        for entry in list.iter_mut().filter_map(Value::as_object_mut) {
            for key in BODY_KEYS {
                if let Some(Value::String(body)) = entry.get_mut(key) {
                    body.clear();
                }
            }
        }
    }
    let after = stringify(&value);
    let entries = u32::try_from(entries).unwrap_or(u32::MAX);
    Ok(Emptied {
        before: text.to_string(),
        revisions: (before_revision, revision_of(&value)),
        after,
        entries,
    })
}

/// A planned diffs prune: the rows it rewrites, with the plan its receipt records.
pub(crate) struct DiffsPlan {
    /// The message row's `data`, before and after.
    pub(crate) row: Emptied,
    /// The newest `message.updated.1` snapshot's id and `data` before and after, when it holds
    /// bodies to empty.
    pub(crate) snapshot: Option<(String, Emptied)>,
    /// Revisions (the diffs revision before and after) and bytes the rows shrink by.
    pub(crate) plan: Plan,
    /// The abandoned run the fence admitted the prune beside.
    pub(crate) abandoned: Option<Abandoned>,
}

/// Everything before the first write, inside the caller's transaction: the schema profile's V1
/// write refusal, the V1 fence, the receipt lookup, the message row read (16 MiB budget), the
/// revision compared, the bodies emptied, the newest snapshot read.
///
/// Refusals: `unsupported_storage` (the layout; a row that is not JSON or not written by
/// `JSON.stringify`), the fence's, `not_deletable` (the message missing, over the budget, not a
/// user message, no body to empty), `conflict` (the diffs moved since the revision).
pub(crate) fn prepare(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    request_key: &str,
    clock: FenceClock,
) -> rusqlite::Result<Prepared<DiffsPlan>> {
    let refuse = |reason, detail: String| Ok(Prepared::Refuse(Refusal::new(reason, detail)));
    let abandoned = match fence::admit(conn, schema, known, request, request_key, clock)? {
        Admission::Admitted(abandoned) => abandoned,
        Admission::Answered(answer) => return Ok(answer),
    };
    let message_id = &request.message_id;
    let data = match message_data(conn, &request.session_id, message_id)? {
        Some(MessageData::Text(data)) => data,
        Some(MessageData::OverBudget) => {
            return refuse(
                BlockedReason::NotDeletable,
                format!("message {message_id} holds more than the 16 MiB budget"),
            )
        }
        None => {
            return refuse(
                BlockedReason::NotDeletable,
                format!(
                    "session {} has no message {message_id} stored as text",
                    request.session_id
                ),
            )
        }
    };
    let role = serde_json::from_str::<Value>(&data)
        .ok()
        .and_then(|value| value.get("role").and_then(Value::as_str).map(String::from));
    if role.as_deref() != Some("user") {
        return refuse(
            BlockedReason::NotDeletable,
            format!("message {message_id} is not a user message: only user messages keep diffs"),
        );
    }
    let row = match empty_bodies(&data, ROW_DIFFS) {
        Ok(row) => row,
        Err(why) => return refuse(BlockedReason::UnsupportedStorage, words(why, "message row")),
    };
    if row.revisions.0 != request.revision {
        return refuse(
            BlockedReason::Conflict,
            "the message's summary diffs changed since their revision was read: read them again"
                .into(),
        );
    }
    if row.entries == 0 {
        return refuse(
            BlockedReason::NotDeletable,
            format!("message {message_id} holds no file body in its summary diffs"),
        );
    }
    let snapshot = if schema.has_events() {
        match newest_snapshot(conn, known, &request.session_id, message_id)? {
            // Both copies of the bodies go, or neither: a snapshot over the budget would keep what
            // the row no longer holds.
            NewestSnapshot::OverBudget(id) => {
                return refuse(
                    BlockedReason::NotDeletable,
                    format!(
                        "snapshot {id} of message {message_id} holds more than the 16 MiB budget"
                    ),
                )
            }
            NewestSnapshot::Text(id, text) => match empty_bodies(&text, SNAPSHOT_DIFFS) {
                Ok(emptied) if emptied.entries > 0 => Some((id, emptied)),
                Ok(_) => None,
                Err(why) => {
                    return refuse(
                        BlockedReason::UnsupportedStorage,
                        words(why, &format!("snapshot {id}")),
                    )
                }
            },
            NewestSnapshot::None => None,
        }
    } else {
        None
    };
    let bytes = row.bytes() + snapshot.as_ref().map_or(0, |(_, s)| s.bytes());
    Ok(Prepared::Plan(DiffsPlan {
        plan: Plan {
            remove: Vec::new(),
            revision_before: row.revisions.0.clone(),
            revision_after: row.revisions.1.clone(),
            bytes,
            operation: Some(Operation::Diffs(DiffsPruned {
                entries: row.entries,
                snapshot_id: snapshot.as_ref().map(|(id, _)| id.clone()),
            })),
        },
        row,
        snapshot,
        abandoned,
    }))
}

/// The diffs revision of a V1 message row, `None` when the row is missing, not text, over the
/// 16 MiB budget, or not a JSON object.
///
/// Errors: SQLite's.
pub fn revision_of(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<String>> {
    Ok(match message_data(conn, session_id, message_id)? {
        Some(MessageData::Text(data)) => empty_bodies(&data, ROW_DIFFS)
            .ok()
            .map(|emptied| emptied.revisions.0),
        Some(MessageData::OverBudget) | None => None,
    })
}

/// The message row of a V1 user message with the file bodies of its diffs emptied, or why they
/// cannot be (not JSON, not written by `JSON.stringify`, over the 16 MiB budget); `None` when
/// the row is missing, not text, or not a user message's. What a clean plans a diffs prune from.
///
/// Errors: SQLite's.
pub fn row_bodies(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<Result<Emptied, NotEmptied>>> {
    let data = match message_data(conn, session_id, message_id)? {
        Some(MessageData::Text(data)) => data,
        Some(MessageData::OverBudget) => return Ok(Some(Err(NotEmptied::Oversize))),
        None => return Ok(None),
    };
    let emptied = empty_bodies(&data, ROW_DIFFS);
    let user = serde_json::from_str::<Value>(&data)
        .ok()
        .is_some_and(|value| value.get("role").and_then(Value::as_str) == Some("user"));
    Ok(match emptied {
        Err(NotEmptied::NotJson) => Some(Err(NotEmptied::NotJson)),
        _ if !user => None,
        other => Some(other),
    })
}

/// What `message.data` of the message holds.
enum MessageData {
    /// Its text, within the 16 MiB budget.
    Text(String),
    /// More than the budget: not loaded (docs/ARCHITECTURE.md, "Rows over the budget").
    OverBudget,
}

/// `message.data` of the message, `None` when there is no such row or it is not text.
fn message_data(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<MessageData>> {
    let found: Option<(Option<i64>, Option<String>)> = crate::cached::query_row(
        conn,
        &format!(
            "SELECT octet_length(data), \
                    CASE WHEN typeof(data) = 'text' AND octet_length(data) <= {MAX_MESSAGE_BYTES} \
                         THEN data END \
             FROM message WHERE id = ?1 AND session_id = ?2"
        ),
        [message_id, session_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()?;
    Ok(match found {
        None | Some((None, _)) => None,
        Some((Some(len), _))
            if usize::try_from(len).map_or(true, |len| len > MAX_MESSAGE_BYTES) =>
        {
            Some(MessageData::OverBudget)
        }
        Some((_, text)) => text.map(MessageData::Text),
    })
}

/// The newest `message.updated.1` snapshot of the message.
enum NewestSnapshot {
    /// The message has none.
    None,
    /// Its event id and data.
    Text(String, String),
    /// Its event id; its data is over the 16 MiB budget (not loaded).
    OverBudget(String),
}

/// The newest `message.updated.1` snapshot of the message.
fn newest_snapshot(
    conn: &Connection,
    known: &mut Known,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<NewestSnapshot> {
    let Some((id, _)) = known.newest_message_snapshot(conn, session_id, message_id)? else {
        return Ok(NewestSnapshot::None);
    };
    let found: Option<(Option<i64>, Option<String>)> = crate::cached::query_row(
        conn,
        &format!(
            "SELECT octet_length(data), \
                    CASE WHEN typeof(data) = 'text' AND octet_length(data) <= {MAX_MESSAGE_BYTES} \
                         THEN data END \
             FROM event WHERE id = ?1"
        ),
        [&id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()?;
    Ok(match found {
        None => NewestSnapshot::None,
        Some((_, Some(text))) => NewestSnapshot::Text(id, text),
        Some((Some(len), None))
            if usize::try_from(len).map_or(true, |len| len > MAX_MESSAGE_BYTES) =>
        {
            NewestSnapshot::OverBudget(id)
        }
        // Data that is not text holds no bodies to empty, as before.
        Some(_) => NewestSnapshot::None,
    })
}

fn words(why: NotEmptied, what: &str) -> String {
    match why {
        NotEmptied::NotJson => format!("the {what} does not hold a JSON object"),
        NotEmptied::NotStringified => format!(
            "the {what} is not JSON as OpenCode writes it (JSON.stringify), so emptying its \
             diffs would change more than them: left as it is"
        ),
        NotEmptied::Oversize => format!("the {what} holds more than the 16 MiB budget"),
    }
}

/// The writes of a planned diffs prune: the message row and the snapshot set to their texts
/// after, each where it still holds the text read (`conflict` otherwise). With `capture`, both
/// rows as they were (every column) are returned for the archive.
pub(crate) fn write(
    conn: &Connection,
    command: &PruneCommand<'_>,
    planned: &DiffsPlan,
    capture: bool,
) -> rusqlite::Result<Result<Written, Refusal>> {
    let request = command.request;
    let removed_rows = if capture {
        match capture_ahead(conn, request, planned)? {
            Some(rows) => Some(rows),
            None => return Ok(Err(changed(&request.message_id))),
        }
    } else {
        None
    };
    let updated = conn
        .prepare_cached(
            "UPDATE message SET data = ?1 WHERE id = ?2 AND session_id = ?3 AND data = ?4",
        )?
        .execute(params![
            planned.row.after,
            request.message_id,
            request.session_id,
            planned.row.before
        ])?;
    if updated != 1 {
        return Ok(Err(changed(&request.message_id)));
    }
    if let Some((id, snapshot)) = &planned.snapshot {
        let updated = conn
            .prepare_cached("UPDATE event SET data = ?1 WHERE id = ?2 AND data = ?3")?
            .execute(params![snapshot.after, id, snapshot.before])?;
        if updated != 1 {
            return Ok(Err(changed(&request.message_id)));
        }
    }
    Ok(Ok(Written {
        part_ids: Vec::new(),
        operation: planned.plan.operation.clone(),
        bytes_removed: planned.plan.bytes,
        removed_rows,
    }))
}

fn changed(message_id: &str) -> Refusal {
    Refusal::new(
        BlockedReason::Conflict,
        format!("message {message_id} or its snapshot changed while its diffs were being pruned"),
    )
}

/// The rows a diffs prune rewrites, as they are before it (every column), in the archive
/// entry's order: the message row, then the snapshot. `None` when one no longer holds the text
/// read (the prune will be a conflict).
pub(crate) fn capture_ahead(
    conn: &Connection,
    request: &PruneRequest,
    planned: &DiffsPlan,
) -> rusqlite::Result<Option<ArchivedRows>> {
    let mut message: Option<TableRows> = None;
    let mut select = conn
        .prepare_cached("SELECT * FROM message WHERE id = ?1 AND session_id = ?2 AND data = ?3")?;
    let found = capture_rows(
        &mut select,
        "message",
        params![request.message_id, request.session_id, planned.row.before],
        &mut message,
    )?;
    if found != 1 {
        return Ok(None);
    }
    let mut event: Option<TableRows> = None;
    if let Some((id, snapshot)) = &planned.snapshot {
        let mut select = conn.prepare_cached("SELECT * FROM event WHERE id = ?1 AND data = ?2")?;
        if capture_rows(
            &mut select,
            "event",
            params![id, snapshot.before],
            &mut event,
        )? != 1
        {
            return Ok(None);
        }
    }
    Ok(Some(ArchivedRows {
        tables: [message, event].into_iter().flatten().collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_emptied_and_every_other_byte_kept() {
        let text = r#"{"role":"user","time":{"created":1},"summary":{"diffs":[{"file":"a.py","patch":"@@ -1 +1 @@\n-x\n+y\n","additions":1,"deletions":1,"status":"modified"},{"file":"b.py","before":"old","after":"new","additions":0,"deletions":0},{"file":"c.py","patch":"","additions":0,"deletions":0}]}}"#;
        let emptied = empty_bodies(text, ROW_DIFFS).unwrap();
        assert_eq!(emptied.entries, 2);
        assert_eq!(
            emptied.after,
            r#"{"role":"user","time":{"created":1},"summary":{"diffs":[{"file":"a.py","patch":"","additions":1,"deletions":1,"status":"modified"},{"file":"b.py","before":"","after":"","additions":0,"deletions":0},{"file":"c.py","patch":"","additions":0,"deletions":0}]}}"#
        );
        assert_eq!(emptied.bytes(), (text.len() - emptied.after.len()) as u64);
        assert_ne!(emptied.revisions.0, emptied.revisions.1);
        // Emptied again: nothing left to empty.
        let again = empty_bodies(&emptied.after, ROW_DIFFS).unwrap();
        assert_eq!(again.entries, 0);
        assert_eq!(again.after, emptied.after);
        assert_eq!(again.revisions.0, emptied.revisions.1);
    }

    #[test]
    fn a_text_json_stringify_would_not_write_is_refused() {
        let spaced = r#"{"role": "user", "summary": {"diffs": [{"file": "a", "patch": "x"}]}}"#;
        assert_eq!(
            empty_bodies(spaced, ROW_DIFFS),
            Err(NotEmptied::NotStringified)
        );
        assert_eq!(empty_bodies("[1]", ROW_DIFFS), Err(NotEmptied::NotJson));
        assert_eq!(empty_bodies("{", ROW_DIFFS), Err(NotEmptied::NotJson));
    }

    #[test]
    fn a_message_without_diffs_has_nothing_to_empty() {
        let text = r#"{"role":"user","summary":{"diffs":[]}}"#;
        let emptied = empty_bodies(text, ROW_DIFFS).unwrap();
        assert_eq!(emptied.entries, 0);
        let none = empty_bodies(r#"{"role":"user"}"#, ROW_DIFFS).unwrap();
        assert_eq!(none.entries, 0);
        assert_eq!(none.revisions.0, diffs_revision(&[]));
    }
}
