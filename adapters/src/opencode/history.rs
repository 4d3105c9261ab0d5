//! History scans over both generations: the rows of the sessions in scope, V1 `message` and V2
//! `session_message` merged in one order (`time_created`, id, generation), read one at a time.
//!
//! Source: docs/ARCHITECTURE.md, "Contract", and CodeNomad's `history.test.ts`, and the engine's
//! [`pruning_engine::history()`]. A scan
//! is one read transaction. Keyset paging on the position (never `OFFSET`) keeps a cursor on the
//! same row whatever is appended; the horizon bounds the scan to the rows that existed when its
//! first page ran.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::history::{
    HistoryScan, Position, ScanEnd, ScannedContent, ScannedMessage, UNTIMED,
};
use pruning_engine::{BlockedReason, Refusal};
use rusqlite::Connection;

use super::generation::Generation;
use super::ownership::{self, SessionTable};
use super::schema::Schema;
use super::v1::read;
use super::v2;
use super::values::lenient_text;

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
        let row = read_row(conn, &schema, position, session_id)?;
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
    // A session id held by both session tables (an upgrade) is in scope only when every row of
    // it is: each generation's messages belong to its own row.
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
        return Ok(Ok(Sessions::Only(
            serde_json::json!([session_id]).to_string(),
        )));
    }
    if scan.scope.is_unscoped() {
        return Ok(Ok(Sessions::All));
    }
    let mut admitted: BTreeMap<String, bool> = BTreeMap::new();
    for table in tables {
        for (id, owner) in ownership::all(conn, table)? {
            let inside = scan.scope.admits(&owner.as_ownership()).is_ok();
            *admitted.entry(id).or_insert(true) &= inside;
        }
    }
    let ids: Vec<String> = admitted
        .into_iter()
        .filter_map(|(id, inside)| inside.then_some(id))
        .collect();
    Ok(Ok(Sessions::Only(serde_json::Value::from(ids).to_string())))
}

/// One generation's message table in the scan.
#[derive(Debug, Clone, Copy)]
struct Table {
    /// `message` or `session_message`.
    name: &'static str,
    /// 1 or 2 (see [`Position::generation`]).
    generation: u8,
}

/// The ordered rows of the sessions in scope, over both generations. Each table is read in
/// index order (`time_created`, id) and the tables are merged here, so a page costs two short
/// range scans however large the database is. Rows whose `time_created` is not an integer come
/// last, by id, at [`UNTIMED`].
struct RowQuery {
    tables: Vec<Table>,
    /// The session filter's JSON array, when there is one.
    sessions: Option<String>,
}

/// Rows with an integer time below [`UNTIMED`]; the others are "untimed".
const TIMED: &str = "typeof(time_created) = 'integer' AND time_created < 9223372036854775807";
/// Rows whose id a cursor and a request can name (short UTF-8 text); the others are not
/// scanned: paging on a converted id would not move past them.
const NAMED: &str = "session_prune_is_id(id)";

impl RowQuery {
    fn new(schema: &Schema, sessions: &Sessions) -> Self {
        let mut tables = Vec::new();
        if schema.has_v1() {
            tables.push(Table {
                name: "message",
                generation: 1,
            });
        }
        if schema.has_v2() {
            tables.push(Table {
                name: "session_message",
                generation: 2,
            });
        }
        Self {
            tables,
            sessions: match sessions {
                Sessions::All => None,
                Sessions::Only(ids) => Some(ids.clone()),
            },
        }
    }

