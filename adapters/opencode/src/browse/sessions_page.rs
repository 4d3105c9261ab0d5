//! `GET .../sessions`: the sessions a workspace admits, a page at a time, ordered by session id
//! (OpenCode's session ids descend with time, so the newest come first), with the sizes
//! `session-prune sessions --json` prints. The cursor is the last session id of the page
//! before: an id never moves, so a scan neither skips nor repeats a session while OpenCode
//! writes (a session created meanwhile sorts before the cursor and is seen on the next scan).

use pruning_engine::browse::SESSIONS_PAGE;
use rusqlite::Connection;
use serde::Serialize;

use crate::ownership::SessionTable;
use crate::schema::Schema;
use crate::sessions::{self, SessionSummary};
use crate::values::lenient_text;
use crate::Owner;

/// One page of sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionsPage {
    /// At most 100 sessions, by session id.
    pub sessions: Vec<SessionSummary>,
    /// The next page's `cursor`; `null` on the last page.
    pub cursor: Option<String>,
}

/// Reads one page after `cursor`, inside the caller's read transaction.
pub(super) fn read(
    conn: &Connection,
    cursor: Option<&str>,
    admit: &dyn Fn(&Owner) -> bool,
) -> rusqlite::Result<SessionsPage> {
    let schema = Schema::read(conn)?;
    let mut selects = Vec::new();
    for table in [SessionTable::Shared, SessionTable::V2] {
        if schema.has(table.name()) {
            let workspace = crate::ownership::workspace_column(conn, table)?;
            selects.push(format!(
                "SELECT id, directory, project_id, {workspace} FROM {} WHERE id > ?1",
                table.name()
            ));
        }
    }
    let mut ids = Vec::new();
    let mut more = false;
    if !selects.is_empty() {
        let sql = format!("{} ORDER BY 1", selects.join(" UNION ALL "));
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([cursor.unwrap_or("")])?;
        while let Some(row) = rows.next()? {
            let workspace = row.get_ref(3)?;
            let owner = Owner {
                directory: lenient_text(row.get_ref(1)?),
                project_id: lenient_text(row.get_ref(2)?),
                workspace_id: (workspace != rusqlite::types::ValueRef::Null)
                    .then(|| lenient_text(workspace)),
            };
            if !admit(&owner) {
                continue;
            }
            if ids.len() == SESSIONS_PAGE {
                more = true;
                break;
            }
            ids.push(lenient_text(row.get_ref(0)?));
        }
    }
    let mut sessions = sessions::list_of(conn, Some(&ids))?;
    sessions.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    let cursor = more.then(|| ids.last().cloned()).flatten();
    Ok(SessionsPage { sessions, cursor })
}
