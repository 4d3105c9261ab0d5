//! Failure words that name their cause and place: a storage or journal error that comes from a
//! full disk, a read-only file system or a missing permission says so, and says where (the
//! folders of the database and the journal, with their free space).

use std::path::Path;

use pruning_opencode::{free_space, read_only_media};

use crate::cli::config::Config;
use crate::output;

/// What an error's text says about its cause, by the words SQLite, redb and the OS use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// `ENOSPC`, `SQLITE_FULL`, or an I/O error a full disk explains.
    DiskFull,
    /// `EROFS`, `SQLITE_READONLY`.
    ReadOnly,
    /// `EACCES`, `EPERM`.
    Permission,
}

/// Below this many free bytes, a bare I/O error is most likely a full disk (64 MiB).
const LOW_SPACE: u64 = 64 * 1024 * 1024;

/// `message` with a sentence that names the cause and where, when its words show one (or when
/// a bare I/O error meets a nearly full disk); unchanged otherwise.
pub fn explain(message: &str, config: &Config) -> String {
    let lower = message.to_ascii_lowercase();
    // `vacuum --into`'s failure names its own place, the copy's disk, not the database's.
    if lower.contains("the vacuumed copy ") {
        return message.to_string();
    }
    // The store's own refusal of a damaged file already says what to do.
    if !lower.contains("is damaged:") && is_damage_text(&lower) {
        return damaged_read(
            config,
            lower.contains("file is not a database") || lower.contains("error code 26"),
        );
    }
    let places = places(config);
    let cause = if lower.contains("no space left")
        || lower.contains("os error 28")
        || lower.contains("disk is full")
    {
        Some(Cause::DiskFull)
    } else if lower.contains("read-only file system")
        || lower.contains("os error 30")
        // SQLite says this of a file it may not write for other reasons too (a hot journal
        // it cannot roll back, a replaced file): storage is blamed only when it is read-only.
        || (lower.contains("readonly database")
            && (read_only_media(&config.db)
                || (config.journal.exists() && read_only_media(&config.journal))))
    {
        Some(Cause::ReadOnly)
    } else if lower.contains("permission denied")
        || lower.contains("os error 13")
        || lower.contains("os error 1)")
    {
        Some(Cause::Permission)
    } else if (lower.contains("i/o error") || lower.contains("poisoned"))
        && places
            .iter()
            .any(|(_, free)| free.is_some_and(|f| f < LOW_SPACE))
    {
        Some(Cause::DiskFull)
    } else {
        None
    };
    let Some(cause) = cause else {
        return message.to_string();
    };
    let where_ = places
        .iter()
        .map(|(folder, free)| match free {
            Some(free) => format!("{} ({} free)", folder.display(), output::bytes(*free)),
            None => folder.display().to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let advice = match cause {
        Cause::DiskFull => format!(
            "the disk is full: free space where the database and the journal are ({where_}), then run the same command again; what committed stays committed"
        ),
        Cause::ReadOnly => format!(
            "the storage is read-only ({where_}): prunes need the database and the journal on writable storage (--journal PATH moves the journal)"
        ),
        Cause::Permission => format!(
            "this user may not write there ({where_}): check the permissions of the database, its folder and the journal"
        ),
    };
    format!("{message}. Cause: {advice}")
}

/// Whether an error's text is SQLite's of a damaged file (`SQLITE_CORRUPT`: "database disk
/// image is malformed", error code 11; `SQLITE_NOTADB`: "file is not a database", 26;
/// `SQLITE_IOERR_SHORT_READ`, 522: the file ends before a page SQLite was told is there).
fn is_damage_text(lower: &str) -> bool {
    lower.contains("database disk image is malformed")
        || lower.contains("file is not a database")
        || lower.contains("error code 11")
        || lower.contains("error code 26")
        || lower.contains("error code 522")
}

/// [`explain`]'s words for an error that is SQLite's of a damaged file, `None` for another.
pub fn damage_in_words(message: &str, config: &Config) -> Option<String> {
    let lower = message.to_ascii_lowercase();
    is_damage_text(&lower).then(|| {
        damaged_read(
            config,
            lower.contains("file is not a database") || lower.contains("error code 26"),
        )
    })
}

/// What a command that met damaged pages says instead of SQLite's words: what happened, that
/// nothing was written, and what to do (docs/ARCHITECTURE.md, "Sound files"). `not_sqlite`:
/// SQLite does not take the file for a database at all (`SQLITE_NOTADB`).
fn damaged_read(config: &Config, not_sqlite: bool) -> String {
    let db = config.db.display();
    if not_sqlite {
        return format!(
            "{db} is not an SQLite database, or its first page (the header) is damaged: nothing \
             was read or written. Check that --db names OpenCode's opencode.db; if it does, the \
             file is damaged: restore it from a backup, or stop OpenCode and try to recover a copy \
             (sqlite3 {db} .recover | sqlite3 recovered.db)"
        );
    }
    format!(
        "database {db} is damaged: SQLite cannot read part of it, so this command stopped where \
         it met the damage; nothing was written. `session-prune audit` reports the damage. To \
         recover, stop OpenCode, keep a copy of the file with its -wal, and recover the copy \
         into a new file (sqlite3 {db} .recover | sqlite3 recovered.db)"
    )
}

/// The folders of the database and the journal (once each), with their free space where it
/// can be read.
fn places(config: &Config) -> Vec<(std::path::PathBuf, Option<u64>)> {
    let mut folders: Vec<std::path::PathBuf> = Vec::new();
    for file in [&config.db, &config.journal] {
        let folder = match file.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => Path::new(".").to_path_buf(),
        };
        if !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    folders
        .into_iter()
        .map(|folder| {
            let free = free_space(&folder).ok().map(|(free, _)| free);
            (folder, free)
        })
        .collect()
}