    fn filter(&self) -> &'static str {
        match self.sessions {
            None => NAMED,
            Some(_) => {
                "session_prune_is_id(id) AND session_id IN (SELECT value FROM json_each(:sessions))"
            }
        }
    }

    /// The last row in scan order now.
    fn last(&self, conn: &Connection) -> rusqlite::Result<Option<Position>> {
        let mut last: Option<Position> = None;
        for table in &self.tables {
            let untimed = format!(
                "SELECT 0, id, '' FROM {} WHERE NOT ({TIMED}) AND {} ORDER BY id DESC LIMIT 1",
                table.name,
                self.filter()
            );
            let timed = format!(
                "SELECT time_created, id, '' FROM {} WHERE {TIMED} AND {} \
                 ORDER BY time_created DESC, id DESC LIMIT 1",
                table.name,
                self.filter()
            );
            let found = match self.query(conn, &untimed, &[])?.pop() {
                Some((_, id, _)) => Some(Position {
                    time_created: UNTIMED,
                    message_id: id,
                    generation: table.generation,
                }),
                None => {
                    self.query(conn, &timed, &[])?
                        .pop()
                        .map(|(time_created, message_id, _)| Position {
                            time_created,
                            message_id,
                            generation: table.generation,
                        })
                }
            };
            last = last.max(found);
        }
        Ok(last)
    }

    /// Up to `limit` rows after `after` and up to `horizon`, in scan order, with their sessions.
    fn page(
        &self,
        conn: &Connection,
        after: Option<&Position>,
        horizon: &Position,
        limit: usize,
    ) -> rusqlite::Result<Vec<(Position, String)>> {
        let mut rows = Vec::new();
        for table in &self.tables {
            rows.extend(self.table_page(conn, *table, after, horizon, limit)?);
        }
        rows.sort();
        rows.truncate(limit);
        Ok(rows)
    }

    /// One table's first `limit` rows after `after` and up to `horizon`.
    fn table_page(
        &self,
        conn: &Connection,
        table: Table,
        after: Option<&Position>,
        horizon: &Position,
        limit: usize,
    ) -> rusqlite::Result<Vec<(Position, String)>> {
        let g = table.generation;
        // Within one (time, id), the lower generation comes first: a row of this table is
        // after `after` when its (time, id) is greater, or equal with a greater generation.
        let lower_op = |a: &Position| if g > a.generation { ">=" } else { ">" };
        let upper_op = if g <= horizon.generation { "<=" } else { "<" };
        let lim = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut found = Vec::new();
        let timed_started = after.is_none_or(|a| a.time_created < UNTIMED);
        if timed_started {
            let mut conditions = vec![TIMED.to_string(), self.filter().to_string()];
            let mut binds: Vec<(&str, rusqlite::types::Value)> = Vec::new();
            if let Some(a) = after {
                conditions.push(format!("(time_created, id) {} (:at, :aid)", lower_op(a)));
                binds.push((":at", a.time_created.into()));
                binds.push((":aid", a.message_id.clone().into()));
            }
            if horizon.time_created < UNTIMED {
                conditions.push(format!("(time_created, id) {upper_op} (:ht, :hid)"));
                binds.push((":ht", horizon.time_created.into()));
                binds.push((":hid", horizon.message_id.clone().into()));
            }
            binds.push((":lim", lim.into()));
            let sql = format!(
                "SELECT time_created, id, session_id FROM {} WHERE {} \
                 ORDER BY time_created, id LIMIT :lim",
                table.name,
                conditions.join(" AND ")
            );
            for (time_created, message_id, session_id) in self.query(conn, &sql, &binds)? {
                found.push((
                    Position {
                        time_created,
                        message_id,
                        generation: g,
                    },
                    session_id,
                ));
            }
        }
        if found.len() < limit && horizon.time_created == UNTIMED {
            let mut conditions = vec![format!("NOT ({TIMED})"), self.filter().to_string()];
            let mut binds: Vec<(&str, rusqlite::types::Value)> = Vec::new();
            if let Some(a) = after.filter(|a| a.time_created == UNTIMED) {
                conditions.push(format!("id {} :aid", lower_op(a)));
                binds.push((":aid", a.message_id.clone().into()));
            }
            conditions.push(format!("id {upper_op} :hid"));
            binds.push((":hid", horizon.message_id.clone().into()));
            binds.push((":lim", lim.into()));
            let sql = format!(
                "SELECT 0, id, session_id FROM {} WHERE {} ORDER BY id LIMIT :lim",
                table.name,
                conditions.join(" AND ")
            );
            for (_, message_id, session_id) in self.query(conn, &sql, &binds)? {
                found.push((
                    Position {
                        time_created: UNTIMED,
                        message_id,
                        generation: g,
                    },
                    session_id,
                ));
            }
        }
        Ok(found)
    }

    /// Runs `sql` with the session filter and `binds`; rows are `(time, id, session id)`, ids
    /// read leniently (a damaged id still has a place in the order).
    fn query(
        &self,
        conn: &Connection,
        sql: &str,
        binds: &[(&str, rusqlite::types::Value)],
    ) -> rusqlite::Result<Vec<(i64, String, String)>> {
        let mut stmt = conn.prepare_cached(sql)?;
        for (name, value) in binds {
            if let Some(index) = stmt.parameter_index(name)? {
                stmt.raw_bind_parameter(index, value)?;
            }
        }
        if let Some(ids) = &self.sessions {
            if let Some(index) = stmt.parameter_index(":sessions")? {
                stmt.raw_bind_parameter(index, ids)?;
            }
        }
        let mut rows = stmt.raw_query();
        let mut found = Vec::new();
        while let Some(row) = rows.next()? {
            found.push((
                row.get(0)?,
                lenient_text(row.get_ref(1)?),
                lenient_text(row.get_ref(2)?),
            ));
        }
        Ok(found)
    }
}

/// Reads one row of the scan. A row that cannot be read is returned with why.
fn read_row(
    conn: &Connection,
    schema: &Schema,
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
