//! The session list with sizes: where the bytes of a V1 database are.
//!
//! Sizes are bytes of the `data` columns (UTF-8 text as stored): `message` rows, `part` rows and
//! the session's `event` rows (`aggregate_id` is the session id). Prunable bytes are the tool and
//! reasoning `part` rows plus the `message.part.updated.1` snapshots of tool and reasoning parts,
//! which is what pruning every completed message would free.

use rusqlite::Connection;
use serde::Serialize;

use super::schema::Schema;

/// One session and its sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    /// `session.id`.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// `session.title`.
    pub title: String,
    /// `session.directory`.
    pub directory: String,
    /// Number of V1 `message` rows.
    pub messages: u64,
    /// Bytes of message, part and event data of the session.
    #[serde(rename = "totalBytes")]
    pub total_bytes: u64,
    /// Bytes of tool and reasoning parts and of their snapshot events.
    #[serde(rename = "prunableBytes")]
    pub prunable_bytes: u64,
    /// `session.time_updated`, ms since the Unix epoch.
    #[serde(rename = "timeUpdated")]
    pub time_updated: i64,
}

/// Every session, largest total first (ties: most recently updated first).
pub fn list(conn: &Connection) -> rusqlite::Result<Vec<SessionSummary>> {
    let schema = Schema::read(conn)?;
    let events = schema.has_events();
    let event_total = if events {
        "(SELECT coalesce(sum(length(CAST(e.data AS BLOB))), 0) FROM event e WHERE e.aggregate_id = s.id)"
    } else {
        "0"
    };
    let event_prunable = if events {
        "(SELECT coalesce(sum(length(CAST(e.data AS BLOB))), 0) FROM event e \
           WHERE e.aggregate_id = s.id AND e.type = 'message.part.updated.1' \
             AND json_extract(e.data, '$.part.type') IN ('tool', 'reasoning'))"
    } else {
        "0"
    };
    let sql = format!(
        "SELECT s.id, s.title, s.directory, s.time_updated,
           (SELECT count(*) FROM message m WHERE m.session_id = s.id),
           (SELECT coalesce(sum(length(CAST(m.data AS BLOB))), 0) FROM message m WHERE m.session_id = s.id),
           (SELECT coalesce(sum(length(CAST(p.data AS BLOB))), 0) FROM part p WHERE p.session_id = s.id),
           (SELECT coalesce(sum(length(CAST(p.data AS BLOB))), 0) FROM part p WHERE p.session_id = s.id
              AND json_extract(p.data, '$.type') IN ('tool', 'reasoning')),
           {event_total}, {event_prunable}
         FROM session s"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([], |row| {
        let n = |i: usize| -> rusqlite::Result<u64> {
            Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
        };
        Ok(SessionSummary {
            session_id: row.get(0)?,
            title: row.get(1)?,
            directory: row.get(2)?,
            time_updated: row.get(3)?,
            messages: n(4)?,
            total_bytes: n(5)? + n(6)? + n(8)?,
            prunable_bytes: n(7)? + n(9)?,
        })
    })?;
    let mut sessions: Vec<SessionSummary> = rows.collect::<Result<_, _>>()?;
    sessions.sort_by(|a, b| {
        b.total_bytes
            .cmp(&a.total_bytes)
            .then(b.time_updated.cmp(&a.time_updated))
    });
    Ok(sessions)
}

/// One message of a session, with its technical parts counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageSummary {
    /// `message.id`.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// `role` of `message.data`: `user` or `assistant`.
    pub role: String,
    /// Whether `time.completed` is a number > 0 (assistant messages; user messages are never
    /// complete in this sense).
    pub completed: bool,
    /// `message.time_created`, ms since the Unix epoch.
    #[serde(rename = "timeCreated")]
    pub time_created: i64,
    /// Number of parts.
    pub parts: u64,
    /// Number of tool and reasoning parts.
    #[serde(rename = "technicalParts")]
    pub technical_parts: u64,
    /// Bytes of their `part.data`.
    #[serde(rename = "technicalBytes")]
    pub technical_bytes: u64,
}

/// Every message of a session, oldest first (by `time_created`, then id: ids wrapped on
/// 2026-08-14 and do not sort by time).
pub fn messages(conn: &Connection, session_id: &str) -> rusqlite::Result<Vec<MessageSummary>> {
    let mut stmt = conn.prepare(
        "SELECT m.id, coalesce(json_extract(m.data, '$.role'), ''),
                coalesce(json_type(m.data, '$.time.completed') IN ('integer', 'real')
                         AND json_extract(m.data, '$.time.completed') > 0, 0),
                m.time_created,
                count(p.id),
                coalesce(sum(json_extract(p.data, '$.type') IN ('tool', 'reasoning')), 0),
                coalesce(sum(CASE WHEN json_extract(p.data, '$.type') IN ('tool', 'reasoning')
                             THEN length(CAST(p.data AS BLOB)) ELSE 0 END), 0)
         FROM message m LEFT JOIN part p ON p.message_id = m.id
         WHERE m.session_id = ?1
         GROUP BY m.id
         ORDER BY m.time_created, m.id",
    )?;
    let rows = stmt.query_map([session_id], |row| {
        let n = |i: usize| -> rusqlite::Result<u64> {
            Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
        };
        Ok(MessageSummary {
            message_id: row.get(0)?,
            role: row.get(1)?,
            completed: row.get::<_, i64>(2)? != 0,
            time_created: row.get(3)?,
            parts: n(4)?,
            technical_parts: n(5)?,
            technical_bytes: n(6)?,
        })
    })?;
    rows.collect()
}

/// The completed assistant messages of a session that have tool or reasoning parts: what a
/// prune could remove. Oldest first.
pub fn candidates(conn: &Connection, session_id: &str) -> rusqlite::Result<Vec<MessageSummary>> {
    Ok(messages(conn, session_id)?
        .into_iter()
        .filter(|m| m.role == "assistant" && m.completed && m.technical_parts > 0)
        .collect())
}
