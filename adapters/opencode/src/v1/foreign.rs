//! Part snapshots filed under another session's aggregate: `message.part.updated.1` events whose
//! `aggregate_id` is not the session the part belongs to. OpenCode files a part's snapshots
//! under its own session, but a database it left inconsistent (or a hand-edited one) can hold a
//! full copy of a part under another aggregate; a prune of that part must remove it too, or the
//! pruned output survives in the file.
//!
//! Such rows cannot be found through an index (`event` is indexed by aggregate, not by part), so
//! a store finds them with one pass over `event` and then follows only the rows appended since
//! (by `rowid`, which SQLite gives new rows above every existing one). Rowids freed at the top
//! (another connection deleted the newest rows) can be given again: the row last looked at, gone
//! or holding another id, tells, and everything is looked at anew. The pass reads each
//! snapshot's text once and parses only those that do not name their own aggregate twice (a
//! snapshot names its session as the event's and as the part's `sessionID`), so its cost is
//! reading the `event` table once per process, not once per prune; the part's own
//! `sessionID` decides.

use std::collections::{HashMap, HashSet};

use rusqlite::Connection;

use super::events::PART_UPDATED;
use crate::row_budget;

/// The foreign snapshots a store has found so far, by part id.
#[derive(Debug, Default)]
pub struct ForeignSnapshots {
    /// The highest `event.rowid` looked at; `None` before the first pass.
    through: Option<i64>,
    /// The `id` of the row at `through` when it was looked at (`None`: no row there, or an id
    /// that is not text). Another id there now means rows at the top were deleted and their
    /// rowids given again: rows at or below `through` may be new.
    through_id: Option<String>,
    /// Part id -> ids of the events holding a snapshot of it under another aggregate.
    by_part: HashMap<String, Vec<String>>,
}

impl ForeignSnapshots {
    /// Looks at the `event` rows appended since the last call: all of them the first time, or
    /// when rows at the top were deleted by another connection (the row last looked at is gone,
    /// or another row holds its rowid), which lets SQLite hand out their rowids again.
    ///
    /// Errors: SQLite's.
    pub fn catch_up(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        // The top row and its id in one statement: outside a transaction, another connection may
        // replace the top row before a second one, and the mark must name the row looked at.
        let top: Option<(i64, Option<String>)> = {
            let mut stmt =
                conn.prepare_cached("SELECT rowid, id FROM event ORDER BY rowid DESC LIMIT 1")?;
            let mut rows = stmt.query([])?;
            match rows.next()? {
                Some(row) => Some((row.get(0)?, text(row.get_ref(1)?))),
                None => None,
            }
        };
        let unchanged_below = match (self.through, &top) {
            (Some(through), Some((top, _))) if *top >= through => {
                id_at(conn, through)? == self.through_id
            }
            _ => false,
        };
        let from = match self.through {
            Some(through) if unchanged_below => through,
            // The first pass, or rows at the top were deleted: their rowids may be handed out
            // again, so everything is looked at anew.
            _ => {
                self.by_part.clear();
                0
            }
        };
        let data = row_budget::data("", "event");
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id, \
                    CASE WHEN json_valid({data}) THEN json_extract({data}, '$.part.id') END, \
                    CASE WHEN json_valid({data}) THEN json_extract({data}, '$.part.sessionID') END, \
                    aggregate_id \
             FROM event \
             WHERE rowid > ?1 AND type = ?2 \
               AND session_prune_count({data}, '\"sessionID\":\"' || aggregate_id || '\"') < 2"
        ))?;
        let mut rows = stmt.query(rusqlite::params![from, PART_UPDATED])?;
        while let Some(row) = rows.next()? {
            let id: Option<String> = text(row.get_ref(0)?);
            let part: Option<String> = text(row.get_ref(1)?);
            let owner: Option<String> = text(row.get_ref(2)?);
            let aggregate: Option<String> = text(row.get_ref(3)?);
            // A row whose id is not text cannot be named for deletion: it is left as it is.
            if let (Some(id), Some(part), Some(owner)) = (id, part, owner) {
                if Some(&owner) != aggregate.as_ref() {
                    let ids = self.by_part.entry(part).or_default();
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
        }
        let (through, through_id) = top.unwrap_or((0, None));
        self.through = Some(through);
        self.through_id = through_id;
        Ok(())
    }

    /// Records that this connection's own writes (a prune's deletes and appended events, in
    /// its transaction, after [`Self::catch_up`]) end at the `event` table's current top: the
    /// rowids they freed may be handed out again, so the next look starts there. The rows they
    /// appended at or below the mark are `message.part.removed.1` events, no snapshot: the row
    /// at the mark is taken as it is now.
    ///
    /// Errors: SQLite's.
    pub fn after_own_writes(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let top: Option<i64> =
            crate::cached::query_row(conn, "SELECT max(rowid) FROM event", [], |row| row.get(0))?;
        if let Some(through) = self.through {
            // Inside the transaction: nobody else writes between these statements.
            let through = through.min(top.unwrap_or(0));
            self.through_id = id_at(conn, through)?;
            self.through = Some(through);
        }
        Ok(())
    }

    /// The events holding a snapshot of one of `part_ids` under another aggregate, as found by
    /// the last [`Self::catch_up`]; a caller checks each still exists.
    pub fn of_parts(&self, part_ids: &HashSet<&str>) -> Vec<String> {
        let mut ids: Vec<String> = part_ids
            .iter()
            .filter_map(|part| self.by_part.get(*part))
            .flatten()
            .cloned()
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// The `id` of the `event` row at `rowid`, when there is one and its id is text.
fn id_at(conn: &Connection, rowid: i64) -> rusqlite::Result<Option<String>> {
    let mut stmt = conn.prepare_cached("SELECT id FROM event WHERE rowid = ?1")?;
    let mut rows = stmt.query([rowid])?;
    Ok(match rows.next()? {
        Some(row) => text(row.get_ref(0)?),
        None => None,
    })
}

/// A text column's value, `None` for anything else.
fn text(value: rusqlite::types::ValueRef<'_>) -> Option<String> {
    match value {
        rusqlite::types::ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok().map(String::from),
        _ => None,
    }
}
