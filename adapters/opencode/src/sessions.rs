//! The session and message listings with sizes, over both generations: where the bytes are.
//!
//! Sessions come from `session` (V1, and OpenCode 1.18's V2 sessions) and `session_v2`
//! (opencode2). Sizes are bytes of the `data` columns as stored: V1 `message` and `part` rows,
//! V2 `session_message` rows, and the session's `event` rows (`aggregate_id` is the session id).
//! Prunable bytes are what pruning every technical part would free: V1 tool and reasoning
//! `part` rows and their `message.part.updated.1` snapshots, and the tool and reasoning entries
//! of V2 `content` arrays (measured as SQLite's minified JSON of each entry).

use std::collections::HashMap;

use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde::Serialize;

use super::json_sql;
use super::ownership::SessionTable;
use super::row_budget;
use super::schema::Schema;
use super::values::lenient_text;

/// One session and its sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSummary {
    /// The session id.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// Its title (empty when NULL).
    pub title: String,
    /// Its directory.
    pub directory: String,
    /// Its project (`project_id`).
    #[serde(rename = "projectID")]
    pub project_id: String,
    /// Its workspace (`workspace_id`; `null` when it has none or the table has no such column).
    #[serde(rename = "workspaceID")]
    pub workspace_id: Option<String>,
    /// Number of messages: V1 `message` rows plus V2 `session_message` rows (of a session
    /// OpenCode 2 migrated, its V1 rows with no OpenCode 2 copy and its `session_message` rows).
    pub messages: u64,
    /// Bytes of message, part, session_message and event data of the session.
    #[serde(rename = "totalBytes")]
    pub total_bytes: u64,
    /// Bytes of tool and reasoning content and of V1 snapshot events of it (of a session
    /// OpenCode 2 migrated, of its OpenCode 2 rows alone).
    #[serde(rename = "prunableBytes")]
    pub prunable_bytes: u64,
    /// `time_updated`, ms since the Unix epoch.
    #[serde(rename = "timeUpdated")]
    pub time_updated: i64,
    /// `time_created`, ms since the Unix epoch.
    #[serde(rename = "timeCreated")]
    pub time_created: i64,
    /// Where its messages are: `v2` (`session_message` rows, or a session of opencode2's
    /// `session_v2`), `v1` (`message` + `part`), or `v1+v2` (rows in both generations).
    pub storage: &'static str,
    /// Of `totalBytes`, the V1 `message` and `part` data.
    #[serde(rename = "v1Bytes")]
    pub v1_bytes: u64,
    /// Of `totalBytes`, the V2 `session_message` data.
    #[serde(rename = "v2Bytes")]
    pub v2_bytes: u64,
    /// Of `v1Bytes`, the V1 rows of a session OpenCode 2 migrated: a copy it does not read
    /// (`clean --migrated-v1` removes it). 0 for every other session.
    #[serde(rename = "migratedV1Bytes")]
    pub migrated_v1_bytes: u64,
    /// Whether `prunableBytes` is estimated from a sample of the session's rows (an estimated
    /// overview's largest sessions beyond its read budget), not read from every row.
    #[serde(rename = "prunableEstimated")]
    pub prunable_estimated: bool,
}

/// `data` of V2 row `sm` (bounded by the row budget) when it is valid JSON, else `{}`:
/// `json_extract` fails on malformed text, and one malformed row must not hide the rest.
fn v2_data() -> String {
    let data = row_budget::data("sm", "session_message");
    format!("CASE WHEN json_valid({data}) THEN {data} ELSE '{{}}' END")
}

/// 1 when part row `p` (bounded by the row budget) is a tool or reasoning part.
fn technical_part() -> String {
    let data = row_budget::data("p", "part");
    format!("CASE WHEN json_valid({data}) THEN json_extract({data}, '$.type') END IN ('tool', 'reasoning')")
}

/// Every session of both tables, largest total first (ties: most recently updated first, then
/// by id).
pub fn list(conn: &Connection) -> rusqlite::Result<Vec<SessionSummary>> {
    let mut sessions = list_of(conn, None)?;
    sessions.sort_by(largest_first);
    Ok(sessions)
}

