//! The schema profile of one OpenCode database: which tables, columns and indexes it has, and
//! what follows from them for every path (listings, history, preview's `liveMutation`, dry runs,
//! prunes, clean, stats). Read from `sqlite_schema` and `pragma_table_info`, never guessed from a
//! version number: a database upgraded in place has the newest tables beside rows of old shapes.
//!
//! The layouts OpenCode 1.2 to 1.19 wrote are in `docs/opencode-versions.md`. In short:
//! - V1 is `session` + `message` + `part` (every release from 1.2). Some `session` columns came
//!   later (`workspace_id` within 1.2, `time_compacting`/`revert` may be absent in damaged or
//!   hand-made files): the engine reads a missing optional column as NULL.
//! - The event log is `event` + `event_sequence` (from 1.14; rows written from 1.17). Without
//!   both tables a V1 prune deletes and appends no event; with only one of them, or without the
//!   columns OpenCode's own writes use, the storage is refused (`unsupported_storage`).
//!   `event_sequence.owner_id` (remote event owners) may be absent: then no session has a
//!   remote owner.
//! - V2 is `session_message` with a `seq` column (1.17 on, and opencode2's `session_v2`). The
//!   `session_message` of 1.14 and 1.15 has no `seq` and holds only agent and model switches,
//!   not messages: it is not V2 history and is ignored.

pub(crate) mod holders;
pub(crate) mod integrity;
pub(crate) mod media;
pub(crate) mod soundness;

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension};

/// Columns a V1 prune and every V1 listing read, per table. Any of them missing: V1 is
/// `unsupported_storage` (read commands list what they can; writes are refused).
const V1_REQUIRED: [(&str, &[&str]); 3] = [
    (
        "session",
        &[
            "id",
            "project_id",
            "directory",
            "title",
            "time_created",
            "time_updated",
        ],
    ),
    ("message", &["id", "session_id", "time_created", "data"]),
    ("part", &["id", "message_id", "session_id", "data"]),
];

/// Columns OpenCode's own event writes use (and a prune's event rewrite uses).
const EVENT_REQUIRED: [(&str, &[&str]); 2] = [
    ("event", &["id", "aggregate_id", "seq", "type", "data"]),
    ("event_sequence", &["aggregate_id", "seq"]),
];

/// Columns of `session_message` that make it V2 history.
const V2_REQUIRED: [&str; 6] = ["id", "session_id", "type", "seq", "time_created", "data"];

/// The `session_message` row types of OpenCode 1.14 and 1.15, whose table has no `seq`: session
/// events, not messages (docs/opencode-versions.md).
pub const V2_SWITCH_TYPES: [&str; 2] = ["agent-switched", "model-switched"];

/// Tables whose columns the profile records.
const PROFILED: [&str; 11] = [
    "session",
    "session_v2",
    "message",
    "part",
    "event",
    "event_sequence",
    "session_message",
    "session_input",
    "todo",
    "session_prune_receipt",
    "workspace",
];

/// What the database's event log looks like to a V1 prune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventLog {
    /// Neither `event` nor `event_sequence` (OpenCode 1.2, 1.3): a prune deletes and appends no
    /// event.
    Absent,
    /// Both tables, with the columns OpenCode writes.
    Present {
        /// `event_sequence.owner_id` exists (remote owners can be recorded).
        owner_column: bool,
    },
    /// Something in between: no prune can keep the log consistent. The words say what.
    Unusable(String),
}

/// The schema profile: tables, the columns of the tables the engine reads, and the facts the
/// paths consult. Cheap to clone; compare [`Schema::version`] to tell whether it is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    tables: HashSet<String>,
    columns: HashMap<&'static str, HashSet<String>>,
    version: i64,
    /// Why a prune's own writes (event rows, the sequence row, the receipt tables) could not
    /// be made here, found from the schema alone; `None` when they can.
    write_blocker: Option<String>,
    /// The first of OpenCode's tables with a JSON `data` column declared `WITHOUT ROWID`.
    rowless: Option<&'static str>,
}

/// OpenCode's tables with a JSON `data` column: a read of a row over the 16 MiB budget reaches
/// it by row number (`row_budget`).
const DATA_TABLES: [&str; 4] = ["part", "event", "message", "session_message"];

