//! Compaction of a V1 session's event log: its superseded snapshots deleted, in the write
//! transaction `crate::write` opens, with a receipt.
//!
//! A snapshot event is a full state of its entity: `message.part.updated.1` of a part (its
//! `data.part.id`), `message.updated.1` of a message and `session.updated.1` of a session (their
//! `data.info.id`). One is superseded when the session's aggregate holds a newer snapshot (a
//! higher `seq`) of the same entity and type: replaying what is left in `seq` order ends in the
//! same state as replaying all of them. Every other event type is left alone (deltas such as
//! `session.next.*`, `message.part.removed.1`, `session.created.1`).
//!
//! Reading which entity each snapshot holds means reading every snapshot of the session, which
//! must not happen under the write lock (OpenCode waits 5 s for it). So the store reads the
//! session's snapshots first, in a read transaction ([`survey`]), and the write transaction
//! checks by primary key that what it read still holds: the newest snapshot of every entity it
//! deletes from is there, and each row it deletes is the one read (id, aggregate, seq, type and
//! length of `data`). Rows are never rewritten by OpenCode; a row found otherwise is a
//! `conflict`, nothing deleted.
//!
//! A session's compaction is planned as one request per range of seqs ([`Survey::ranges`]), each
//! deleting at most [`RANGE_ROWS`] rows and [`RANGE_BYTES`] bytes, so that no one transaction
//! holds the write lock long (docs/ARCHITECTURE.md, "Group transactions"). Deleting one range's
//! snapshots leaves every other range's superseded: what supersedes a snapshot is the newest of
//! its entity, which is never deleted.
//!
//! Left alone: a snapshot whose entity or `seq` cannot be read (not JSON, no id, a `seq` that is
//! not an integer: its entity's snapshots are all kept), one whose id is not text (it cannot be
//! named), and, where the fence admitted an abandoned run, every snapshot of the run's messages
//! and of their parts. Source: docs/ARCHITECTURE.md, "Copies OpenCode keeps".

use std::collections::{HashMap, HashSet};

use pruning_archive::{ArchivedRows, TableRows};
use pruning_engine::revision::event_log_revision;
use pruning_engine::{
    BlockedReason, Compacted, Operation, Plan, PruneCommand, PruneRequest, Refusal, SeqRange,
};
use rusqlite::{params, Connection, OptionalExtension};

use super::events::{MESSAGE_UPDATED, PART_UPDATED, SESSION_UPDATED};
use super::fence::{self, Admission, FenceClock};
use super::known::Known;
use super::naming::{self, Data};
use super::runs::{self, Abandoned};
use super::snapshot;
use crate::archive::{capture_rows, sort_by_id};
use crate::row_budget;
use crate::schema::Schema;
use crate::write::{Prepared, Written};

/// The entity a snapshot event holds, as SQL over an `event` row: `data.part.id` of a
/// `message.part.updated.1` event, `data.info.id` of the others, read by SQLite's
/// `json_extract` (NULL for data that is not JSON). The one statement of it: the survey, the
/// restore's check and `stats` all read it so. `data` is the SQL of the row's data: an `event`
/// row's bounded by the row budget, or a value bound in.
pub(crate) fn entity_sql(data: &str) -> String {
    format!(
        "CASE WHEN json_valid({data}) THEN json_extract({data}, \
           CASE type WHEN 'message.part.updated.1' THEN '$.part.id' ELSE '$.info.id' END) END"
    )
}

/// [`entity_sql`] of the `data` of an unaliased `event` row.
pub(crate) fn event_entity_sql() -> String {
    entity_sql(&row_budget::data("", "event"))
}

/// The kind of entity a snapshot event holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SnapshotKind {
    /// `message.part.updated.1`: a part.
    Part,
    /// `message.updated.1`: a message.
    Message,
    /// `session.updated.1`: a session.
    Session,
}

impl SnapshotKind {
    /// The `event.type` of this kind.
    pub fn event_type(self) -> &'static str {
        match self {
            Self::Part => PART_UPDATED,
            Self::Message => MESSAGE_UPDATED,
            Self::Session => SESSION_UPDATED,
        }
    }

    /// The kind of an `event.type`, `None` for a type that is not a snapshot's.
    pub fn of(event_type: &str) -> Option<Self> {
        match event_type {
            PART_UPDATED => Some(Self::Part),
            MESSAGE_UPDATED => Some(Self::Message),
            SESSION_UPDATED => Some(Self::Session),
            _ => None,
        }
    }
}

/// One snapshot event as the survey read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `event.id`.
    pub id: String,
    /// Its type.
    pub kind: SnapshotKind,
    /// `event.seq`.
    pub seq: i64,
    /// Bytes of `event.data`.
    pub len: i64,
    /// The entity it holds: a part, message or session id.
    pub entity: String,
    /// The message it belongs to: the part's `messageID`, or the message itself (`None` for a
    /// session snapshot, or a part snapshot that names none).
    pub message: Option<String>,
}

