//! What `VACUUM` needs and who else holds the database: the checks before giving space back.
//!
//! Source: SQLite's VACUUM builds the new database in a temporary file (in `SQLITE_TMPDIR`,
//! `TMPDIR`, `/var/tmp`, `/usr/tmp`, `/tmp` or `.`, the first usable) and, in WAL mode, writes
//! it through the WAL beside the database: up to the live size of the database in each place.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

/// The space a VACUUM of this database needs, in bytes, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needs {
    /// Bytes of live pages: `(page_count - freelist_count) * page_size`.
    pub live_bytes: u64,
    /// The folder of the temporary copy.
    pub temp_dir: PathBuf,
    /// The database's folder (its WAL).
    pub database_dir: PathBuf,
}

/// How much the database holds live, and where VACUUM will write.
pub fn needs(conn: &Connection, database: &Path) -> rusqlite::Result<Needs> {
    let pragma = |name: &str| -> rusqlite::Result<i64> {
        conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
    };
    let live_pages = (pragma("page_count")? - pragma("freelist_count")?).max(0) as u64;
    Ok(Needs {
        live_bytes: live_pages.saturating_mul(pragma("page_size")?.max(0) as u64),
        temp_dir: sqlite_temp_dir(),
        database_dir: database
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."))
            .to_path_buf(),
    })
}

/// The folder SQLite puts temporary files in on Unix.
pub fn sqlite_temp_dir() -> PathBuf {
    let candidates = ["SQLITE_TMPDIR", "TMPDIR"]
        .iter()
        .filter_map(|var| std::env::var_os(var).map(PathBuf::from))
        .chain(["/var/tmp", "/usr/tmp", "/tmp"].iter().map(PathBuf::from));
    for dir in candidates {
        if dir.is_dir() {
            return dir;
        }
    }
    PathBuf::from(".")
}

/// Free bytes for an unprivileged writer in the file system holding `path`, and that file
/// system's id (equal ids: one file system).
pub fn free_space(path: &Path) -> std::io::Result<(u64, u64)> {
    let stat = rustix::fs::statvfs(path).map_err(std::io::Error::from)?;
    Ok((stat.f_bavail.saturating_mul(stat.f_frsize), stat.f_fsid))
}

/// Other processes with the database, its WAL or its shared-memory file open (see
/// `holders`: Linux only; nothing is found elsewhere), sorted, each once.
pub fn other_processes(database: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = super::schema::holders::held(database, false)
        .into_iter()
        .map(|held| held.pid)
        .collect();
    pids.dedup();
    pids
}

/// Why a VACUUM did not run to the end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VacuumError {
    /// Another connection holds the database (`SQLITE_BUSY` or `SQLITE_LOCKED`); nothing
    /// changed.
    #[error("the database is busy ({0}): another process is using it")]
    Busy(String),
    /// SQLite failed otherwise.
    #[error("vacuum failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The copy of `VACUUM INTO` could not be made, written, synced or checked; what this
    /// command wrote of it was removed.
    #[error("the vacuumed copy {path} could not be written ({detail}); nothing of it is left, and the database is as it was")]
    Copy {
        /// The copy's path.
        path: String,
        /// What failed.
        detail: String,
    },
}

/// Runs `VACUUM`, then truncates the WAL it filled (`wal_checkpoint(TRUNCATE)`). With
/// `online_shrink` the VACUUM also switches the file to `auto_vacuum = INCREMENTAL` (the mode
/// changes only with a VACUUM), so that later cleans give freed pages back while OpenCode runs
/// (`super::shrink`). Returns whether the WAL was truncated: a reader of another process keeps
/// it from being (the file then shrinks at OpenCode's next checkpoint).
///
/// Errors: [`VacuumError::Busy`] while another connection reads or writes;
/// [`VacuumError::Sqlite`] for anything else.
pub fn run(conn: &Connection, online_shrink: bool) -> Result<bool, VacuumError> {
    let busy = |error: rusqlite::Error| match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            VacuumError::Busy(error.to_string())
        }
        _ => VacuumError::Sqlite(error),
    };
    if online_shrink {
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")?;
    }
    conn.execute_batch("VACUUM").map_err(busy)?;
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if mode.eq_ignore_ascii_case("wal") {
        // The first column is 1 when a reader or writer kept the checkpoint from finishing.
        let blocked: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
            .map_err(busy)?;
        return Ok(blocked == 0);
    }
    Ok(true)
}

