//! The overview estimated (docs/ARCHITECTURE.md, "The overview"): the file, table and event
//! type figures exact from one pass over each table's record headers (`octet_length` reads a
//! value's size, never the value), which also sums each session's bytes for the overview's
//! largest sessions; the technical content and the copies from the rows the sample draws
//! ([`super::sample`]), read whole and measured by the same SQL as [`measure`].
//!
//! A drawn snapshot event is superseded when its aggregate holds a later snapshot of the same
//! entity and type; to tell, the entity of each of those later snapshots is read from the first
//! bytes of its `data` (`v1::snapshot_entity`), through SQLite's incremental blob I/O, which
//! reads a row's first page and not the rest.
//!
//! [`measure`]: super::measure

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::blob::Blob;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, MAIN_DB};

use super::sample::{Design, Drawer, Drawing, Sizes, Tally};
use super::{
    diffs_sql, part_is, shell_sql, technical_snapshot, v2_entries_sql, Copies, DiffsIn, Estimate,
    EventVolume, Files, Rows, Stats, TableVolume, Technical, Volume,
};
use crate::schema::Schema;
use crate::sessions::SessionTotals;
use crate::v1::compact::event_entity_sql;
use crate::v1::events::{MESSAGE_UPDATED, PART_UPDATED, SESSION_UPDATED};
use crate::v1::snapshot_entity::{entity_in_prefix, PREFIX_BYTES};
use crate::values::lenient_text;

/// Seeds of each table's draws.
const PART: u64 = 0x7061_7274;
const MESSAGE: u64 = 0x6d65_7373;
const SESSION_MESSAGE: u64 = 0x736d_7367;
const EVENT: u64 = 0x6576_6e74;

/// The snapshot types, whose superseded rows are copies.
const SNAPSHOTS: [&str; 3] = [PART_UPDATED, MESSAGE_UPDATED, SESSION_UPDATED];