/// What a session's event log holds of superseded snapshots, read in one read transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    /// The session.
    pub session_id: String,
    /// The event log's revision when it was read ([`event_log_revision`]).
    pub revision: String,
    /// Every superseded snapshot, in `seq` order.
    pub superseded: Vec<Snapshot>,
    /// The newest snapshot of each entity that has superseded ones (what keeps them superseded).
    pub newest: Vec<Snapshot>,
}

/// Most snapshots one compaction request deletes (one range of `Survey::ranges`).
pub const RANGE_ROWS: usize = 1_000;

/// Most bytes of `event.data` one compaction request deletes, 4 MiB (one range of
/// `Survey::ranges`); a range holds one snapshot more when that one alone is larger. Freeing a
/// row's overflow pages is what a compaction's transaction spends its time on.
pub const RANGE_BYTES: u64 = 4 * 1024 * 1024;

impl Survey {
    /// The ranges of `event.seq` the session's compaction is requested in, in order: each one
    /// spans superseded snapshots in `seq` order up to [`RANGE_ROWS`] rows or [`RANGE_BYTES`]
    /// bytes (the first snapshot of a range always joins it), and snapshots of one `seq` are
    /// never split between two. Snapshots over the row budget, which a compaction leaves, count
    /// for no range. Empty when nothing is superseded. The same survey gives the same ranges:
    /// a clean and a scheduled clean of one database make the same requests.
    pub fn ranges(&self) -> Vec<SeqRange> {
        let mut ranges = Vec::new();
        // The range being filled: its first seq, last seq, rows and bytes.
        let mut open: Option<(i64, i64, usize, u64)> = None;
        for snapshot in self.superseded.iter().filter(|s| !over_budget(s)) {
            let len = u64::try_from(snapshot.len).unwrap_or(0);
            if let Some((first, last, rows, bytes)) = open {
                let full = rows + 1 > RANGE_ROWS || bytes + len > RANGE_BYTES;
                if full && snapshot.seq != last {
                    ranges.push(SeqRange { first, last });
                    open = None;
                }
            }
            open = Some(match open {
                Some((first, _, rows, bytes)) => (first, snapshot.seq, rows + 1, bytes + len),
                None => (snapshot.seq, snapshot.seq, 1, len),
            });
        }
        ranges.extend(open.map(|(first, last, _, _)| SeqRange { first, last }));
        ranges
    }
}

/// Whether a snapshot is over the row budget: it stays, as a message over it is never pruned,
/// since the archive would have to hold it whole (docs/ARCHITECTURE.md, "Rows over the budget").
fn over_budget(snapshot: &Snapshot) -> bool {
    usize::try_from(snapshot.len).map_or(true, |len| len > row_budget::ROW_BYTES)
}

/// The session's `event_sequence.seq` (`None` without a row) and its event log's revision.
///
/// Errors: SQLite's.
pub fn revision(conn: &Connection, session_id: &str) -> rusqlite::Result<String> {
    let seq: Option<Option<i64>> = crate::cached::query_row(
        conn,
        "SELECT CASE typeof(seq) WHEN 'integer' THEN seq END FROM event_sequence \
         WHERE aggregate_id = ?1",
        [session_id],
        |row| row.get(0),
    )
    .optional()?;
    Ok(event_log_revision(session_id, seq.flatten()))
}

/// Reads every snapshot event of the session's aggregate (inside the caller's read
/// transaction) and finds the superseded ones. Costs one read of the session's snapshots; no
/// lock is held beyond the read transaction's.
///
/// Errors: SQLite's.
pub fn survey(conn: &Connection, session_id: &str) -> rusqlite::Result<Survey> {
    let revision = revision(conn, session_id)?;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, type, CASE typeof(seq) WHEN 'integer' THEN seq END, octet_length(data), {} \
         FROM event WHERE aggregate_id = ?1 AND type IN (?2, ?3, ?4)",
        row_budget::data("", "event")
    ))?;
    let mut rows = stmt.query(params![
        session_id,
        PART_UPDATED,
        MESSAGE_UPDATED,
        SESSION_UPDATED
    ])?;
    let mut groups: HashMap<(SnapshotKind, String), Rows> = HashMap::new();
    // The rows read and not yet named, with their data's bytes: named a chunk at a time.
    let mut chunk: Vec<Read> = Vec::new();
    let mut chunk_bytes = 0;
    while let Some(row) = rows.next()? {
        let Some(kind) = text(row.get_ref(1)?).as_deref().and_then(SnapshotKind::of) else {
            continue;
        };
        let data = Data::of(row.get_ref(4)?);
        chunk_bytes += data.len() + naming::ROW_BYTES;
        chunk.push(Read {
            id: text(row.get_ref(0)?),
            seq: row.get(2)?,
            len: row.get::<_, Option<i64>>(3)?.unwrap_or(0),
            kind,
            data,
        });
        if chunk_bytes >= naming::CHUNK_BYTES {
            group(conn, std::mem::take(&mut chunk), &mut groups)?;
            chunk_bytes = 0;
        }
    }
    group(conn, chunk, &mut groups)?;
    let mut superseded = Vec::new();
    let mut newest = Vec::new();
    for mut rows in groups.into_values() {
        let shape: Vec<(Option<i64>, bool)> = rows
            .iter()
            .map(|(seq, snapshot)| (*seq, snapshot.is_some()))
            .collect();
        let Some(split) = split(&shape) else {
            continue;
        };
        newest.extend(rows[split.newest].1.take());
        for index in split.superseded {
            superseded.extend(rows[index].1.take());
        }
    }
    superseded.sort_by(|a, b| (a.seq, &a.id).cmp(&(b.seq, &b.id)));
    newest.sort_by(|a, b| (a.seq, &a.id).cmp(&(b.seq, &b.id)));
    Ok(Survey {
        session_id: session_id.to_string(),
        revision,
        superseded,
        newest,
    })
}

