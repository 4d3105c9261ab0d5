//! The request scope: which sessions a caller may touch (CodeNomad's workspace), and the rule
//! that decides whether a session's ownership falls inside it.
//!
//! Source: codenomad-pruning.md §4 (the fence refuses a session whose `directory`, `project_id`
//! or `workspace_id` moved, `not_deletable`; on Windows `\` becomes `/` before comparing) and §8
//! (history's directory scope takes nested directories and OpenCode's `global` project, and
//! leaves out a sibling such as `/repo-other`). The scope is context, not part of a request body,
//! and not part of the request key: a retry from another scope is checked again by the fence.

use serde::Serialize;

/// The project id OpenCode gives sessions of directories outside any git repository.
pub const GLOBAL_PROJECT: &str = "global";

/// The ownership a caller is authorized for. Every field left `None` is not checked; the default
/// scope admits every session (a person running the CLI on their own database).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// Sessions must live in this directory or below it (compared by path component, with `\`
    /// read as `/`).
    pub directory: Option<String>,
    /// Sessions must belong to this project (`session.project_id`), or to OpenCode's `global`
    /// project.
    #[serde(rename = "projectID")]
    pub project_id: Option<String>,
    /// Sessions must belong to this workspace (`session.workspace_id`).
    #[serde(rename = "workspaceID")]
    pub workspace_id: Option<String>,
}

/// Who owns a session, as its row says (`session` in V1 and OpenCode 1.18, `session_v2` in
/// opencode2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership<'a> {
    /// `directory`.
    pub directory: &'a str,
    /// `project_id`.
    pub project_id: &'a str,
    /// `workspace_id` (NULL when the session has no workspace).
    pub workspace_id: Option<&'a str>,
}

impl Scope {
    /// Whether the scope checks nothing.
    pub fn is_unscoped(&self) -> bool {
        self.directory.is_none() && self.project_id.is_none() && self.workspace_id.is_none()
    }

    /// Checks a session's ownership against the scope. `Err` says, in words, which field is
    /// outside it (the fence turns it into `not_deletable`).
    pub fn admits(&self, owner: &Ownership<'_>) -> Result<(), String> {
        if let Some(directory) = &self.directory {
            if !within(owner.directory, directory) {
                return Err(format!(
                    "the session's directory {} is outside {directory}",
                    owner.directory
                ));
            }
        }
        if let Some(project) = &self.project_id {
            if owner.project_id != project && owner.project_id != GLOBAL_PROJECT {
                return Err(format!(
                    "the session belongs to project {}, not {project}",
                    owner.project_id
                ));
            }
        }
        if let Some(workspace) = &self.workspace_id {
            if owner.workspace_id != Some(workspace.as_str()) {
                return Err(format!(
                    "the session belongs to workspace {}, not {workspace}",
                    owner.workspace_id.unwrap_or("(none)")
                ));
            }
        }
        Ok(())
    }
}

/// Whether `path` is `root` or lies below it, comparing whole path components after turning `\`
/// into `/` and resolving `.` and `..` by name (`/repo` holds `/repo/a`, not `/repo-other` nor
/// `/repo/../etc`). Only absolute paths compare: a root that is not absolute holds nothing (`.`
/// or `../..` would otherwise hold every path), and a path that is not absolute lies nowhere
/// (`x/../../C:/repo` would otherwise climb into any root).
pub fn within(path: &str, root: &str) -> bool {
    is_absolute(path) && is_absolute(root) && components(path).starts_with(&components(root))
}

/// Whether `path` is absolute: it starts with `/` or `\`, or with a Windows drive (`C:/`,
/// `C:\`).
pub fn is_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    matches!(bytes.first(), Some(b'/' | b'\\'))
        || (bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'/' | b'\\'))
}

/// The components of `path`: `/` and `\` separate, empty and `.` components drop out, `..`
/// removes the one before it. The first component of an absolute path is `""`.
fn components(path: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = Vec::new();
    for (i, part) in path.split(['/', '\\']).enumerate() {
        match part {
            "" if i == 0 => parts.push(""),
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| !last.is_empty()) {
                    parts.pop();
                }
            }
            name => parts.push(name),
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner<'a>(
        directory: &'a str,
        project: &'a str,
        workspace: Option<&'a str>,
    ) -> Ownership<'a> {
        Ownership {
            directory,
            project_id: project,
            workspace_id: workspace,
        }
    }

    #[test]
    fn nested_directories_are_inside_and_siblings_are_not() {
        assert!(within("/repo", "/repo"));
        assert!(within("/repo/src/deep", "/repo/"));
        assert!(!within("/repo-other", "/repo"));
        assert!(!within("/re", "/repo"));
        assert!(within("C:\\work\\repo\\sub", "C:/work/repo"));
        assert!(within("/anything", "/"));
        assert!(!within("/repo/../etc", "/repo"));
        assert!(within("/repo/./a/../b", "/repo"));
        assert!(!within("/../etc", "/repo"));
        assert!(!within("", "/"));
        assert!(!within("/repo/a", "."));
        assert!(!within("/repo/a", "../.."));
        assert!(!within("/repo/a", "repo"));
        assert!(!within("/repo/a", ""));
        assert!(!within("x/../../C:/repo/sub", "C:/repo"));
        assert!(!within("repo/a", "/"));
    }

    #[test]
    fn the_global_project_is_admitted_beside_the_scoped_one() {
        let scope = Scope {
            directory: Some("/repo".into()),
            project_id: Some("p1".into()),
            workspace_id: None,
        };
        assert_eq!(scope.admits(&owner("/repo/a", "p1", None)), Ok(()));
        assert_eq!(
            scope.admits(&owner("/repo/a", GLOBAL_PROJECT, Some("w"))),
            Ok(())
        );
        assert_eq!(
            scope.admits(&owner("/repo/a", "p2", None)),
            Err("the session belongs to project p2, not p1".into())
        );
        assert_eq!(
            scope.admits(&owner("/repo-other", "p1", None)),
            Err("the session's directory /repo-other is outside /repo".into())
        );
    }

    #[test]
    fn a_workspace_scope_needs_the_same_workspace() {
        let scope = Scope {
            workspace_id: Some("wrk_1".into()),
            ..Scope::default()
        };
        assert_eq!(scope.admits(&owner("/x", "p", Some("wrk_1"))), Ok(()));
        assert_eq!(
            scope.admits(&owner("/x", "p", None)),
            Err("the session belongs to workspace (none), not wrk_1".into())
        );
        assert!(Scope::default()
            .admits(&owner("/x", "p", Some("w")))
            .is_ok());
        assert!(Scope::default().is_unscoped());
    }
}