/// Measures the database at `path` through `conn` as [`super::measure`] does, the technical
/// content and the copies estimated from a sample (their `Stats::estimate` says how), and
/// each session's total bytes. It reads every row's size once and rows holding about 5 % of
/// each table's bytes whole (a table of at most 8 MiB whole, so its figures are exact), plus the
/// first bytes of the snapshots after each drawn one in its session.
///
/// Errors: SQLite's.
pub fn estimate(conn: &Connection, path: &Path) -> rusqlite::Result<(Stats, SessionTotals)> {
    let schema = Schema::read(conn)?;
    let files = Files::read(conn, &schema, path)?;
    let mut pass = Pass {
        conn,
        schema: &schema,
        database_bytes: files.database_bytes.saturating_add(files.wal_bytes),
        totals: SessionTotals::default(),
    };
    let measured = |table: &str| schema.has(table) && schema.has_column(table, "data");
    let mut read = Reading::default();
    let mut technical = Technical::default();
    let mut copies = Copies::default();
    let mut events = Vec::new();
    let mut entities_read = 0u64;
    // Each session's prunable bytes, estimated (as `SessionSummary::prunable_bytes` counts
    // them: tool and reasoning parts, snapshot events of them, V2 tool and reasoning entries).
    let mut prunable: HashMap<String, f64> = HashMap::new();

    if measured("part") {
        let sample = pass.scan("part", PART)?;
        let [(tools, mut each), (reasoning, of_reasoning)] =
            sample.figures(conn, &technical_parts_sql(&schema))?;
        each.extend(of_reasoning);
        technical.tool_parts = tools;
        technical.reasoning_parts = reasoning;
        if let Some(column) = SessionTotals::session_column(&schema, "part") {
            sample.add_per_session(conn, "part", column, &each, &mut prunable)?;
        }
        read.sampled("part", &sample);
    }
    if measured("message") {
        let sample = pass.scan("message", MESSAGE)?;
        copies.diffs_in_messages =
            sample.estimate(conn, &diffs_sql(&schema, DiffsIn::Messages, Rows::Drawn))?;
        read.sampled("message", &sample);
    }
    if measured("session_message") {
        let sample = pass.scan("session_message", SESSION_MESSAGE)?;
        if schema.has_v2() {
            let (entries, each) = sample.figure(conn, &v2_entries_sql(Rows::Drawn))?;
            technical.v2_entries = entries;
            let [output, sent] = shell_sql(Rows::Drawn);
            technical.shell_output = sample.estimate(conn, &output)?;
            technical.shell_sent = sample.estimate(conn, &sent)?;
            if let Some(column) = SessionTotals::session_column(&schema, "session_message") {
                sample.add_per_session(conn, "session_message", column, &each, &mut prunable)?;
            }
            read.sampled("session_message", &sample);
        } else {
            read.unsampled("session_message", &sample);
        }
    }
    if measured("event") {
        let typed = schema.has_column("event", "type");
        let (sample, by_type) = pass.scan_events(typed)?;
        events = by_type;
        if typed {
            let (snapshots, each) = sample.figure(conn, &technical_snapshot_sql())?;
            technical.snapshot_events = snapshots;
            if let Some(column) = SessionTotals::session_column(&schema, "event") {
                sample.add_per_session(conn, "event", column, &each, &mut prunable)?;
            }
            if ["seq", "aggregate_id"]
                .iter()
                .all(|column| schema.has_column("event", column))
            {
                copies.diffs_in_snapshots =
                    sample.estimate(conn, &diffs_sql(&schema, DiffsIn::Snapshots, Rows::Drawn))?;
                let (superseded, entities) = superseded(conn, &sample)?;
                copies.superseded_snapshots = superseded;
                entities_read = entities;
            }
            read.sampled("event", &sample);
        } else {
            read.unsampled("event", &sample);
        }
    }
    read.tables
        .sort_by_key(|t| std::cmp::Reverse(t.volume.bytes));

    let whole = read.estimated.is_empty();
    let tables = std::mem::take(&mut read.tables);
    let estimate = (!whole).then(|| Estimate {
        estimated_tables: std::mem::take(&mut read.estimated),
        sampled_rows: read.sampled_rows,
        entities_read,
        margin_bytes: read.margin,
    });
    let migrated_v1 = super::MigratedV1::read(conn, &schema)?;
    let stats = files.into_stats(tables, events, technical, copies, migrated_v1, estimate);
    let mut totals = pass.totals;
    if !whole {
        for (session, bytes) in prunable {
            totals.estimate_prunable(session, bytes.round() as u64);
        }
    }
    Ok((stats, totals))
}

/// A value as SQLite tells values apart, to group rows by a column as `GROUP BY` and
/// `PARTITION BY` do: of another storage class, another value (a text `'7'` is not the whole
/// number 7, nor the blob of the same bytes). Its order is SQLite's order of the classes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Null,
    Integer(i64),
    /// The bits of a real.
    Real(u64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl Key {
    fn of(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(n) => Self::Integer(n),
            ValueRef::Real(r) => Self::Real(r.to_bits()),
            ValueRef::Text(t) => Self::Text(t.to_vec()),
            ValueRef::Blob(b) => Self::Blob(b.to_vec()),
        }
    }

    /// The value, to bind.
    fn value(&self) -> rusqlite::types::Value {
        use rusqlite::types::Value;
        match self {
            Self::Null => Value::Null,
            Self::Integer(n) => Value::Integer(*n),
            Self::Real(bits) => Value::Real(f64::from_bits(*bits)),
            Self::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            Self::Blob(b) => Value::Blob(b.clone()),
        }
    }
}

/// What the samples of the tables read.
#[derive(Default)]
struct Reading {
    /// Each table's rows and bytes (exact).
    tables: Vec<TableVolume>,
    sampled_rows: u64,
    /// The largest table's margin.
    margin: u64,
    /// The tables whose figures are estimated (not read whole); none: every figure is exact.
    estimated: Vec<&'static str>,
}

