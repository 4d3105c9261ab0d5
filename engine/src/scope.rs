//! The request scope: which sessions a caller may touch (CodeNomad's workspace), and the rule
//! that decides whether a session's ownership falls inside it.
//!
//! Source: CodeNomad's session-pruning contract. Its fence refuses a session whose `directory`,
//! `project_id` or `workspace_id` moved (`not_deletable`), reading `\` as `/` in Windows
//! directories; its history scope takes nested directories and OpenCode's `global` project, and
//! leaves out a sibling such as `/repo-other`. Here Windows' rules apply to Windows paths only
//! (see [`AbsolutePath`]). The scope is context, not part of a request body, and not part of the
//! request key: a retry from another scope is checked again by the fence.

use serde::Serialize;

/// The project id OpenCode gives sessions of directories outside any git repository.
pub const GLOBAL_PROJECT: &str = "global";

/// The ownership a caller is authorized for. Every field left `None` is not checked; the default
/// scope admits every session (a person running the CLI on their own database).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// Sessions must live in this directory or below it (an absolute path, compared by
    /// [`within`]: by component, with Windows' rules for Windows paths only).
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

/// Whether `path` is `root` or lies below it, by the rules of [`AbsolutePath`]: both must be
/// absolute paths of the same platform (a POSIX root never holds a Windows path, nor the other
/// way round), with the same root (POSIX `/`, the same drive, or the same UNC server and share),
/// and `root`'s components must begin `path`'s. So `/repo` holds `/repo/a`, not `/repo-other`,
/// `/repo/../etc` nor `/repo\sub`; `C:\Users\dev` holds `c:/users/DEV/proj`. A path or root
/// that is not absolute holds nothing and lies nowhere (`.` would otherwise hold every path, and
/// `x/../../C:/repo` climb into any root).
pub fn within(path: &str, root: &str) -> bool {
    match (AbsolutePath::parse(path), AbsolutePath::parse(root)) {
        (Some(path), Some(root)) => root.holds(&path),
        _ => false,
    }
}

/// Whether `path` is absolute by the rules of [`AbsolutePath`]: a POSIX path starting with `/`,
/// a Windows drive path (`C:\`, `C:/`) or a UNC path (`\\server\share`, `//server/share`).
pub fn is_absolute(path: &str) -> bool {
    AbsolutePath::parse(path).is_some()
}

/// The normalized text of an absolute path (see [`AbsolutePath`]'s `Display`), or `None` when it
/// is not absolute. `/a/./b/../c/` becomes `/a/c`, `C:\work\repo\` becomes `C:/work/repo`.
pub fn normalize(path: &str) -> Option<String> {
    AbsolutePath::parse(path).map(|path| path.to_string())
}

/// An absolute directory path with `.` and `..` resolved by name (never by the file system, which
/// may be another machine's), compared by whole components.
///
/// How the path starts decides which platform's rules it follows:
///
/// - a drive (an ASCII letter, `:`, then `\` or `/`) or a UNC root (`\\server\share` or
///   `//server/share`: two equal separators, then a server and a share) is a Windows path: `\`
///   and `/` both separate components, and the drive letter, the server, the share and every
///   component compare ASCII case-insensitively (Windows compares names case-insensitively; only
///   ASCII letters are folded, so two non-ASCII names that differ by case count as different and
///   a scope refuses rather than admits). `..` never climbs above the drive's root or the share:
///   server and share stay the first components. Device and verbatim roots (`\\.\`, `\\?\`)
///   are not directories and are not absolute here;
/// - otherwise a path starting with `/` is a POSIX path: only `/` separates, `\` is an ordinary
///   character of a name, and names compare exactly (`///x` is `/x`, as POSIX reads three or more
///   leading slashes);
/// - anything else is not absolute.
///
/// Empty components (a trailing or a doubled separator) and `.` drop out; `..` removes the
/// component before it, or nothing at the root. The rule is the ownership check of CodeNomad's
/// session-pruning contract (a session outside the caller's directory is `not_deletable`; on
/// Windows `\` and `/` are the same separator), made to apply only to Windows paths.
#[derive(Debug, Clone)]
pub struct AbsolutePath {
    root: PathRoot,
    components: Vec<String>,
}

