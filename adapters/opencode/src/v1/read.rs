//! Reading a V1 message as the planner sees it: the `message` row and its `part` rows.
//!
//! Source: OpenCode `MessageV2.parts` (1.2 to 1.18): parts are read `WHERE message_id = ?`
//! `ORDER BY id`, and each is `{...row.data, id, sessionID, messageID}`. That order and that
//! shape are the message content the revision is computed over.

use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::planner::{completed_at, completion_time};
use pruning_engine::{
    BlockedReason, PartClass, PreviewRequest, Refusal, StoredMessage, StoredPart, ToolStatus,
};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};

use crate::ownership::{self, SessionTable};
use crate::schema::Schema;

/// Part types of OpenCode 1.2 to 1.19 that are kept by every prune.
const KEPT_TYPES: [&str; 10] = [
    "text",
    "file",
    "step-start",
    "step-finish",
    "snapshot",
    "patch",
    "agent",
    "compaction",
    "subtask",
    "retry",
];

/// One part row as read, with the text that was read (for compare-and-swap deletes).
#[derive(Debug, Clone)]
pub struct PartRow {
    /// `part.id`.
    pub id: String,
    /// `part.data` exactly as stored; empty when read with [`Texts::Skip`].
    pub data: String,
    /// Length of `part.data` in bytes.
    pub len: usize,
}

/// Whether [`read_message`] keeps each part's stored text (a prune needs it for its
/// compare-and-swap deletes; a preview does not, and skips copying up to 16 MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Texts {
    /// Keep `PartRow::data`.
    Keep,
    /// Leave `PartRow::data` empty.
    Skip,
}

/// A V1 message: the planner's view plus the rows it came from.
#[derive(Debug, Clone)]
pub struct V1Message {
    /// What the planner sees.
    pub message: StoredMessage,
    /// `role` of `message.data` (`user`, `assistant`), empty when missing.
    pub role: String,
    /// The part rows, in content order.
    pub rows: Vec<PartRow>,
}

/// Classifies a V1 part by its `type`.
pub fn classify(part: &Value) -> PartClass {
    match part.get("type").and_then(Value::as_str) {
        Some("tool") => PartClass::Tool(ToolStatus::of(part)),
        Some("reasoning") => PartClass::Reasoning,
        Some(kind) if KEPT_TYPES.contains(&kind) => PartClass::Kept,
        _ => PartClass::Unknown,
    }
}

/// The refusal of a message over the contract's 16 MiB budget.
fn over_budget(message_id: &str) -> Refusal {
    Refusal::new(
        BlockedReason::NotDeletable,
        format!("message {message_id} holds more than the 16 MiB budget"),
    )
}

/// Reads message `message_id` of session `session_id` with its parts.
///
/// Refusals: the message is not in that session (`not_deletable`); the message and its parts
/// hold more than 16 MiB (`not_deletable`); a row is not a JSON object (`unsupported_storage`).
pub fn read_message(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
    texts: Texts,
) -> rusqlite::Result<Result<V1Message, Refusal>> {
    // Sizes first, from the record headers: a message over the budget is refused before any of
    // its rows is loaded (docs/ARCHITECTURE.md, "Rows over the budget").
    let stored: Option<i64> = crate::cached::query_row(
        conn,
        "SELECT octet_length(m.data) \
                + (SELECT coalesce(sum(octet_length(p.data)), 0) FROM part p WHERE p.message_id = m.id) \
         FROM message m WHERE m.id = ?1 AND m.session_id = ?2",
        [message_id, session_id],
        |row| row.get(0),
    )
    .optional()?
    .flatten();
    if stored.is_some_and(|bytes| usize::try_from(bytes).map_or(true, |b| b > MAX_MESSAGE_BYTES)) {
        return Ok(Err(over_budget(message_id)));
    }
    let row: Option<Option<String>> = crate::cached::query_row(
        conn,
        "SELECT data FROM message WHERE id = ?1 AND session_id = ?2",
        [message_id, session_id],
        |row| Ok(utf8(row.get_ref(0)?).map(str::to_string)),
    )
    .optional()?;
    let Some(message_data) = row else {
        return Ok(Err(Refusal::new(
            BlockedReason::NotDeletable,
            why_missing(conn, session_id, message_id)?,
        )));
    };
    let Some(message_data) = message_data else {
        return Ok(Err(not_text("message", message_id)));
    };
    let info: Value = match pruning_engine::lone_surrogates::parse(&message_data) {
        Ok(value @ Value::Object(_)) => value,
        _ => return Ok(Err(not_json("message", message_id))),
    };

    let mut stmt =
        conn.prepare_cached("SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id")?;
    let mut query = stmt.query([message_id])?;
    let mut parts = Vec::new();
    let mut rows = Vec::new();
    let mut total = message_data.len();
    while let Some(row) = query.next()? {
        let id: String = row.get(0)?;
        let Some(data) = utf8(row.get_ref(1)?) else {
            return Ok(Err(not_text("part", &id)));
        };
        total = total.saturating_add(data.len());
        if total > MAX_MESSAGE_BYTES {
            return Ok(Err(over_budget(message_id)));
        }
        let Ok(Value::Object(mut map)) = pruning_engine::lone_surrogates::parse(data) else {
            return Ok(Err(not_json("part", &id)));
        };
        merge_ids(&mut map, &id, session_id, message_id);
        let value = Value::Object(map);
        parts.push(StoredPart {
            class: classify(&value),
            value,
        });
        let len = data.len();
        let data = match texts {
            Texts::Keep => data.to_owned(),
            Texts::Skip => String::new(),
        };
        rows.push(PartRow { id, data, len });
    }
    let role = info.get("role").and_then(Value::as_str).unwrap_or_default();
    let message = StoredMessage {
        is_assistant: role == "assistant",
        completed: completed_at(&info),
        completed_at_ms: completion_time(&info),
        parts,
    };
    Ok(Ok(V1Message {
        message,
        role: role.to_string(),
        rows,
    }))
}

