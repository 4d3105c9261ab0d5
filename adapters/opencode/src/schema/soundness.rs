//! Whether the database file is sound enough to be written: SQLite's integrity check finds
//! no damage (damaged pages, a broken freelist, an index out of step with its table), and no
//! process holds a database, `-wal` or `-shm` file that was deleted or replaced at its path.
//! A store checks both before its first write; a write that meets SQLite's damage errors
//! stops every later one (docs/ARCHITECTURE.md, "Sound files").

use std::path::Path;

use pruning_engine::StoreError;
use rusqlite::{Connection, ErrorCode};

use crate::schema::holders::{self, Held, HeldState};

/// How many findings of the integrity check are read: the first one names the damage, the
/// count says how much there is (past this many, "at least").
const MAX_FINDINGS: usize = 100;

/// Whether SQLite reports the file damaged (`SQLITE_CORRUPT`, `SQLITE_NOTADB`).
pub(crate) fn is_damage(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// Runs `PRAGMA integrity_check` and returns its findings: empty when the file is sound. A
/// check that itself meets damaged pages counts that as its finding.
///
/// Errors: SQLite's, other than damage (a busy database, an I/O error).
pub(crate) fn integrity_findings(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let checked = (|| {
        let mut stmt = conn.prepare(&format!("PRAGMA integrity_check({MAX_FINDINGS})"))?;
        let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
    })();
    match checked {
        Ok(rows) if rows.len() == 1 && rows[0] == "ok" => Ok(Vec::new()),
        // One row may hold several findings, a line each, under a heading per database.
        Ok(rows) => Ok(rows
            .iter()
            .flat_map(|row| row.lines())
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with("***"))
            .map(str::to_string)
            .collect()),
        // SQLite's words name no page: say where the check stopped instead.
        Err(error) if is_damage(&error) => Ok(vec![
            "the check itself stopped at a page it cannot read, so there may be more".into(),
        ]),
        Err(error) => Err(error),
    }
}

/// The files of the database's family that another process holds open although they were
/// deleted or replaced at their path. This process is left out: SQLite keeps a closed
/// connection's descriptors open while another connection of the process holds locks on the
/// same file, so its own view of deleted names is SQLite's bookkeeping, not a writer beside it.
pub(crate) fn detached_files(database: &Path) -> Vec<Held> {
    beside(database).detached
}

/// What other processes hold of the database's family, from one look at `/proc`.
pub(crate) struct Beside {
    /// The files held open although they were deleted or replaced ([`detached_files`]).
    pub(crate) detached: Vec<Held>,
    /// Whether another process this user may inspect holds any of them; `None` where `/proc`
    /// cannot be read (not Linux), so nobody can be said to be absent.
    pub(crate) others: Option<bool>,
}

/// How long [`beside`] waits before it looks again at files it found detached.
const SECOND_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// [`Beside`] of `database` now. A file found detached is looked for again after
/// [`SECOND_LOOK`], and counts only when the same process still holds it: a process between
/// `fork` and `exec` holds a copy of every descriptor of its parent for that moment (SQLite's
/// and ours are close-on-exec), and is not a writer beside us.
pub(crate) fn beside(database: &Path) -> Beside {
    let held = holders::held(database, false);
    let others = Path::new("/proc/self/fd")
        .is_dir()
        .then_some(!held.is_empty());
    let mut detached: Vec<Held> = held
        .into_iter()
        .filter(|held| held.state != HeldState::Current)
        .collect();
    if !detached.is_empty() {
        std::thread::sleep(SECOND_LOOK);
        let again = holders::held(database, false);
        detached.retain(|held| again.contains(held));
    }
    Beside { detached, others }
}

/// What a damaged file's findings are, in a sentence: how many, the first, and whether they
/// all concern indexes (rows missing from one, entries it should not have).
pub(crate) fn damage_found(findings: &[String]) -> String {
    let count = if findings.len() >= MAX_FINDINGS {
        format!("at least {MAX_FINDINGS} problems")
    } else {
        format!("{} problem(s)", findings.len())
    };
    let first = findings.first().map(String::as_str).unwrap_or("");
    match indexes_only(findings) {
        Some(names) => format!(
            "SQLite reports {count}, all in indexes out of step with their tables ({}; the \
             first: {first}), so a prune could miss rows",
            names.join(", ")
        ),
        None => format!("SQLite reports {count} (the first: {first})"),
    }
}

/// [`damage_found`], that nothing was written, and what to do: findings that all concern
/// indexes are mended by `REINDEX`; any other damage needs a recovered copy.
pub(crate) fn damage_words(path: &Path, findings: &[String]) -> String {
    let file = path.display();
    let advice = match indexes_only(findings) {
        Some(_) => format!(
            "Stop OpenCode, keep a copy of the file with its -wal, rebuild the indexes \
             (sqlite3 {file} REINDEX) and run the command again"
        ),
        None => format!(
            "Stop OpenCode, keep a copy of the file with its -wal, and recover the copy into a \
             new file (sqlite3 {file} .recover | sqlite3 recovered.db); `session-prune --db \
             recovered.db audit` then checks the new file"
        ),
    };
    format!(
        "{}. Nothing was written: no prune, restore, compaction or vacuum runs on a damaged \
         file. {advice}",
        damage_found(findings)
    )
}

