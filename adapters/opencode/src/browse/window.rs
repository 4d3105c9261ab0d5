//! `window`: at most 200 visible messages of a session, oldest first, around a target; the
//! targets of the windows before and after it (CodeNomad's `readNavigationWindow`, over both
//! generations).

use pruning_engine::browse::{
    BrowseReason, Target, WindowRequest, WindowResult, AROUND_BEFORE, AROUND_FROM, MESSAGE_BYTES,
    PAGE_OVERLAP, WINDOW_BYTES, WINDOW_MESSAGES,
};
use rusqlite::types::Value;
use rusqlite::Connection;

use super::message;
use super::visible::Visible;
use crate::values::lenient_text;

/// A visible message's id, order key and stored bytes.
struct Header {
    id: String,
    key: Vec<Value>,
    bytes: u64,
}

/// Which side of an anchor a read takes.
#[derive(Clone, Copy)]
enum Side {
    Before,
    AtOrBefore,
    From,
    After,
}

impl Side {
    fn operator(self) -> &'static str {
        match self {
            Self::Before => "<",
            Self::AtOrBefore => "<=",
            Self::From => ">=",
            Self::After => ">",
        }
    }
}

/// Reads the window `request` names, inside the caller's read transaction.
pub(super) fn read(conn: &Connection, request: &WindowRequest) -> rusqlite::Result<WindowResult> {
    let blocked = |reason| Ok(WindowResult::Blocked { reason });
    let Some(visible) = Visible::of(conn, &request.session_id)? else {
        return blocked(BrowseReason::NotDeletable);
    };
    let anchor = match request.target.anchor() {
        None => None,
        Some(id) => match visible.visible_key(conn, id)? {
            Some(key) => Some(key),
            None => return blocked(BrowseReason::AnchorMissing),
        },
    };
    let anchor = anchor.as_deref();
    let edge = WINDOW_MESSAGES - PAGE_OVERLAP;
    let (older, newer): ((Option<Side>, usize), (Option<Side>, usize)) = match &request.target {
        Target::Latest {} => ((None, WINDOW_MESSAGES), (None, 0)),
        Target::Oldest {} => ((None, 0), (None, WINDOW_MESSAGES)),
        Target::Around { .. } => (
            (Some(Side::Before), AROUND_BEFORE),
            (Some(Side::From), AROUND_FROM),
        ),
        Target::Before { .. } => ((Some(Side::Before), edge), (Some(Side::From), PAGE_OVERLAP)),
        Target::After { .. } => (
            (Some(Side::AtOrBefore), PAGE_OVERLAP),
            (Some(Side::After), edge),
        ),
    };
    let mut headers = Vec::with_capacity(WINDOW_MESSAGES);
    if older.1 > 0 {
        let mut before = headers_on(conn, &visible, older.0, anchor, true, older.1)?;
        before.reverse();
        headers.extend(before);
    }
    if newer.1 > 0 {
        headers.extend(headers_on(conn, &visible, newer.0, anchor, false, newer.1)?);
    }
    let mut total = 0u64;
    for header in &headers {
        total += header.bytes;
        if header.bytes > MESSAGE_BYTES || total > WINDOW_BYTES {
            return blocked(BrowseReason::UnsupportedStorage);
        }
    }
    let mut messages = Vec::with_capacity(headers.len());
    for header in &headers {
        match message::load(conn, visible.layout, &visible.session_id, &header.id)? {
            Some(message) => messages.push(message),
            None => return blocked(BrowseReason::UnsupportedStorage),
        }
    }
    let (older, newer) = match (headers.first(), headers.last()) {
        (Some(first), Some(last)) => (
            exists(conn, &visible, Side::Before, &first.key)?.then(|| Target::Before {
                message_id: first.id.clone(),
            }),
            exists(conn, &visible, Side::After, &last.key)?.then(|| Target::After {
                message_id: last.id.clone(),
            }),
        ),
        _ => (None, None),
    };
    Ok(WindowResult::Window {
        messages,
        latest: newer.is_none(),
        older,
        newer,
        resume: request.target.clone(),
    })
}

/// Up to `limit` visible headers on `side` of `anchor` (every visible row without a side),
/// nearest first when `descending`.
fn headers_on(
    conn: &Connection,
    visible: &Visible,
    side: Option<Side>,
    anchor: Option<&[Value]>,
    descending: bool,
    limit: usize,
) -> rusqlite::Result<Vec<Header>> {
    let (filter, mut params) = visible.filter();
    let mut sql = format!(
        "SELECT m.id, {}, {} FROM {} WHERE {filter}",
        visible.key(),
        visible.bytes(),
        visible.table()
    );
    if let (Some(side), Some(anchor)) = (side, anchor) {
        sql.push_str(&format!(
            " AND ({}) {} {}",
            visible.key(),
            side.operator(),
            visible.key_slots()
        ));
        params.extend(anchor.iter().cloned());
    }
    sql.push_str(&format!(
        " ORDER BY {} LIMIT {limit}",
        visible.order(descending)
    ));
    let width = visible.key_width();
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(params), |row| {
        Ok(Header {
            id: lenient_text(row.get_ref(0)?),
            key: (1..=width)
                .map(|i| row.get::<_, Value>(i))
                .collect::<Result<_, _>>()?,
            bytes: u64::try_from(row.get::<_, i64>(width + 1)?).unwrap_or(0),
        })
    })?;
    rows.collect()
}

/// Whether a visible row lies on `side` of `key`.
fn exists(
    conn: &Connection,
    visible: &Visible,
    side: Side,
    key: &[Value],
) -> rusqlite::Result<bool> {
    let (filter, mut params) = visible.filter();
    params.extend(key.iter().cloned());
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM {} WHERE {filter} AND ({}) {} {})",
        visible.table(),
        visible.key(),
        side.operator(),
        visible.key_slots()
    );
    conn.prepare_cached(&sql)?
        .query_row(rusqlite::params_from_iter(params), |row| row.get(0))
}
