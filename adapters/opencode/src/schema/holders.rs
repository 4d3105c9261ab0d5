//! Who holds the database's files open: the processes with the database, its `-wal` or its
//! `-shm` file open, and whether the file each holds is still the one at that path.
//!
//! Linux only: read from `/proc/<pid>/fd`. Elsewhere, and for processes this user may not
//! inspect, nothing is found. Source: proc(5), `/proc/<pid>/fd/<n>` is a link that names the
//! open file, with ` (deleted)` appended once the file was unlinked; `stat` through it gives
//! the open file's device and inode.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What readlink(2) appends to the name of an open file that was unlinked (proc(5)).
const DELETED_SUFFIX: &str = " (deleted)";

/// One open file of the database's family (the database, `-wal`, `-shm`) in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The process.
    pub pid: u32,
    /// The path the file was opened at.
    pub path: PathBuf,
    /// Whether that path still names the open file.
    pub state: HeldState,
}

/// Whether the file a process holds is still the one at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldState {
    /// The path names the open file.
    Current,
    /// The file was unlinked: its path names nothing, or a new file created since.
    Deleted,
    /// The path names another file (moved or copied into place) than the open one.
    Replaced,
}

impl HeldState {
    /// The state in words, for a refusal ("deleted", "replaced").
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::Deleted => "deleted",
            Self::Replaced => "replaced",
        }
    }
}

/// The database's family: the database file, its `-wal` and its `-shm`, canonical (the folder
/// resolved, the file names kept, so that an unlinked side file is still named).
pub fn family(database: &Path) -> Vec<PathBuf> {
    let database = canonical(database);
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut name = database.clone().into_os_string();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect()
}

/// Every open file of the database's family, in every process this user may inspect
/// (`own` decides whether this process counts), sorted by pid then path.
pub fn held(database: &Path, own: bool) -> Vec<Held> {
    held_among(&family(database), own)
}

/// The processes other than this one that hold the file at `path` open, by the path they
/// opened it at, whether that path still names it or it was unlinked or replaced since (the
/// journal a `serve` holds, say, after its file was deleted). Sorted, each once.
pub fn holding_path(path: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = held_among(&[canonical(path)], false)
        .into_iter()
        .map(|held| held.pid)
        .collect();
    pids.dedup();
    pids
}

/// The processes other than this one that hold the database, its `-wal` or its `-shm` open and
/// whose command name (`/proc/<pid>/comm`) is `name`: another `session-prune`, say. Sorted,
/// each once.
pub fn holders_named(database: &Path, name: &str) -> Vec<u32> {
    let mut pids: Vec<u32> = held(database, false)
        .into_iter()
        .map(|held| held.pid)
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .collect();
    pids.dedup();
    pids
}

/// [`held`] for the files `family` (canonical paths).
fn held_among(family: &[PathBuf], own: bool) -> Vec<Held> {
    let this = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| own || *pid != this)
    {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let text = target.to_string_lossy();
            let (named, deleted) = match text.strip_suffix(DELETED_SUFFIX) {
                Some(named) => (PathBuf::from(named), true),
                None => (target.clone(), false),
            };
            let Some(path) = family.iter().find(|member| **member == named) else {
                continue;
            };
            // A descriptor may be closed and its number reused between the reads: a file is
            // reported replaced only when the link still names it after the comparison.
            let state = if deleted {
                HeldState::Deleted
            } else if same_file(&fd.path(), path)
                || std::fs::read_link(fd.path()).ok().as_ref() != Some(&target)
            {
                HeldState::Current
            } else {
                HeldState::Replaced
            };
            found.push(Held {
                pid,
                path: path.clone(),
                state,
            });
        }
    }
    found.sort_by(|a, b| (a.pid, &a.path).cmp(&(b.pid, &b.path)));
    found.dedup();
    found
}

/// The processes other than this one with the database, its `-wal` or its `-shm` open, found by
/// the file itself (device and inode), whatever path they opened it by: a hard link, another
/// mount of the same folder. Sorted, each once.
pub fn holding_by_inode(database: &Path) -> Vec<u32> {
    let files: Vec<(u64, u64)> = family(database)
        .iter()
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|meta| (meta.dev(), meta.ino()))
        .collect();
    if files.is_empty() {
        return Vec::new();
    }
    let this = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != this)
    {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.filter_map(Result::ok).any(|fd| {
            std::fs::metadata(fd.path()).is_ok_and(|open| files.contains(&(open.dev(), open.ino())))
        });
        if holds {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// Whether the open file behind `fd_link` is the file at `path` (same device and inode). A
/// path that cannot be read counts as another file.
fn same_file(fd_link: &Path, path: &Path) -> bool {
    match (std::fs::metadata(fd_link), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// The path with its folder resolved (the file itself may not exist).
fn canonical(path: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    match (std::fs::canonicalize(folder), path.file_name()) {
        (Ok(folder), Some(name)) => folder.join(name),
        _ => path.to_path_buf(),
    }
}

/// `pid 12622 (opencode)`: a process id with its command name where `/proc/<pid>/comm` tells it.
pub fn process_named(pid: u32) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(name) if !name.trim().is_empty() => format!("pid {pid} ({})", name.trim()),
        _ => format!("pid {pid}"),
    }
}