/// The order of [`list`].
fn largest_first(a: &SessionSummary, b: &SessionSummary) -> std::cmp::Ordering {
    b.total_bytes
        .cmp(&a.total_bytes)
        .then(b.time_updated.cmp(&a.time_updated))
        .then_with(|| a.session_id.cmp(&b.session_id))
}

/// The first `top` sessions of [`list`] that `admit` takes, the same as `list` would give, but
/// read without the prunable bytes of the others: every session is ranked by `totals` (read
/// in the same snapshot), and only the chosen sessions' rows are read for their figures.
///
/// Where `totals` holds estimates of the prunable bytes (an estimated overview), the chosen
/// sessions are read for them smallest first while their bytes add up to at most
/// `read_budget`; the larger ones take the estimate (`prunable_estimated`). Without estimates,
/// every chosen session is read.
///
/// Errors: SQLite's.
pub fn largest(
    conn: &Connection,
    top: usize,
    admit: &dyn Fn(&SessionSummary) -> bool,
    totals: &SessionTotals,
    read_budget: u64,
) -> rusqlite::Result<Vec<SessionSummary>> {
    let mut sized = list_with(conn, None, Figures::Owners)?;
    for session in &mut sized {
        session.total_bytes = totals.total(&session.session_id);
    }
    sized.sort_by(largest_first);
    let mut chosen: Vec<SessionSummary> =
        sized.into_iter().filter(|s| admit(s)).take(top).collect();
    let (mut read, mut estimated) = (Vec::new(), Vec::new());
    let mut spent = 0u64;
    chosen.sort_by_key(|s| s.total_bytes);
    for session in chosen {
        let within = spent.saturating_add(session.total_bytes) <= read_budget;
        if within || !totals.prunable.contains_key(&session.session_id) {
            spent = spent.saturating_add(session.total_bytes);
            read.push(session.session_id);
        } else {
            estimated.push(session.session_id);
        }
    }
    let mut sessions = list_of(conn, Some(&read))?;
    if !estimated.is_empty() {
        // Their sizes are the totals' (the same sums); only their counts are read.
        for mut session in list_with(conn, Some(&estimated), Figures::Counts)? {
            let [message, part, session_message, _] = totals
                .bytes
                .get(&session.session_id)
                .copied()
                .unwrap_or_default();
            session.total_bytes = totals.total(&session.session_id);
            session.v1_bytes = message + part;
            session.v2_bytes = session_message;
            session.prunable_bytes = totals.prunable[&session.session_id];
            session.prunable_estimated = true;
            sessions.push(session);
        }
    }
    sessions.sort_by(largest_first);
    Ok(sessions)
}

/// Each session's total bytes as [`SessionSummary::total_bytes`] counts them, by session id:
/// its `message`, `part` and `session_message` rows by `session_id`, its `event` rows by
/// `aggregate_id`, summed from the rows' sizes handed to [`Self::add`]; and, from an estimated
/// overview, each session's prunable bytes estimated from its sampled rows.
#[derive(Debug, Default)]
pub struct SessionTotals {
    /// Per session, its bytes in each of [`TOTALLED`].
    bytes: HashMap<String, [u64; 4]>,
    prunable: HashMap<String, u64>,
}

/// The tables whose rows count in a session's total, in the order of `SessionTotals::bytes`.
const TOTALLED: [&str; 4] = ["message", "part", "session_message", "event"];

