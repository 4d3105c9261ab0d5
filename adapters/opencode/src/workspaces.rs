//! OpenCode's own workspaces: its projects (`project.id` -> `worktree`) and workspaces
//! (`workspace.id` -> `directory`), each the directory its sessions live in.
//!
//! Source: OpenCode's migrations (`project`, `20260225215848_workspace`). OpenCode 2 keeps a
//! `workspace` table of its own shape (`id, provider, binding, created_at, last_used_at`: no
//! directory), so there a workspace is known by its project alone.

use pruning_engine::Scope;
use rusqlite::Connection;
use serde::Serialize;

use super::schema::Schema;
use super::values::lenient_text;

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

/// Reads OpenCode's projects (`project.worktree`) and workspaces (`workspace.directory`, where
/// set), ordered by id. A table that does not exist, or lacks the directory column (OpenCode
/// 2's `workspace`), contributes nothing; a row whose directory is NULL, empty or not absolute
/// is left out (it could not scope anything).
pub fn discover(conn: &Connection) -> rusqlite::Result<Vec<Workspace>> {
    let schema = Schema::read(conn)?;
    let mut found = Vec::new();
    for (present, sql) in [
        (schema.has("project"), "SELECT id, worktree FROM project"),
        (
            schema.has_column("workspace", "directory"),
            "SELECT id, directory FROM workspace WHERE directory IS NOT NULL",
        ),
    ] {
        if !present {
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
