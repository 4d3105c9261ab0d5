//! What a store's connection has learnt about the V1 tables, kept between its transactions so
//! that a clean of many messages does not pay for it once per message: the sessions whose fence
//! passed, one session's snapshot index (part id -> its `message.part.updated.1` events), the
//! prunes a clean planned ([`PlannedPrune`]: the message need not be read and hashed again by
//! its prune), the snapshots filed under another aggregate ([`ForeignSnapshots`], which
//! keeps itself current by `rowid`), and the compaction surveys of the sessions a clean planned
//! last (as many as a batch of compactions spans, up to [`MAX_SURVEYED_SNAPSHOTS`]).
//!
//! The first three hold while SQLite's `PRAGMA data_version` holds: it changes when another
//! connection (OpenCode) commits and never for this connection's own commits. So what was learnt
//! inside one transaction is still true inside a later one at the same data version, except for
//! this connection's own writes in between, which are either told to [`Known`] (the snapshots a
//! prune or a compaction deleted; a planned prune is taken out by the prune of its message, whatever it does) or
//! cannot change what was learnt (a prune deletes its own message's parts and their snapshots,
//! appends `message.part.removed.1` events with the session's next seqs, and inserts a receipt:
//! a fence that passed still passes, and another message's rows are untouched). A transaction
//! that rolls back after writing makes everything be read again ([`Known::forget`]).
//!
//! The compaction surveys are held on other terms: by session and event log revision,
//! across data versions, since every range of a session's compaction is planned from one survey
//! and OpenCode's commits elsewhere do not change it. What OpenCode appends to the session moves
//! the revision, so the survey is read again. What it cannot see (rows deleted by another
//! connection, or by this one's earlier ranges) the write checks row by row: it deletes only
//! rows found as read, beside the newest snapshots found as read, and is a `conflict` otherwise,
//! after which the survey is read again ([`Known::forget_survey`]). Source:
//! docs/ARCHITECTURE.md, "Bulk work" and "Copies OpenCode keeps".

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use pruning_engine::{Plan, Selection, SeqRange};
use rusqlite::{params, Connection};

use super::compact::{self, SnapshotKind, Survey};
use super::events::{MESSAGE_UPDATED, PART_UPDATED};
use super::foreign::ForeignSnapshots;
use super::runs::Abandoned;
use crate::row_budget;

/// What the store's connection knows of the V1 tables: a cache, one per store
/// (`OpenCodeStore`'s `known`, reached through `OpenCodeStore::known`), kept between the
/// connection's transactions.
///
/// The rule: what it holds (the fence passes, the snapshot indexes, the prunes a clean
/// planned) is true while SQLite's `PRAGMA data_version` is the one it was learnt at. That
/// number moves when another connection (OpenCode) commits, never for this connection's own
/// commits, whose writes are told to it as they are made ([`Self::snapshots_deleted`],
/// [`Self::events_deleted`], [`Self::take_planned`]).
///
/// Who fills it: the read-only planners, each inside a read transaction of the store's
/// connection (a clean's plan of a message, `crate::clean::plan`, keeps the prune it planned:
/// [`Self::remember_planned`]; the clean's estimate of the bytes a prune frees and its plans of
/// compactions read and fill the snapshot index and the survey), and the write path itself (a
/// fence that passed). Who reads it: the write
/// path inside its write transaction (`crate::v1::apply::prepare` takes the planned prune and
/// deletes its rows without reading and hashing the message again; the fence skips the checks
/// that passed), after [`Self::refresh`].
///
/// When the version moved: [`Self::refresh`], the first thing every transaction that uses it
/// does, forgets all of it but the foreign snapshots and the compaction survey (held on their
/// own terms, see the module docs), and everything is read again. A transaction of this
/// connection that wrote and rolled back (or a panic inside one) forgets all of it
/// ([`Self::forget`]).
#[derive(Debug, Default)]
pub struct Known {
    /// `PRAGMA data_version` when the fence passes and the snapshot index were learnt; `None`
    /// when nothing is known.
    data_version: Option<i64>,
    /// Session id -> its `time_updated` (ms since the Unix epoch) when every scope-independent
    /// check of the V1 fence passed at `data_version`, and the abandoned run it admitted.
    fence_passed: HashMap<String, (i64, Option<Abandoned>)>,
    /// One session's snapshot index at `data_version`.
    snapshots: Option<SnapshotIndex>,
    /// Message id -> the prune a clean planned for it at `data_version`.
    planned: HashMap<String, PlannedPrune>,
    /// One session's newest `message.updated.1` of each message at `data_version`.
    message_snapshots: Option<MessageSnapshotIndex>,
    /// Snapshots filed under another aggregate (valid across data versions on its own terms).
    pub foreign: ForeignSnapshots,
    /// The compaction surveys of the sessions planned and not yet written, in their order,
    /// each valid while its revision holds (see the module docs); at most
    /// [`MAX_SURVEYED_SNAPSHOTS`] snapshots in all, or one survey.
    surveys: VecDeque<Arc<Survey>>,
}