/// `VACUUM INTO target`: the live pages of the database at `database` written to the new file
/// `target` (with the database's permissions), which
/// needs the live size free on its disk and nothing beside the database (no temporary copy,
/// no WAL: SQLite builds the copy in place of its temporary database and writes it without a
/// journal). SQLite does not sync the copy, so it is synced here, with its folder, then read
/// whole by `PRAGMA quick_check` on a connection of its own. Returns the copy's size, bytes.
///
/// Errors: [`VacuumError::Busy`]; [`VacuumError::Copy`] when `target` exists (left as it
/// is) or the copy could not be written (a full disk), synced or checked, or `stop` was set
/// while SQLite wrote it. A copy that fails any step is removed with its rollback journal:
/// never a half-written file at `target`.
pub fn into(
    conn: &mut Connection,
    database: &Path,
    target: &Path,
    stop: &'static std::sync::atomic::AtomicBool,
) -> Result<u64, VacuumError> {
    let copy_error = |detail: String| VacuumError::Copy {
        path: target.display().to_string(),
        detail,
    };
    let name = target
        .to_str()
        .ok_or_else(|| copy_error("the path is not UTF-8".into()))?;
    // Asked between SQLite's steps: a stop (Ctrl-C, SIGTERM) interrupts the copy, which is
    // then removed as any failed one.
    conn.progress_handler(
        10_000,
        Some(|| stop.load(std::sync::atomic::Ordering::SeqCst)),
    )?;
    // Made here, empty and new (SQLite writes into an empty file): a file of someone else's
    // at `target` is never written or removed.
    // With the database's permissions: the copy holds all of it (SQLite gives the rollback
    // journal beside it the same).
    let mode = std::fs::metadata(database).map_or(0o600, |meta| meta.permissions().mode() & 0o777);
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(target);
    if let Err(error) = created {
        let _ = conn.progress_handler(0, None::<fn() -> bool>);
        return Err(copy_error(format!("creating it: {error}")));
    }
    let made = (|| {
        conn.execute("VACUUM INTO ?1", [name]).map_err(|error| {
            match error.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                    VacuumError::Busy(error.to_string())
                }
                _ => copy_error(copy_failure(&error)),
            }
        })?;
        std::fs::File::open(target)
            .and_then(|file| file.sync_all())
            .map_err(|e| copy_error(format!("syncing it: {e}")))?;
        if let Some(folder) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(folder)
                .and_then(|dir| dir.sync_all())
                .map_err(|e| copy_error(format!("syncing its folder: {e}")))?;
        }
        check_copy(target).map_err(copy_error)?;
        std::fs::metadata(target)
            .map(|meta| meta.len())
            .map_err(|e| copy_error(e.to_string()))
    })();
    let cleared = conn.progress_handler(0, None::<fn() -> bool>);
    if made.is_err() {
        // The copy and the rollback journal SQLite keeps beside it while it writes (the caller
        // refused a path with one beside it already).
        let _ = std::fs::remove_file(target);
        let _ = std::fs::remove_file(side_file(target, "-journal"));
    }
    let written = made?;
    cleared?;
    Ok(written)
}

/// Why SQLite could not write the copy, in words of ours for the causes a person can act on.
fn copy_failure(error: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode;
    match error.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => "its disk filled up".into(),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            "its folder cannot be written".into()
        }
        Some(ErrorCode::OperationInterrupted) => "it was stopped".into(),
        Some(ErrorCode::SystemIoFailure) => "an I/O error on its disk".into(),
        _ => format!("SQLite failed: {error}"),
    }
}

/// `PRAGMA quick_check` of the copy at `target`, read-only.
fn check_copy(target: &Path) -> Result<(), String> {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let copy = Connection::open_with_flags(target, flags).map_err(|e| e.to_string())?;
    let answer: String = copy
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
        .map_err(|e| format!("checking it: {e}"))?;
    if answer == "ok" {
        Ok(())
    } else {
        Err(format!("checking it: {answer}"))
    }
}

/// `path` with `suffix` added to its file name (`-journal`, `-wal`).
pub fn side_file(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}
