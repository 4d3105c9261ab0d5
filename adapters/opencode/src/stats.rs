//! Where the bytes of an OpenCode database are: per table, per event type, how much of it is
//! technical content (tool and reasoning parts, V2 content entries) and snapshot events of it,
//! the copies OpenCode keeps besides (superseded snapshots, file bodies in summary diffs), spill
//! files, and the file, WAL and free-page sizes.
//!
//! Bytes are the stored `data` text (`octet_length(data)`) unless named otherwise; file
//! sizes are from the file system. Malformed rows count in totals and never as technical.
//!
//! [`measure`] reads every row; [`estimate`] (`stats/estimate.rs`) reads each table's sizes
//! once and a sample of rows whole, by the same SQL for each figure (docs/ARCHITECTURE.md,
//! "The overview").

use std::path::Path;

use rusqlite::Connection;
use serde::Serialize;

use super::json_sql;
use super::row_budget;
use super::schema::Schema;
use super::spill;
use super::v1::compact::event_entity_sql;

mod estimate;
mod sample;

pub use estimate::estimate;

/// Bytes an estimated overview reads whole of one table of `bytes` (its drawn rows), and of
/// its largest sessions (for their prunable bytes): 5 % of them, at least 8 MiB.
pub fn read_budget(bytes: u64) -> u64 {
    sample::budget(bytes as f64) as u64
}

/// Rows and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Volume {
    /// Row (or entry, or file) count.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
}

/// One table's rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableVolume {
    /// `part`, `message`, `session_message` or `event`.
    pub table: &'static str,
    /// Its rows and `data` bytes.
    #[serde(flatten)]
    pub volume: Volume,
}

/// One event type's rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventVolume {
    /// `event.type`, e.g. `message.part.updated.1`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Its rows and `data` bytes.
    #[serde(flatten)]
    pub volume: Volume,
}

/// Technical content, what a clean of every message could remove.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Technical {
    /// V1 tool `part` rows.
    pub tool_parts: Volume,
    /// V1 reasoning `part` rows.
    pub reasoning_parts: Volume,
    /// `message.part.updated.1` events holding a tool or reasoning part: copies of it.
    pub snapshot_events: Volume,
    /// Tool and reasoning entries of V2 `content` arrays (SQLite's minified JSON of each).
    pub v2_entries: Volume,
    /// OpenCode 2's `shell` rows (a command the user ran) and the bytes of the output they
    /// keep (`output.output`): what its UI shows; never sent to the model again, and emptied
    /// by a clean.
    pub shell_output: Volume,
    /// OpenCode 2's `synthetic` rows that tell the model of such a command
    /// (`metadata.source = "shell"`), and the bytes of their `text`: what the model is sent of
    /// it (its last 2,000 lines). Not technical content: the conversation's own.
    pub shell_sent: Volume,
}

/// The copies OpenCode keeps besides the parts (docs/ARCHITECTURE.md, "Copies OpenCode keeps"):
/// what a clean's compaction and `--diffs` could remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Copies {
    /// Snapshot events superseded by a newer one of the same entity and type in their
    /// aggregate, per type, largest first.
    pub superseded_snapshots: Vec<EventVolume>,
    /// File bodies (`patch`, `before`, `after`) in the `summary.diffs` of `message` rows: the
    /// count is of diff entries holding one, the bytes those of the bodies as JSON text.
    pub diffs_in_messages: Volume,
    /// The same in `message.updated.1` events (every snapshot, superseded or not).
    pub diffs_in_snapshots: Volume,
}

/// One OpenCode release and the sessions it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Release {
    /// The release (`1.18.34`, `2.1.2`), as the session rows name it.
    pub version: String,
    /// Sessions it wrote.
    pub sessions: u64,
}