impl Reading {
    /// Records `table`, whose figures were estimated from `sample`.
    fn sampled(&mut self, table: &'static str, sample: &Sample) {
        self.sampled_rows += sample.read_whole();
        self.margin = self.margin.max(sample.margin());
        if !sample.design.reads_whole() {
            self.estimated.push(table);
        }
        self.unsampled(table, sample);
    }

    /// Records `table`, of which only the sizes were read (no figure is of its rows here).
    fn unsampled(&mut self, table: &'static str, sample: &Sample) {
        self.tables.push(TableVolume {
            table,
            volume: sample.sizes.volume,
        });
    }
}

/// A drawn row: its `rowid`, size and the chance it had.
#[derive(Debug, Clone, Copy)]
struct Drawn {
    rowid: i64,
    len: u64,
    chance: f64,
}

/// The rows drawn from one table, and the table's exact count and bytes.
struct Sample {
    sizes: Sizes,
    design: Design,
    drawn: Vec<Drawn>,
    /// The counted rows: every row had the same chance (counts come from them).
    counted: HashSet<i64>,
    /// Every drawn row with its size, every counted row as one.
    all: Tally,
    /// Each session's bytes in this table (exact), where its rows name a session.
    session_bytes: HashMap<String, u64>,
}

impl Sample {
    /// The estimate of the figure whose `(rowid, count, bytes)` rows `sql` selects of the drawn
    /// rows (bound to `?1` as a JSON array of their `rowid`s).
    fn estimate(&self, conn: &Connection, sql: &str) -> rusqlite::Result<Volume> {
        Ok(self.figure(conn, sql)?.0)
    }

    /// [`Self::estimate`], and the bytes of the figure in each drawn row that has any.
    fn figure(
        &self,
        conn: &Connection,
        sql: &str,
    ) -> rusqlite::Result<(Volume, HashMap<i64, u64>)> {
        let sql = format!("WITH figure(id, c, b) AS ({sql}) SELECT id, 0, c, b FROM figure");
        let [figure] = self.figures(conn, &sql)?;
        Ok(figure)
    }

    /// [`Self::figure`] of `N` figures at once, whose `(rowid, figure, count, bytes)` rows
    /// `sql` selects (`figure` from 0 to `N - 1`): one read of each drawn row for all of them.
    fn figures<const N: usize>(
        &self,
        conn: &Connection,
        sql: &str,
    ) -> rusqlite::Result<[(Volume, HashMap<i64, u64>); N]> {
        let chances: HashMap<i64, f64> = self.drawn.iter().map(|d| (d.rowid, d.chance)).collect();
        let mut stmt = conn.prepare(sql)?;
        let mut rows = stmt.query([self.rowids()])?;
        let mut tallies = [Tally::default(); N];
        let mut each: [HashMap<i64, u64>; N] = std::array::from_fn(|_| HashMap::new());
        while let Some(row) = rows.next()? {
            let rowid: i64 = row.get(0)?;
            let figure = match usize::try_from(row.get::<_, i64>(1)?) {
                Ok(figure) if figure < N => figure,
                _ => continue,
            };
            if let Some(&chance) = chances.get(&rowid) {
                let bytes = size(row.get_ref(3)?);
                tallies[figure].add_bytes(bytes, chance);
                *each[figure].entry(rowid).or_insert(0) += bytes;
            }
            if self.counted.contains(&rowid) {
                tallies[figure].add_count(size(row.get_ref(2)?));
            }
        }
        let mut each = each.into_iter();
        Ok(tallies.map(|tally| {
            (
                tally.volume(self.all, self.sizes),
                each.next().unwrap_or_default(),
            )
        }))
    }

