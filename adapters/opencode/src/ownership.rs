//! Session ownership: reading a session's `directory`, `project_id` and `workspace_id`, and
//! refusing a session outside the request's [`Scope`] (moved ownership, `not_deletable`).
//!
//! Source: docs/ARCHITECTURE.md, "Fence" (CodeNomad's claim fence compares all three).
//! `workspace_id` came
//! with OpenCode migration `20260227213759_add_session_workspace_id`; older databases have no
//! such column and their sessions have no workspace.

use pruning_engine::{BlockedReason, Ownership, Refusal, Scope};
use rusqlite::{Connection, OptionalExtension};

use crate::values::lenient_text;

/// The table that holds a generation's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionTable {
    /// `session`: V1, and OpenCode 1.18's V2 sessions.
    Shared,
    /// `session_v2`: opencode2.
    V2,
}

impl SessionTable {
    /// The table name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Shared => "session",
            Self::V2 => "session_v2",
        }
    }
}

/// A session's ownership as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `directory`.
    pub directory: String,
    /// `project_id`.
    pub project_id: String,
    /// `workspace_id`, `None` when NULL or when the table has no such column.
    pub workspace_id: Option<String>,
}

impl Owner {
    /// The engine's view of it.
    pub fn as_ownership(&self) -> Ownership<'_> {
        Ownership {
            directory: &self.directory,
            project_id: &self.project_id,
            workspace_id: self.workspace_id.as_deref(),
        }
    }
}

/// The SQL expression for `workspace_id` in `table`: the column, or NULL where it is missing.
pub fn workspace_column(conn: &Connection, table: SessionTable) -> rusqlite::Result<&'static str> {
    let has: bool = crate::cached::query_row(
        conn,
        "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = 'workspace_id'",
        [table.name()],
        |row| row.get(0),
    )?;
    Ok(if has { "workspace_id" } else { "NULL" })
}

/// Reads the owner of session `session_id`; `None` when the session does not exist.
pub fn read(
    conn: &Connection,
    table: SessionTable,
    session_id: &str,
) -> rusqlite::Result<Option<Owner>> {
    let workspace = workspace_column(conn, table)?;
    let sql = format!(
        "SELECT directory, project_id, {workspace} FROM {} WHERE id = ?1",
        table.name()
    );
    crate::cached::query_row(conn, &sql, [session_id], owner_of).optional()
}

/// Reads the owner of session `session_id` from whichever generation holds it: opencode2's
/// `session_v2` first, then the shared `session` table. `None` when neither has it.
pub fn find(conn: &Connection, session_id: &str) -> rusqlite::Result<Option<Owner>> {
    let schema = crate::schema::Schema::read(conn)?;
    for table in [SessionTable::V2, SessionTable::Shared] {
        if !schema.has(table.name()) {
            continue;
        }
        if let Some(owner) = read(conn, table, session_id)? {
            return Ok(Some(owner));
        }
    }
    Ok(None)
}

/// An [`Owner`] from columns 0 to 2 (`directory`, `project_id`, `workspace_id`), read leniently.
fn owner_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Owner> {
    let workspace = row.get_ref(2)?;
    Ok(Owner {
        directory: lenient_text(row.get_ref(0)?),
        project_id: lenient_text(row.get_ref(1)?),
        workspace_id: (workspace != rusqlite::types::ValueRef::Null)
            .then(|| lenient_text(workspace)),
    })
}

/// Refuses (`not_deletable`) a session outside `scope`. An unscoped request reads nothing.
/// A missing session is left to the caller, which refuses it with its own words.
pub fn check(
    conn: &Connection,
    table: SessionTable,
    session_id: &str,
    scope: &Scope,
) -> rusqlite::Result<Option<Refusal>> {
    if scope.is_unscoped() {
        return Ok(None);
    }
    let Some(owner) = read(conn, table, session_id)? else {
        return Ok(None);
    };
    Ok(scope.admits(&owner.as_ownership()).err().map(|why| {
        Refusal::new(
            BlockedReason::NotDeletable,
            format!("session {session_id} is outside the request's scope: {why}"),
        )
    }))
}

/// The refusal detail of a prune in a session that does not exist, naming a likely mix-up: an
/// id of OpenCode's message form (`msg_`) given as the session (the session comes first).
pub(crate) fn missing_session(session_id: &str) -> String {
    if session_id.starts_with("msg_") {
        format!(
            "session {session_id} does not exist: that looks like a message id (the session id, ses_..., comes first)"
        )
    } else {
        format!("session {session_id} does not exist")
    }
}
