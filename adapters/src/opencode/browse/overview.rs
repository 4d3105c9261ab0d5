//! `GET .../stats`: where the bytes of the database are (`stats::measure`, the whole file) and
//! the largest sessions a workspace admits, read in one snapshot: what the page's overview
//! draws and `session-prune stats --json` prints.

use rusqlite::Connection;
use serde::Serialize;

use crate::opencode::sessions::{self, SessionSummary};
use crate::opencode::stats::{self, Stats};
use crate::opencode::Owner;

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

/// Measures the database at `path` and lists the `top` largest sessions `admit` lets through,
/// inside the caller's read transaction.
pub(super) fn read(
    conn: &Connection,
    path: &std::path::Path,
    top: usize,
    admit: &dyn Fn(&Owner) -> bool,
) -> rusqlite::Result<Overview> {
    let stats = stats::measure(conn, path)?;
    let mut sessions = sessions::list(conn)?;
    sessions.retain(|s| {
        admit(&Owner {
            directory: s.directory.clone(),
            project_id: s.project_id.clone(),
            workspace_id: s.workspace_id.clone(),
        })
    });
    sessions.truncate(top);
    Ok(Overview { stats, sessions })
}