    /// Adds to `prunable` each session's estimated bytes of the figure whose bytes per drawn
    /// row are `each`: the session's bytes in this table times the figure's share of its drawn
    /// rows' (of the whole table's drawn rows, where none of the session's was drawn).
    fn add_per_session(
        &self,
        conn: &Connection,
        table: &str,
        column: &str,
        each: &HashMap<i64, u64>,
        prunable: &mut HashMap<String, f64>,
    ) -> rusqlite::Result<()> {
        // session -> (figure, all) over its drawn rows, each weighted by 1 / π.
        let mut shares: HashMap<String, (f64, f64)> = HashMap::new();
        let (mut figure, mut all) = (0.0, 0.0);
        let chances: HashMap<i64, (f64, u64)> = self
            .drawn
            .iter()
            .map(|d| (d.rowid, (d.chance, d.len)))
            .collect();
        let mut stmt = conn.prepare(&format!(
            "SELECT rowid, {column} FROM {table} WHERE rowid IN (SELECT value FROM json_each(?1))"
        ))?;
        let mut rows = stmt.query([self.rowids()])?;
        while let Some(row) = rows.next()? {
            let rowid: i64 = row.get(0)?;
            let Some(&(chance, len)) = chances.get(&rowid) else {
                continue;
            };
            let bytes = each.get(&rowid).copied().unwrap_or(0) as f64 / chance;
            if let Some(session) = SessionTotals::key(row.get_ref(1)?) {
                let share = shares.entry(session).or_default();
                share.0 += bytes;
                share.1 += len as f64 / chance;
            }
            figure += bytes;
            all += len as f64 / chance;
        }
        let ratio = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
        for (session, &bytes) in &self.session_bytes {
            let (part, whole) = shares.get(session).copied().unwrap_or((figure, all));
            *prunable.entry(session.clone()).or_default() += bytes as f64 * ratio(part, whole);
        }
        Ok(())
    }

    /// The `rowid`s drawn, as the JSON array `?1` of a `Rows::Drawn` statement takes.
    fn rowids(&self) -> String {
        let mut ids: Vec<i64> = self.drawn.iter().map(|d| d.rowid).collect();
        ids.extend(self.counted.iter().copied());
        ids.sort_unstable();
        ids.dedup();
        serde_json::Value::from(ids).to_string()
    }

    /// Rows read whole: drawn or counted.
    fn read_whole(&self) -> u64 {
        let both = self
            .drawn
            .iter()
            .filter(|d| self.counted.contains(&d.rowid))
            .count();
        (self.drawn.len() + self.counted.len() - both) as u64
    }

    /// About twice the standard deviation of a byte figure of this table, at most.
    fn margin(&self) -> u64 {
        self.design.margin()
    }
}

/// The passes over the tables' row sizes.
struct Pass<'a> {
    conn: &'a Connection,
    schema: &'a Schema,
    database_bytes: u64,
    totals: SessionTotals,
}

