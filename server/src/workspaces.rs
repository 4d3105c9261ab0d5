//! Workspaces: the directory each workspace id stands for, and the scope a request through it
//! gets. Discovered from OpenCode's `project` (`id` -> `worktree`) and `workspace` (`id` ->
//! `directory`) tables, or given by the operator (`serve --workspace ID=DIR`).
//!
//! Source: CodeNomad's broker (it answers 403 "Session does not belong to workspace"); the
//! discovery itself is the store's (`OpenCodeStore::workspaces`).

use pruning_engine::StoreError;
use pruning_opencode::OpenCodeStore;
pub use pruning_opencode::Workspace;
use serde::Serialize;

/// A workspace as `GET /api/workspaces` lists it: `{id, directory}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = Workspace)]
pub struct Listed {
    /// The id in the route (`/api/workspaces/{id}/...`): an OpenCode project id, an OpenCode
    /// workspace id (`wrk_...`), or the operator's own name.
    pub id: String,
    /// Sessions whose `directory` is this directory or lies below it belong to the workspace.
    pub directory: String,
}

impl From<&Workspace> for Listed {
    fn from(workspace: &Workspace) -> Self {
        Self {
            id: workspace.id.clone(),
            directory: workspace.directory.clone(),
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
    /// Errors: the store's, reading `project` or `workspace`.
    pub fn list(&self, store: &OpenCodeStore) -> Result<Vec<Workspace>, StoreError> {
        match self {
            Self::Given(list) => {
                let mut list = list.clone();
                list.sort_by(|a, b| a.id.cmp(&b.id));
                Ok(list)
            }
            Self::Discovered => store.workspaces(),
        }
    }

    /// The workspace `id`, if there is one.
    ///
    /// Errors: as [`Workspaces::list`].
    pub fn find(&self, store: &OpenCodeStore, id: &str) -> Result<Option<Workspace>, StoreError> {
        Ok(self.list(store)?.into_iter().find(|w| w.id == id))
    }
}