/// Snapshots a survey lists.
fn listed(survey: &Survey) -> usize {
    survey.superseded.len() + survey.newest.len()
}

/// How many snapshots the held compaction surveys list at most, together (about 230 bytes
/// each: 7 MB). A clean plans a batch of compactions (one per range, many sessions) before
/// the batch is applied; without the surveys held, each would be read again by its write.
const MAX_SURVEYED_SNAPSHOTS: usize = 30_000;

/// How many planned prunes [`Known`] keeps at most: a clean plans one batch ahead of its prunes
/// (its `--batch-size`, 1,000 by default); beyond this a plan is not kept and its prune reads
/// the message again.
const MAX_PLANNED: usize = 10_000;

/// A V1 prune that a clean planned from the message as one read transaction saw it: what the
/// prune's own transaction needs when nothing was committed by another connection since (the
/// same `PRAGMA data_version`), so that it deletes the planned rows without reading, parsing and
/// hashing the message again. Source: docs/ARCHITECTURE.md, "Bulk work".
#[derive(Debug, Clone)]
pub struct PlannedPrune {
    /// The message's session.
    pub session_id: String,
    /// The request's selection, as planned.
    pub selection: Selection,
    /// Ids of the part rows the plan removes, in `plan.remove` order.
    pub part_ids: Vec<String>,
    /// The planner's decision (its `revision_before` is the revision the request names).
    pub plan: Plan,
}

/// One `message.part.updated.1` event in a [`SnapshotIndex`].
#[derive(Debug, Clone)]
struct Indexed {
    /// `event.id`, `None` when it is not text (the row cannot be named for deletion).
    id: Option<String>,
    /// `event.seq`, `None` when it is not an integer.
    seq: Option<i64>,
    /// Bytes of `event.data`.
    len: i64,
}

/// The `message.part.updated.1` events of one session, by the part they hold.
#[derive(Debug)]
struct SnapshotIndex {
    /// The session (the events' `aggregate_id`).
    session_id: String,
    /// Part id -> every snapshot of it in the session, in the order read.
    by_part: HashMap<String, Vec<Indexed>>,
}

impl Known {
    /// Forgets the fence passes and the snapshot index when another connection committed since
    /// they were learnt. Call first inside each transaction that uses them.
    ///
    /// Errors: SQLite's.
    pub fn refresh(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let now: i64 = crate::cached::query_row(conn, "PRAGMA data_version", [], |row| row.get(0))?;
        if self.data_version != Some(now) {
            self.fence_passed.clear();
            self.snapshots = None;
            self.planned.clear();
            self.message_snapshots = None;
            self.data_version = Some(now);
        }
        Ok(())
    }

    /// Forgets the fence passes and the snapshot index (after a transaction of this connection
    /// that wrote and then rolled back, or whose commit may have failed).
    pub fn forget(&mut self) {
        self.fence_passed.clear();
        self.snapshots = None;
        self.planned.clear();
        self.message_snapshots = None;
        self.data_version = None;
        self.surveys.clear();
    }