impl Pass<'_> {
    /// Reads every row's size of `table` once, drawing its sample and adding each row to its
    /// session's total; `columns` are read too, from index 3 on, and handed with the row's size
    /// to `each`.
    fn draw(
        &mut self,
        table: &str,
        seed: u64,
        columns: &str,
        mut each: impl FnMut(&rusqlite::Row<'_>, u64) -> rusqlite::Result<()>,
    ) -> rusqlite::Result<Sample> {
        let session = SessionTotals::session_column(self.schema, table);
        let mut stmt = self.conn.prepare(&format!(
            "SELECT rowid, octet_length(data), {}{columns} FROM {table}",
            session.unwrap_or("NULL")
        ))?;
        let mut rows = stmt.query([])?;
        let mut drawer = Drawer::new(self.database_bytes, seed);
        let mut session_bytes: HashMap<String, u64> = HashMap::new();
        while let Some(row) = rows.next()? {
            let len = size(row.get_ref(1)?);
            drawer.offer(row.get(0)?, len);
            if session.is_some() {
                let id = row.get_ref(2)?;
                self.totals.add(table, id, len);
                let known = match id {
                    ValueRef::Text(text) => std::str::from_utf8(text)
                        .ok()
                        .and_then(|id| session_bytes.get_mut(id)),
                    _ => None,
                };
                match known {
                    Some(total) => *total += len,
                    None => {
                        if let Some(id) = SessionTotals::key(id) {
                            *session_bytes.entry(id).or_insert(0) += len;
                        }
                    }
                }
            }
            each(row, len)?;
        }
        let Drawing {
            sizes,
            design,
            drawn,
            counted,
        } = drawer.finish();
        let mut all = Tally::default();
        let drawn = drawn
            .into_iter()
            .map(|(rowid, len, chance)| {
                all.add_bytes(len, chance);
                Drawn { rowid, len, chance }
            })
            .collect();
        for _ in &counted {
            all.add_count(1);
        }
        Ok(Sample {
            sizes,
            design,
            drawn,
            counted: counted.into_iter().collect(),
            all,
            session_bytes,
        })
    }

    /// The sample of `table`.
    fn scan(&mut self, table: &str, seed: u64) -> rusqlite::Result<Sample> {
        self.draw(table, seed, "", |_, _| Ok(()))
    }

    /// The sample of `event`, with the count and bytes per type (`typed`: the table has a
    /// `type`), largest first (ties: by type).
    fn scan_events(&mut self, typed: bool) -> rusqlite::Result<(Sample, Vec<EventVolume>)> {
        // Grouped by the stored value, as `measure`'s `GROUP BY type`; each named and ordered
        // by its `CAST(type AS TEXT)` (NULL first), then by the value, as its `ORDER BY`.
        // Text types (all OpenCode writes) are looked up by their bytes, without a copy.
        let mut text_types: HashMap<Vec<u8>, (Option<Vec<u8>>, Volume)> = HashMap::new();
        let mut other_types: HashMap<Key, (Option<Vec<u8>>, Volume)> = HashMap::new();
        let columns = if typed {
            ", type, CAST(type AS TEXT)"
        } else {
            ""
        };
        let sample = self.draw("event", EVENT, columns, |row, len| {
            if typed {
                let raw = row.get_ref(3)?;
                let name = || {
                    let name = row.get_ref(4).ok().and_then(|v| v.as_bytes().ok());
                    (name.map(<[u8]>::to_vec), Volume::default())
                };
                let of_type = match raw {
                    ValueRef::Text(text) => match text_types.get_mut(text) {
                        Some(of_type) => of_type,
                        None => text_types.entry(text.to_vec()).or_insert_with(name),
                    },
                    _ => other_types.entry(Key::of(raw)).or_insert_with(name),
                };
                of_type.1.count += 1;
                of_type.1.bytes += len;
            }
            Ok(())
        })?;
        let mut grouped: Vec<(Key, Option<Vec<u8>>, Volume)> = text_types
            .into_iter()
            .map(|(text, (name, volume))| (Key::Text(text), name, volume))
            .chain(
                other_types
                    .into_iter()
                    .map(|(key, (name, volume))| (key, name, volume)),
            )
            .collect();
        grouped.sort_by(|a, b| {
            b.2.bytes
                .cmp(&a.2.bytes)
                .then_with(|| a.1.cmp(&b.1))
                .then_with(|| a.0.cmp(&b.0))
        });
        let events = grouped
            .into_iter()
            .map(|(_, name, volume)| EventVolume {
                event_type: name.map_or_else(String::new, |n| lenient_text(ValueRef::Text(&n))),
                volume,
            })
            .collect();
        Ok((sample, events))
    }
}

/// A size or count read from SQLite (NULL, or anything but a whole number: 0).
fn size(value: ValueRef<'_>) -> u64 {
    match value {
        ValueRef::Integer(n) => n.max(0) as u64,
        _ => 0,
    }
}

