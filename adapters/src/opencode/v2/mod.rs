//! V2 messages (`session_message`, OpenCode's next storage generation): reading them as the
//! planner sees them, the V2 fence ([`fence`]) and the compare-and-swap write ([`apply`]).
//! Prunes are written only where `session_v2.time_suspended` exists (opencode2); OpenCode 1.18
//! keeps its V2 sessions in the shared `session` table, where V2 messages are previewed
//! read-only and a prune is refused.
//!
//! Source: opencode-storage.md §6 and codenomad-pruning.md §1, §4. A row's `data` is the message
//! without `id` and `type`; its `content` array holds `text`, `reasoning` and `tool` parts, and
//! that array, in stored order, is the content the revision is computed over. Rows larger than
//! 16 MiB (`length(CAST(data AS BLOB))`) are not read.

pub mod apply;
pub mod fence;

use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::planner::completed_at;
use pruning_engine::{BlockedReason, PartClass, Refusal, StoredMessage, StoredPart, ToolStatus};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

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
    conn.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('session_v2') WHERE name = 'time_suspended'",
        [],
        |row| row.get(0),
    )
}

/// Whether `message_id` is a V2 message (a `session_message` row).
pub fn is_v2_message(conn: &Connection, message_id: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) > 0 FROM session_message WHERE id = ?1",
        [message_id],
        |row| row.get(0),
    )
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
    let Some(data) = data else {
        return refuse(format!("V2 message {message_id} is over the 16 MiB budget"));
    };
    match parse(&kind, &data) {
        Ok(parsed) => Ok(Ok((parsed.message, data))),
        Err(why) => refuse(format!("V2 message {message_id} {why}")),
    }
}

/// The row's `type` and its `data`, `None` for data over the 16 MiB budget (not read).
/// `Ok(None)`: no such message in that session.
pub fn load_row(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<(String, Option<String>)>> {
    conn.query_row(
        "SELECT type, CASE WHEN length(CAST(data AS BLOB)) <= ?3 THEN data END \
         FROM session_message WHERE session_id = ?1 AND id = ?2",
        rusqlite::params![session_id, message_id, MAX_MESSAGE_BYTES as i64],
        |row| Ok((row.get(0)?, row.get(1)?)),
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
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(data) else {
        return Err("does not hold a JSON object");
    };
    let completed = completed_at(&Value::Object(map.clone()));
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
            completed,
            parts,
        },
        body_text,
    })
}