/// Where an [`AbsolutePath`] starts.
#[derive(Debug, Clone)]
enum PathRoot {
    /// POSIX `/`.
    Posix,
    /// A Windows drive's root, `C:\` (the letter as written).
    Drive(u8),
    /// A Windows UNC share, `\\server\share` (the names as written).
    Unc {
        /// The server's name.
        server: String,
        /// The share's name.
        share: String,
    },
}

impl AbsolutePath {
    /// Parses `path` by the rules of its platform; `None` when it is not absolute (a relative
    /// path, a drive without a separator such as `C:x`, a UNC root without a server or a share,
    /// a device or verbatim root).
    pub fn parse(path: &str) -> Option<Self> {
        let bytes = path.as_bytes();
        if bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'\\' | b'/')
        {
            return Some(Self {
                root: PathRoot::Drive(bytes[0]),
                components: resolve(path[3..].split(['\\', '/'])),
            });
        }
        let unc = (path.starts_with("\\\\") || path.starts_with("//"))
            && !matches!(bytes.get(2), None | Some(b'\\' | b'/'));
        if unc {
            let mut names = path[2..].split(['\\', '/']);
            let server = names
                .next()
                .filter(|s| !matches!(*s, "" | "." | ".." | "?"))?;
            let share = names.next().filter(|s| !matches!(*s, "" | "." | ".."))?;
            return Some(Self {
                root: PathRoot::Unc {
                    server: server.to_string(),
                    share: share.to_string(),
                },
                components: resolve(names),
            });
        }
        let rest = path.strip_prefix('/')?;
        Some(Self {
            root: PathRoot::Posix,
            components: resolve(rest.split('/')),
        })
    }

    /// Whether this path follows Windows' rules (a drive or a UNC root).
    pub fn is_windows(&self) -> bool {
        !matches!(self.root, PathRoot::Posix)
    }

    /// Whether `path` is this path or lies below it: the same platform and root, and this path's
    /// components begin `path`'s.
    pub fn holds(&self, path: &AbsolutePath) -> bool {
        let same_name = |a: &str, b: &str| {
            if self.is_windows() {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        let same_root = match (&self.root, &path.root) {
            (PathRoot::Posix, PathRoot::Posix) => true,
            (PathRoot::Drive(a), PathRoot::Drive(b)) => a.eq_ignore_ascii_case(b),
            (
                PathRoot::Unc { server, share },
                PathRoot::Unc {
                    server: other_server,
                    share: other_share,
                },
            ) => same_name(server, other_server) && same_name(share, other_share),
            _ => false,
        };
        same_root
            && self.components.len() <= path.components.len()
            && self
                .components
                .iter()
                .zip(&path.components)
                .all(|(a, b)| same_name(a, b))
    }
}

impl std::fmt::Display for AbsolutePath {
    /// The normalized text, with `/` between components whatever the platform, so that it
    /// parses back to the same path: `/a/b`, `C:/a/b`, `//server/share/a/b`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.root {
            PathRoot::Posix => f.write_str("/")?,
            PathRoot::Drive(letter) => write!(f, "{}:/", char::from(*letter))?,
            PathRoot::Unc { server, share } => {
                write!(f, "//{server}/{share}")?;
                if !self.components.is_empty() {
                    f.write_str("/")?;
                }
            }
        }
        f.write_str(&self.components.join("/"))
    }
}

