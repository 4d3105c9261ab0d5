//! `assets` and `assetRead`: the file attachments of a session, listed newest message first,
//! 64 a page, and read back one at a time as their `data:` URI (CodeNomad's assets store,
//! over both generations; docs/ARCHITECTURE.md, "Browsing").
//!
//! Where attachments are: V2, the file items (`{type:"file", uri, mime, name?}`) of the
//! `state.content` of each tool item of an assistant row's `content`; V1, each `file` part
//! (`{mime, url, filename?}`; its index is 0) and the `state.attachments` of each tool part
//! (FileParts), a part's position counted in part id order. An attachment is listed when its
//! MIME type is `type/subtype` without parameters; it is `available` (and readable) when its
//! URI is `data:<that type>;base64,...` of at most 8 MiB.
//!
//! The cursor (base64url of JSON) names the message to go on from, by its order key, and the
//! attachment within it; it is bound to the session and its staged revert (a cursor of another
//! state of the session is `conflict`) and pins the newest message of the first page, so
//! messages appended meanwhile wait for the next scan.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use pruning_engine::browse::{
    cut_utf16, embedded, valid_mime, AssetEntry, AssetReadRequest, AssetResult, AssetTarget,
    AssetsRequest, AssetsResult, BrowseReason, ASSET_PAGE, ASSET_SCAN_BYTES, ASSET_SCAN_MESSAGES,
    MAX_ASSET_INDEX, MESSAGE_BYTES, NAME_UNITS,
};
use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::visible::{Layout, Visible};
use crate::values::lenient_text;

/// One attachment found in a message.
struct Found {
    part: u32,
    index: u32,
    tool: String,
    name: Option<String>,
    mime: String,
    uri: String,
}

/// What an assets cursor holds.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cursor {
    /// SHA-256 of the session id and its staged revert.
    binding: String,
    /// The order key of the newest message the scan lists.
    through: Vec<Key>,
    /// The order key of the message to go on from.
    at: Vec<Key>,
    /// The attachment of that message to go on from.
    offset: u32,
}

/// One value of an order key, as a cursor carries it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum Key {
    Integer(i64),
    Text(String),
}

impl Key {
    fn of(value: &SqlValue) -> Option<Self> {
        match value {
            SqlValue::Integer(n) => Some(Self::Integer(*n)),
            SqlValue::Text(t) => Some(Self::Text(t.clone())),
            _ => None,
        }
    }

    fn sql(&self) -> SqlValue {
        match self {
            Self::Integer(n) => SqlValue::Integer(*n),
            Self::Text(t) => SqlValue::Text(t.clone()),
        }
    }
}