/// The releases that wrote the sessions of the file (see [`Stats::releases`]).
///
/// Errors: SQLite's.
fn releases(conn: &Connection, schema: &Schema) -> rusqlite::Result<Vec<Release>> {
    let mut selects = Vec::new();
    if schema.has("session_v2") {
        selects.push("SELECT id, version FROM session_v2".to_string());
    }
    if schema.has("session") && schema.has_column("session", "version") {
        let not_in_v2 = if schema.has("session_v2") {
            " WHERE id NOT IN (SELECT id FROM session_v2)"
        } else {
            ""
        };
        selects.push(format!("SELECT id, version FROM session{not_in_v2}"));
    }
    if selects.is_empty() {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(&format!(
        "SELECT CAST(coalesce(version, '') AS TEXT), count(*) FROM ({}) \
         GROUP BY 1 ORDER BY 2 DESC, 1",
        selects.join(" UNION ALL ")
    ))?;
    let rows = stmt.query_map([], |row| {
        Ok(Release {
            version: row.get(0)?,
            sessions: row.get::<_, i64>(1)?.max(0) as u64,
        })
    })?;
    rows.collect()
}

/// The V1 rows of the sessions OpenCode 2 migrated (docs/opencode-versions.md, "OpenCode 2"):
/// what `clean --migrated-v1` removes where OpenCode 2 holds a copy of every message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigratedV1 {
    /// Sessions with a V1 `session` row and an OpenCode 2 `session_v2` row of the same id.
    pub sessions: u64,
    /// Their `message` rows.
    pub messages: Volume,
    /// Their `part` rows.
    pub parts: Volume,
}

impl MigratedV1 {
    /// Reads them: counts and the sizes of the rows' `data` (`octet_length` reads no value).
    ///
    /// Errors: SQLite's.
    pub(crate) fn read(conn: &Connection, schema: &Schema) -> rusqlite::Result<Self> {
        if !super::migrated::possible(schema) {
            return Ok(Self::default());
        }
        let volume = |table: &str| -> rusqlite::Result<Volume> {
            conn.query_row(
                &format!(
                    "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM {table} \
                     WHERE session_id IN (SELECT id FROM session_v2)"
                ),
                [],
                |row| {
                    Ok(Volume {
                        count: row.get::<_, i64>(0)?.max(0) as u64,
                        bytes: row.get::<_, i64>(1)?.max(0) as u64,
                    })
                },
            )
        };
        let sessions: i64 = conn.query_row(
            "SELECT count(*) FROM session WHERE id IN (SELECT id FROM session_v2)",
            [],
            |row| row.get(0),
        )?;
        Ok(Self {
            sessions: sessions.max(0) as u64,
            messages: volume("message")?,
            parts: volume("part")?,
        })
    }

    /// Bytes of both.
    pub fn bytes(&self) -> u64 {
        self.messages.bytes + self.parts.bytes
    }
}

/// Spill files in `<data>/tool-output/` (OpenCode 1.x) and `<data>/shell/<project>/`
/// (OpenCode 2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Spill {
    /// Every spill file.
    pub files: Volume,
    /// Those no `part` or `session_message` row names.
    pub unreferenced: Volume,
}

/// The whole picture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// The database file, bytes.
    pub database_bytes: u64,
    /// Its `-wal` file, bytes (0 when there is none).
    pub wal_bytes: u64,
    /// Pages on the free list times the page size, bytes: what `VACUUM` gives back at least.
    pub free_bytes: u64,
    /// Per table, largest first.
    pub tables: Vec<TableVolume>,
    /// Per event type, largest first.
    pub events: Vec<EventVolume>,
    /// Technical content.
    pub technical: Technical,
    /// The copies OpenCode keeps besides the parts.
    pub copies: Copies,
    /// Spill files.
    pub spill: Spill,
    /// The V1 history OpenCode 2 migrated: a copy of sessions it reads from its own rows, never
    /// from these (all 0 in a file OpenCode 2 has not migrated). Exact in every overview.
    #[serde(rename = "migratedV1")]
    pub migrated_v1: MigratedV1,
    /// The OpenCode releases that wrote the file's sessions (their `version` column; a session
    /// OpenCode 2 migrated counts once, with the release that wrote it), most sessions first.
    pub releases: Vec<Release>,
    /// OpenCode 2's background services that have the database open now (read from `/proc`).
    pub services: Vec<super::service::OpenCodeService>,
    /// `null` when every figure is exact (`measure`, or an `estimate` that read every table
    /// whole); else how `technical` and `copies` were estimated. The files, tables, event types
    /// and spill files are exact in both.
    pub estimate: Option<Estimate>,
}