    /// The compaction survey of session `session_id` inside the caller's read transaction on
    /// `conn`: the one held when it was read at the session's revision now, else read now
    /// ([`compact::survey`]) and held.
    ///
    /// Errors: SQLite's.
    pub fn survey(&mut self, conn: &Connection, session_id: &str) -> rusqlite::Result<Arc<Survey>> {
        let revision = compact::revision(conn, session_id)?;
        let held = self
            .surveys
            .iter()
            .find(|held| held.session_id == session_id && held.revision == revision);
        match held {
            Some(held) => Ok(Arc::clone(held)),
            None => self.survey_again(conn, session_id),
        }
    }

    /// The compaction survey of session `session_id` read now inside the caller's read
    /// transaction on `conn`, and held (what a clean plans a session's compaction from) while
    /// the held ones list fewer than [`MAX_SURVEYED_SNAPSHOTS`]: the compactions are written in
    /// the order they were planned, so the surveys held are the first the writes need, and
    /// each is let go once the write of its last range took it ([`Self::written`]).
    ///
    /// Errors: SQLite's.
    pub fn survey_again(
        &mut self,
        conn: &Connection,
        session_id: &str,
    ) -> rusqlite::Result<Arc<Survey>> {
        self.surveys.retain(|held| held.session_id != session_id);
        let survey = Arc::new(compact::survey(conn, session_id)?);
        if self.surveys.is_empty() || self.surveyed() + listed(&survey) <= MAX_SURVEYED_SNAPSHOTS {
            self.surveys.push_back(Arc::clone(&survey));
        }
        Ok(survey)
    }

    /// Lets go of `survey` when `range` is the last of its ranges: the write of that range
    /// was the last to need it.
    pub fn written(&mut self, survey: &Survey, range: SeqRange) {
        if survey.ranges().last() == Some(&range) {
            self.surveys.retain(|held| {
                !(held.session_id == survey.session_id && held.revision == survey.revision)
            });
        }
    }

    /// Snapshots the held surveys list, together.
    fn surveyed(&self) -> usize {
        self.surveys.iter().map(|held| listed(held)).sum()
    }

    /// Whether more planned prunes and compaction surveys would be kept: a clean that plans
    /// ahead of its writes stops where its plans would no longer serve them.
    pub fn has_room(&self) -> bool {
        self.planned.len() < MAX_PLANNED && self.surveyed() < MAX_SURVEYED_SNAPSHOTS
    }

    /// Lets go of session `session_id`'s compaction survey (a compaction found a row otherwise
    /// than read).
    pub fn forget_survey(&mut self, session_id: &str) {
        self.surveys.retain(|held| held.session_id != session_id);
    }

    /// Keeps the prune a clean planned for message `message_id` inside the read transaction on
    /// `conn` that read the message, until that message's prune takes it
    /// ([`Self::take_planned`]) or another connection commits. Not kept beyond
    /// [`MAX_PLANNED`] plans.
    ///
    /// Errors: SQLite's.
    pub fn remember_planned(
        &mut self,
        conn: &Connection,
        message_id: &str,
        planned: PlannedPrune,
    ) -> rusqlite::Result<()> {
        self.refresh(conn)?;
        if self.planned.len() < MAX_PLANNED {
            self.planned.insert(message_id.to_string(), planned);
        }
        Ok(())
    }

    /// Takes out the prune planned for message `message_id` of session `session_id`, when one
    /// was planned at this data version ([`Self::refresh`] first in the transaction). Every
    /// prune of the message takes it, whether it uses it or not.
    pub fn take_planned(&mut self, session_id: &str, message_id: &str) -> Option<PlannedPrune> {
        self.planned
            .remove(message_id)
            .filter(|planned| planned.session_id == session_id)
    }

    /// The prune planned for message `message_id` of session `session_id`, left in place (see
    /// [`Self::take_planned`]).
    pub fn peek_planned(&self, session_id: &str, message_id: &str) -> Option<&PlannedPrune> {
        self.planned
            .get(message_id)
            .filter(|planned| planned.session_id == session_id)
    }

    /// The session's `time_updated` (ms) when its fence last passed at this data version, and
    /// the abandoned run it admitted.
    pub fn fence_passed(&self, session_id: &str) -> Option<(i64, Option<Abandoned>)> {
        self.fence_passed.get(session_id).cloned()
    }

