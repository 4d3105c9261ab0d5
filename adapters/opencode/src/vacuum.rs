//! What `VACUUM` needs and who else holds the database: the checks before giving space back.
//!
//! Source: SQLite's VACUUM builds the new database in a temporary file (in `SQLITE_TMPDIR`,
//! `TMPDIR`, `/var/tmp`, `/usr/tmp`, `/tmp` or `.`, the first usable) and, in WAL mode, writes
//! it through the WAL beside the database: up to the live size of the database in each place.

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