/// The `(rowid, figure, count, bytes)` of the drawn `part` rows that are tool parts (figure 0)
/// or reasoning parts (figure 1).
fn technical_parts_sql(schema: &Schema) -> String {
    format!(
        "SELECT rowid, kind, 1, len FROM ( \
           SELECT rowid, octet_length(data) AS len, \
                  CASE WHEN {} THEN 0 WHEN {} THEN 1 END AS kind \
           FROM part WHERE rowid IN (SELECT value FROM json_each(?1))) \
         WHERE kind IS NOT NULL",
        part_is(schema, "tool"),
        part_is(schema, "reasoning")
    )
}

/// The `(rowid, count, bytes)` of the drawn `event` rows that are snapshots of technical parts.
fn technical_snapshot_sql() -> String {
    format!(
        "SELECT rowid, 1, octet_length(data) FROM event \
         WHERE rowid IN (SELECT value FROM json_each(?1)) AND {}",
        technical_snapshot()
    )
}

/// A drawn snapshot event whose entity could be read.
struct DrawnSnapshot {
    seq: i64,
    len: u64,
    entity: String,
    /// Its `π` when it was drawn.
    chance: Option<f64>,
    /// Whether it was counted.
    counted: bool,
}

/// The superseded snapshots per type, estimated from the drawn snapshot events of `sample`,
/// largest first (ties: by type); and how many snapshots' entities were read to tell (the
/// drawn ones' and those after them).
fn superseded(conn: &Connection, sample: &Sample) -> rusqlite::Result<(Vec<EventVolume>, u64)> {
    let chances: HashMap<i64, f64> = sample.drawn.iter().map(|d| (d.rowid, d.chance)).collect();
    // (aggregate, type) -> its drawn snapshots. As in `measure`, a snapshot counts only where its
    // `seq` is an integer and its entity text.
    // A table read whole reads each entity whole too, so that its figures are exact.
    let mut entities = Entities::new(conn, !sample.design.reads_whole())?;
    let mut groups: HashMap<(Key, String), Vec<DrawnSnapshot>> = HashMap::new();
    {
        let mut stmt = conn.prepare(&format!(
            "SELECT rowid, aggregate_id, CAST(type AS TEXT), seq, octet_length(data) FROM event \
             WHERE rowid IN (SELECT value FROM json_each(?1)) \
               AND type IN ('{PART_UPDATED}', '{MESSAGE_UPDATED}', '{SESSION_UPDATED}') \
               AND typeof(seq) = 'integer'"
        ))?;
        let mut rows = stmt.query([sample.rowids()])?;
        while let Some(row) = rows.next()? {
            let rowid: i64 = row.get(0)?;
            let chance = chances.get(&rowid).copied();
            let counted = sample.counted.contains(&rowid);
            if chance.is_none() && !counted {
                continue;
            }
            let event_type = lenient_text(row.get_ref(2)?);
            let Some(entity) = entities.of(rowid, &event_type)? else {
                continue;
            };
            groups
                .entry((Key::of(row.get_ref(1)?), event_type))
                .or_default()
                .push(DrawnSnapshot {
                    seq: row.get(3)?,
                    len: size(row.get_ref(4)?),
                    entity,
                    chance,
                    counted,
                });
        }
    }

    let mut later = conn.prepare(
        "SELECT rowid, seq FROM event \
         WHERE aggregate_id IS ?1 AND type = ?2 AND seq > ?3 AND typeof(seq) = 'integer'",
    )?;
    let mut tallies: HashMap<String, Tally> = HashMap::new();
    for ((aggregate, event_type), snapshots) in &groups {
        let first = snapshots.iter().map(|s| s.seq).min().unwrap_or(i64::MAX);
        // The newest `seq` of each entity after the first drawn snapshot.
        let mut newest: HashMap<String, i64> = HashMap::new();
        let mut rows = later.query(rusqlite::params![aggregate.value(), event_type, first])?;
        while let Some(row) = rows.next()? {
            let (rowid, seq): (i64, i64) = (row.get(0)?, row.get(1)?);
            if let Some(entity) = entities.of(rowid, event_type)? {
                let top = newest.entry(entity).or_insert(seq);
                *top = (*top).max(seq);
            }
        }
        let tally = tallies.entry(event_type.clone()).or_default();
        for snapshot in snapshots {
            if newest
                .get(&snapshot.entity)
                .is_some_and(|&top| top > snapshot.seq)
            {
                if let Some(chance) = snapshot.chance {
                    tally.add_bytes(snapshot.len, chance);
                }
                if snapshot.counted {
                    tally.add_count(1);
                }
            }
        }
    }
    let mut superseded: Vec<EventVolume> = SNAPSHOTS
        .iter()
        .filter_map(|&event_type| {
            let volume = tallies.get(event_type)?.volume(sample.all, sample.sizes);
            (volume.count > 0).then(|| EventVolume {
                event_type: event_type.to_string(),
                volume,
            })
        })
        .collect();
    superseded.sort_by(|a, b| {
        b.volume
            .bytes
            .cmp(&a.volume.bytes)
            .then_with(|| a.event_type.cmp(&b.event_type))
    });
    Ok((superseded, entities.read))
}

