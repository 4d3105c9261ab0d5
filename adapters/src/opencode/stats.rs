//! Where the bytes of an OpenCode database are: per table, per event type, how much of it is
//! technical content (tool and reasoning parts, V2 content entries) and snapshot events of it,
//! spill files, and the file, WAL and free-page sizes.
//!
//! Bytes are the stored `data` text (`octet_length(data)`) unless named otherwise; file
//! sizes are from the file system. Malformed rows count in totals and never as technical.

use std::path::Path;

use rusqlite::Connection;
use serde::Serialize;

use super::schema::Schema;
use super::spill;

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
}

/// Spill files in `<data>/tool-output/`.
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
    /// Spill files.
    pub spill: Spill,
}

/// Measures the database at `path` through `conn`.
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
        let mut stmt = conn.prepare(
            "SELECT CAST(type AS TEXT), count(*), coalesce(sum(octet_length(data)), 0) \
             FROM event GROUP BY type ORDER BY 3 DESC",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok(EventVolume {
                event_type: super::values::lenient_text(row.get_ref(0)?),
                volume: Volume {
                    count: row.get::<_, i64>(1)?.max(0) as u64,
                    bytes: row.get::<_, i64>(2)?.max(0) as u64,
                },
            })
        })?;
        for row in rows {
            events.push(row?);
        }
    }

    // The substring test skips most rows before their JSON is parsed.
    const PART_TYPE: &str = "CASE WHEN json_valid(data) THEN json_extract(data, '$.type') END";
    let mut technical = Technical::default();
    if measured("part") {
        technical.tool_parts = volume(&format!(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM part \
             WHERE session_prune_contains(data, '\"tool\"') AND {PART_TYPE} = 'tool'"
        ))?;
        technical.reasoning_parts = volume(&format!(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM part \
             WHERE session_prune_contains(data, '\"reasoning\"') AND {PART_TYPE} = 'reasoning'"
        ))?;
    }
    if measured("event") && schema.has_column("event", "type") {
        technical.snapshot_events = volume(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM event \
             WHERE type = 'message.part.updated.1' \
               AND (session_prune_contains(data, '\"tool\"') OR session_prune_contains(data, '\"reasoning\"')) \
               AND CASE WHEN json_valid(data) THEN json_extract(data, '$.part.type') END IN ('tool', 'reasoning')",
        )?;
    }
    if schema.has_v2() {
        technical.v2_entries = volume(
            "SELECT count(*), coalesce(sum(octet_length(j.value)), 0) \
             FROM session_message sm, \
                  json_each(CASE WHEN json_valid(sm.data) THEN sm.data ELSE '{}' END, '$.content') j \
             WHERE j.type = 'object' AND json_extract(j.value, '$.type') IN ('tool', 'reasoning')",
        )?;
    }

    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
    let free_pages: i64 = conn.query_row("PRAGMA freelist_count", [], |row| row.get(0))?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");

    let mut spill = Spill::default();
    let files = spill::list(&spill::folder(path)).unwrap_or_default();
    if !files.is_empty() {
        let referenced = spill::referenced(conn)?;
        for (name, bytes) in files {
            spill.files.count += 1;
            spill.files.bytes += bytes;
            if !referenced.contains(&name) {
                spill.unreferenced.count += 1;
                spill.unreferenced.bytes += bytes;
            }
        }
    }
    Ok(Stats {
        database_bytes: size(path),
        wal_bytes: size(Path::new(&wal)),
        free_bytes: (page_size.max(0) as u64).saturating_mul(free_pages.max(0) as u64),
        tables,
        events,
        technical,
        spill,
    })
}