    /// Records that every scope-independent check of the fence passed for the session, whose
    /// `time_updated` is `updated` (ms), beside `abandoned` when it admitted an abandoned run.
    pub fn record_fence_pass(
        &mut self,
        session_id: &str,
        updated: i64,
        abandoned: Option<Abandoned>,
    ) {
        if self.data_version.is_some() {
            self.fence_passed
                .insert(session_id.to_string(), (updated, abandoned));
        }
    }

    /// The `message.part.updated.1` events of `session_id` that hold one of `part_ids`, as
    /// `(event id, bytes of data)`. The first call for a session reads all of its snapshots once
    /// (`super::compact::named` reads which part each names, as SQLite reads it); later
    /// calls at the same data version answer from that index.
    ///
    /// Errors: SQLite's.
    pub fn snapshots_of(
        &mut self,
        conn: &Connection,
        session_id: &str,
        part_ids: &HashSet<&str>,
    ) -> rusqlite::Result<Vec<(String, i64)>> {
        let index = self.snapshot_index(conn, session_id)?;
        let mut found: Vec<(String, i64)> = Vec::new();
        for part in part_ids {
            if let Some(events) = index.by_part.get(*part) {
                found.extend(
                    events
                        .iter()
                        .filter_map(|event| Some((event.id.clone()?, event.len))),
                );
            }
        }
        found.sort();
        Ok(found)
    }

    /// Of the `message.part.updated.1` events of `session_id` that hold one of `part_ids`, the
    /// ids of those the session's compaction deletes: superseded by a newer snapshot of the
    /// same part, by the one rule of supersession (`super::compact::split`). What a prune of
    /// those parts after the compaction no longer finds.
    ///
    /// Errors: SQLite's.
    pub fn superseded_of(
        &mut self,
        conn: &Connection,
        session_id: &str,
        part_ids: &HashSet<&str>,
    ) -> rusqlite::Result<HashSet<String>> {
        let index = self.snapshot_index(conn, session_id)?;
        let mut superseded = HashSet::new();
        for part in part_ids {
            let Some(events) = index.by_part.get(*part) else {
                continue;
            };
            let shape: Vec<(Option<i64>, bool)> = events
                .iter()
                .map(|event| (event.seq, event.id.is_some()))
                .collect();
            if let Some(split) = super::compact::split(&shape) {
                superseded.extend(
                    split
                        .superseded
                        .into_iter()
                        .filter_map(|i| events[i].id.clone()),
                );
            }
        }
        Ok(superseded)
    }

    /// The session's snapshot index at this data version, read when it is not at hand.
    fn snapshot_index(
        &mut self,
        conn: &Connection,
        session_id: &str,
    ) -> rusqlite::Result<&SnapshotIndex> {
        let current = self
            .snapshots
            .as_ref()
            .is_some_and(|index| index.session_id == session_id);
        if !current || self.data_version.is_none() {
            self.snapshots = Some(SnapshotIndex::read(conn, session_id)?);
        }
        // Just read when it was not at hand: the empty index is never what is returned.
        Ok(self.snapshots.get_or_insert_with(|| SnapshotIndex {
            session_id: session_id.to_string(),
            by_part: HashMap::new(),
        }))
    }

    /// The newest `message.updated.1` event of message `message_id` in the aggregate of session
    /// `session_id` (highest `seq`), as `(event id, seq)`. The first call for a session reads
    /// which message each of its message snapshots holds (`data.info.id`, as SQLite's
    /// `json_extract` reads it), once; later calls at the same data version answer from that
    /// index. This connection's own writes keep it true: a diffs prune rewrites that event in
    /// place, a compaction deletes only snapshots older than it.
    ///
    /// Errors: SQLite's.
    pub fn newest_message_snapshot(
        &mut self,
        conn: &Connection,
        session_id: &str,
        message_id: &str,
    ) -> rusqlite::Result<Option<(String, i64)>> {
        let current = self
            .message_snapshots
            .as_ref()
            .is_some_and(|index| index.session_id == session_id);
        if !current || self.data_version.is_none() {
            self.message_snapshots = Some(MessageSnapshotIndex::read(conn, session_id)?);
        }
        Ok(self
            .message_snapshots
            .as_ref()
            .and_then(|index| index.newest.get(message_id).cloned()))
    }

