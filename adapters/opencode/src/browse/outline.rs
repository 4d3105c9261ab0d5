//! `outline`: one entry per visible message, in chunks of at most 512 rows, each with a
//! checkpoint: the SHA-256 of its rows' `{id, type, seq, time_updated, bytes}` (CodeNomad's
//! `readSessionOutline`, over both generations; docs/ARCHITECTURE.md, "Browsing").
//!
//! Every call reads the header rows of the chunks it walks (ids, types, sequence numbers, update
//! times and lengths: no JSON of a V2 row, and of a V1 message only its `role`), and parses
//! rows for entries only in the chunks it answers as changed: those whose checkpoint the client
//! did not send back equal, and the chunk that reaches the newest message.

use std::borrow::Cow;

use pruning_engine::browse::{
    cut_utf16, BrowseReason, Checkpoint, OutlineCursor, OutlineEntry, OutlineRequest,
    OutlineResult, CHUNK_ROWS, MAX_CHECKPOINTS, NAME_UNITS, OUTLINE_ENTRIES,
};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use super::visible::{Layout, Visible};
use crate::row_budget;
use crate::values::lenient_text;

/// A header row of a chunk.
struct Row {
    id: String,
    kind: String,
    seq: u64,
    time_updated: Value,
    bytes: u64,
    /// V1: the order key, to read the next chunk from.
    key: Vec<Value>,
}

/// Where the last V1 chunk ended: its last row's sequence number and order key.
type V1Position = Option<(i64, Vec<Value>)>;

/// Reads one outline page, inside the caller's read transaction; also returns how many rows it
/// parsed for entries.
pub(super) fn read(
    conn: &Connection,
    request: &OutlineRequest,
) -> rusqlite::Result<(OutlineResult, u64)> {
    let blocked = |reason| Ok((OutlineResult::Blocked { reason }, 0));
    if !request.known_is_a_chain() {
        return blocked(BrowseReason::Conflict);
    }
    let Some(visible) = Visible::of(conn, &request.session_id)? else {
        return blocked(BrowseReason::NotDeletable);
    };
    let (count, maximum) = extent(conn, &visible)?;
    let through = match request.cursor {
        Some(cursor) => cursor.through,
        None => maximum.max(request.known.last().map_or(0, |k| k.through)),
    };
    let total = match visible.layout {
        Layout::V2 => count_through(conn, &visible, through)?,
        Layout::V1 => count.min(through.saturating_add(1)),
    };
    let mut after = match request.cursor {
        Some(cursor) => i64::try_from(cursor.after).unwrap_or(i64::MAX),
        None => request.after,
    };
    let horizon = i64::try_from(through).unwrap_or(i64::MAX);
    let mut entries = Vec::new();
    let mut checkpoints = Vec::new();
    let mut examined = 0usize;
    let mut parsed = 0u64;
    let mut position: V1Position = None;
    while after < horizon
        && examined <= OUTLINE_ENTRIES - CHUNK_ROWS
        && checkpoints.len() < MAX_CHECKPOINTS
    {
        let previous = request.known.iter().position(|k| k.after == after);
        let last_known = previous == Some(request.known.len().saturating_sub(1));
        let end = match previous {
            Some(i) if !last_known => request.known[i].through.min(through),
            _ => through,
        };
        let rows = match chunk(conn, &visible, after, end, &mut position)? {
            Some(rows) => rows,
            None => return blocked(BrowseReason::UnsupportedStorage),
        };
        let chunk_end = match rows.last() {
            Some(last) if rows.len() == CHUNK_ROWS => last.seq,
            _ => end,
        };
        let digest = digest(&rows);
        let changed = previous.is_none_or(|i| {
            request.known[i].through != chunk_end || request.known[i].digest != digest
        }) || chunk_end >= maximum;
        if changed {
            for row in &rows {
                entries.push(entry(conn, &visible, row)?);
            }
            parsed += rows.len() as u64;
        }
        checkpoints.push(Checkpoint {
            after,
            through: chunk_end,
            digest,
            changed,
        });
        after = i64::try_from(chunk_end).unwrap_or(i64::MAX);
        examined += rows.len();
    }
    let cursor = (after < horizon).then(|| OutlineCursor {
        after: u64::try_from(after).unwrap_or(0),
        through,
    });
    Ok((
        OutlineResult::Outline {
            entries,
            checkpoints,
            total,
            cursor,
        },
        parsed,
    ))
}