impl SessionTotals {
    /// The column of `table` that names the session its rows count for, when they count in a
    /// session's total in a database of `schema` (as [`list`] sums them).
    pub(crate) fn session_column(schema: &Schema, table: &str) -> Option<&'static str> {
        let v1 = schema.has("message") && schema.has("part");
        match table {
            "message" | "part" if v1 => Some("session_id"),
            "session_message" if schema.has_v2() => Some("session_id"),
            "event" if schema.has_events() => Some("aggregate_id"),
            _ => None,
        }
    }

    /// The session id a row's session column names, as SQL's `= s.id` matches it against the
    /// session tables' text ids: text as it reads ([`lenient_text`]), a whole number as its
    /// digits (the text affinity of `s.id` applies to it); `None` for anything else (NULL, a
    /// blob, a real), which matches no session.
    pub(crate) fn key(session: ValueRef<'_>) -> Option<String> {
        match session {
            ValueRef::Text(_) => Some(lenient_text(session)),
            ValueRef::Integer(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// Adds `bytes` of a row of `table` to the total of the session `session` names.
    pub(crate) fn add(&mut self, table: &str, session: ValueRef<'_>, bytes: u64) {
        let Some(at) = TOTALLED.iter().position(|t| *t == table) else {
            return;
        };
        let known = match session {
            ValueRef::Text(text) => std::str::from_utf8(text)
                .ok()
                .and_then(|id| self.bytes.get_mut(id)),
            _ => None,
        };
        let totals = match known {
            Some(totals) => totals,
            None => match Self::key(session) {
                Some(id) => self.bytes.entry(id).or_default(),
                None => return,
            },
        };
        totals[at] += bytes;
    }

    /// The total bytes of session `id`.
    fn total(&self, id: &str) -> u64 {
        self.bytes.get(id).map_or(0, |t| t.iter().sum())
    }

    /// Sets the estimate of session `session`'s prunable bytes.
    pub(crate) fn estimate_prunable(&mut self, session: String, bytes: u64) {
        self.prunable.insert(session, bytes);
    }

    /// Reads them: one pass over each table's record headers (`octet_length` reads no value).
    ///
    /// Errors: SQLite's.
    pub fn read(conn: &Connection) -> rusqlite::Result<Self> {
        let schema = Schema::read(conn)?;
        let mut totals = Self::default();
        for table in TOTALLED {
            let Some(column) = Self::session_column(&schema, table) else {
                continue;
            };
            let mut stmt =
                conn.prepare(&format!("SELECT {column}, octet_length(data) FROM {table}"))?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let bytes = match row.get_ref(1)? {
                    ValueRef::Integer(n) => n.max(0) as u64,
                    _ => 0,
                };
                totals.add(table, row.get_ref(0)?, bytes);
            }
        }
        Ok(totals)
    }
}

/// What a listing reads of each session: every figure, its counts (its sizes 0), or only what
/// names it and its owner (its counts and sizes 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Figures {
    All,
    Counts,
    Owners,
}

/// The sessions of both tables with the ids in `only` (every session for `None`), in no
/// particular order.
pub fn list_of(
    conn: &Connection,
    only: Option<&[String]>,
) -> rusqlite::Result<Vec<SessionSummary>> {
    list_with(conn, only, Figures::All)
}

