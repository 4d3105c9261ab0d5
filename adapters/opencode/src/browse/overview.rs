//! `GET .../stats`: where the bytes of the database are (the whole file: `stats::estimate`, or
//! `stats::measure` when asked for exact figures) and the largest sessions a workspace admits,
//! read in one snapshot: what the page's overview draws and `session-prune stats --json`
//! prints.

use rusqlite::Connection;
use serde::Serialize;

use crate::sessions::{self, SessionSummary, SessionTotals};
use crate::stats::{self, Stats};
use crate::Owner;

/// The most sessions an overview lists.
pub const OVERVIEW_TOP_MAX: usize = 100;

/// The database's volumes and a workspace's largest sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Overview {
    /// The whole database file: its sizes, tables, event types, technical content and spill
    /// files (these describe the file, not one workspace).
    #[serde(flatten)]
    pub stats: Stats,
    /// The workspace's largest sessions, largest total first (ties: most recently updated
    /// first), at most the `top` asked for.
    pub sessions: Vec<SessionSummary>,
}

/// How exact an overview's figures are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exactness {
    /// The technical content and the copies estimated from a sample (`stats::estimate`).
    Estimated,
    /// Every figure exact: every row read (`stats::measure`).
    Exact,
}

/// Measures the database at `path` and lists the `top` largest sessions `admit` lets through,
/// inside the caller's read transaction.
pub(crate) fn read(
    conn: &Connection,
    path: &std::path::Path,
    top: usize,
    exactness: Exactness,
    admit: &dyn Fn(&Owner) -> bool,
) -> rusqlite::Result<Overview> {
    let (stats, totals) = match exactness {
        Exactness::Estimated => stats::estimate(conn, path)?,
        Exactness::Exact => (stats::measure(conn, path)?, SessionTotals::read(conn)?),
    };
    // The largest sessions whose rows are read for their prunable bytes: as many bytes as the
    // estimate reads of a table (the rest take the estimate). Exact: every one.
    let read_budget = match exactness {
        Exactness::Estimated => {
            stats::read_budget(stats.database_bytes.saturating_add(stats.wal_bytes))
        }
        Exactness::Exact => u64::MAX,
    };
    let admit_summary = |s: &SessionSummary| {
        admit(&Owner {
            directory: s.directory.clone(),
            project_id: s.project_id.clone(),
            workspace_id: s.workspace_id.clone(),
        })
    };
    let sessions = sessions::largest(conn, top, &admit_summary, &totals, read_budget)?;
    Ok(Overview { stats, sessions })
}