/// How an overview's `technical` and `copies` were estimated: from a sample of rows drawn with
/// a chance proportional to their size (docs/ARCHITECTURE.md, "The overview").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// The tables whose figures are estimated (`part`: tool and reasoning parts; `message`:
    /// diff bodies in messages; `session_message`: V2 entries; `event`: snapshot events of
    /// technical parts, superseded snapshots, diff bodies in snapshots). Every other table was
    /// read whole, and its figures are exact.
    pub estimated_tables: Vec<&'static str>,
    /// Rows read whole: the drawn ones and the counted ones.
    pub sampled_rows: u64,
    /// Snapshot events whose entity was read to tell whether a drawn snapshot is superseded
    /// (from the first bytes of each, or whole where those do not name it).
    pub entities_read: u64,
    /// Bytes: each estimated byte figure is within this of the exact one with 95 %
    /// confidence (twice the largest standard deviation the sampling allows for a figure of
    /// the largest table). Where a snapshot's JSON breaks after its id, the estimate counts it
    /// by that id and the exact figure does not (OpenCode writes whole JSON). Counts come from
    /// a sample of 256 rows per table, each with the same chance: within about 6 % of the
    /// table's rows.
    pub margin_bytes: u64,
}

/// Measures the database at `path` through `conn`, every figure exact: it reads every row
/// (on 1 GB, about as long as `VACUUM INTO` of the file). [`estimate`] reads a sample.
///
/// Errors: SQLite's.
pub fn measure(conn: &Connection, path: &Path) -> rusqlite::Result<Stats> {
    let schema = Schema::read(conn)?;
    let volume = |sql: &str| -> rusqlite::Result<Volume> {
        conn.query_row(sql, [], |row| {
            Ok(Volume {
                count: row.get::<_, i64>(0)?.max(0) as u64,
                bytes: row.get::<_, i64>(1)?.max(0) as u64,
            })
        })
    };
    let mut tables = Vec::new();
    // A table is measured when it has a `data` column (a hand-made table without one holds no
    // content to measure); event types need `type` too.
    let measured = |table: &str| schema.has(table) && schema.has_column(table, "data");
    for table in ["part", "message", "session_message", "event"] {
        if measured(table) {
            let v = volume(&format!(
                "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM {table}"
            ))?;
            tables.push(TableVolume { table, volume: v });
        }
    }
    tables.sort_by_key(|t| std::cmp::Reverse(t.volume.bytes));

    let mut events = Vec::new();
    if measured("event") && schema.has_column("event", "type") {
        events = event_volumes(
            conn,
            // Sizes taken before the grouping: a grouping sorts its rows with every column its
            // sums name, `data` included, whole.
            "WITH sized AS MATERIALIZED (SELECT type, octet_length(data) AS len FROM event) \
             SELECT CAST(type AS TEXT), count(*), coalesce(sum(len), 0) \
             FROM sized GROUP BY type ORDER BY 3 DESC, 1, type",
        )?;
    }

    let mut technical = Technical::default();
    if measured("part") {
        technical.tool_parts = volume(&format!(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM part WHERE {}",
            part_is(&schema, "tool")
        ))?;
        technical.reasoning_parts = volume(&format!(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM part WHERE {}",
            part_is(&schema, "reasoning")
        ))?;
    }
    if measured("event") && schema.has_column("event", "type") {
        technical.snapshot_events = volume(&format!(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM event WHERE {}",
            technical_snapshot()
        ))?;
    }
    if schema.has_v2() {
        technical.v2_entries = volume(&v2_entries_sql(Rows::All))?;
        let [output, sent] = shell_sql(Rows::All);
        technical.shell_output = volume(&output)?;
        technical.shell_sent = volume(&sent)?;
    }

    let copies = copies(conn, &schema, &volume)?;
    let migrated_v1 = MigratedV1::read(conn, &schema)?;

    let files = Files::read(conn, &schema, path)?;
    Ok(files.into_stats(tables, events, technical, copies, migrated_v1, None))
}

/// What the file system and SQLite's header say, and the spill files: exact in every overview.
struct Files {
    database_bytes: u64,
    wal_bytes: u64,
    free_bytes: u64,
    spill: Spill,
    releases: Vec<Release>,
    services: Vec<super::service::OpenCodeService>,
}

impl Files {
    /// The overview of these files and the figures read of the rows.
    fn into_stats(
        self,
        tables: Vec<TableVolume>,
        events: Vec<EventVolume>,
        technical: Technical,
        copies: Copies,
        migrated_v1: MigratedV1,
        estimate: Option<Estimate>,
    ) -> Stats {
        Stats {
            database_bytes: self.database_bytes,
            wal_bytes: self.wal_bytes,
            free_bytes: self.free_bytes,
            tables,
            events,
            technical,
            copies,
            spill: self.spill,
            migrated_v1,
            releases: self.releases,
            services: self.services,
            estimate,
        }
    }

