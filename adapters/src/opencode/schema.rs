//! Which storage generations a database holds, read from `sqlite_schema`.
//!
//! Source: opencode-storage.md §1 and §6. V1 is `session` + `message` + `part` (OpenCode 1.2 to
//! 1.18); V1 events are `event` + `event_sequence` (migration `20260323234822_events`). V2 is
//! `session_message` with its sessions in `session_v2` (opencode2) or, in OpenCode 1.18, in the
//! shared `session` table. A database with neither is `unsupported_storage`.

use std::collections::HashSet;

use rusqlite::Connection;

/// The tables found, as far as the engine cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    tables: HashSet<String>,
}

impl Schema {
    /// Reads the table names of the `main` database.
    pub fn read(conn: &Connection) -> rusqlite::Result<Self> {
        let mut stmt =
            conn.prepare_cached("SELECT name FROM main.sqlite_schema WHERE type = 'table'")?;
        let tables = stmt
            .query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<_, _>>()?;
        Ok(Self { tables })
    }

    /// Whether a table exists.
    pub fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// V1 history: `session`, `message` and `part`.
    pub fn has_v1(&self) -> bool {
        self.has("session") && self.has("message") && self.has("part")
    }

    /// V1 sync events: `event` and `event_sequence`.
    pub fn has_events(&self) -> bool {
        self.has("event") && self.has("event_sequence")
    }

    /// V2 history: `session_message`.
    pub fn has_v2(&self) -> bool {
        self.has("session_message")
    }

    /// Whether any generation this engine knows is present.
    pub fn is_supported(&self) -> bool {
        self.has_v1() || self.has_v2()
    }
}