/// Reads one page of assets, inside the caller's read transaction.
pub(super) fn list(conn: &Connection, request: &AssetsRequest) -> rusqlite::Result<AssetsResult> {
    let blocked = |reason| Ok(AssetsResult::Blocked { reason });
    let Some(visible) = Visible::of(conn, &request.session_id)? else {
        return blocked(BrowseReason::NotDeletable);
    };
    let binding = binding(&visible);
    let cursor = match &request.cursor {
        None => None,
        Some(text) => match decode(text) {
            Some(cursor) if cursor.binding == binding => Some(cursor),
            Some(_) => return blocked(BrowseReason::Conflict),
            None => return blocked(BrowseReason::UnsupportedStorage),
        },
    };
    let (filter, mut params) = visible.filter();
    let assistant_only = match visible.layout {
        Layout::V2 => " AND m.type = 'assistant'",
        Layout::V1 => "",
    };
    let through = match &cursor {
        Some(cursor) => cursor.through.clone(),
        None => {
            let sql = format!(
                "SELECT {} FROM {} WHERE {filter}{assistant_only} ORDER BY {} LIMIT 1",
                visible.key(),
                visible.table(),
                visible.order(true)
            );
            let width = visible.key_width();
            let newest: Option<Vec<SqlValue>> = conn
                .prepare_cached(&sql)?
                .query_map(rusqlite::params_from_iter(params.clone()), |row| {
                    (0..width).map(|i| row.get::<_, SqlValue>(i)).collect()
                })?
                .next()
                .transpose()?;
            match newest.map(|key| key.iter().map(Key::of).collect::<Option<Vec<_>>>()) {
                None => {
                    return Ok(AssetsResult::Page {
                        entries: Vec::new(),
                        cursor: None,
                    })
                }
                Some(Some(key)) => key,
                Some(None) => return blocked(BrowseReason::UnsupportedStorage),
            }
        }
    };
    let start = cursor.as_ref().map_or(&through, |c| &c.at);
    if start.len() != visible.key_width() || through.len() != visible.key_width() {
        return blocked(BrowseReason::Conflict);
    }
    params.extend(start.iter().map(Key::sql));
    let sql = format!(
        "SELECT m.id, {}, {} FROM {} WHERE {filter}{assistant_only} AND ({}) <= {} \
         ORDER BY {} LIMIT {}",
        visible.key(),
        visible.bytes(),
        visible.table(),
        visible.key(),
        visible.key_slots(),
        visible.order(true),
        ASSET_SCAN_MESSAGES + 1
    );
    let width = visible.key_width();
    let rows: Vec<(String, Vec<SqlValue>, i64)> = conn
        .prepare_cached(&sql)?
        .query_map(rusqlite::params_from_iter(params), |row| {
            Ok((
                lenient_text(row.get_ref(0)?),
                (1..=width).map(|i| row.get(i)).collect::<Result<_, _>>()?,
                row.get::<_, Option<i64>>(width + 1)?.unwrap_or(0),
            ))
        })?
        .collect::<Result<_, _>>()?;
    let page = |at: &[SqlValue], offset: u32, entries: Vec<AssetEntry>| {
        let at = at.iter().map(Key::of).collect::<Option<Vec<_>>>();
        let Some(at) = at else {
            return Ok(AssetsResult::Blocked {
                reason: BrowseReason::UnsupportedStorage,
            });
        };
        let cursor = Cursor {
            binding: binding.clone(),
            through: through.clone(),
            at,
            offset,
        };
        let json = serde_json::to_vec(&cursor).unwrap_or_default();
        Ok(AssetsResult::Page {
            entries,
            cursor: Some(URL_SAFE_NO_PAD.encode(json)),
        })
    };
    let mut entries = Vec::new();
    let mut examined = 0u64;
    for (i, (id, key, bytes)) in rows.iter().enumerate() {
        if i == ASSET_SCAN_MESSAGES {
            return page(key, 0, entries);
        }
        let bytes = u64::try_from(*bytes).unwrap_or(0);
        if bytes > MESSAGE_BYTES {
            // Not read: a message over 16 MiB is passed over, so that the older ones stay
            // within reach.
            continue;
        }
        if examined > 0 && examined + bytes > ASSET_SCAN_BYTES {
            return page(key, 0, entries);
        }
        examined += bytes;
        // A message that cannot be read as JSON, or holds more than 100,000 parts or
        // attachments, is passed over as one without attachments.
        let found = attachments(conn, &visible, id)?.unwrap_or_default();
        // The offset counts in the message the cursor names, if it is still there.
        let skip = match &cursor {
            Some(c) if i == 0 && key.iter().map(Key::of).eq(c.at.iter().cloned().map(Some)) => {
                c.offset
            }
            _ => 0,
        };
        for (n, file) in found.iter().enumerate().skip(skip as usize) {
            if entries.len() == ASSET_PAGE {
                return page(key, u32::try_from(n).unwrap_or(u32::MAX), entries);
            }
            entries.push(AssetEntry {
                target: AssetTarget {
                    message_id: id.clone(),
                    part: file.part,
                    index: file.index,
                    digest: hex::encode(Sha256::digest(file.uri.as_bytes())),
                },
                name: match file.name.as_deref().filter(|name| !name.is_empty()) {
                    Some(name) => cut_utf16(name, NAME_UNITS).to_string(),
                    None => format!(
                        "{} · {}",
                        if file.tool.is_empty() {
                            "file"
                        } else {
                            &file.tool
                        },
                        file.index + 1
                    ),
                },
                tool: file.tool.clone(),
                mime: file.mime.clone(),
                available: embedded(&file.mime, &file.uri),
            });
        }
    }
    Ok(AssetsResult::Page {
        entries,
        cursor: None,
    })
}

/// Reads one attachment, inside the caller's read transaction.
pub(super) fn read(conn: &Connection, request: &AssetReadRequest) -> rusqlite::Result<AssetResult> {
    let blocked = |reason| Ok(AssetResult::Blocked { reason });
    let Some(visible) = Visible::of(conn, &request.session_id)? else {
        return blocked(BrowseReason::NotDeletable);
    };
    let target = &request.target;
    if visible.visible_key(conn, &target.message_id)?.is_none() {
        return blocked(BrowseReason::Missing);
    }
    if visible.layout == Layout::V2 {
        // As the listing: only assistant rows carry attachments.
        let kind: Option<String> = conn
            .prepare_cached(
                "SELECT CAST(type AS TEXT) FROM session_message WHERE session_id = ?1 AND id = ?2",
            )?
            .query_row([&visible.session_id, &target.message_id], |row| row.get(0))?;
        if kind.as_deref() != Some("assistant") {
            return blocked(BrowseReason::Missing);
        }
    }
    let sql = format!(
        "SELECT {} FROM {} WHERE m.session_id = ?1 AND m.id = ?2",
        visible.bytes(),
        visible.table()
    );
    let bytes: Option<i64> = conn
        .prepare_cached(&sql)?
        .query_row([&visible.session_id, &target.message_id], |row| row.get(0))?;
    if u64::try_from(bytes.unwrap_or(0)).unwrap_or(0) > MESSAGE_BYTES {
        return blocked(BrowseReason::Missing);
    }
    let Some(found) = attachments(conn, &visible, &target.message_id)? else {
        return blocked(BrowseReason::Unavailable);
    };
    let file = found
        .into_iter()
        .find(|f| f.part == target.part && f.index == target.index);
    match file {
        Some(file)
            if hex::encode(Sha256::digest(file.uri.as_bytes())) == target.digest
                && embedded(&file.mime, &file.uri) =>
        {
            Ok(AssetResult::Asset {
                uri: file.uri,
                mime: file.mime,
            })
        }
        _ => blocked(BrowseReason::Unavailable),
    }
}

