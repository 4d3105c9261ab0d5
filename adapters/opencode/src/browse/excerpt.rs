//! `outlinePreview`: the text and tool excerpts of up to 12 messages, at most 4,096 UTF-16 code
//! units each (CodeNomad's `readOutlinePreviews`; a V1 message's are taken from its parts).
//!
//! - `text`: V2, the row's `text`, `summary` and `command` when they are strings, then the
//!   `text` of each text item that is neither `synthetic` nor `ignored`; V1, the text of each
//!   such text part.
//! - `tools`: for each tool item or part, `**NAME**` (V2 `name`, V1 `tool`; `\`, `*`, `` ` ``
//!   and `_` removed), the state's `title`, its `output` (V2: or `output.output`), and, V2, the
//!   text blocks of its `content`.
//!
//! Pieces are joined with a blank line; a piece that is not a string is skipped. Ids that are
//! missing, of another session or hidden by a staged revert are left out; a message over 16
//! MiB answers empty excerpts.

use pruning_engine::browse::{
    BrowseReason, Excerpt, OutlinePreviewRequest, PreviewsResult, EXCERPT_UNITS, MESSAGE_BYTES,
};
use rusqlite::Connection;
use serde_json::Value;

use super::visible::{Layout, Visible};

/// Reads the excerpts, inside the caller's read transaction.
pub(super) fn read(
    conn: &Connection,
    request: &OutlinePreviewRequest,
) -> rusqlite::Result<PreviewsResult> {
    let Some(visible) = Visible::of(conn, &request.session_id)? else {
        return Ok(PreviewsResult::Blocked {
            reason: BrowseReason::NotDeletable,
        });
    };
    let mut entries = Vec::new();
    for id in request.distinct_ids() {
        if visible.visible_key(conn, id)?.is_none() {
            continue;
        }
        let mut excerpt = Excerpt {
            id: id.to_string(),
            text: String::new(),
            tools: String::new(),
        };
        if size_of(conn, &visible, id)? <= MESSAGE_BYTES {
            match visible.layout {
                Layout::V2 => v2(conn, &visible, id, &mut excerpt)?,
                Layout::V1 => v1(conn, id, &mut excerpt)?,
            }
        }
        entries.push(excerpt);
    }
    Ok(PreviewsResult::Previews { entries })
}

fn size_of(conn: &Connection, visible: &Visible, id: &str) -> rusqlite::Result<u64> {
    let sql = format!(
        "SELECT {} FROM {} WHERE m.session_id = ?1 AND m.id = ?2",
        visible.bytes(),
        visible.table()
    );
    let bytes: Option<i64> = conn
        .prepare_cached(&sql)?
        .query_row([&visible.session_id, id], |row| row.get(0))?;
    Ok(u64::try_from(bytes.unwrap_or(0)).unwrap_or(0))
}

fn v2(
    conn: &Connection,
    visible: &Visible,
    id: &str,
    excerpt: &mut Excerpt,
) -> rusqlite::Result<()> {
    let data: Option<String> = conn
        .prepare_cached(
            "SELECT CAST(data AS TEXT) FROM session_message WHERE session_id = ?1 AND id = ?2",
        )?
        .query_row([&visible.session_id, id], |row| row.get(0))?;
    let data: Value = data
        .and_then(|d| serde_json::from_str(&d).ok())
        .unwrap_or(Value::Null);
    for key in ["text", "summary", "command"] {
        append(&mut excerpt.text, data.get(key));
    }
    let items = data.get("content").and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        add_text(&mut excerpt.text, item);
        if item.get("type").and_then(Value::as_str) == Some("tool") {
            add_tool(&mut excerpt.tools, item, "name");
        }
    }
    Ok(())
}

fn v1(conn: &Connection, id: &str, excerpt: &mut Excerpt) -> rusqlite::Result<()> {
    let mut stmt = conn
        .prepare_cached("SELECT CAST(data AS TEXT) FROM part WHERE message_id = ?1 ORDER BY id")?;
    let mut rows = stmt.query([id])?;
    while let Some(row) = rows.next()? {
        let parsed = row
            .get_ref(0)?
            .as_str()
            .ok()
            .map(serde_json::from_str::<Value>);
        let Some(Ok(part)) = parsed else {
            continue;
        };
        add_text(&mut excerpt.text, &part);
        if part.get("type").and_then(Value::as_str) == Some("tool") {
            add_tool(&mut excerpt.tools, &part, "tool");
        }
    }
    Ok(())
}

/// A text item or part that is neither synthetic nor ignored.
fn add_text(text: &mut String, item: &Value) {
    let flag = |key| item.get(key).is_some_and(truthy);
    if item.get("type").and_then(Value::as_str) == Some("text")
        && !flag("synthetic")
        && !flag("ignored")
    {
        append(text, item.get("text"));
    }
}

/// A tool item or part: its name (from `name_key`), title, output and text blocks.
fn add_tool(tools: &mut String, item: &Value, name_key: &str) {
    let name = match item.get(name_key).and_then(Value::as_str) {
        Some(name) => format!("**{}**", name.replace(['\\', '*', '`', '_'], "")),
        None => String::new(),
    };
    append(tools, Some(&Value::String(name)));
    let state = item.get("state");
    append(tools, state.and_then(|s| s.get("title")));
    let output = state.and_then(|s| s.get("output"));
    match output {
        Some(Value::String(_)) => append(tools, output),
        _ => append(tools, output.and_then(|o| o.get("output"))),
    }
    let blocks = state
        .and_then(|s| s.get("content"))
        .and_then(Value::as_array);
    for block in blocks.into_iter().flatten() {
        if block.get("type").and_then(Value::as_str) == Some("text") {
            append(tools, block.get("text"));
        }
    }
}

/// JavaScript's truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// Appends `value` when it is a string and `current` is not full yet: a blank line between
/// pieces, the whole cut at [`EXCERPT_UNITS`] UTF-16 code units.
fn append(current: &mut String, value: Option<&Value>) {
    let Some(Value::String(value)) = value else {
        return;
    };
    let used = current.encode_utf16().count();
    if used >= EXCERPT_UNITS {
        return;
    }
    if !current.is_empty() {
        current.push_str("\n\n");
    }
    current.push_str(value);
    let cut = pruning_engine::browse::cut_utf16(current, EXCERPT_UNITS).len();
    current.truncate(cut);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_with_a_blank_line_up_to_the_bound() {
        let mut text = String::new();
        append(&mut text, Some(&Value::String("a".into())));
        append(&mut text, Some(&Value::Null));
        append(&mut text, Some(&Value::String("b".into())));
        assert_eq!(text, "a\n\nb");
        append(&mut text, Some(&Value::String("x".repeat(5000))));
        assert_eq!(text.encode_utf16().count(), EXCERPT_UNITS);
        let full = text.clone();
        append(&mut text, Some(&Value::String("more".into())));
        assert_eq!(text, full);
    }
}