/// Each entity's snapshot rows in a survey, by `(kind, entity)`: each one's seq, and the
/// snapshot where its id is text.
type Rows = Vec<(Option<i64>, Option<Snapshot>)>;

/// A snapshot row the survey read, before its data is named.
struct Read {
    id: Option<String>,
    seq: Option<i64>,
    len: i64,
    kind: SnapshotKind,
    data: Data,
}

/// Names the data of the rows of `chunk` (together: [`naming::name_all`]) and adds each to
/// its entity's rows in `groups`, in the order read.
///
/// Errors: SQLite's.
fn group(
    conn: &Connection,
    chunk: Vec<Read>,
    groups: &mut HashMap<(SnapshotKind, String), Rows>,
) -> rusqlite::Result<()> {
    let (reads, datas): (Vec<_>, Vec<_>) = chunk
        .into_iter()
        .map(|read| {
            let Read {
                id,
                seq,
                len,
                kind,
                data,
            } = read;
            ((id, seq, len, kind), (kind, data))
        })
        .unzip();
    let names = naming::name_all(conn, &datas)?;
    for ((id, seq, len, kind), named) in reads.into_iter().zip(names) {
        // A snapshot whose entity cannot be read is neither superseded nor superseding.
        let Some(entity) = named.entity else {
            continue;
        };
        let message = match kind {
            SnapshotKind::Part => named.message,
            SnapshotKind::Message => Some(entity.clone()),
            SnapshotKind::Session => None,
        };
        let snapshot = match (id, seq) {
            (Some(id), Some(seq)) => Some(Snapshot {
                id,
                kind,
                seq,
                len,
                entity: entity.clone(),
                message,
            }),
            _ => None,
        };
        groups
            .entry((kind, entity))
            .or_default()
            .push((seq, snapshot));
    }
    Ok(())
}

/// The newest `seq` of each entity's snapshots in the session's aggregate, by `(kind, entity)`:
/// what keeps an older snapshot superseded. Rows whose entity or seq cannot be read count for
/// none.
///
/// Errors: SQLite's.
pub fn newest_seqs(
    conn: &Connection,
    session_id: &str,
) -> rusqlite::Result<HashMap<(SnapshotKind, String), i64>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT type, entity, max(seq) FROM ( \
           SELECT type, seq, {} AS entity \
           FROM event WHERE aggregate_id = ?1 AND type IN (?2, ?3, ?4) \
             AND typeof(seq) = 'integer') \
         WHERE typeof(entity) = 'text' GROUP BY type, entity",
        event_entity_sql()
    ))?;
    let mut rows = stmt.query(params![
        session_id,
        PART_UPDATED,
        MESSAGE_UPDATED,
        SESSION_UPDATED
    ])?;
    let mut newest = HashMap::new();
    while let Some(row) = rows.next()? {
        let kind = text(row.get_ref(0)?).as_deref().and_then(SnapshotKind::of);
        if let (Some(kind), Some(entity)) = (kind, text(row.get_ref(1)?)) {
            newest.insert((kind, entity), row.get(2)?);
        }
    }
    Ok(newest)
}

/// The entity the `data` of a snapshot of `kind` holds, read as the survey reads it (SQLite's
/// `json_extract`); `None` when it cannot be read.
///
/// Errors: SQLite's.
pub fn entity_of(
    conn: &Connection,
    kind: SnapshotKind,
    data: &[u8],
) -> rusqlite::Result<Option<String>> {
    let data = rusqlite::types::ValueRef::Text(data);
    conn.query_row(
        &format!(
            "SELECT {} FROM (SELECT ?1 AS type, ?2 AS data)",
            entity_sql("data")
        ),
        params![
            kind.event_type(),
            rusqlite::types::ToSqlOutput::Borrowed(data)
        ],
        |row| Ok(text(row.get_ref(0)?)),
    )
}

/// What the `data` of a snapshot of `kind` names, as [`entity_sql`] reads it (and, of a part
/// snapshot, `$.part.messageID` as `json_extract` reads it): in Rust where
/// [`snapshot::named`] is sure to answer as SQLite does, else by SQLite (a statement that reads
/// no table). The one reading of a snapshot's entity for every reader in Rust: the survey, a
/// prune's index of part snapshots, the audit; SQL readers use [`entity_sql`] itself.
///
/// Errors: SQLite's.
pub(crate) fn named(
    conn: &Connection,
    kind: SnapshotKind,
    data: rusqlite::types::ValueRef<'_>,
) -> rusqlite::Result<snapshot::Named> {
    match snapshot::named(data, kind == SnapshotKind::Part) {
        Some(named) => Ok(named),
        None => named_by_sqlite(conn, kind, data),
    }
}