/// SHA-256 of the session id and the staged revert it is read under.
fn binding(visible: &Visible) -> String {
    let text = format!("{}\n{}", visible.session_id, visible.cut_text());
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn decode(text: &str) -> Option<Cursor> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The attachments of message `id`, in part then index order; `None` when the message cannot
/// be read as JSON or holds more than 100,000 parts or attachments.
fn attachments(
    conn: &Connection,
    visible: &Visible,
    id: &str,
) -> rusqlite::Result<Option<Vec<Found>>> {
    let mut found = Vec::new();
    let limit = MAX_ASSET_INDEX as usize;
    match visible.layout {
        Layout::V2 => {
            let data: Option<String> = conn
                .prepare_cached(
                    "SELECT CAST(data AS TEXT) FROM session_message WHERE session_id = ?1 AND id = ?2",
                )?
                .query_row([&visible.session_id, id], |row| row.get(0))?;
            let Some(data) = data.and_then(|d| serde_json::from_str::<Value>(&d).ok()) else {
                return Ok(None);
            };
            let items = data.get("content").and_then(Value::as_array);
            let items = items.map(Vec::as_slice).unwrap_or_default();
            if items.len() > limit {
                return Ok(None);
            }
            for (part, item) in items.iter().enumerate() {
                if item.get("type").and_then(Value::as_str) != Some("tool") {
                    continue;
                }
                let tool = text(item, "name")
                    .or_else(|| text(item, "tool"))
                    .unwrap_or_default();
                let files = item.pointer("/state/content").and_then(Value::as_array);
                let Some(files) = files else { continue };
                if files.len() > limit {
                    return Ok(None);
                }
                for (index, file) in files.iter().enumerate() {
                    push(&mut found, part, index, &tool, file, "uri", "name");
                }
            }
        }
        Layout::V1 => {
            let mut stmt = conn.prepare_cached(
                "SELECT CAST(data AS TEXT) FROM part WHERE message_id = ?1 ORDER BY id",
            )?;
            let mut rows = stmt.query([id])?;
            let mut part = 0usize;
            while let Some(row) = rows.next()? {
                if part > limit {
                    return Ok(None);
                }
                let parsed = row
                    .get_ref(0)?
                    .as_str()
                    .ok()
                    .map(serde_json::from_str::<Value>);
                if let Some(Ok(data)) = parsed {
                    match data.get("type").and_then(Value::as_str) {
                        Some("file") => push(&mut found, part, 0, "", &data, "url", "filename"),
                        Some("tool") => {
                            let tool = text(&data, "tool").unwrap_or_default();
                            let files =
                                data.pointer("/state/attachments").and_then(Value::as_array);
                            for (index, file) in files.into_iter().flatten().enumerate() {
                                if index > limit {
                                    return Ok(None);
                                }
                                push(&mut found, part, index, &tool, file, "url", "filename");
                            }
                        }
                        _ => {}
                    }
                }
                part += 1;
            }
        }
    }
    if found.len() > limit {
        return Ok(None);
    }
    Ok(Some(found))
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Records `file` when it is a file with a URI (under `uri_key`) and a valid MIME type.
fn push(
    found: &mut Vec<Found>,
    part: usize,
    index: usize,
    tool: &str,
    file: &Value,
    uri_key: &str,
    name_key: &str,
) {
    if file.get("type").and_then(Value::as_str) != Some("file") {
        return;
    }
    let (Some(uri), Some(mime)) = (text(file, uri_key), text(file, "mime")) else {
        return;
    };
    if !valid_mime(&mime) {
        return;
    }
    found.push(Found {
        part: u32::try_from(part).unwrap_or(u32::MAX),
        index: u32::try_from(index).unwrap_or(u32::MAX),
        tool: cut_utf16(tool, NAME_UNITS).to_string(),
        name: text(file, name_key),
        mime,
        uri,
    });
}