    /// Records that this connection deleted the session's snapshot events `event_ids` (a
    /// compaction, in a transaction it then commits; if it does not, call [`Self::forget`]):
    /// they leave the session's snapshot index, which stays true without them (a compaction
    /// deletes rows and writes none).
    pub fn events_deleted(&mut self, session_id: &str, event_ids: &HashSet<&str>) {
        let Some(index) = self
            .snapshots
            .as_mut()
            .filter(|index| index.session_id == session_id)
        else {
            return;
        };
        index.by_part.retain(|_, events| {
            events.retain(|event| event.id.as_deref().is_none_or(|id| !event_ids.contains(id)));
            !events.is_empty()
        });
    }

    /// Records that this connection deleted the snapshots of `part_ids` (in a transaction it then
    /// commits; if it does not, call [`Self::forget`]).
    pub fn snapshots_deleted(&mut self, part_ids: &HashSet<&str>) {
        if let Some(index) = &mut self.snapshots {
            for part in part_ids {
                index.by_part.remove(*part);
            }
        }
    }
}

/// The newest `message.updated.1` event of each message of one session.
#[derive(Debug)]
struct MessageSnapshotIndex {
    /// The session (the events' `aggregate_id`).
    session_id: String,
    /// Message id -> `(event id, seq)` of its newest snapshot; a message whose snapshots cannot
    /// all be placed (a `seq` that is not an integer, two with the newest one) is left out.
    newest: HashMap<String, (String, i64)>,
}

impl MessageSnapshotIndex {
    /// Reads every `message.updated.1` event of the session once.
    fn read(conn: &Connection, session_id: &str) -> rusqlite::Result<Self> {
        let data = row_budget::data("", "event");
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id, CASE typeof(seq) WHEN 'integer' THEN seq END, \
                    CASE WHEN json_valid({data}) THEN json_extract({data}, '$.info.id') END \
             FROM event WHERE aggregate_id = ?1 AND type = ?2"
        ))?;
        let mut rows = stmt.query(params![session_id, MESSAGE_UPDATED])?;
        // Message id -> its newest snapshot so far, `None` once it cannot be told.
        let mut newest: HashMap<String, Option<(Option<String>, i64)>> = HashMap::new();
        while let Some(row) = rows.next()? {
            let rusqlite::types::ValueRef::Text(message) = row.get_ref(2)? else {
                continue;
            };
            let Ok(message) = std::str::from_utf8(message) else {
                continue;
            };
            let id = match row.get_ref(0)? {
                rusqlite::types::ValueRef::Text(id) => {
                    std::str::from_utf8(id).ok().map(str::to_string)
                }
                _ => None,
            };
            let seq: Option<i64> = row.get(1)?;
            let entry = newest
                .entry(message.to_string())
                .or_insert(Some((None, i64::MIN)));
            *entry = match (entry.take(), seq) {
                (Some((_, best)), Some(seq)) if seq > best => Some((id, seq)),
                (Some((_, best)), Some(seq)) if seq == best => None,
                (Some(kept), Some(_)) => Some(kept),
                (_, None) | (None, _) => None,
            };
        }
        Ok(Self {
            session_id: session_id.to_string(),
            newest: newest
                .into_iter()
                .filter_map(|(message, found)| match found {
                    Some((Some(id), seq)) => Some((message, (id, seq))),
                    _ => None,
                })
                .collect(),
        })
    }
}