/// [`list_of`], with every figure or only the owners.
fn list_with(
    conn: &Connection,
    only: Option<&[String]>,
    figures: Figures,
) -> rusqlite::Result<Vec<SessionSummary>> {
    let schema = Schema::read(conn)?;
    let zero = "0".to_string();
    let v1 = schema.has("message") && schema.has("part");
    let count = |present: bool, sql: String| {
        if present && figures != Figures::Owners {
            sql
        } else {
            zero.clone()
        }
    };
    let pick = |present: bool, sql: String| {
        if present && figures == Figures::All {
            sql
        } else {
            zero.clone()
        }
    };
    let migrated = super::migrated::possible(&schema);
    let copied = if migrated {
        format!("AND NOT {}", super::migrated::copied("m"))
    } else {
        String::new()
    };
    // Of a migrated session (listed from `session_v2`), the V1 rows count as its messages only
    // where OpenCode 2 holds no copy of them.
    let v1_messages = count(
        v1,
        "(SELECT count(*) FROM message m WHERE m.session_id = s.id COPIED)".into(),
    );
    let v1_bytes_sql: String =
        "(SELECT coalesce(sum(octet_length(m.data)), 0) FROM message m WHERE m.session_id = s.id) \
         + (SELECT coalesce(sum(octet_length(p.data)), 0) FROM part p WHERE p.session_id = s.id)"
            .into();
    let v1_bytes = pick(v1, v1_bytes_sql.clone());
    // Read for the counts too: an estimated listing takes its sizes from elsewhere, but not
    // which of them are a migrated copy.
    let migrated_v1_bytes = count(v1, v1_bytes_sql);
    let v1_prunable = pick(
        v1,
        format!(
            "(SELECT coalesce(sum(octet_length(p.data)), 0) FROM part p WHERE p.session_id = s.id \
               AND {} AND NOT MIGRATED)",
            technical_part()
        ),
    );
    let events = schema.has_events();
    let event_bytes = pick(
        events,
        "(SELECT coalesce(sum(octet_length(e.data)), 0) FROM event e WHERE e.aggregate_id = s.id)"
            .into(),
    );
    let event = row_budget::data("e", "event");
    let event_prunable = pick(
        events,
        format!(
            "(SELECT coalesce(sum(octet_length(e.data)), 0) FROM event e \
               WHERE e.aggregate_id = s.id AND e.type = 'message.part.updated.1' \
                 AND CASE WHEN json_valid({event}) THEN json_extract({event}, '$.part.type') END \
                     IN ('tool', 'reasoning'))"
        ),
    );
    let v2 = schema.has_v2();
    let v2_messages = count(
        v2,
        "(SELECT count(*) FROM session_message sm WHERE sm.session_id = s.id)".into(),
    );
    let v2_bytes = pick(
        v2,
        "(SELECT coalesce(sum(octet_length(sm.data)), 0) FROM session_message sm WHERE sm.session_id = s.id)"
            .into(),
    );
    let bounded_v2 = row_budget::data("sm", "session_message");
    let v2_prunable = pick(
        v2,
        format!(
            "(SELECT coalesce(sum({}), 0) \
               FROM session_message sm, {} \
              WHERE sm.session_id = s.id AND j.type = 'object' AND {} IN ('tool', 'reasoning')) \
             + (SELECT coalesce(sum(octet_length(json_extract({}, '$.output.output'))), 0) \
                  FROM session_message sm WHERE sm.session_id = s.id AND sm.type = 'shell' \
                   AND json_type({}, '$.output.output') = 'text')",
            row_budget::uncut_bytes("sm", &json_sql::entry_text("j")),
            json_sql::entries(&bounded_v2, "$.content", "j"),
            json_sql::entry_field("j", "$.type"),
            v2_data(),
            v2_data()
        ),
    );
    let (where_only, only_param) = match only {
        Some(ids) => (
            "WHERE s.id IN (SELECT value FROM json_each(?1))",
            vec![serde_json::to_string(ids).unwrap_or_else(|_| "[]".into())],
        ),
        None => ("", Vec::new()),
    };
    let mut sessions = Vec::new();
    // A session in both tables is listed once: from `session_v2` where OpenCode 2 migrated it
    // (the row OpenCode 2 reads), else from the shared table; each sum above covers both
    // generations by session id already.
    let (in_v2, in_shared) = (
        schema.has("session_v2"),
        schema.has(SessionTable::Shared.name()),
    );
    let not_in = |other: &str| match only.is_some() {
        true => format!("AND s.id NOT IN (SELECT id FROM {other})"),
        false => format!("WHERE s.id NOT IN (SELECT id FROM {other})"),
    };
    for table in [SessionTable::Shared, SessionTable::V2] {
        if !schema.has(table.name()) {
            continue;
        }
        let once = match table {
            SessionTable::Shared if in_v2 && migrated => not_in("session_v2"),
            SessionTable::V2 if in_shared && !migrated => not_in("session"),
            _ => String::new(),
        };
        // The session's V1 rows are a copy OpenCode 2 does not read.
        let is_migrated = if table == SessionTable::V2 && migrated {
            "s.id IN (SELECT id FROM session)"
        } else {
            "0"
        };
        let v1_messages = v1_messages.replace(
            "COPIED",
            if is_migrated == "0" {
                ""
            } else {
                copied.as_str()
            },
        );
        let v1_prunable = v1_prunable.replace("MIGRATED", is_migrated);
        let workspace = super::ownership::workspace_column(conn, table)?;
        let sql = format!(
            "SELECT s.id, CAST(coalesce(s.title, '') AS TEXT), CAST(coalesce(s.directory, '') AS TEXT),
               CAST(coalesce(s.time_updated, 0) AS INTEGER),
               {v1_messages} + {v2_messages},
               {v1_bytes} + {v2_bytes} + {event_bytes},
               {v1_prunable} + {v2_prunable} + (CASE WHEN {is_migrated} THEN 0 ELSE {event_prunable} END),
               CAST(coalesce(s.project_id, '') AS TEXT), CAST({workspace} AS TEXT),
               CAST(coalesce(s.time_created, 0) AS INTEGER), {v2_messages} > 0,
               {v1_bytes}, {v2_bytes}, {v1_messages} > 0,
               CASE WHEN {is_migrated} THEN {migrated_v1_bytes} ELSE 0 END
             FROM {} s {where_only} {once}",
            table.name()
        );
        let in_v2_table = table == SessionTable::V2;
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(&only_param), |row| {
            let n = |i: usize| -> rusqlite::Result<u64> {
                Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
            };
            Ok(SessionSummary {
                session_id: lenient_text(row.get_ref(0)?),
                title: lenient_text(row.get_ref(1)?),
                directory: lenient_text(row.get_ref(2)?),
                time_updated: row.get(3)?,
                messages: n(4)?,
                total_bytes: n(5)?,
                prunable_bytes: n(6)?,
                project_id: lenient_text(row.get_ref(7)?),
                workspace_id: match row.get_ref(8)? {
                    rusqlite::types::ValueRef::Null => None,
                    value => Some(lenient_text(value)),
                },
                time_created: row.get(9)?,
                storage: match (
                    row.get::<_, bool>(13)?,
                    in_v2_table || row.get::<_, bool>(10)?,
                ) {
                    (true, true) => "v1+v2",
                    (false, true) => "v2",
                    (_, false) => "v1",
                },
                v1_bytes: n(11)?,
                v2_bytes: n(12)?,
                migrated_v1_bytes: n(14)?,
                prunable_estimated: false,
            })
        })?;
        for row in rows {
            sessions.push(row?);
        }
    }
    Ok(sessions)
}