/// What the `data` of a snapshot of `kind` names, read by SQLite ([`entity_sql`], and of a
/// part snapshot `$.part.messageID` by `json_extract`): where [`snapshot::named`] is not sure.
///
/// Errors: SQLite's.
pub(crate) fn named_by_sqlite(
    conn: &Connection,
    kind: SnapshotKind,
    data: rusqlite::types::ValueRef<'_>,
) -> rusqlite::Result<snapshot::Named> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {}, CASE WHEN type = ?3 AND json_valid(data) \
                    THEN json_extract(data, '$.part.messageID') END \
         FROM (SELECT ?1 AS type, ?2 AS data)",
        entity_sql("data")
    ))?;
    stmt.query_row(
        params![
            kind.event_type(),
            rusqlite::types::ToSqlOutput::Borrowed(data),
            PART_UPDATED
        ],
        |row| {
            Ok(snapshot::Named {
                entity: text(row.get_ref(0)?),
                message: text(row.get_ref(1)?),
            })
        },
    )
}

/// How one entity's snapshots split: the row that keeps the others superseded, and theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    /// The index of a row with the newest seq.
    pub(crate) newest: usize,
    /// The indexes of the superseded rows.
    pub(crate) superseded: Vec<usize>,
}

/// The rule of supersession over one entity's snapshots in one aggregate, each given as its
/// `seq` (`None` when not an integer) and whether its id is text (it can be named): the rows
/// with a lower seq than the newest are superseded, when they can be named. `None` (nothing
/// superseded) when a seq cannot be placed, when a row with the newest seq cannot be named (a
/// write could not check it is still there), or when no row is older than the newest (two rows
/// with the newest seq, with no unique index, do not supersede each other). The compaction's
/// survey and a dry run's count of what a prune deletes after it both follow this one rule.
pub(crate) fn split(rows: &[(Option<i64>, bool)]) -> Option<Split> {
    let mut top: Option<i64> = None;
    for (seq, _) in rows {
        let seq = (*seq)?;
        top = Some(top.map_or(seq, |top| top.max(seq)));
    }
    let top = top?;
    let at_top: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].0 == Some(top))
        .collect();
    if at_top.iter().any(|&i| !rows[i].1) {
        return None;
    }
    let superseded: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].1 && rows[i].0.is_some_and(|seq| seq < top))
        .collect();
    if superseded.is_empty() {
        return None;
    }
    Some(Split {
        newest: at_top[0],
        superseded,
    })
}

/// A planned compaction: the snapshot rows it deletes, with the plan its receipt records.
pub(crate) struct CompactionPlan {
    /// The rows to delete, in `seq` order.
    pub(crate) doomed: Vec<Snapshot>,
    /// Revisions before and after (the same: a compaction appends no event), bytes, and what
    /// the receipt records.
    pub(crate) plan: Plan,
    /// The abandoned run the fence admitted the compaction beside.
    pub(crate) abandoned: Option<Abandoned>,
}