impl Schema {
    /// Reads the profile of the `main` database.
    ///
    /// Errors: SQLite's, when the schema cannot be read (not a database, cannot open).
    pub fn read(conn: &Connection) -> rusqlite::Result<Self> {
        let version = schema_version(conn)?;
        let mut stmt =
            conn.prepare_cached("SELECT name, sql FROM main.sqlite_schema WHERE type = 'table'")?;
        let declared: Vec<(String, Option<String>)> = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let rowless = DATA_TABLES.into_iter().find(|table| {
            declared.iter().any(|(name, sql)| {
                name == table
                    && sql
                        .as_deref()
                        .is_some_and(|sql| sql.to_ascii_uppercase().contains("WITHOUT ROWID"))
            })
        });
        let tables: HashSet<String> = declared.into_iter().map(|(name, _)| name).collect();
        let mut columns = HashMap::new();
        let mut info = conn.prepare_cached("SELECT name FROM pragma_table_info(?1)")?;
        for table in PROFILED {
            if tables.contains(table) {
                let names: HashSet<String> = info
                    .query_map([table], |row| row.get::<_, String>(0))?
                    .collect::<Result<_, _>>()?;
                columns.insert(table, names);
            }
        }
        let write_blocker = match rowless {
            Some(table) => Some(rowless_words(table)),
            None => write_blocker(conn, &tables)?,
        };
        Ok(Self {
            tables,
            columns,
            version,
            write_blocker,
            rowless,
        })
    }

    /// Why this layout cannot be read, when one of OpenCode's tables with a JSON `data` column
    /// is declared `WITHOUT ROWID` (OpenCode never declares one so): a row over the 16 MiB
    /// budget is read in pieces by its row number, which such a table does not have.
    pub fn rowless(&self) -> Option<String> {
        self.rowless.map(rowless_words)
    }

    /// SQLite's schema cookie when the profile was read (`PRAGMA schema_version`): another
    /// value now means the schema changed (OpenCode ran a migration) and the profile is stale.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// Whether a table exists.
    pub fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// Whether `table` (one of the profiled tables) has `column`.
    pub fn has_column(&self, table: &str, column: &str) -> bool {
        self.columns
            .get(table)
            .is_some_and(|names| names.contains(column))
    }

    /// `column` of `table` for a SELECT list, or `NULL` where the table lacks it (an optional
    /// column of an older layout, such as `session.workspace_id` before OpenCode 1.3).
    pub fn column_or_null(&self, table: &str, column: &'static str) -> &'static str {
        if self.has_column(table, column) {
            column
        } else {
            "NULL"
        }
    }

    /// V1 history: `session`, `message` and `part`.
    pub fn has_v1(&self) -> bool {
        self.has("session") && self.has("message") && self.has("part")
    }

    /// Why V1 messages cannot be pruned here (missing tables or columns), in words; `None` when
    /// they can as far as the schema tells (the event log is checked by [`Self::event_log`]).
    pub fn v1_unsupported(&self) -> Option<String> {
        if !self.has_v1() {
            return Some(
                "the database has no V1 session/message/part tables: not an OpenCode 1.x database (1.2 or later)"
                    .into(),
            );
        }
        let missing = missing_columns(self, &V1_REQUIRED);
        (!missing.is_empty()).then(|| {
            format!(
                "the V1 tables lack column(s) {}: a layout this version does not know",
                missing.join(", ")
            )
        })
    }

    /// Why a V1 prune cannot be written here, in words: [`Self::v1_unsupported`], an
    /// [`EventLog::Unusable`] log, or a schema the prune's own writes would fail on (see
    /// `write_blocker`). `None` when it can (the fence still checks each session).
    pub fn v1_write_refusal(&self) -> Option<String> {
        if let Some(why) = self.v1_unsupported() {
            return Some(why);
        }
        if let Some(why) = &self.write_blocker {
            return Some(why.clone());
        }
        match self.event_log() {
            EventLog::Unusable(why) => Some(why),
            EventLog::Absent | EventLog::Present { .. } => None,
        }
    }

    /// The event log as a V1 prune sees it.
    pub fn event_log(&self) -> EventLog {
        match (self.has("event"), self.has("event_sequence")) {
            (false, false) => EventLog::Absent,
            (true, false) => EventLog::Unusable(
                "the database has an event table but no event_sequence table".into(),
            ),
            (false, true) => EventLog::Unusable(
                "the database has an event_sequence table but no event table".into(),
            ),
            (true, true) => {
                let missing = missing_columns(self, &EVENT_REQUIRED);
                if missing.is_empty() {
                    EventLog::Present {
                        owner_column: self.has_column("event_sequence", "owner_id"),
                    }
                } else {
                    EventLog::Unusable(format!(
                        "the event tables lack column(s) {}: a layout this version does not know",
                        missing.join(", ")
                    ))
                }
            }
        }
    }

    /// Whether the event tables are there and usable (see [`Self::event_log`]).
    pub fn has_events(&self) -> bool {
        matches!(self.event_log(), EventLog::Present { .. })
    }

    /// V2 history: `session_message` with the columns of V2 messages (`seq` among them).
    pub fn has_v2(&self) -> bool {
        self.has("session_message")
            && V2_REQUIRED
                .iter()
                .all(|column| self.has_column("session_message", column))
    }

    /// The columns every V2 reader needs that the `session_message` table lacks (empty when
    /// it has them all, or there is no such table). OpenCode 1.14 and 1.15 made the table
    /// without `seq` and kept only agent and model switches in it (`V2_SWITCH_TYPES`).
    pub fn v2_missing_columns(&self) -> Vec<&'static str> {
        if !self.has("session_message") {
            return Vec::new();
        }
        V2_REQUIRED
            .iter()
            .copied()
            .filter(|column| !self.has_column("session_message", column))
            .collect()
    }