/// Reads the entity of snapshot events by `rowid`: from the first [`PREFIX_BYTES`] of `data`
/// where they name it (when `first_bytes`), else from the whole row by `entity_sql`.
struct Entities<'c> {
    conn: &'c Connection,
    /// The open blob handle, moved from row to row; `None` before the first and after a row
    /// it could not open (SQLite's handle is unusable after a failed move).
    blob: Option<Blob<'c>>,
    whole: rusqlite::Statement<'c>,
    /// Whether the first bytes are read before the whole row.
    first_bytes: bool,
    prefix: Vec<u8>,
    /// Entities read.
    read: u64,
}

impl<'c> Entities<'c> {
    fn new(conn: &'c Connection, first_bytes: bool) -> rusqlite::Result<Self> {
        let whole = conn.prepare(&format!(
            "SELECT CASE WHEN typeof(e) = 'text' THEN e END \
             FROM (SELECT {} AS e FROM event WHERE rowid = ?1)",
            event_entity_sql()
        ))?;
        Ok(Self {
            conn,
            blob: None,
            whole,
            first_bytes,
            prefix: vec![0; PREFIX_BYTES],
            read: 0,
        })
    }

    /// The entity of row `rowid`, a snapshot of `event_type`; `None` when it has none that is
    /// text.
    fn of(&mut self, rowid: i64, event_type: &str) -> rusqlite::Result<Option<String>> {
        self.read += 1;
        if let Some(len) = self.first_bytes.then(|| self.read_prefix(rowid)).flatten() {
            if let Some(entity) = entity_in_prefix(&self.prefix[..len], event_type) {
                return Ok(Some(entity));
            }
        }
        let mut rows = self.whole.query([rowid])?;
        match rows.next()? {
            Some(row) => Ok(match row.get_ref(0)? {
                ValueRef::Null => None,
                entity => Some(lenient_text(entity)),
            }),
            None => Ok(None),
        }
    }

    /// Reads the first bytes of row `rowid`'s `data` into `prefix`: how many, or `None` when
    /// the value cannot be opened as text or a blob.
    fn read_prefix(&mut self, rowid: i64) -> Option<usize> {
        let moved = match self.blob.take() {
            Some(mut blob) => blob.reopen(rowid).map(|()| blob),
            None => self.conn.blob_open(MAIN_DB, "event", "data", rowid, true),
        };
        let blob = moved.ok()?;
        let len = blob.read_at(&mut self.prefix, 0).ok()?;
        self.blob = Some(blob);
        Some(len)
    }
}