/// The indexes the findings name, sorted, once each, when every finding concerns an index
/// alone; `None` otherwise (or for no findings).
fn indexes_only(findings: &[String]) -> Option<Vec<&str>> {
    let mut names: Vec<&str> = findings.iter().filter_map(|f| index_named(f)).collect();
    if findings.is_empty() || names.len() != findings.len() {
        return None;
    }
    names.sort_unstable();
    names.dedup();
    Some(names)
}

/// The index an integrity-check finding is about, for the findings that concern only an index
/// ("row 5 missing from index part_message_idx", "wrong # of entries in index part_message_idx",
/// "non-unique entry in index ...").
fn index_named(finding: &str) -> Option<&str> {
    let (_, rest) = finding
        .split_once("missing from index ")
        .or_else(|| finding.split_once("entries in index "))
        .or_else(|| finding.split_once("non-unique entry in index "))?;
    rest.split_whitespace().next()
}

/// The refusal of a file some process holds deleted or replaced.
pub(crate) fn detached(path: &Path, held: &[Held]) -> StoreError {
    let what: Vec<String> = held
        .iter()
        .map(|held| {
            format!(
                "{} holds {} {}",
                holders::process_named(held.pid),
                held.path.display(),
                held.state.as_str()
            )
        })
        .collect();
    StoreError::Detached {
        path: path.display().to_string(),
        detail: format!(
            "{}. A write now would go to files that process never sees, or deletes when it \
             closes: nothing was written. Stop that process (OpenCode or whatever holds the \
             file), so that SQLite's files are whole again, then run the command again",
            what.join("; ")
        ),
    }
}

/// What a database file cut short says of itself, before SQLite opens it (which would create
/// `-wal` and `-shm` files beside it): its header counts more pages than the file holds. The
/// header's page count is trusted only where SQLite trusts it (not 0, and written by the same
/// change as the header: bytes 24-27 equal 92-95), and only when no non-empty `-wal` file could
/// hold the pages past the file's end. Source: SQLite's file format (the 100-byte header: page
/// size at 16, change counter at 24, page count at 28, version-valid-for at 92).
///
/// `None` for a file that is not cut short, or that cannot be read here (the open says why).
///
/// It opens and closes the file: call it before this process opens the file with SQLite, never
/// beside an open connection (closing any descriptor of a file drops every POSIX lock the
/// process holds on it, SQLite's included).
pub fn cut_short(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let mut header = [0u8; 100];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut header))
        .ok()?;
    let field = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        size => u64::from(size),
    };
    let pages = u64::from(field(28));
    if pages == 0 || field(24) != field(92) {
        return None;
    }
    let mut wal = path.as_os_str().to_os_string();
    wal.push("-wal");
    if std::fs::metadata(&wal).is_ok_and(|found| found.len() > 0) {
        return None;
    }
    let length = std::fs::metadata(path).ok()?.len();
    let expected = pages.saturating_mul(page_size);
    (length < expected).then(|| {
        format!(
            "the file is cut short: its header counts {pages} pages of {page_size} bytes \
             ({expected} bytes), and the file holds {length}"
        )
    })
}

/// [`cut_short`]'s finding, that nothing was read or written, and what to do.
pub fn cut_short_words(path: &Path, finding: &str) -> String {
    let file = path.display();
    format!(
        "{finding}. Nothing was read or written, and no -wal or -shm file was made beside it. \
         If the file was copied while OpenCode wrote it, copy it again whole; otherwise keep a \
         copy and recover what it holds into a new file (sqlite3 {file} .recover | sqlite3 \
         recovered.db); `session-prune --db recovered.db audit` then checks the new file"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process holding the database open is seen beside it; with none, nobody is.
    #[test]
    fn another_process_holding_the_database_is_beside_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let database = dir.path().join("opencode.db");
        std::fs::write(&database, b"").expect("write");
        let alone = beside(&database);
        assert!(alone.detached.is_empty());
        assert_eq!(alone.others, Some(false));

        let ready = dir.path().join("ready");
        let mut holder = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3<\"$1\"; : > \"$2\"; exec sleep 30")
            .arg("sh")
            .arg(&database)
            .arg(&ready)
            .spawn()
            .expect("spawn sh");
        while !ready.exists() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let held = beside(&database);
        let _ = holder.kill();
        let _ = holder.wait();
        assert!(held.detached.is_empty(), "the file is still at its path");
        assert_eq!(held.others, Some(true));
    }
}