    /// Whether any generation this engine knows is present.
    pub fn is_supported(&self) -> bool {
        self.has_v1() || self.has_v2()
    }
}

/// `table.column` for every required column missing from a table that exists (a missing table
/// is reported by its caller).
fn missing_columns(schema: &Schema, required: &[(&str, &[&str])]) -> Vec<String> {
    let mut missing = Vec::new();
    for (table, columns) in required {
        if !schema.has(table) {
            continue;
        }
        for column in *columns {
            if !schema.has_column(table, column) {
                missing.push(format!("{table}.{column}"));
            }
        }
    }
    missing
}

fn rowless_words(table: &str) -> String {
    format!(
        "the {table} table is declared WITHOUT ROWID, which OpenCode never does: a layout this version does not know (a row over the 16 MiB budget is read in pieces by its row number)"
    )
}

/// What in the schema would make a prune's own writes fail, in words, so that the dry run, the
/// preview's `liveMutation` and history say so before any prune is tried:
/// - a text encoding other than UTF-8 (OpenCode writes UTF-8; sizes would be counted in other
///   units);
/// - any trigger (a prune could fire writes nobody reviewed);
/// - `event` with a column beyond OpenCode's that must be given a value (`NOT NULL` without a
///   default) (a table with a JSON `data` column declared `WITHOUT ROWID` is refused before
///   these, by [`Schema::rowless`]);
/// - `event_sequence` whose `aggregate_id` is not its primary key (the sequence row is
///   written with `ON CONFLICT (aggregate_id)`);
/// - the receipt or meta table name taken by something that is not such a table.
fn write_blocker(conn: &Connection, tables: &HashSet<String>) -> rusqlite::Result<Option<String>> {
    let encoding: String = crate::cached::query_row(conn, "PRAGMA encoding", [], |row| row.get(0))?;
    if !encoding.eq_ignore_ascii_case("UTF-8") {
        return Ok(Some(format!(
            "the database's text encoding is {encoding}; OpenCode writes UTF-8, and this version prunes only UTF-8 databases"
        )));
    }
    let triggers = trigger_count(conn)?;
    if triggers > 0 {
        return Ok(Some(format!(
            "the database has {triggers} trigger(s); a prune could fire unknown writes"
        )));
    }
    if tables.contains("event") {
        let mut stmt = conn.prepare_cached(
            "SELECT name FROM pragma_table_info('event') \
             WHERE \"notnull\" AND dflt_value IS NULL AND pk = 0 \
               AND name NOT IN ('id', 'aggregate_id', 'seq', 'type', 'data')",
        )?;
        let extra: Vec<String> = stmt
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        if !extra.is_empty() {
            return Ok(Some(format!(
                "the event table has column(s) {} that every new row must fill, which OpenCode's events do not: a layout this version does not know",
                extra.join(", ")
            )));
        }
    }
    if tables.contains("event_sequence") {
        let keyed: bool = crate::cached::query_row(
            conn,
            "SELECT count(*) = 1 AND sum(name = 'aggregate_id') = 1 \
             FROM pragma_table_info('event_sequence') WHERE pk > 0",
            [],
            |row| {
                row.get::<_, Option<bool>>(0)
                    .map(|keyed| keyed.unwrap_or(false))
            },
        )?;
        if !keyed {
            return Ok(Some(
                "event_sequence.aggregate_id is not the table's primary key, as OpenCode declares it: a layout this version does not know".into(),
            ));
        }
    }
    let taken: Option<String> = crate::cached::query_row(
        conn,
        "SELECT name || ' (a ' || type || ')' FROM main.sqlite_schema \
         WHERE name IN ('session_prune_receipt', 'session_prune_meta') AND type <> 'table'",
        [],
        |row| row.get(0),
    )
    .optional()?;
    if let Some(taken) = taken {
        return Ok(Some(format!(
            "the name of this tool's receipt tables is taken by {taken}: receipts cannot be written"
        )));
    }
    Ok(None)
}

/// How many triggers the `main` database has.
///
/// Errors: SQLite's.
pub(crate) fn trigger_count(conn: &Connection) -> rusqlite::Result<i64> {
    crate::cached::query_row(
        conn,
        "SELECT count(*) FROM main.sqlite_schema WHERE type = 'trigger'",
        [],
        |row| row.get(0),
    )
}

/// SQLite's schema cookie (`PRAGMA schema_version`), bumped by every schema change.
///
/// Errors: SQLite's.
pub fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    crate::cached::query_row(conn, "PRAGMA schema_version", [], |row| row.get(0))
}