    /// Reads them for the database at `path`. Which spill files no row names is read from the
    /// rows that name spill files (`spill::referenced`), only when there are any.
    fn read(conn: &Connection, schema: &Schema, path: &Path) -> rusqlite::Result<Self> {
        let page_size: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
        let free_pages: i64 = conn.query_row("PRAGMA freelist_count", [], |row| row.get(0))?;
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");

        let mut spill = Spill::default();
        let files = spill::list(&spill::folder(path)).unwrap_or_default();
        if !files.is_empty() {
            let referenced = spill::referenced(conn)?;
            for file in files {
                spill.files.count += 1;
                spill.files.bytes += file.bytes;
                if !referenced.contains(&file.name) {
                    spill.unreferenced.count += 1;
                    spill.unreferenced.bytes += file.bytes;
                }
            }
        }
        Ok(Self {
            database_bytes: size(path),
            wal_bytes: size(Path::new(&wal)),
            free_bytes: (page_size.max(0) as u64).saturating_mul(free_pages.max(0) as u64),
            spill,
            releases: releases(conn, schema)?,
            services: super::service::holding(path),
        })
    }
}

/// The copies OpenCode keeps: superseded snapshots (of the three snapshot types, in their
/// aggregate, by the entity each holds and its `seq`) and the file bodies in summary diffs.
fn copies(
    conn: &Connection,
    schema: &Schema,
    volume: &dyn Fn(&str) -> rusqlite::Result<Volume>,
) -> rusqlite::Result<Copies> {
    let mut copies = Copies::default();
    let events = schema.has("event")
        && ["type", "data", "seq", "aggregate_id"]
            .iter()
            .all(|column| schema.has_column("event", column));
    if events {
        copies.superseded_snapshots = event_volumes(
            conn,
            &format!(
                "SELECT CAST(type AS TEXT), count(*), coalesce(sum(len), 0) FROM ( \
                   SELECT type, len, seq, \
                          max(seq) OVER (PARTITION BY aggregate_id, type, entity) AS top \
                   FROM ( \
                     SELECT aggregate_id, type, seq, octet_length(data) AS len, \
                            {} AS entity \
                     FROM event WHERE type IN ('message.part.updated.1', 'message.updated.1', \
                                               'session.updated.1')) \
                   WHERE typeof(entity) = 'text' AND typeof(seq) = 'integer') \
                 WHERE seq < top GROUP BY type ORDER BY 3 DESC, 1",
                event_entity_sql()
            ),
        )?;
        copies.diffs_in_snapshots = volume(&diffs_sql(schema, DiffsIn::Snapshots, Rows::All))?;
    }
    if schema.has("message") && schema.has_column("message", "data") {
        copies.diffs_in_messages = volume(&diffs_sql(schema, DiffsIn::Messages, Rows::All))?;
    }
    Ok(copies)
}

/// The `(type, count, bytes)` rows `sql` selects, as event volumes.
fn event_volumes(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<EventVolume>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |row| {
        Ok(EventVolume {
            event_type: super::values::lenient_text(row.get_ref(0)?),
            volume: Volume {
                count: row.get::<_, i64>(1)?.max(0) as u64,
                bytes: row.get::<_, i64>(2)?.max(0) as u64,
            },
        })
    })?;
    rows.collect()
}

/// Which rows a figure's SQL reads: every row (one row of sums), or the drawn rows whose
/// `rowid`s are bound as a JSON array to `?1` (one row of `rowid` and sums per row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rows {
    All,
    Drawn,
}

impl Rows {
    /// The SELECT's first columns, the condition that goes with `WHERE` and the grouping, for
    /// a table aliased `alias`.
    fn clauses(self, alias: &str) -> (String, String, String) {
        match self {
            Rows::All => (String::new(), "1".into(), String::new()),
            Rows::Drawn => (
                format!("{alias}.rowid, "),
                format!("{alias}.rowid IN (SELECT value FROM json_each(?1))"),
                format!(" GROUP BY {alias}.rowid"),
            ),
        }
    }
}

/// The condition on a `part` row (unaliased) that it is a part of type `kind` (`tool`,
/// `reasoning`) of live history: not of a session OpenCode 2 migrated, whose V1 rows are a
/// copy ([`MigratedV1`] counts them). The substring test skips most rows before their JSON is
/// parsed; every read of `data` but its size is bounded by the row budget.
fn part_is(schema: &Schema, kind: &str) -> String {
    let part = row_budget::data("", "part");
    let migrated = super::migrated::in_migrated_session(schema, "session_id");
    // The session test first: a migrated copy's rows are never parsed.
    format!(
        "NOT {migrated} AND session_prune_contains({part}, '\"{kind}\"') \
         AND CASE WHEN json_valid({part}) THEN json_extract({part}, '$.type') END = '{kind}'"
    )
}