/// Everything before the first write, inside the caller's transaction: a database without an
/// event log, a V2 session, then the checks every V1 write opens with ([`fence::admit`]), the
/// revision, then `survey` (read before the transaction began; its superseded snapshots whose
/// seq lies in `seqs`, the request's range, are the ones deleted) checked against the rows: the
/// newest snapshot of every entity it deletes from is there as read.
///
/// Refusals: `unsupported_storage` (no usable event log, a V2 session), the fence's, the
/// receipt under the key naming another request, `conflict` (the event log moved since the
/// request's revision, or since the survey), `not_deletable` (nothing superseded in the range).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    seqs: SeqRange,
    request_key: &str,
    clock: FenceClock,
    survey: Option<&Survey>,
) -> rusqlite::Result<Prepared<CompactionPlan>> {
    let refuse = |reason, detail: String| Ok(Prepared::Refuse(Refusal::new(reason, detail)));
    if !schema.has_events() {
        return refuse(
            BlockedReason::UnsupportedStorage,
            "the database keeps no event log (OpenCode before 1.14): there is nothing to compact"
                .into(),
        );
    }
    if has_v2_rows(conn, schema, &request.session_id)? {
        return refuse(
            BlockedReason::UnsupportedStorage,
            "a V2 session: its event log is what OpenCode's V2 history is projected from, and is \
             not compacted"
                .into(),
        );
    }
    let abandoned = match fence::admit(conn, schema, known, request, request_key, clock)? {
        Admission::Admitted(abandoned) => abandoned,
        Admission::Answered(answer) => return Ok(answer),
    };
    let now = revision(conn, &request.session_id)?;
    if now != request.revision {
        return refuse(
            BlockedReason::Conflict,
            "the session's event log moved since its revision was read (OpenCode appended \
             events): read it again"
                .into(),
        );
    }
    let Some(survey) = survey.filter(|s| s.session_id == request.session_id) else {
        return refuse(
            BlockedReason::Unavailable,
            "the session's snapshots were not read before the compaction".into(),
        );
    };
    if survey.revision != request.revision {
        return refuse(
            BlockedReason::Conflict,
            "the session's snapshots were read at another revision of its event log".into(),
        );
    }
    let run_messages = match &abandoned {
        Some(_) => runs::unfinished_messages(conn, &request.session_id)?,
        None => HashSet::new(),
    };
    let left_alone = |s: &Snapshot| {
        s.message
            .as_ref()
            .is_some_and(|message| run_messages.contains(message))
    };
    let in_range: Vec<&Snapshot> = survey
        .superseded
        .iter()
        .filter(|s| seqs.contains(s.seq))
        .collect();
    let doomed: Vec<Snapshot> = in_range
        .iter()
        .filter(|s| !left_alone(s) && !over_budget(s))
        .map(|s| (*s).clone())
        .collect();
    if doomed.is_empty() {
        let kept = in_range.iter().filter(|s| over_budget(s)).count();
        let range = format!("seqs {} to {}", seqs.first, seqs.last);
        return refuse(
            BlockedReason::NotDeletable,
            if kept > 0 {
                format!(
                    "the session's event log holds no superseded snapshot in {range} but {kept} over the 16 MiB budget, which stay"
                )
            } else {
                format!("the session's event log holds no superseded snapshot in {range}")
            },
        );
    }
    let entities: HashSet<(SnapshotKind, &str)> =
        doomed.iter().map(|s| (s.kind, s.entity.as_str())).collect();
    for newest in survey
        .newest
        .iter()
        .filter(|s| entities.contains(&(s.kind, s.entity.as_str())))
    {
        if !is_there(conn, &request.session_id, newest)? {
            known.forget_survey(&request.session_id);
            return refuse(
                BlockedReason::Conflict,
                format!(
                    "snapshot {} changed or went away since the session's snapshots were read",
                    newest.id
                ),
            );
        }
    }
    let mut compacted = Compacted::default();
    let mut bytes = 0u64;
    for snapshot in &doomed {
        match snapshot.kind {
            SnapshotKind::Part => compacted.part_snapshots += 1,
            SnapshotKind::Message => compacted.message_snapshots += 1,
            SnapshotKind::Session => compacted.session_snapshots += 1,
        }
        bytes += u64::try_from(snapshot.len).unwrap_or(0);
        compacted.event_ids.push(snapshot.id.clone());
    }
    Ok(Prepared::Plan(CompactionPlan {
        doomed,
        plan: Plan {
            remove: Vec::new(),
            revision_before: now.clone(),
            revision_after: now,
            bytes,
            operation: Some(Operation::Compaction(compacted)),
        },
        abandoned,
    }))
}

/// Whether the session's event log holds V2 message rows of the session (then it is OpenCode's
/// V2 history's source).
fn has_v2_rows(conn: &Connection, schema: &Schema, session_id: &str) -> rusqlite::Result<bool> {
    if !schema.has("session_message") {
        return Ok(false);
    }
    crate::cached::query_row(
        conn,
        "SELECT EXISTS (SELECT 1 FROM session_message WHERE session_id = ?1)",
        [session_id],
        |row| row.get(0),
    )
}

/// Whether `snapshot` is in the session's aggregate with the id, seq and type read (its data
/// may have been rewritten since: a diffs prune rewrites the newest `message.updated.1`).
fn is_there(conn: &Connection, session_id: &str, snapshot: &Snapshot) -> rusqlite::Result<bool> {
    let found: i64 = crate::cached::query_row(
        conn,
        "SELECT count(*) FROM event WHERE id = ?1 AND aggregate_id = ?2 AND seq = ?3 \
           AND type = ?4",
        params![
            snapshot.id,
            session_id,
            snapshot.seq,
            snapshot.kind.event_type()
        ],
        |row| row.get(0),
    )?;
    Ok(found == 1)
}

/// The writes of a planned compaction: every doomed row deleted in one statement, each matching
/// what the survey read (`conflict` when not every one is there as read). With `capture`, the deleted rows (every
/// column) are returned for the archive, by id.
pub(crate) fn write(
    conn: &Connection,
    known: &mut Known,
    command: &PruneCommand<'_>,
    planned: &CompactionPlan,
    capture: bool,
) -> rusqlite::Result<Result<Written, Refusal>> {
    let session_id = &command.request.session_id;
    let mut rows: Option<TableRows> = None;
    // One statement for every doomed row: SQLite keeps the pages a statement changes for its
    // own rollback, once per statement (and past 64 KiB in a file), so one delete per row
    // would copy the same index pages again for each row.
    let doomed: Vec<(&str, i64, &str, i64)> = planned
        .doomed
        .iter()
        .map(|s| (s.id.as_str(), s.seq, s.kind.event_type(), s.len))
        .collect();
    let doomed = serde_json::to_string(&doomed).unwrap_or_else(|_| "[]".into());
    // CROSS JOIN keeps the list as the outer loop: each row is then found by its id.
    let sql = "DELETE FROM event WHERE rowid IN (SELECT e.rowid FROM json_each(?2) AS j \
               CROSS JOIN event AS e ON e.id = j.value ->> 0 AND e.aggregate_id = ?1 \
               AND e.seq = j.value ->> 1 AND e.type = j.value ->> 2 \
               AND octet_length(e.data) = j.value ->> 3)";
    let values = params![session_id, doomed];
    let deleted = if capture {
        let mut delete = conn.prepare_cached(&format!("{sql} RETURNING *"))?;
        capture_rows(&mut delete, "event", values, &mut rows)?
    } else {
        conn.prepare_cached(sql)?.execute(values)?
    };
    if deleted != planned.doomed.len() {
        known.forget_survey(session_id);
        return Ok(Err(Refusal::new(
            BlockedReason::Conflict,
            format!(
                "{} of the {} snapshots to delete changed or went away since the session's \
                 snapshots were read",
                planned.doomed.len().abs_diff(deleted),
                planned.doomed.len()
            ),
        )));
    }
    let deleted: HashSet<&str> = planned.doomed.iter().map(|s| s.id.as_str()).collect();
    known.events_deleted(session_id, &deleted);
    known.foreign.after_own_writes(conn)?;
    Ok(Ok(Written {
        part_ids: Vec::new(),
        operation: planned.plan.operation.clone(),
        bytes_removed: planned.plan.bytes,
        removed_rows: capture.then(|| archived(rows)),
    }))
}