/// Whether session `session_id` has a `message` row `message_id`.
pub(crate) fn has_message(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<bool> {
    crate::cached::query_row(
        conn,
        "SELECT count(*) > 0 FROM message WHERE id = ?1 AND session_id = ?2",
        [message_id, session_id],
        |row| row.get::<_, bool>(0),
    )
}

/// The message of a preview, as the planner sees it: refused (`not_deletable`) where the
/// database has no V1 tables or the session (in the shared `session` table) is outside the
/// request's scope; else [`read_message`] without the part rows' text.
pub(crate) fn read_in_scope(
    conn: &Connection,
    schema: &Schema,
    request: &PreviewRequest,
) -> rusqlite::Result<Result<StoredMessage, Refusal>> {
    let (session_id, message_id) = (request.session_id.as_str(), request.message_id.as_str());
    if !schema.has_v1() {
        return Ok(Err(Refusal::new(
            BlockedReason::NotDeletable,
            format!("there is no message {message_id} in this database"),
        )));
    }
    if let Some(refusal) = ownership::check(conn, SessionTable::Shared, session_id, &request.scope)?
    {
        return Ok(Err(refusal));
    }
    Ok(read_message(conn, session_id, message_id, Texts::Skip)?.map(|m| m.message))
}

/// Why message `message_id` of session `session_id` was not found, in words.
fn why_missing(conn: &Connection, session_id: &str, message_id: &str) -> rusqlite::Result<String> {
    let owner: Option<String> = crate::cached::query_row(
        conn,
        "SELECT session_id FROM message WHERE id = ?1",
        [message_id],
        |row| row.get(0),
    )
    .optional()?;
    if let Some(owner) = owner {
        return Ok(format!(
            "message {message_id} belongs to session {owner}, not {session_id}"
        ));
    }
    let session_exists: bool = crate::cached::query_row(
        conn,
        "SELECT count(*) > 0 FROM session WHERE id = ?1",
        [session_id],
        |row| row.get(0),
    )?;
    let swapped = session_id.starts_with("msg_") && message_id.starts_with("ses_");
    Ok(match (session_exists, swapped) {
        (_, true) => format!("no message {message_id}: the session and message ids look swapped (SESSION comes first)"),
        (true, false) => format!("session {session_id} has no message {message_id}"),
        (false, false) => format!("there is no session {session_id} and no message {message_id} in this database"),
    })
}

/// `{...data, id, sessionID, messageID}`: an existing key keeps its place, new keys go last.
fn merge_ids(map: &mut Map<String, Value>, id: &str, session_id: &str, message_id: &str) {
    map.insert("id".into(), Value::String(id.into()));
    map.insert("sessionID".into(), Value::String(session_id.into()));
    map.insert("messageID".into(), Value::String(message_id.into()));
}

/// A column's text, `None` when it is not UTF-8 text (a damaged row).
fn utf8(value: rusqlite::types::ValueRef<'_>) -> Option<&str> {
    match value {
        // Rows run to 16 MiB: a SIMD check takes a fraction of the standard library's time.
        rusqlite::types::ValueRef::Text(bytes) => simdutf8::basic::from_utf8(bytes).ok(),
        _ => None,
    }
}

fn not_text(what: &str, id: &str) -> Refusal {
    Refusal::new(
        BlockedReason::UnsupportedStorage,
        format!("{what} {id} does not hold UTF-8 text"),
    )
}

fn not_json(what: &str, id: &str) -> Refusal {
    Refusal::new(
        BlockedReason::UnsupportedStorage,
        format!("{what} {id} does not hold a JSON object"),
    )
}
