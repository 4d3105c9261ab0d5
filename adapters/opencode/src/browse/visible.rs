//! Which rows of a session a browsing request sees: the generation that holds its messages,
//! their order, and the staged revert that hides the tail (docs/ARCHITECTURE.md, "Browsing").
//!
//! - V2 (`session_message`): ordered by `seq`; a revert hides the rows whose id is at or past
//!   `revert.messageID` (CodeNomad's rule, ids compared as text).
//! - V1 (`message` + `part`): ordered by `(time_created, id)`, OpenCode's own order since its
//!   migration `20260312043431_session_message_cursor`; a message's sequence number is its
//!   position in that order, from 0. A revert hides the message `revert.messageID` and every
//!   one after it in that order (by id, when that message is gone).

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension};

use crate::ownership::SessionTable;
use crate::schema::Schema;
use crate::values::lenient_text;

/// The storage generation of a session's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// `message` + `part`.
    V1,
    /// `session_message`.
    V2,
}

/// Where the staged revert cuts the session off.
#[derive(Debug, Clone)]
enum Cut {
    /// Rows whose order key is at or past this one are hidden.
    Key(Vec<Value>),
    /// Rows whose id is at or past this one are hidden.
    Id(String),
}

/// The visible rows of one session.
#[derive(Debug, Clone)]
pub(super) struct Visible {
    pub layout: Layout,
    pub session_id: String,
    cut: Option<Cut>,
}

impl Visible {
    /// The session's visible rows; `None` when no session has this id.
    pub fn of(conn: &Connection, session_id: &str) -> rusqlite::Result<Option<Self>> {
        let schema = Schema::read(conn)?;
        let Some(revert) = revert_of(conn, &schema, session_id)? else {
            return Ok(None);
        };
        let in_v2 = schema.has_v2()
            && conn
                .query_row(
                    "SELECT 1 FROM session_message WHERE session_id = ?1 LIMIT 1",
                    [session_id],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
        let layout = if in_v2 || !schema.has_v1() {
            Layout::V2
        } else {
            Layout::V1
        };
        let mut visible = Self {
            layout,
            session_id: session_id.to_string(),
            cut: None,
        };
        if let Some(message_id) = revert {
            visible.cut = Some(match visible.key_of(conn, &message_id)? {
                Some(key) if layout == Layout::V1 => Cut::Key(key),
                _ => Cut::Id(message_id),
            });
        }
        Ok(Some(visible))
    }

    /// The message table, aliased `m`.
    pub fn table(&self) -> &'static str {
        match self.layout {
            Layout::V1 => "message m",
            Layout::V2 => "session_message m",
        }
    }

    /// The order key's columns.
    pub fn key(&self) -> &'static str {
        match self.layout {
            Layout::V1 => "m.time_created, m.id",
            Layout::V2 => "m.seq",
        }
    }

    /// `ORDER BY` the key, ascending or descending.
    pub fn order(&self, descending: bool) -> &'static str {
        match (self.layout, descending) {
            (Layout::V1, false) => "m.time_created, m.id",
            (Layout::V1, true) => "m.time_created DESC, m.id DESC",
            (Layout::V2, false) => "m.seq",
            (Layout::V2, true) => "m.seq DESC",
        }
    }

    /// Placeholders for one key value: `(?, ?)` or `(?)`.
    pub fn key_slots(&self) -> &'static str {
        match self.layout {
            Layout::V1 => "(?, ?)",
            Layout::V2 => "(?)",
        }
    }

    /// The `WHERE` clause of the visible rows and its parameters.
    pub fn filter(&self) -> (String, Vec<Value>) {
        let mut sql = "m.session_id = ?".to_string();
        let mut params = vec![Value::Text(self.session_id.clone())];
        match &self.cut {
            None => {}
            Some(Cut::Key(key)) => {
                sql.push_str(&format!(" AND ({}) < {}", self.key(), self.key_slots()));
                params.extend(key.iter().cloned());
            }
            Some(Cut::Id(id)) => {
                sql.push_str(" AND m.id < ?");
                params.push(Value::Text(id.clone()));
            }
        }
        (sql, params)
    }

    /// The order key of message `message_id` when it is visible.
    pub fn visible_key(
        &self,
        conn: &Connection,
        message_id: &str,
    ) -> rusqlite::Result<Option<Vec<Value>>> {
        let (filter, mut params) = self.filter();
        params.push(Value::Text(message_id.to_string()));
        let sql = format!(
            "SELECT {} FROM {} WHERE {filter} AND m.id = ?",
            self.key(),
            self.table()
        );
        let width = self.key_width();
        conn.query_row(&sql, rusqlite::params_from_iter(params), |row| {
            (0..width).map(|i| row.get::<_, Value>(i)).collect()
        })
        .optional()
    }

    /// The order key of message `message_id` of this session, visible or not.
    fn key_of(&self, conn: &Connection, message_id: &str) -> rusqlite::Result<Option<Vec<Value>>> {
        let sql = format!(
            "SELECT {} FROM {} WHERE m.session_id = ?1 AND m.id = ?2",
            self.key(),
            self.table()
        );
        let width = self.key_width();
        conn.query_row(&sql, [&self.session_id, message_id], |row| {
            (0..width).map(|i| row.get::<_, Value>(i)).collect()
        })
        .optional()
    }

    /// The staged revert this view hides the tail from, in words (empty: none), for binding a
    /// cursor to it.
    pub fn cut_text(&self) -> String {
        match &self.cut {
            None => String::new(),
            Some(Cut::Id(id)) => format!("id {id}"),
            Some(Cut::Key(key)) => format!("key {key:?}"),
        }
    }

    /// Columns in the order key.
    pub fn key_width(&self) -> usize {
        match self.layout {
            Layout::V1 => 2,
            Layout::V2 => 1,
        }
    }

    /// Stored bytes of a message row `m`: V2 its `data`; V1 its `data` and its parts'.
    pub fn bytes(&self) -> &'static str {
        match self.layout {
            Layout::V1 => {
                "octet_length(m.data) + (SELECT coalesce(sum(octet_length(p.data)), 0) \
                 FROM part p WHERE p.message_id = m.id)"
            }
            Layout::V2 => "octet_length(m.data)",
        }
    }
}

/// `revert.messageID` of the session (`Some(None)`: no staged revert); `None` when no session
/// has this id. opencode2's `session_v2` is looked at first, as ownership does.
fn revert_of(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
) -> rusqlite::Result<Option<Option<String>>> {
    for table in [SessionTable::V2, SessionTable::Shared] {
        let name = table.name();
        if !schema.has(name) {
            continue;
        }
        let revert = schema.column_or_null(name, "revert");
        let sql = format!(
            "SELECT CASE WHEN json_valid({revert}) THEN json_extract({revert}, '$.messageID') END \
             FROM {name} WHERE id = ?1"
        );
        let found = conn
            .query_row(&sql, [session_id], |row| {
                Ok(match row.get_ref(0)? {
                    rusqlite::types::ValueRef::Text(_) => Some(lenient_text(row.get_ref(0)?)),
                    _ => None,
                })
            })
            .optional()?;
        if let Some(found) = found {
            return Ok(Some(found));
        }
    }
    Ok(None)
}