/// The rows a compaction removes, as its archive entry holds them: the event rows by id.
fn archived(rows: Option<TableRows>) -> ArchivedRows {
    let mut rows = rows;
    if let Some(rows) = rows.as_mut() {
        sort_by_id(rows);
    }
    ArchivedRows {
        tables: rows.into_iter().filter(|t| !t.rows.is_empty()).collect(),
    }
}

/// The rows the compaction of `planned` would remove, read (not removed) inside the caller's
/// transaction, in the archive entry's order. `None` when one is not there as read (the
/// compaction will be a conflict).
pub(crate) fn capture_ahead(
    conn: &Connection,
    session_id: &str,
    planned: &CompactionPlan,
) -> rusqlite::Result<Option<ArchivedRows>> {
    let mut rows: Option<TableRows> = None;
    let mut select = conn.prepare_cached(
        "SELECT * FROM event WHERE id = ?1 AND aggregate_id = ?2 AND seq = ?3 AND type = ?4 \
           AND octet_length(data) = ?5",
    )?;
    for snapshot in &planned.doomed {
        let found = capture_rows(
            &mut select,
            "event",
            params![
                snapshot.id,
                session_id,
                snapshot.seq,
                snapshot.kind.event_type(),
                snapshot.len
            ],
            &mut rows,
        )?;
        if found != 1 {
            return Ok(None);
        }
    }
    Ok(Some(archived(rows)))
}