/// The condition on an `event` row (unaliased) that it is a snapshot of a tool or reasoning
/// part.
fn technical_snapshot() -> String {
    let event = row_budget::data("", "event");
    format!(
        "type = 'message.part.updated.1' \
         AND (session_prune_contains({event}, '\"tool\"') OR session_prune_contains({event}, '\"reasoning\"')) \
         AND CASE WHEN json_valid({event}) THEN json_extract({event}, '$.part.type') END IN ('tool', 'reasoning')"
    )
}

/// The count and bytes (SQLite's minified JSON of each) of the tool and reasoning entries of V2
/// `content` arrays in `rows` of `session_message`.
fn v2_entries_sql(rows: Rows) -> String {
    let v2 = row_budget::data("sm", "session_message");
    let (rowid, which, group) = rows.clauses("sm");
    format!(
        "SELECT {rowid}count(*), coalesce(sum({}), 0) \
         FROM session_message sm, {} \
         WHERE {which} AND j.type = 'object' AND {} IN ('tool', 'reasoning'){group}",
        row_budget::uncut_bytes("sm", &json_sql::entry_text("j")),
        json_sql::entries(&v2, "$.content", "j"),
        json_sql::entry_field("j", "$.type")
    )
}

/// The count and bytes of OpenCode 2's user shell output in `rows` of `session_message`: the
/// `shell` rows' `output.output`, and the `synthetic` rows' `text` that carry it to the model.
fn shell_sql(rows: Rows) -> [String; 2] {
    let data = row_budget::data("sm", "session_message");
    let (rowid, which, group) = rows.clauses("sm");
    let text_bytes = |path: &str| {
        let text = format!("json_extract({data}, '{path}')");
        format!(
            "coalesce(CASE WHEN json_valid({data}) AND json_type({data}, '{path}') = 'text' \
                 THEN octet_length({text}) END, 0)"
        )
    };
    [
        format!(
            "SELECT {rowid}count(*), coalesce(sum({}), 0) FROM session_message sm \
             WHERE {which} AND sm.type = 'shell'{group}",
            text_bytes("$.output.output")
        ),
        format!(
            "SELECT {rowid}count(*), coalesce(sum({}), 0) FROM session_message sm \
             WHERE {which} AND sm.type = 'synthetic' \
               AND CASE WHEN json_valid({data}) \
                   THEN json_extract({data}, '$.metadata.source') = 'shell' END{group}",
            text_bytes("$.text")
        ),
    ]
}

/// Where summary diffs are: the `message` rows, or the `message.updated.1` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiffsIn {
    Messages,
    Snapshots,
}

/// The count of diff entries holding a file body, and the bytes of those bodies as JSON text,
/// in `rows` of the table `place` names (of `message` rows, those of live history: not of a
/// session OpenCode 2 migrated).
fn diffs_sql(schema: &Schema, place: DiffsIn, rows: Rows) -> String {
    let live = format!(
        "NOT {} AND",
        super::migrated::in_migrated_session(schema, "r.session_id")
    );
    let (table, filter, path) = match place {
        DiffsIn::Messages => ("message", live.as_str(), "$.summary.diffs"),
        DiffsIn::Snapshots => (
            "event",
            "r.type = 'message.updated.1' AND",
            "$.info.summary.diffs",
        ),
    };
    let data = row_budget::data("r", table);
    let field = |key: &str| json_sql::entry_field("d", &format!("$.{key}"));
    let body = |key: &str| {
        let quoted = format!("json_quote({})", field(key));
        format!("coalesce({} - 2, 0)", row_budget::uncut_bytes("r", &quoted))
    };
    let (rowid, which, group) = rows.clauses("r");
    format!(
        "SELECT {rowid}count(*), coalesce(sum({} + {} + {}), 0) FROM {table} r, {} \
         WHERE {which} AND {filter} session_prune_contains({data}, '\"diffs\"') AND d.type = 'object' \
           AND ({} <> '' OR {} <> '' OR {} <> ''){group}",
        body("patch"),
        body("before"),
        body("after"),
        json_sql::entries(&data, path, "d"),
        field("patch"),
        field("before"),
        field("after")
    )
}
