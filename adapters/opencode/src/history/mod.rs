//! History scans over both generations: the rows of the sessions in scope, session by session
//! in session id order, and within a session V1 `message` and V2 `session_message` merged in one
//! order (`time_created`, id, generation), read one at a time.
//!
//! Source: docs/ARCHITECTURE.md, "History scans", CodeNomad's `history.test.ts`, and the
//! engine's [`pruning_engine::history()`]. A scan is one read transaction. Keyset paging on the
//! position (never `OFFSET`) keeps a cursor on the same row whatever is appended; the horizon
//! (each table's highest `rowid` when the first page ran) bounds the scan to the rows that
//! existed then. The walk from session to session, and its queries, are [`walk`]'s.

use std::ops::ControlFlow;

use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::history::{
    HistoryScan, Horizon, Position, ScanEnd, ScannedContent, ScannedMessage,
};
use pruning_engine::{BlockedReason, Refusal};
use rusqlite::Connection;

use super::generation::Generation;
use super::ownership::{self, SessionTable};
use super::schema::Schema;
use super::v1::read;
use super::v2;

mod walk;

use walk::{last_row, tables, without_rowid, Sessions, Walk};

/// Runs `scan` on `conn` inside a read transaction; see [`pruning_engine::SessionStore::scan_history`].
pub fn scan(
    conn: &Connection,
    scan: &HistoryScan<'_>,
    visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
) -> rusqlite::Result<Result<ScanEnd, Refusal>> {
    let txn = crate::txn::ReadTxn::begin(conn)?;
    let result = run(conn, scan, visit);
    txn.end();
    result
}

fn run(
    conn: &Connection,
    scan: &HistoryScan<'_>,
    visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
) -> rusqlite::Result<Result<ScanEnd, Refusal>> {
    let schema = Schema::read(conn)?;
    if !schema.is_supported() {
        return Ok(Err(Refusal::new(
            BlockedReason::UnsupportedStorage,
            "the database has neither V1 (message, part) nor V2 (session_message) tables",
        )));
    }
    let tables = tables(&schema);
    for table in &tables {
        if without_rowid(conn, table.name)? {
            return Ok(Err(Refusal::new(
                BlockedReason::UnsupportedStorage,
                format!(
                    "the {} table is declared WITHOUT ROWID, which OpenCode never does: a history scan could not tell the rows appended after it began",
                    table.name
                ),
            )));
        }
    }
    let sessions = match sessions_in_scope(conn, &schema, scan)? {
        Ok(sessions) => sessions,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let horizon = match scan.horizon {
        Some(horizon) => *horizon,
        None => Horizon {
            v1: last_row(conn, &tables, 1)?,
            v2: last_row(conn, &tables, 2)?,
        },
    };
    let walk = Walk {
        tables,
        sessions,
        horizon,
    };
    // One row more than the page takes tells whether the scan goes on.
    let positions = walk.page(conn, scan.after, scan.limit + 1)?;
    let mut visited = 0;
    for position in positions.iter().take(scan.limit) {
        let row = read_row(conn, &schema, position)?;
        visited += 1;
        if visit(row).is_break() {
            break;
        }
    }
    Ok(Ok(ScanEnd {
        horizon: Some(horizon),
        exhausted: visited == positions.len(),
    }))
}

/// The named session (checked against the scope), or the sessions the scope admits.
fn sessions_in_scope<'a>(
    conn: &Connection,
    schema: &Schema,
    scan: &HistoryScan<'a>,
) -> rusqlite::Result<Result<Sessions<'a>, Refusal>> {
    let tables: Vec<SessionTable> = [SessionTable::Shared, SessionTable::V2]
        .into_iter()
        .filter(|table| schema.has(table.name()))
        .collect();
    if let Some(session_id) = scan.session_id {
        let mut found = false;
        for table in &tables {
            let Some(owner) = ownership::read(conn, *table, session_id)? else {
                continue;
            };
            found = true;
            if let Err(why) = scan.scope.admits(&owner.as_ownership()) {
                return Ok(Err(Refusal::new(
                    BlockedReason::NotDeletable,
                    format!("session {session_id} is outside the request's scope: {why}"),
                )));
            }
        }
        if !found {
            return Ok(Err(Refusal::new(
                BlockedReason::NotDeletable,
                format!("there is no session {session_id} in this database"),
            )));
        }
        return Ok(Ok(Sessions::One(session_id.to_string())));
    }
    if scan.scope.is_unscoped() {
        return Ok(Ok(Sessions::All));
    }
    Ok(Ok(Sessions::Scoped {
        scope: scan.scope,
        tables,
    }))
}

/// Reads one row of the scan. A row that cannot be read is returned with why.
fn read_row(
    conn: &Connection,
    schema: &Schema,
    position: &Position,
) -> rusqlite::Result<ScannedMessage> {
    let id = position.message_id.as_str();
    let session_id = position.session_id.as_str();
    let (role, read) = if position.generation == 1 {
        match read::read_message(conn, session_id, id, read::Texts::Skip)? {
            Ok(loaded) => (
                loaded.role,
                Ok(ScannedContent {
                    message: loaded.message,
                    body_text: None,
                }),
            ),
            Err(refusal) => (String::new(), Err(refusal.detail)),
        }
    } else {
        match v2::load_row(conn, session_id, id)? {
            None => (String::new(), Err(format!("V2 message {id} is gone"))),
            Some((kind, v2::RowData::OverBudget)) => (
                kind,
                Err(format!(
                    "V2 message {id} is over the {MAX_MESSAGE_BYTES}-byte budget"
                )),
            ),
            Some((kind, v2::RowData::NotText)) => (
                kind,
                Err(format!("V2 message {id} does not hold UTF-8 text")),
            ),
            Some((kind, v2::RowData::Text(data))) => {
                let read = v2::parse(&kind, &data)
                    .map(|parsed| ScannedContent {
                        message: parsed.message,
                        body_text: parsed.body_text,
                    })
                    .map_err(|why| format!("V2 message {id} {why}"));
                (kind, read)
            }
        }
    };
    let in_v2 = Generation::of(conn, schema, session_id, id)? == Generation::V2;
    Ok(ScannedMessage {
        position: position.clone(),
        session_id: session_id.to_string(),
        role,
        read,
        addressable: in_v2 == (position.generation == 2),
    })
}
