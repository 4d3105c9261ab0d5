//! What a store's connection has learnt about the V1 tables, kept between its transactions so
//! that a clean of many messages does not pay for it once per message: the sessions whose fence
//! passed, one session's snapshot index (part id -> its `message.part.updated.1` events), and
//! the snapshots filed under another aggregate ([`ForeignSnapshots`], which keeps itself current
//! by `rowid`).
//!
//! The first two hold while SQLite's `PRAGMA data_version` holds: it changes when another
//! connection (OpenCode) commits and never for this connection's own commits. So what was learnt
//! inside one transaction is still true inside a later one at the same data version, except for
//! this connection's own writes in between, which are either told to [`Known`] (the snapshots a
//! prune deleted) or cannot change what was learnt (a prune deletes parts and snapshots, appends
//! `message.part.removed.1` events with the session's next seqs, and inserts a receipt: a fence
//! that passed still passes). A transaction that rolls back after writing makes everything be
//! read again ([`Known::forget`]). Source: docs/ARCHITECTURE.md, "Bulk work".

use std::collections::{HashMap, HashSet};

use rusqlite::{params, Connection};

use super::events::PART_UPDATED;
use super::foreign::ForeignSnapshots;
use super::snapshot;

/// What the store's connection knows of the V1 tables (see the module docs).
#[derive(Debug, Default)]
pub struct Known {
    /// `PRAGMA data_version` when the fence passes and the snapshot index were learnt; `None`
    /// when nothing is known.
    data_version: Option<i64>,
    /// Session id -> its `time_updated` (ms since the Unix epoch) when every scope-independent
    /// check of the V1 fence passed at `data_version`.
    fence_passed: HashMap<String, i64>,
    /// One session's snapshot index at `data_version`.
    snapshots: Option<SnapshotIndex>,
    /// Snapshots filed under another aggregate (valid across data versions on its own terms).
    pub foreign: ForeignSnapshots,
}

/// The `message.part.updated.1` events of one session, by the part they hold.
#[derive(Debug)]
struct SnapshotIndex {
    /// The session (the events' `aggregate_id`).
    session_id: String,
    /// Part id -> `(event id, bytes of data)` of every snapshot of it in the session.
    by_part: HashMap<String, Vec<(String, i64)>>,
}

impl Known {
    /// Forgets the fence passes and the snapshot index when another connection committed since
    /// they were learnt. Call first inside each transaction that uses them.
    ///
    /// Errors: SQLite's.
    pub fn refresh(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let now: i64 =
            crate::opencode::cached::query_row(conn, "PRAGMA data_version", [], |row| row.get(0))?;
        if self.data_version != Some(now) {
            self.fence_passed.clear();
            self.snapshots = None;
            self.data_version = Some(now);
        }
        Ok(())
    }

    /// Forgets the fence passes and the snapshot index (after a transaction of this connection
    /// that wrote and then rolled back, or whose commit may have failed).
    pub fn forget(&mut self) {
        self.fence_passed.clear();
        self.snapshots = None;
        self.data_version = None;
    }

    /// The session's `time_updated` (ms) when its fence last passed at this data version.
    pub fn fence_passed(&self, session_id: &str) -> Option<i64> {
        self.fence_passed.get(session_id).copied()
    }

    /// Records that every scope-independent check of the fence passed for the session, whose
    /// `time_updated` is `updated` (ms).
    pub fn record_fence_pass(&mut self, session_id: &str, updated: i64) {
        if self.data_version.is_some() {
            self.fence_passed.insert(session_id.to_string(), updated);
        }
    }

    /// The `message.part.updated.1` events of `session_id` that hold one of `part_ids`, as
    /// `(event id, bytes of data)`. The first call for a session reads all of its snapshots once
    /// (`super::snapshot::part_id` reads which part each names, as SQLite reads it); later
    /// calls at the same data version answer from that index.
    ///
    /// Errors: SQLite's.
    pub fn snapshots_of(
        &mut self,
        conn: &Connection,
        session_id: &str,
        part_ids: &HashSet<&str>,
    ) -> rusqlite::Result<Vec<(String, i64)>> {
        let current = self
            .snapshots
            .as_ref()
            .is_some_and(|index| index.session_id == session_id);
        if !current || self.data_version.is_none() {
            self.snapshots = Some(SnapshotIndex::read(conn, session_id)?);
        }
        let Some(index) = &self.snapshots else {
            return Ok(Vec::new());
        };
        let mut found: Vec<(String, i64)> = Vec::new();
        for part in part_ids {
            if let Some(events) = index.by_part.get(*part) {
                found.extend(events.iter().cloned());
            }
        }
        found.sort();
        Ok(found)
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

impl SnapshotIndex {
    /// Reads every `message.part.updated.1` event of the session once.
    fn read(conn: &Connection, session_id: &str) -> rusqlite::Result<Self> {
        let mut stmt = conn.prepare_cached(
            "SELECT id, data, octet_length(data) FROM event \
             WHERE aggregate_id = ?1 AND type = ?2",
        )?;
        let mut rows = stmt.query(params![session_id, PART_UPDATED])?;
        let mut by_part: HashMap<String, Vec<(String, i64)>> = HashMap::new();
        while let Some(row) = rows.next()? {
            // An event whose id is not text cannot be named for deletion: it stays.
            let rusqlite::types::ValueRef::Text(id) = row.get_ref(0)? else {
                continue;
            };
            let Ok(id) = std::str::from_utf8(id) else {
                continue;
            };
            let Some(part) = snapshot::part_id(row.get_ref(1)?) else {
                continue;
            };
            by_part
                .entry(part)
                .or_default()
                .push((id.to_string(), row.get(2)?));
        }
        Ok(Self {
            session_id: session_id.to_string(),
            by_part,
        })
    }
}