/// Whether a session exists in either table.
pub fn exists(conn: &Connection, session_id: &str) -> rusqlite::Result<bool> {
    let schema = Schema::read(conn)?;
    for table in [SessionTable::Shared, SessionTable::V2] {
        if schema.has(table.name()) {
            let sql = format!("SELECT count(*) > 0 FROM {} WHERE id = ?1", table.name());
            if conn.query_row(&sql, [session_id], |row| row.get::<_, bool>(0))? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// One message of a session, with its technical parts counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageSummary {
    /// The message id.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// V1 `role` of `message.data` (`user`, `assistant`), or the V2 row `type`.
    pub role: String,
    /// Whether `time.completed` is a number > 0 (assistant messages; user messages are never
    /// complete in this sense).
    pub completed: bool,
    /// `time_created`, ms since the Unix epoch.
    #[serde(rename = "timeCreated")]
    pub time_created: i64,
    /// Number of parts (V2: entries of `content`).
    pub parts: u64,
    /// Number of tool and reasoning parts.
    #[serde(rename = "technicalParts")]
    pub technical_parts: u64,
    /// Their bytes (V1 `part.data`; V2 each entry's minified JSON).
    #[serde(rename = "technicalBytes")]
    pub technical_bytes: u64,
    /// `v1` (`message` + `part`) or `v2` (`session_message`).
    pub storage: &'static str,
}

const COMPLETED: &str = "coalesce(json_type(DATA, '$.time.completed') IN ('integer', 'real') \
                         AND json_extract(DATA, '$.time.completed') > 0, 0)";

/// Every message of a session in both generations, oldest first (by `time_created`, then id:
/// ids wrapped on 2026-08-14 and do not sort by time). A V1 message OpenCode 2 holds a copy of
/// (`super::migrated`) is listed once, as that copy.
pub fn messages(conn: &Connection, session_id: &str) -> rusqlite::Result<Vec<MessageSummary>> {
    let schema = Schema::read(conn)?;
    let mut list = Vec::new();
    if schema.has("message") && schema.has("part") {
        // One subquery per count, never a join grouped by message: a grouping sorts its rows
        // with every column they name, `data` included, whole.
        let message = row_budget::data("m", "message");
        let technical = technical_part();
        // A V1 message OpenCode 2 holds a copy of is listed once, as that copy.
        let copy = if super::migrated::possible(&schema) {
            format!(
                "AND NOT ({} AND {})",
                super::migrated::in_migrated_session(&schema, "m.session_id"),
                super::migrated::copied("m")
            )
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT m.id,
                CAST(CASE WHEN json_valid({message}) THEN coalesce(json_extract({message}, '$.role'), '') ELSE '' END AS TEXT),
                CASE WHEN json_valid({message}) THEN {} ELSE 0 END,
                CAST(coalesce(m.time_created, 0) AS INTEGER),
                (SELECT count(*) FROM part p WHERE p.message_id = m.id),
                (SELECT coalesce(sum({technical}), 0) FROM part p WHERE p.message_id = m.id),
                (SELECT coalesce(sum(CASE WHEN {technical} THEN octet_length(p.data) ELSE 0 END), 0)
                   FROM part p WHERE p.message_id = m.id)
             FROM message m
             WHERE m.session_id = ?1 {copy}",
            COMPLETED.replace("DATA", &message)
        );
        collect(conn, &sql, session_id, "v1", &mut list)?;
    }
    if schema.has_v2() {
        let v2 = v2_data();
        let bounded = row_budget::data("sm", "session_message");
        let (content, kind) = (
            json_sql::entries(&bounded, "$.content", "j"),
            json_sql::entry_field("j", "$.type"),
        );
        let sql = format!(
            "SELECT sm.id, CAST(sm.type AS TEXT), {}, CAST(coalesce(sm.time_created, 0) AS INTEGER),
                (SELECT count(*) FROM {content}),
                (SELECT count(*) FROM {content}
                  WHERE j.type = 'object' AND {kind} IN ('tool', 'reasoning')),
                (SELECT coalesce(sum({}), 0) FROM {content}
                  WHERE j.type = 'object' AND {kind} IN ('tool', 'reasoning'))
             FROM session_message sm WHERE sm.session_id = ?1",
            COMPLETED.replace("DATA", &v2),
            row_budget::uncut_bytes("sm", &json_sql::entry_text("j"))
        );
        collect(conn, &sql, session_id, "v2", &mut list)?;
    }
    list.sort_by(|a, b| {
        (a.time_created, a.storage, &a.message_id).cmp(&(b.time_created, b.storage, &b.message_id))
    });
    Ok(list)
}

fn collect(
    conn: &Connection,
    sql: &str,
    session_id: &str,
    storage: &'static str,
    list: &mut Vec<MessageSummary>,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([session_id], |row| {
        let n = |i: usize| -> rusqlite::Result<u64> {
            Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
        };
        Ok(MessageSummary {
            message_id: lenient_text(row.get_ref(0)?),
            role: lenient_text(row.get_ref(1)?),
            completed: row.get::<_, i64>(2)? != 0,
            time_created: row.get(3)?,
            parts: n(4)?,
            technical_parts: n(5)?,
            technical_bytes: n(6)?,
            storage,
        })
    })?;
    for row in rows {
        list.push(row?);
    }
    Ok(())
}

/// The completed assistant messages of a session that have tool or reasoning parts: what a
/// prune could remove. Oldest first.
pub fn candidates(conn: &Connection, session_id: &str) -> rusqlite::Result<Vec<MessageSummary>> {
    Ok(messages(conn, session_id)?
        .into_iter()
        .filter(|m| m.role == "assistant" && m.completed && m.technical_parts > 0)
        .collect())
}