/// The components left after dropping empty names and `.`, and letting each `..` remove the
/// name before it (nothing at the root).
fn resolve<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut components: Vec<String> = Vec::new();
    for name in names {
        match name {
            "" | "." => {}
            ".." => {
                components.pop();
            }
            name => components.push(name.to_string()),
        }
    }
    components
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
    fn a_backslash_in_a_posix_path_is_part_of_a_name() {
        assert!(!within("/x/work\\sub", "/x/work"));
        assert!(!within("/x/work\\..\\..\\home\\other", "/home/other"));
        assert!(within("/x/work\\..\\..\\home\\other", "/x"));
        assert!(within("/x/work\\sub", "/x/work\\sub"));
        assert!(within("/x/work\\sub/deeper", "/x/work\\sub/"));
        assert!(!within("/x/Work", "/x/work"));
        assert!(!within("\\x\\work", "/"));
        assert!(!within("/x/work", "\\x"));
        assert!(within("///x/work", "/x"));
        assert_eq!(normalize("/x/./work\\sub/../y/").as_deref(), Some("/x/y"));
        assert_eq!(normalize("/x/work\\sub").as_deref(), Some("/x/work\\sub"));
        assert_eq!(normalize("\\x"), None);
    }

    #[test]
    fn windows_paths_compare_without_case_and_with_both_separators() {
        assert!(within("c:\\users\\dev\\proj\\", "C:\\Users\\dev\\proj"));
        assert!(within("c:/Users/DEV/proj/sub", "C:\\Users\\dev\\proj"));
        assert!(within("C:\\Users\\dev\\proj", "c:/users/dev/proj/"));
        assert!(within(
            "C:\\Users\\dev\\proj\\.\\a\\..\\b",
            "C:\\Users\\dev\\proj"
        ));
        assert!(!within(
            "C:\\Users\\dev\\proj\\..\\other",
            "C:\\Users\\dev\\proj"
        ));
        assert!(!within("C:\\Users\\dev\\project", "C:\\Users\\dev\\proj"));
        assert!(!within("D:\\Users\\dev\\proj", "C:\\Users\\dev\\proj"));
        assert!(within("C:\\..\\..\\Users", "c:\\users"));
        assert!(within("C:\\anything", "C:/"));
        assert!(!within("C:Users", "C:\\"));
        // Only ASCII letters are folded: a name that differs in a non-ASCII letter is refused.
        assert!(!within("C:\\Users\\DÉV", "C:\\Users\\dév"));
        assert!(within("C:\\Users\\dév\\a", "C:\\USERS\\dév"));
        assert_eq!(
            normalize("C:\\work\\.\\repo\\x\\..\\").as_deref(),
            Some("C:/work/repo")
        );
    }

    #[test]
    fn unc_roots_keep_server_and_share() {
        let share = "\\\\server\\share\\proj";
        assert!(within("//SERVER/Share/proj/sub", share));
        assert!(within("\\\\server\\share\\proj", "//server/share"));
        assert!(!within("\\\\server\\other\\proj", share));
        assert!(!within("\\\\elsewhere\\share\\proj", share));
        assert!(!within(
            "\\\\server\\share\\..\\other\\proj",
            "\\\\server\\other"
        ));
        assert!(within(
            "\\\\server\\share\\..\\..\\proj",
            "\\\\server\\share\\proj"
        ));
        assert!(!within("\\\\server", "\\\\server"));
        assert!(!within("\\\\server\\share", "\\\\server"));
        assert!(!within("\\\\?\\C:\\proj", "\\\\?\\C:"));
        assert!(!within("\\\\.\\pipe\\x", "\\\\.\\pipe"));
        assert!(!within("\\\\\\server\\share", "\\\\\\server\\share"));
        assert_eq!(
            normalize("\\\\server\\share\\a\\..\\b\\").as_deref(),
            Some("//server/share/b")
        );
        assert_eq!(
            normalize("//server/share/").as_deref(),
            Some("//server/share")
        );
    }

    #[test]
    fn a_posix_root_never_holds_a_windows_path_nor_the_other_way_round() {
        assert!(!within("C:\\repo", "/"));
        assert!(!within("C:/repo", "/"));
        assert!(!within("\\\\server\\share\\repo", "/"));
        assert!(!within("/repo", "C:\\"));
        assert!(!within("/server/share/repo", "//server/share"));
        assert!(!within("//server/share/repo", "/server/share"));
        assert!(!within("C:\\repo", "\\\\server\\share"));
        assert!(!within("/C:/repo", "C:/repo"));
    }

    #[test]
    fn normalized_text_parses_back_to_the_same_path() {
        for path in [
            "/x/work\\sub/..",
            "/",
            "///x",
            "/\\\\server\\share",
            "C:\\Work\\..\\Repo\\",
            "c:/",
            "\\\\Server\\Share\\a",
            "//server/share",
        ] {
            let once = normalize(path).unwrap();
            assert_eq!(normalize(&once).as_deref(), Some(once.as_str()), "{path}");
            assert!(within(path, &once) && within(&once, path), "{path}");
        }
        assert_eq!(
            normalize("/\\\\server\\share").as_deref(),
            Some("/\\\\server\\share")
        );
        assert_eq!(normalize("c:/").as_deref(), Some("c:/"));
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