impl SnapshotIndex {
    /// Reads every `message.part.updated.1` event of the session once.
    fn read(conn: &Connection, session_id: &str) -> rusqlite::Result<Self> {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id, {}, octet_length(data), CASE typeof(seq) WHEN 'integer' THEN seq END \
             FROM event WHERE aggregate_id = ?1 AND type = ?2",
            row_budget::data("", "event")
        ))?;
        let mut rows = stmt.query(params![session_id, PART_UPDATED])?;
        let mut by_part: HashMap<String, Vec<Indexed>> = HashMap::new();
        while let Some(row) = rows.next()? {
            let Some(part) = compact::named(conn, SnapshotKind::Part, row.get_ref(1)?)?.entity
            else {
                continue;
            };
            // An event whose id is not text cannot be named for deletion: it stays (and still
            // supersedes older snapshots of its part).
            let id = match row.get_ref(0)? {
                rusqlite::types::ValueRef::Text(id) => {
                    std::str::from_utf8(id).ok().map(str::to_string)
                }
                _ => None,
            };
            by_part.entry(part).or_default().push(Indexed {
                id,
                seq: row.get(3)?,
                len: row.get::<_, Option<i64>>(2)?.unwrap_or(0),
            });
        }
        Ok(Self {
            session_id: session_id.to_string(),
            by_part,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OpenCode 1.18.34 fixture of coding work the end-to-end tests use, copied, and its
    /// sessions that have superseded snapshots.
    fn fixture() -> (tempfile::TempDir, Connection, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let source = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/opencode-1.18.34-work/opencode.db"
        );
        std::fs::copy(source, &db).unwrap();
        let conn = Connection::open(&db).unwrap();
        crate::sql_functions::register(&conn).unwrap();
        let ids: Vec<String> = conn
            .prepare("SELECT id FROM session ORDER BY id")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let surveyed: Vec<String> = ids
            .into_iter()
            .filter(|id| compact::survey(&conn, id).is_ok_and(|survey| !survey.ranges().is_empty()))
            .collect();
        assert!(surveyed.len() >= 2, "the fixture has sessions to compact");
        (dir, conn, surveyed)
    }

    #[test]
    fn the_surveys_a_batch_planned_are_held_for_their_writes() {
        let (_dir, conn, sessions) = fixture();
        let mut known = Known::default();
        let planned: Vec<Arc<Survey>> = sessions
            .iter()
            .map(|id| known.survey_again(&conn, id).unwrap())
            .collect();
        // Each write finds the survey its planning read, not one read again.
        for (id, survey) in sessions.iter().zip(&planned) {
            assert!(
                Arc::ptr_eq(&known.survey(&conn, id).unwrap(), survey),
                "{id}"
            );
        }
    }

    #[test]
    fn a_survey_is_let_go_once_the_write_of_its_last_range_took_it() {
        let (_dir, conn, sessions) = fixture();
        let mut known = Known::default();
        let first = known.survey_again(&conn, &sessions[0]).unwrap();
        let second = known.survey_again(&conn, &sessions[1]).unwrap();
        let ranges = first.ranges();
        if let [earlier, .., _] = ranges.as_slice() {
            known.written(&first, *earlier);
            assert!(Arc::ptr_eq(
                &known.survey(&conn, &sessions[0]).unwrap(),
                &first
            ));
        }
        known.written(&first, *ranges.last().unwrap());
        assert!(!Arc::ptr_eq(
            &known.survey(&conn, &sessions[0]).unwrap(),
            &first
        ));
        assert!(Arc::ptr_eq(
            &known.survey(&conn, &sessions[1]).unwrap(),
            &second
        ));
    }

    #[test]
    fn past_the_bound_a_new_survey_is_read_but_not_held() {
        let (_dir, conn, sessions) = fixture();
        let mut known = Known::default();
        let first = known.survey_again(&conn, &sessions[0]).unwrap();
        // Filled up to the bound by copies of the first survey under other names.
        let mut filler = (*first).clone();
        while known.surveyed() < MAX_SURVEYED_SNAPSHOTS {
            filler.session_id.push('x');
            known.surveys.push_back(Arc::new(filler.clone()));
        }
        let second = known.survey_again(&conn, &sessions[1]).unwrap();
        assert!(known.surveys.iter().all(|held| !Arc::ptr_eq(held, &second)));
        assert!(!known.has_room());
        assert!(Arc::ptr_eq(
            &known.survey(&conn, &sessions[0]).unwrap(),
            &first
        ));
    }
}
