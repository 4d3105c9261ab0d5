//! One message as a window answers it: V2, the `session_message` row's `data` with its `id` and
//! `type` set from the columns (CodeNomad's window); V1, `{info, parts}` as OpenCode's own
//! `GET /session/{id}/message` answers it: `info` the `message` row's `data` with `id` and
//! `sessionID`, `parts` its `part` rows' `data` in id order, each with `id`, `sessionID` and
//! `messageID` (the columns OpenCode strips from the JSON and merges back when it reads).

use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};

use super::visible::Layout;
use crate::values::lenient_text;

/// The message `message_id` of session `session_id`; `None` when its row is gone or its JSON
/// is not an object (the caller refuses the window).
pub(super) fn load(
    conn: &Connection,
    layout: Layout,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<Value>> {
    match layout {
        Layout::V2 => load_v2(conn, session_id, message_id),
        Layout::V1 => load_v1(conn, session_id, message_id),
    }
}

fn load_v2(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<Value>> {
    let row = conn
        .prepare_cached(
            "SELECT type, CAST(data AS TEXT) FROM session_message WHERE session_id = ?1 AND id = ?2",
        )?
        .query_row([session_id, message_id], |row| {
            Ok((lenient_text(row.get_ref(0)?), row.get::<_, Option<String>>(1)?))
        })
        .optional()?;
    let Some((kind, Some(data))) = row else {
        return Ok(None);
    };
    let Some(mut object) = object_of(&data) else {
        return Ok(None);
    };
    object.insert("id".into(), Value::String(message_id.to_string()));
    object.insert("type".into(), Value::String(kind));
    Ok(Some(Value::Object(object)))
}

fn load_v1(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<Value>> {
    let data = conn
        .prepare_cached("SELECT CAST(data AS TEXT) FROM message WHERE session_id = ?1 AND id = ?2")?
        .query_row([session_id, message_id], |row| {
            row.get::<_, Option<String>>(0)
        })
        .optional()?
        .flatten();
    let Some(mut info) = data.as_deref().and_then(object_of) else {
        return Ok(None);
    };
    info.insert("id".into(), Value::String(message_id.to_string()));
    info.insert("sessionID".into(), Value::String(session_id.to_string()));
    let mut parts = Vec::new();
    let mut stmt = conn.prepare_cached(
        "SELECT id, session_id, CAST(data AS TEXT) FROM part WHERE message_id = ?1 ORDER BY id",
    )?;
    let mut rows = stmt.query([message_id])?;
    while let Some(row) = rows.next()? {
        let Some(mut part) = row
            .get::<_, Option<String>>(2)?
            .as_deref()
            .and_then(object_of)
        else {
            return Ok(None);
        };
        part.insert("id".into(), Value::String(lenient_text(row.get_ref(0)?)));
        part.insert(
            "sessionID".into(),
            Value::String(lenient_text(row.get_ref(1)?)),
        );
        part.insert("messageID".into(), Value::String(message_id.to_string()));
        parts.push(Value::Object(part));
    }
    let mut message = Map::new();
    message.insert("info".into(), Value::Object(info));
    message.insert("parts".into(), Value::Array(parts));
    Ok(Some(Value::Object(message)))
}

/// `text` as a JSON object; `None` when it is not one.
fn object_of(text: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}
