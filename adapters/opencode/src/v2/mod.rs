//! V2 messages (`session_message`, OpenCode's next storage generation): reading them as the
//! planner sees them, the V2 fence ([`fence`]) and the compare-and-swap write ([`apply`]).
//! Prunes are written only where `session_v2.time_suspended` exists (opencode2); OpenCode 1.18
//! keeps its V2 sessions in the shared `session` table, where V2 messages are previewed
//! read-only and a prune is refused.
//!
//! Source: docs/ARCHITECTURE.md, "Storage generations" and "Fence". A row's `data` is the message
//! without `id` and `type`; its `content` array holds `text`, `reasoning` and `tool` parts, and
//! that array, in stored order, is the content the revision is computed over. Rows larger than
//! 16 MiB (`octet_length(data)`) are not read.

pub mod apply;
pub(crate) mod compaction;
pub mod fence;
pub(crate) mod shell;

use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::planner::completion_time;
use pruning_engine::{
    BlockedReason, PartClass, PreviewRequest, Refusal, StoredMessage, StoredPart, ToolStatus,
};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use crate::ownership::{self, SessionTable};
use crate::schema::Schema;

/// Classifies a V2 content part by its `type`: `tool` and `reasoning` are prunable, `text` is
/// kept, anything else is unknown.
pub fn classify(part: &Value) -> PartClass {
    match part.get("type").and_then(Value::as_str) {
        Some("tool") => PartClass::Tool(ToolStatus::of(part)),
        Some("reasoning") => PartClass::Reasoning,
        Some("text") => PartClass::Kept,
        _ => PartClass::Unknown,
    }
}

/// Whether V2 prunes can be written here: a `session_v2` table with the `time_suspended` run
/// claim the V2 fence reads (OpenCode 1.18 keeps V2 sessions in `session`, without it).
pub fn writable(conn: &Connection) -> rusqlite::Result<bool> {
    crate::cached::query_row(
        conn,
        "SELECT count(*) > 0 FROM pragma_table_info('session_v2') WHERE name = 'time_suspended'",
        [],
        |row| row.get(0),
    )
}

/// Whether `message_id` is a V2 message (a `session_message` row) of session `session_id`, or,
/// with `session_id` `None`, of any session.
pub fn has_message(
    conn: &Connection,
    session_id: Option<&str>,
    message_id: &str,
) -> rusqlite::Result<bool> {
    crate::cached::query_row(conn,
        "SELECT count(*) > 0 FROM session_message WHERE id = ?1 AND (?2 IS NULL OR session_id = ?2)",
        rusqlite::params![message_id, session_id],
        |row| row.get(0),
    )
}

/// The message of a preview, as the planner sees it: refused (`not_deletable`) where the
/// session (in `session_v2` where the schema has it, else in the shared `session` table) is
/// outside the request's scope; else [`read_message`].
pub(crate) fn read_in_scope(
    conn: &Connection,
    schema: &Schema,
    request: &PreviewRequest,
) -> rusqlite::Result<Result<StoredMessage, Refusal>> {
    let (session_id, message_id) = (request.session_id.as_str(), request.message_id.as_str());
    let table = if schema.has("session_v2") {
        SessionTable::V2
    } else {
        SessionTable::Shared
    };
    if let Some(refusal) = ownership::check(conn, table, session_id, &request.scope)? {
        return Ok(Err(refusal));
    }
    read_message(conn, session_id, message_id)
}

/// Reads V2 message `message_id` of session `session_id`.
///
/// Refusals (`not_deletable`): the message is not in that session, is over 16 MiB, or its
/// `data` is not a JSON object with a `content` array.
pub fn read_message(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Result<StoredMessage, Refusal>> {
    Ok(load(conn, session_id, message_id)?.map(|(message, _)| message))
}

/// [`read_message`], also returning the row's `data` exactly as stored (for compare-and-swap).
pub fn load(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Result<(StoredMessage, String), Refusal>> {
    let Some((kind, data)) = load_row(conn, session_id, message_id)? else {
        return Ok(Err(Refusal::new(
            BlockedReason::NotDeletable,
            format!("session {session_id} has no V2 message {message_id}"),
        )));
    };
    let refuse = |detail: String| Ok(Err(Refusal::new(BlockedReason::NotDeletable, detail)));
    let data = match data {
        RowData::Text(data) => data,
        RowData::OverBudget => {
            return refuse(format!("V2 message {message_id} is over the 16 MiB budget"))
        }
        RowData::NotText => {
            return refuse(format!("V2 message {message_id} does not hold UTF-8 text"))
        }
    };
    match parse(&kind, &data) {
        Ok(parsed) => Ok(Ok((parsed.message, data))),
        Err(why) => refuse(format!("V2 message {message_id} {why}")),
    }
}

/// A row's `data` as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowData {
    /// The text, exactly as stored.
    Text(String),
    /// Over the 16 MiB budget: not read.
    OverBudget,
    /// Not UTF-8 text (a damaged row).
    NotText,
}

/// The row's `type` (read leniently) and its `data`. `Ok(None)`: no such message in that
/// session.
pub fn load_row(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<(String, RowData)>> {
    crate::cached::query_row(
        conn,
        "SELECT type, CASE WHEN octet_length(data) <= ?3 THEN data END, \
                octet_length(data) <= ?3 \
         FROM session_message WHERE session_id = ?1 AND id = ?2",
        rusqlite::params![session_id, message_id, MAX_MESSAGE_BYTES as i64],
        |row| {
            let kind = match row.get_ref(0)? {
                rusqlite::types::ValueRef::Text(bytes) => {
                    String::from_utf8_lossy(bytes).into_owned()
                }
                _ => String::new(),
            };
            let within: bool = row.get(2)?;
            let data = match (within, row.get_ref(1)?) {
                (false, _) => RowData::OverBudget,
                (true, rusqlite::types::ValueRef::Text(bytes)) => {
                    match simdutf8::basic::from_utf8(bytes) {
                        Ok(text) => RowData::Text(text.to_string()),
                        Err(_) => RowData::NotText,
                    }
                }
                (true, _) => RowData::NotText,
            };
            Ok((kind, data))
        },
    )
    .optional()
}

/// A parsed V2 row.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The message as the planner sees it.
    pub message: StoredMessage,
    /// The message's own `text` (user and synthetic messages keep theirs outside `content`).
    pub body_text: Option<String>,
}

/// Parses a row of type `kind` with `data`. `Err` says what is wrong, as a phrase that follows
/// the message's name ("does not hold a JSON object", "has no content array").
pub fn parse(kind: &str, data: &str) -> Result<Parsed, &'static str> {
    let Ok(Value::Object(mut map)) = pruning_engine::lone_surrogates::parse(data) else {
        return Err("does not hold a JSON object");
    };
    // Only `time` is looked at: cloning the whole row (up to 16 MiB) would cost a copy.
    let completed_at_ms = map
        .get("time")
        .and_then(|time| completion_time(&serde_json::json!({ "time": time })));
    let body_text = match map.get("text") {
        Some(Value::String(text)) => Some(text.clone()),
        _ => None,
    };
    let parts = match map.remove("content") {
        Some(Value::Array(items)) => items,
        None if kind != "assistant" => Vec::new(),
        _ => return Err("has no content array"),
    };
    let parts = parts
        .into_iter()
        .map(|value| StoredPart {
            class: classify(&value),
            value,
        })
        .collect();
    Ok(Parsed {
        message: StoredMessage {
            is_assistant: kind == "assistant",
            completed: completed_at_ms.is_some(),
            completed_at_ms,
            parts,
        },
        body_text,
    })
}
