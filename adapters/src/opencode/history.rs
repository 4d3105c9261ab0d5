//! History scans over both generations: the rows of the sessions in scope, V1 `message` and V2
//! `session_message` merged in one order (`time_created`, generation, id), read one at a time.
//!
//! Source: codenomad-pruning.md §2 and §8, and the engine's [`pruning_engine::history`]. A scan
//! is one read transaction. Keyset paging on the position (never `OFFSET`) keeps a cursor on the
//! same row whatever is appended; the horizon bounds the scan to the rows that existed when its
//! first page ran.

use std::ops::ControlFlow;

use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::history::{HistoryScan, Position, ScanEnd, ScannedContent, ScannedMessage};
use pruning_engine::{BlockedReason, Refusal};
use rusqlite::{params, Connection};

use super::ownership::{self, SessionTable};
use super::schema::Schema;
use super::v1::read;
use super::v2;

/// Which sessions a scan covers.
enum Sessions {
    /// Every row, whatever its session.
    All,
    /// These sessions (a JSON array of ids, bound to `json_each`).
    Only(String),
}

/// Runs `scan` on `conn` inside a read transaction; see [`pruning_engine::SessionStore::scan_history`].
pub fn scan(
    conn: &Connection,
    scan: &HistoryScan<'_>,
    visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
) -> rusqlite::Result<Result<ScanEnd, Refusal>> {
    conn.execute_batch("BEGIN")?;
    let result = run(conn, scan, visit);
    let _ = conn.execute_batch("COMMIT");
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
    let sessions = match sessions_in_scope(conn, &schema, scan)? {
        Ok(sessions) => sessions,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let rows = RowQuery::new(&schema, &sessions);
    let horizon = match scan.horizon {
        Some(horizon) => horizon.clone(),
        None => match rows.last(conn)? {
            Some(last) => last,
            None => {
                return Ok(Ok(ScanEnd {
                    horizon: None,
                    exhausted: true,
                }))
            }
        },
    };
    // One row more than the page takes tells whether the scan goes on.
    let positions = rows.page(conn, scan.after, &horizon, scan.limit + 1)?;
    let mut visited = 0;
    for (position, session_id) in positions.iter().take(scan.limit) {
        let row = read_row(conn, position, session_id)?;
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

/// The named session (checked against the scope), or every session the scope admits.
fn sessions_in_scope(
    conn: &Connection,
    schema: &Schema,
    scan: &HistoryScan<'_>,
) -> rusqlite::Result<Result<Sessions, Refusal>> {
    let tables: Vec<SessionTable> = [SessionTable::Shared, SessionTable::V2]
        .into_iter()
        .filter(|table| schema.has(table.name()))
        .collect();
    if let Some(session_id) = scan.session_id {
        let mut owner = None;
        for table in &tables {
            owner = ownership::read(conn, *table, session_id)?;
            if owner.is_some() {
                break;
            }
        }
        let Some(owner) = owner else {
            return Ok(Err(Refusal::new(
                BlockedReason::NotDeletable,
                format!("there is no session {session_id} in this database"),
            )));
        };
        if let Err(why) = scan.scope.admits(&owner.as_ownership()) {
            return Ok(Err(Refusal::new(
                BlockedReason::NotDeletable,
                format!("session {session_id} is outside the request's scope: {why}"),
            )));
        }
        return Ok(Ok(Sessions::Only(
            serde_json::json!([session_id]).to_string(),
        )));
    }
    if scan.scope.is_unscoped() {
        return Ok(Ok(Sessions::All));
    }
    let mut ids = Vec::new();
    for table in tables {
        let workspace = ownership::workspace_column(conn, table)?;
        let sql = format!(
            "SELECT id, directory, project_id, {workspace} FROM {}",
            table.name()
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let owner = ownership::Owner {
                directory: row.get(1)?,
                project_id: row.get(2)?,
                workspace_id: row.get(3)?,
            };
            if scan.scope.admits(&owner.as_ownership()).is_ok() {
                ids.push(row.get::<_, String>(0)?);
            }
        }
    }
    Ok(Ok(Sessions::Only(serde_json::Value::from(ids).to_string())))
}

/// The merged, ordered row set of the sessions in scope.
struct RowQuery {
    /// `SELECT t, g, id, sid` over both generations, filtered to the sessions.
    union: String,
    /// The session filter's JSON array, when there is one.
    sessions: Option<String>,
}

impl RowQuery {
    fn new(schema: &Schema, sessions: &Sessions) -> Self {
        let filter = match sessions {
            Sessions::All => "1",
            Sessions::Only(_) => "session_id IN (SELECT value FROM json_each(?1))",
        };
        let mut selects = Vec::new();
        if schema.has_v1() {
            selects.push(format!(
                "SELECT CAST(coalesce(time_created, 0) AS INTEGER) AS t, 1 AS g, id, session_id AS sid \
                 FROM message WHERE {filter}"
            ));
        }
        if schema.has_v2() {
            selects.push(format!(
                "SELECT CAST(coalesce(time_created, 0) AS INTEGER) AS t, 2 AS g, id, session_id AS sid \
                 FROM session_message WHERE {filter}"
            ));
        }
        Self {
            union: selects.join(" UNION ALL "),
            sessions: match sessions {
                Sessions::All => None,
                Sessions::Only(ids) => Some(ids.clone()),
            },
        }
    }

    /// The last row in scan order now.
    fn last(&self, conn: &Connection) -> rusqlite::Result<Option<Position>> {
        let sql = format!(
            "SELECT t, g, id FROM ({}) ORDER BY t DESC, g DESC, id DESC LIMIT 1",
            self.union
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = match &self.sessions {
            Some(ids) => stmt.query([ids])?,
            None => stmt.query([])?,
        };
        rows.next()?.map(position).transpose()
    }

    /// Up to `limit` rows after `after` and up to `horizon`, with their sessions.
    fn page(
        &self,
        conn: &Connection,
        after: Option<&Position>,
        horizon: &Position,
        limit: usize,
    ) -> rusqlite::Result<Vec<(Position, String)>> {
        let start = after.cloned().unwrap_or(Position {
            time_created: i64::MIN,
            generation: 0,
            message_id: String::new(),
        });
        let sql = format!(
            "SELECT t, g, id, sid FROM ({}) \
             WHERE (t, g, id) > (?2, ?3, ?4) AND (t, g, id) <= (?5, ?6, ?7) \
             ORDER BY t, g, id LIMIT ?8",
            self.union
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query(params![
            self.sessions.as_deref().unwrap_or("[]"),
            start.time_created,
            start.generation,
            start.message_id,
            horizon.time_created,
            horizon.generation,
            horizon.message_id,
            i64::try_from(limit).unwrap_or(i64::MAX),
        ])?;
        let mut found = Vec::new();
        while let Some(row) = rows.next()? {
            found.push((position(row)?, row.get(3)?));
        }
        Ok(found)
    }
}

fn position(row: &rusqlite::Row<'_>) -> rusqlite::Result<Position> {
    Ok(Position {
        time_created: row.get(0)?,
        generation: row.get(1)?,
        message_id: row.get(2)?,
    })
}

/// Reads one row of the scan. A row that cannot be read is returned with why.
fn read_row(
    conn: &Connection,
    position: &Position,
    session_id: &str,
) -> rusqlite::Result<ScannedMessage> {
    let id = position.message_id.as_str();
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
            Some((kind, None)) => (
                kind,
                Err(format!(
                    "V2 message {id} is over the {MAX_MESSAGE_BYTES}-byte budget"
                )),
            ),
            Some((kind, Some(data))) => {
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
    Ok(ScannedMessage {
        position: position.clone(),
        session_id: session_id.to_string(),
        role,
        read,
    })
}
