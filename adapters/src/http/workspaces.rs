//! Workspaces: the directory each workspace id stands for, and the scope a request through it
//! gets. Discovered from OpenCode's `project` (`id` -> `worktree`) and `workspace` (`id` ->
//! `directory`) tables, or given by the operator (`serve --workspace ID=DIR`).
//!
//! Source: OpenCode's migrations (`project`, `20260225215848_workspace`) and
//! CodeNomad's broker (it answers 403 "Session does not belong to workspace").

use pruning_engine::Scope;
use rusqlite::Connection;
use serde::Serialize;

use crate::opencode::schema::Schema;
use crate::opencode::sessions::lenient_text;

/// One workspace: `{id, directory}` in `GET /api/workspaces`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workspace {
    /// The id in the route (`/api/workspaces/{id}/...`): an OpenCode project id, an OpenCode
    /// workspace id (`wrk_...`), or the operator's own name.
    pub id: String,
    /// Sessions whose `directory` is this directory or lies below it belong to the workspace.
    pub directory: String,
}

impl Workspace {
    /// The scope of a request made through this workspace: its directory (see
    /// [`pruning_engine::scope::within`] for how directories compare).
    pub fn scope(&self) -> Scope {
        Scope {
            directory: Some(self.directory.clone()),
            ..Scope::default()
        }
    }
}

/// Where the workspace list comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workspaces {
    /// Exactly these, as the operator gave them; the database's tables are not read.
    Given(Vec<Workspace>),
    /// Read from the database at each lookup, so a project OpenCode opened after the server
    /// started is found.
    Discovered,
}

impl Workspaces {
    /// Every workspace, ordered by id.
    ///
    /// Errors: the SQLite error of reading `project` or `workspace`.
    pub fn list(&self, conn: &Connection) -> rusqlite::Result<Vec<Workspace>> {
        match self {
            Self::Given(list) => {
                let mut list = list.clone();
                list.sort_by(|a, b| a.id.cmp(&b.id));
                Ok(list)
            }
            Self::Discovered => discover(conn),
        }
    }

    /// The workspace `id`, if there is one.
    ///
    /// Errors: as [`Workspaces::list`].
    pub fn find(&self, conn: &Connection, id: &str) -> rusqlite::Result<Option<Workspace>> {
        Ok(self.list(conn)?.into_iter().find(|w| w.id == id))
    }
}

/// Reads OpenCode's projects (`project.worktree`) and workspaces (`workspace.directory`, where
/// set), ordered by id. A table that does not exist contributes nothing; a row whose directory
/// is NULL, empty or not absolute is left out (it could not scope anything).
pub fn discover(conn: &Connection) -> rusqlite::Result<Vec<Workspace>> {
    let schema = Schema::read(conn)?;
    let mut found = Vec::new();
    for (table, sql) in [
        ("project", "SELECT id, worktree FROM project"),
        (
            "workspace",
            "SELECT id, directory FROM workspace WHERE directory IS NOT NULL",
        ),
    ] {
        if !schema.has(table) {
            continue;
        }
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map([], |row| {
            Ok(Workspace {
                id: lenient_text(row.get_ref(0)?),
                directory: lenient_text(row.get_ref(1)?),
            })
        })?;
        for row in rows {
            let workspace = row?;
            if pruning_engine::scope::is_absolute(&workspace.directory) && !workspace.id.is_empty()
            {
                found.push(workspace);
            }
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found.dedup_by(|a, b| a.id == b.id);
    Ok(found)
}
