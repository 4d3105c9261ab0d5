//! The validated global configuration: the flags every command takes (`--db`, `--journal`,
//! `--channel`, `--json`, `--quiet-period`) turned into paths and durations, or one clear error
//! (exit code 2) before anything is opened. Each command validates its own flags
//! (`crate::commands`); the scope flags they share are validated here ([`scope`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use pruning_engine::Scope;
use pruning_opencode::Environment;

use super::args::{GlobalArgs, ScopeArgs};
use super::duration::{duration_flag, parse_duration, ANY_DURATION};
pub use super::error::ConfigError;

/// The validated global flags: where the files are and how the fence waits.
#[derive(Debug, Clone)]
pub struct Config {
    /// The OpenCode database.
    pub db: PathBuf,
    /// The journal file.
    pub journal: PathBuf,
    /// JSON output.
    pub json: bool,
    /// Quiet period of the fence.
    pub quiet_period: Duration,
    /// How long a session with an incomplete run must have been idle for the fence to admit
    /// prunes of its other messages; `None` (`never`): never.
    pub abandoned_after: Option<Duration>,
    /// How to run this binary on the same files, for the commands the output suggests:
    /// `session-prune` plus the `--db`, `--journal` and `--channel` flags that were given.
    pub invocation: String,
    /// What the database file says of itself when it is cut short
    /// (`pruning_opencode::cut_short`), read once before this process opens it with SQLite:
    /// reading the file later, beside SQLite's own handles, would drop the locks SQLite holds
    /// on it (POSIX locks belong to the process and go with any of its descriptors).
    pub cut_short: Option<String>,
}

/// `word` quoted for a POSIX shell when it holds anything but plain path characters.
pub(crate) fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The default journal of a database: `<database>.prune-journal` beside it.
pub fn default_journal(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".prune-journal");
    db.with_file_name(name)
}

/// The journal of `db` when none is given: beside the file a symlink (or a symlinked folder)
/// leads to, so that every path to one database finds the one journal, whose lock lets one
/// process write at a time (SQLite, too, puts its WAL beside that file). A journal left beside
/// the link by an earlier release is not taken over silently.
///
/// Errors: [`ConfigError::JournalBesideLink`] when a journal lies beside the link and none beside
/// the file.
fn journal_of(db: &Path) -> Result<PathBuf, ConfigError> {
    let given = default_journal(db);
    let Ok(real) = std::fs::canonicalize(db) else {
        // No file yet (or none to read): the path as given.
        return Ok(given);
    };
    let journal = default_journal(&real);
    let beside_link = given != journal && given.exists();
    if beside_link && !journal.exists() {
        return Err(ConfigError::JournalBesideLink {
            found: given.display().to_string(),
            expected: journal.display().to_string(),
        });
    }
    Ok(journal)
}

impl Config {
    /// Validates the global flags. `uses_database` is false for a command that makes its own
    /// files (`demo`): then no database is looked for and the journal is not checked.
    ///
    /// Errors: [`ConfigError`] (a duration, a database that cannot be located, a journal that
    /// names the database or lies in a missing folder).
    pub fn from_global(global: GlobalArgs, uses_database: bool) -> Result<Self, ConfigError> {
        let quiet_period = duration_flag("--quiet-period", &global.quiet_period, ANY_DURATION)?;
        let abandoned_after = match global.abandoned_after.trim() {
            "never" => None,
            text => Some(parse_duration(text, ABANDONED_AFTER).map_err(|problem| {
                ConfigError::AbandonedAfter {
                    value: global.abandoned_after.clone(),
                    problem,
                }
            })?),
        };
        let explicit_db = global.db.is_some();
        let db = match (uses_database, global.db) {
            (_, Some(db)) => db,
            // The demo makes its own database.
            (false, None) => PathBuf::new(),
            (true, None) => Environment::from_process().database_path(&global.channel)?,
        };
        let explicit_journal = global.journal.is_some();
        let journal = match global.journal {
            Some(journal) => journal,
            None => journal_of(&db)?,
        };
        if uses_database {
            if let Some(why) = pruning_opencode::empty_database(&db) {
                return Err(ConfigError::EmptyDatabase(why));
            }
            refuse_what_is_no_database(&db)?;
            if is_database_file(&db, &journal) {
                return Err(ConfigError::JournalIsDatabase(
                    journal.display().to_string(),
                ));
            }
            let folder = match journal.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if explicit_journal && !folder.is_dir() {
                return Err(ConfigError::JournalFolder(folder.display().to_string()));
            }
            if journal.is_dir() {
                return Err(ConfigError::JournalIsFolder(journal.display().to_string()));
            }
        }
        let mut invocation = String::from("session-prune");
        if explicit_db {
            invocation.push_str(&format!(" --db {}", shell_word(&db.display().to_string())));
        } else if global.channel != pruning_opencode::DEFAULT_CHANNEL {
            invocation.push_str(&format!(" --channel {}", shell_word(&global.channel)));
        }
        if explicit_journal {
            invocation.push_str(&format!(
                " --journal {}",
                shell_word(&journal.display().to_string())
            ));
        }
        let cut_short = if uses_database {
            pruning_opencode::cut_short(&db)
        } else {
            None
        };
        Ok(Self {
            invocation,
            db,
            journal,
            json: global.json,
            quiet_period,
            abandoned_after,
            cut_short,
        })
    }
}