/// A text value's string, `None` for anything else.
fn text(value: rusqlite::types::ValueRef<'_>) -> Option<String> {
    match value {
        rusqlite::types::ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok().map(String::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A survey of superseded snapshots given as `(seq, bytes)`, in seq order.
    fn surveyed(rows: &[(i64, i64)]) -> Survey {
        Survey {
            session_id: "ses_1".into(),
            revision: "0".repeat(64),
            superseded: rows
                .iter()
                .enumerate()
                .map(|(i, &(seq, len))| Snapshot {
                    id: format!("evt_{i:05}"),
                    kind: SnapshotKind::Part,
                    seq,
                    len,
                    entity: format!("prt_{i}"),
                    message: None,
                })
                .collect(),
            newest: Vec::new(),
        }
    }

    fn range(first: i64, last: i64) -> SeqRange {
        SeqRange { first, last }
    }

    #[test]
    fn ranges_are_cut_at_the_row_bound() {
        let rows: Vec<(i64, i64)> = (0..2_500).map(|i| (i * 2, 10)).collect();
        assert_eq!(
            surveyed(&rows).ranges(),
            vec![range(0, 1_998), range(2_000, 3_998), range(4_000, 4_998)]
        );
        assert_eq!(surveyed(&[]).ranges(), Vec::<SeqRange>::new());
    }

    #[test]
    fn ranges_are_cut_at_the_byte_bound_and_a_large_snapshot_fills_one_alone() {
        let mib = 1024 * 1024;
        let rows = [(1, 3 * mib), (2, mib), (3, 1), (4, 5 * mib), (5, 2 * mib)];
        assert_eq!(
            surveyed(&rows).ranges(),
            vec![range(1, 2), range(3, 3), range(4, 4), range(5, 5)]
        );
    }

    #[test]
    fn snapshots_of_one_seq_share_a_range() {
        let mib = 1024 * 1024;
        // The second snapshot of seq 7 is past the bound, and joins its seq's range.
        let rows = [(1, 3 * mib), (7, mib), (7, mib), (8, 1)];
        assert_eq!(surveyed(&rows).ranges(), vec![range(1, 7), range(8, 8)]);
    }

    #[test]
    fn a_snapshot_over_the_row_budget_counts_for_no_range() {
        let over = row_budget::ROW_BYTES as i64 + 1;
        let rows = [(1, 10), (2, over), (3, 10)];
        assert_eq!(surveyed(&rows).ranges(), vec![range(1, 3)]);
        assert_eq!(surveyed(&[(2, over)]).ranges(), Vec::<SeqRange>::new());
    }

    #[test]
    fn every_snapshot_older_than_the_newest_is_superseded() {
        let rows = [
            (Some(3), true),
            (Some(1), true),
            (Some(7), true),
            (Some(5), true),
        ];
        assert_eq!(
            split(&rows),
            Some(Split {
                newest: 2,
                superseded: vec![0, 1, 3]
            })
        );
    }

    #[test]
    fn a_lone_snapshot_or_two_at_the_newest_seq_supersede_nothing() {
        assert_eq!(split(&[(Some(3), true)]), None);
        assert_eq!(split(&[(Some(3), true), (Some(3), true)]), None);
        assert_eq!(split(&[]), None);
    }

    #[test]
    fn an_unplaceable_seq_or_an_unnamed_newest_keeps_every_snapshot() {
        assert_eq!(
            split(&[(Some(1), true), (None, true), (Some(4), true)]),
            None
        );
        assert_eq!(split(&[(Some(1), true), (Some(4), false)]), None);
    }

    #[test]
    fn an_unnamed_older_snapshot_stays_and_the_named_ones_go() {
        assert_eq!(
            split(&[(Some(1), false), (Some(2), true), (Some(4), true)]),
            Some(Split {
                newest: 2,
                superseded: vec![1]
            })
        );
    }

    /// What SQLite alone answers for `data` of `kind`: the survey's SQL, no Rust reading.
    fn by_sqlite(kind: SnapshotKind, data: &[u8]) -> snapshot::Named {
        let conn = Connection::open_in_memory().expect("memory database");
        conn.query_row(
            &format!(
                "SELECT {}, CASE WHEN type = ?3 AND json_valid(data) \
                            THEN json_extract(data, '$.part.messageID') END \
                 FROM (SELECT ?1 AS type, ?2 AS data)",
                entity_sql("data")
            ),
            params![
                kind.event_type(),
                rusqlite::types::ToSqlOutput::Borrowed(rusqlite::types::ValueRef::Text(data)),
                PART_UPDATED
            ],
            |row| {
                Ok(snapshot::Named {
                    entity: text(row.get_ref(0)?),
                    message: text(row.get_ref(1)?),
                })
            },
        )
        .expect("SQLite's answer")
    }

    /// Snapshots `snapshot::named` reads itself: each answer equals SQLite's.
    #[test]
    fn the_survey_reads_what_sqlite_reads_where_it_reads_alone() {
        let deep = format!(
            "{{\"part\":{{\"id\":\"p\"}},\"x\":{}1{}}}",
            "[".repeat(999),
            "]".repeat(999)
        );
        // The snapshot's kind, its data, and the entity and message SQLite reads in it.
        type Case<'a> = (SnapshotKind, Vec<u8>, Option<&'a str>, Option<&'a str>);
        let cases: Vec<Case> = vec![
            (
                SnapshotKind::Part,
                br#"{"sessionID":"ses_1","part":{"id":"prt_1","messageID":"msg_1","type":"tool"}}"#.to_vec(),
                Some("prt_1"),
                Some("msg_1"),
            ),
            (
                SnapshotKind::Part,
                br#"{"part":{"id":"a","id":"b","messageID":"m1","messageID":"m2"},"part":{"id":"c"}}"#.to_vec(),
                Some("a"),
                Some("m1"),
            ),
            (
                SnapshotKind::Part,
                b" {\"part\" :\n{\"id\":\"prt_1\",\t\"messageID\":\"m1\"}}\r\n".to_vec(),
                Some("prt_1"),
                Some("m1"),
            ),
            (SnapshotKind::Part, br#"{"part":{"id":42,"messageID":true}}"#.to_vec(), None, None),
            (SnapshotKind::Part, br#"{"part":{"id":null,"messageID":1.5}}"#.to_vec(), None, None),
            (SnapshotKind::Part, br#"{"part":"prt_1"}"#.to_vec(), None, None),
            (SnapshotKind::Part, br#"[{"part":{"id":"prt_1"}}]"#.to_vec(), None, None),
            (SnapshotKind::Part, br#""text""#.to_vec(), None, None),
            (SnapshotKind::Part, br#"{"info":{"id":"msg_1"}}"#.to_vec(), None, None),
            (SnapshotKind::Part, deep.into_bytes(), Some("p"), None),
            (
                SnapshotKind::Part,
                format!(
                    "{{\"part\":{{\"id\":\"a\"}},\"code\":\"\\\"{}\",\"x\":[{{}}]}}",
                    "{[".repeat(1500)
                )
                .into_bytes(),
                Some("a"),
                None,
            ),
            (
                SnapshotKind::Part,
                br#"{"n":1e400,"m":123456789012345678901234567890,"part":{"id":"a"}}"#.to_vec(),
                Some("a"),
                None,
            ),
            (
                SnapshotKind::Part,
                b"{\"part\":{\"id\":\"prt_1\"},\"junk\":\"\xff\xfe\"}".to_vec(),
                Some("prt_1"),
                None,
            ),
            (
                SnapshotKind::Message,
                br#"{"info":{"role":"user","id":"msg_9","messageID":"other"}}"#.to_vec(),
                Some("msg_9"),
                None,
            ),
            (
                SnapshotKind::Session,
                br#"{"sessionID":"ses_2","info":{"id":"ses_2"},"info":{"id":"ses_3"}}"#.to_vec(),
                Some("ses_2"),
                None,
            ),
        ];
        for (kind, data, entity, message) in cases {
            let shown = String::from_utf8_lossy(&data).into_owned();
            let sqlite = by_sqlite(kind, &data);
            assert_eq!(
                (sqlite.entity.as_deref(), sqlite.message.as_deref()),
                (entity, message),
                "SQLite on {shown}"
            );
            let read = snapshot::named(
                rusqlite::types::ValueRef::Text(&data),
                kind == SnapshotKind::Part,
            );
            assert_eq!(read, Some(sqlite), "{shown}");
        }
    }

    /// Snapshots only SQLite can answer for: `snapshot::named` leaves them to it, and the
    /// survey's reading (`named`) gives SQLite's answer.
    #[test]
    fn what_the_rust_reading_cannot_be_sure_of_is_asked_of_sqlite() {
        let conn = Connection::open_in_memory().expect("memory database");
        let cases: Vec<(Vec<u8>, Option<&str>)> = vec![
            (
                br#"{"part":{"id":{"nested":1}}}"#.to_vec(),
                Some(r#"{"nested":1}"#),
            ),
            (br#"{"part":{"id":["a"]}}"#.to_vec(), Some(r#"["a"]"#)),
            (br#"{"part":{"id":"a"}"#.to_vec(), None),
            (br#"{"part":{"id":"a"}} x"#.to_vec(), None),
            (br#"{"part":{"id":"a\u0000b"}}"#.to_vec(), Some("a\0b")),
            (
                br#" {"p\u0061rt":{"\u0069d":"prt_\u0031\n","messageID":"m\"1"}} "#.to_vec(),
                Some("prt_1\n"),
            ),
            (br#"{"part":{"id":"prt_\u0031"}}"#.to_vec(), Some("prt_1")),
            // SQLite compares an escaped name up to a decoded U+0000, and reads malformed UTF-8
            // in it leniently.
            (
                br#"{"part":{"id\u0000x":"evil","id":"a"}}"#.to_vec(),
                Some("evil"),
            ),
            (
                br#"{"part\u0000zzz":{"id":"b"},"part":{"id":"a"}}"#.to_vec(),
                Some("b"),
            ),
            (br#"{"part\u0000":{"id":"a"}}"#.to_vec(), Some("a")),
            (
                b"{\"part\":{\"\xC1\xA9\\u0064\":\"shadow\",\"id\":\"a\"}}".to_vec(),
                Some("shadow"),
            ),
            // A control character in a key is JSON5 to SQLite, not JSON.
            (
                b"{\"part\":{\"id\":\"a\",\"te\txt\":\"new\"}}".to_vec(),
                None,
            ),
            (b"{\"pa\x01rt\":1,\"part\":{\"id\":\"a\"}}".to_vec(), None),
            // SQLite reads text up to a U+0000.
            (b"{\"part\":{\"id\":\"a\"}}\x00junk".to_vec(), Some("a")),
            (br#"{part:{id:'a'}}"#.to_vec(), None),
            (b"{\"part\":{\"id\":\"a\tb\"}}".to_vec(), None),
            (
                format!(
                    "{{\"part\":{{\"id\":\"a\"}},\"x\":{}{}}}",
                    "[".repeat(1000),
                    "]".repeat(1000)
                )
                .into_bytes(),
                None,
            ),
        ];
        for (data, entity) in cases {
            let shown = String::from_utf8_lossy(&data).into_owned();
            let value = rusqlite::types::ValueRef::Text(&data);
            assert_eq!(snapshot::named(value, true), None, "{shown}");
            let sqlite = by_sqlite(SnapshotKind::Part, &data);
            assert_eq!(sqlite.entity.as_deref(), entity, "SQLite on {shown}");
            assert_eq!(
                named(&conn, SnapshotKind::Part, value).expect("read"),
                sqlite,
                "{shown}"
            );
        }
        let blob = rusqlite::types::ValueRef::Blob(br#"{"part":{"id":"a"}}"#);
        assert_eq!(snapshot::named(blob, true), None);
    }

    /// The reading names no part in text SQLite does not read as JSON for nesting too deep, and
    /// the part in text nested as deep as it reads.
    #[test]
    fn a_part_snapshot_nested_past_sqlites_depth_names_no_part() {
        for (arrays, part) in [(999, Some("a")), (1000, None)] {
            let data = format!(
                "{{\"part\":{{\"id\":\"a\"}},\"x\":{}{}}}",
                "[".repeat(arrays),
                "]".repeat(arrays)
            );
            let value = rusqlite::types::ValueRef::Text(data.as_bytes());
            assert_eq!(
                by_sqlite(SnapshotKind::Part, data.as_bytes())
                    .entity
                    .as_deref(),
                part
            );
            let conn = Connection::open_in_memory().expect("memory database");
            let read = named(&conn, SnapshotKind::Part, value).expect("read");
            assert_eq!(read.entity.as_deref(), part, "{arrays} arrays");
        }
    }
}