/// Visible messages, and the largest sequence number (0 for none).
fn extent(conn: &Connection, visible: &Visible) -> rusqlite::Result<(u64, u64)> {
    let (filter, params) = visible.filter();
    let sql = format!(
        "SELECT count(*), coalesce(max(m.seq), 0) FROM {} WHERE {filter}",
        visible.table()
    );
    let sql = match visible.layout {
        Layout::V2 => sql,
        Layout::V1 => format!("SELECT count(*), 0 FROM {} WHERE {filter}", visible.table()),
    };
    let (count, maximum): (i64, i64) = conn
        .prepare_cached(&sql)?
        .query_row(rusqlite::params_from_iter(params), |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?;
    let count = u64::try_from(count).unwrap_or(0);
    let maximum = match visible.layout {
        Layout::V2 => u64::try_from(maximum).unwrap_or(0),
        Layout::V1 => count.saturating_sub(1),
    };
    Ok((count, maximum))
}

/// V2 rows with `seq <= through`.
fn count_through(conn: &Connection, visible: &Visible, through: u64) -> rusqlite::Result<u64> {
    let (filter, mut params) = visible.filter();
    params.push(Value::Integer(i64::try_from(through).unwrap_or(i64::MAX)));
    let sql = format!(
        "SELECT count(*) FROM {} WHERE {filter} AND m.seq <= ?",
        visible.table()
    );
    let count: i64 = conn
        .prepare_cached(&sql)?
        .query_row(rusqlite::params_from_iter(params), |row| row.get(0))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// The header rows with `after < seq <= end`, at most 512; `None` when a V1 message has no
/// `role` to stand for its type.
fn chunk(
    conn: &Connection,
    visible: &Visible,
    after: i64,
    end: u64,
    position: &mut V1Position,
) -> rusqlite::Result<Option<Vec<Row>>> {
    let end = i64::try_from(end).unwrap_or(i64::MAX);
    let (filter, mut params) = visible.filter();
    match visible.layout {
        Layout::V2 => {
            params.extend([Value::Integer(after), Value::Integer(end)]);
            let sql = format!(
                "SELECT m.id, m.type, m.seq, m.time_updated, octet_length(m.data) \
                 FROM session_message m WHERE {filter} AND m.seq > ? AND m.seq <= ? \
                 ORDER BY m.seq LIMIT {CHUNK_ROWS}"
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(params), |row| {
                Ok(Row {
                    id: lenient_text(row.get_ref(0)?),
                    kind: lenient_text(row.get_ref(1)?),
                    seq: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                    time_updated: row.get(3)?,
                    bytes: u64::try_from(row.get::<_, Option<i64>>(4)?.unwrap_or(0)).unwrap_or(0),
                    key: Vec::new(),
                })
            })?;
            rows.collect::<Result<Vec<_>, _>>().map(Some)
        }
        Layout::V1 => {
            let wanted = end.saturating_sub(after).clamp(0, CHUNK_ROWS as i64);
            let mut sql = format!(
                "SELECT m.id, CASE WHEN json_valid({message}) THEN {message} ->> '$.role' END, \
                   m.time_created, \
                   max(coalesce(m.time_updated, 0), coalesce((SELECT max(p.time_updated) \
                     FROM part p WHERE p.message_id = m.id), 0)), \
                   {} \
                 FROM message m WHERE {filter}",
                visible.bytes(),
                message = row_budget::data("m", "message")
            );
            let offset = match position.take() {
                Some((seq, key)) if seq == after => {
                    sql.push_str(" AND (m.time_created, m.id) > (?, ?)");
                    params.extend(key);
                    0
                }
                _ => after.saturating_add(1),
            };
            sql.push_str(&format!(
                " ORDER BY m.time_created, m.id LIMIT {wanted} OFFSET {offset}"
            ));
            let mut stmt = conn.prepare_cached(&sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
            let mut found = Vec::new();
            let mut seq = after;
            while let Some(row) = rows.next()? {
                seq = seq.saturating_add(1);
                let ValueRef::Text(_) = row.get_ref(1)? else {
                    return Ok(None);
                };
                let id = lenient_text(row.get_ref(0)?);
                found.push(Row {
                    key: vec![row.get(2)?, Value::Text(id.clone())],
                    id,
                    kind: lenient_text(row.get_ref(1)?),
                    seq: u64::try_from(seq).unwrap_or(0),
                    time_updated: row.get(3)?,
                    bytes: u64::try_from(row.get::<_, Option<i64>>(4)?.unwrap_or(0)).unwrap_or(0),
                });
            }
            if let Some(last) = found.last() {
                *position = Some((seq, last.key.clone()));
            }
            Ok(Some(found))
        }
    }
}

/// SHA-256 (lowercase hex) of the JSON array of the rows, each
/// `{"id","type","seq","time_updated","bytes"}` in that order, as JavaScript's
/// `JSON.stringify` writes it (CodeNomad's digest, so the checkpoints of a V2 session are the
/// same from either).
fn digest(rows: &[Row]) -> String {
    let mut text = String::from("[");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        let time = match &row.time_updated {
            Value::Integer(n) => n.to_string(),
            Value::Real(x) => {
                serde_json::Number::from_f64(*x).map_or("null".into(), |n| n.to_string())
            }
            _ => "null".into(),
        };
        text.push_str(&format!(
            "{{\"id\":{},\"type\":{},\"seq\":{},\"time_updated\":{time},\"bytes\":{}}}",
            json_string(&row.id),
            json_string(&row.kind),
            row.seq,
            row.bytes
        ));
    }
    text.push(']');
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// The entry of a header row: its tool and reasoning parts counted from its JSON.
fn entry(conn: &Connection, visible: &Visible, row: &Row) -> rusqlite::Result<OutlineEntry> {
    let mut counts = Counts::default();
    match visible.layout {
        Layout::V2 => {
            if row.kind == "assistant" {
                let data: Option<String> = conn
                    .prepare_cached(&format!(
                        "SELECT CAST({} AS TEXT) FROM session_message \
                         WHERE session_id = ?1 AND id = ?2",
                        row_budget::data("", "session_message")
                    ))?
                    .query_row([&visible.session_id, &row.id], |r| r.get(0))?;
                if let Some(data) = data {
                    counts.add_content(&data);
                }
            }
        }
        Layout::V1 => {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT CAST({} AS TEXT) FROM part WHERE message_id = ?1 ORDER BY id",
                row_budget::data("", "part")
            ))?;
            let mut parts = stmt.query([&row.id])?;
            while let Some(part) = parts.next()? {
                // A part that is not UTF-8 text counts as neither kind.
                if let Ok(data) = part.get_ref(0)?.as_str() {
                    counts.add_item(data);
                }
            }
        }
    }
    Ok(OutlineEntry {
        id: row.id.clone(),
        seq: row.seq,
        kind: row.kind.clone(),
        tools: counts.tools,
        reasoning: counts.reasoning,
        tool_name: (counts.tools > 0).then(|| counts.tool_name.unwrap_or_default()),
    })
}

/// Tool and reasoning parts of a message, and the first tool name.
#[derive(Default)]
struct Counts {
    tools: u64,
    reasoning: u64,
    tool_name: Option<String>,
}

/// What the count reads of a part (V1 `part.data`) or a `content` item (V2); everything else
/// in it is skipped unparsed.
#[derive(Deserialize)]
struct ItemHead<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool: Option<&'a RawValue>,
}

/// A V2 row's `data`, down to its `content` items.
#[derive(Deserialize)]
struct ContentHead<'a> {
    #[serde(borrow, default)]
    content: Option<Vec<&'a RawValue>>,
}

impl Counts {
    /// Counts the items of a V2 row's `content` (none when it is not an array of them).
    fn add_content(&mut self, data: &str) {
        let Ok(head) = serde_json::from_str::<ContentHead<'_>>(data) else {
            return;
        };
        for item in head.content.unwrap_or_default() {
            self.add_item(item.get());
        }
    }

    /// Counts one part or item (nothing when it is not an object with a text `type`).
    fn add_item(&mut self, data: &str) {
        let Ok(head) = serde_json::from_str::<ItemHead<'_>>(data) else {
            return;
        };
        match head.kind.as_deref() {
            Some("tool") => {
                self.tools += 1;
                if self.tool_name.is_none() {
                    let text = |raw: Option<&RawValue>| {
                        raw.and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
                    };
                    if let Some(name) = text(head.name).or_else(|| text(head.tool)) {
                        self.tool_name = Some(cut_utf16(&name, NAME_UNITS).to_string());
                    }
                }
            }
            Some("reasoning") => self.reasoning += 1,
            _ => {}
        }
    }
}