/// The bounds of `--abandoned-after`: at least a minute. A run streams into its parts without
/// touching the session row, so a shorter threshold could admit prunes beside a run that is
/// still writing.
const ABANDONED_AFTER: std::ops::RangeInclusive<Duration> = Duration::from_secs(60)..=Duration::MAX;

/// The scope flags as a [`Scope`]: the directory must be absolute and is normalized by
/// [`normalize_directory`]; ids must not be empty.
pub fn scope(args: ScopeArgs) -> Result<Scope, ConfigError> {
    let directory = match args.directory {
        None => None,
        Some(dir) => Some(normalize_directory(&dir).ok_or(ConfigError::ScopeDirectory(dir))?),
    };
    for (flag, value) in [
        ("--project", &args.project),
        ("--workspace", &args.workspace),
    ] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(ConfigError::EmptyScope(flag));
        }
    }
    Ok(Scope {
        directory,
        project_id: args.project,
        workspace_id: args.workspace,
    })
}

/// A scope directory in its normalized text, or `None` when it is not absolute. The path rules
/// (which paths are absolute, POSIX or Windows, and how `.` and `..` resolve) are the engine's,
/// [`pruning_engine::scope::AbsolutePath`], so a directory compares the same way once normalized:
/// `/a/./b/../c/` -> `/a/c`, `C:\work\repo\` -> `C:/work/repo`, `/x/work\sub` unchanged.
pub fn normalize_directory(dir: &str) -> Option<String> {
    pruning_engine::scope::normalize(dir)
}

/// Whether `journal` is `db` or SQLite's `-wal`, `-shm` or `-journal` file of it: by path after
/// following symbolic links (a dangling one too: SQLite may create its target later) and
/// resolving folders, and by device and inode where both files exist (hard links).
/// Refuses a database path that names nothing ([`ConfigError::NoDatabase`]) or a file that does
/// not begin with SQLite's 16-byte header, `SQLite format 3\0` ([`ConfigError::NotSqlite`]):
/// input no command can use, refused as bad input (exit 2) before anything is opened, as an
/// empty file is. A file that cannot be read here is left to the open, which says why.
fn refuse_what_is_no_database(db: &Path) -> Result<(), ConfigError> {
    use std::io::Read as _;
    const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";
    if std::fs::symlink_metadata(db).is_err() {
        return Err(ConfigError::NoDatabase(db.display().to_string()));
    }
    if db.is_dir() {
        return Err(ConfigError::NotAFile {
            path: db.display().to_string(),
            what: "a folder",
        });
    }
    if !db.is_file() {
        return Err(ConfigError::NotAFile {
            path: db.display().to_string(),
            what: "not a regular file (a device, a socket or a pipe)",
        });
    }
    let Ok(file) = std::fs::File::open(db) else {
        return Ok(());
    };
    let mut header = Vec::with_capacity(SQLITE_HEADER.len());
    if file
        .take(SQLITE_HEADER.len() as u64)
        .read_to_end(&mut header)
        .is_err()
    {
        return Ok(());
    }
    if header != SQLITE_HEADER {
        return Err(ConfigError::NotSqlite(db.display().to_string()));
    }
    Ok(())
}

fn is_database_file(db: &Path, journal: &Path) -> bool {
    let family: Vec<PathBuf> = ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| {
            let mut name = resolve(db).into_os_string();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect();
    let target = resolve(journal);
    if family.contains(&target) {
        return true;
    }
    same_inode_as_any(journal, &family)
}

/// `path` with every symbolic link followed (up to 40, dangling ones included) and its folder
/// made canonical; the path itself when that fails.
fn resolve(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&current) {
            Ok(target) => {
                current = match current.parent() {
                    Some(parent) if target.is_relative() => parent.join(target),
                    _ => target,
                };
            }
            Err(_) => break,
        }
    }
    let Some(name) = current.file_name().map(|n| n.to_os_string()) else {
        return current;
    };
    let parent = match current.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::canonicalize(&parent) {
        Ok(parent) => parent.join(name),
        Err(_) => current,
    }
}

#[cfg(unix)]
fn same_inode_as_any(path: &Path, others: &[PathBuf]) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    others.iter().any(|other| {
        std::fs::metadata(other).is_ok_and(|o| o.dev() == meta.dev() && o.ino() == meta.ino())
    })
}

#[cfg(not(unix))]
fn same_inode_as_any(_path: &Path, _others: &[PathBuf]) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::normalize_directory;

    #[test]
    fn scope_directories_are_absolute_and_normalized() {
        assert_eq!(normalize_directory("/a/./b/../c/").as_deref(), Some("/a/c"));
        assert_eq!(normalize_directory("/").as_deref(), Some("/"));
        assert_eq!(normalize_directory("/..").as_deref(), Some("/"));
        assert_eq!(
            normalize_directory("C:\\work\\repo").as_deref(),
            Some("C:/work/repo")
        );
        assert_eq!(
            normalize_directory("/x/work\\sub/..").as_deref(),
            Some("/x")
        );
        assert_eq!(
            normalize_directory("\\\\server\\share\\..").as_deref(),
            Some("//server/share")
        );
        assert_eq!(normalize_directory("\\work"), None);
        assert_eq!(normalize_directory("tmp/work"), None);
        assert_eq!(normalize_directory(""), None);
    }
}
