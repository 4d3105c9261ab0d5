//! `events --cursor-file F`: the last event id a client has seen, kept in a file so that a
//! client started again resumes where the last one stopped. The file holds one line: the
//! decimal id, then, after a space, the `databaseID` of the server's database (`GET /health`),
//! so that a client started again against a server that now serves another database (whose
//! journal numbers its events anew) knows its id means nothing there. A file of the id alone
//! is read too. It is replaced whole (written beside it, then renamed over it), so a client
//! killed at any moment leaves the old line or the new one, never a torn one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::error::ConfigError;

/// What a cursor file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The last event id seen.
    pub id: u64,
    /// The database its journal belongs to, when it was known.
    pub database: Option<String>,
}

/// The cursor file of one client.
#[derive(Debug)]
pub struct CursorFile {
    path: PathBuf,
    /// What the file holds now (not written again while unchanged).
    written: Option<Kept>,
}

impl CursorFile {
    /// Reads `path`: `Some` when it holds an id, `None` when it does not exist or is empty (a
    /// new client).
    ///
    /// Errors: [`ConfigError::CursorFile`] when it cannot be read, does not hold an id (and
    /// perhaps a database id), or its folder does not exist or cannot be written in (nothing
    /// could be kept there).
    pub fn open(path: &Path) -> Result<(Self, Option<Kept>), ConfigError> {
        let invalid = |detail: String| ConfigError::CursorFile {
            path: path.display().to_string(),
            detail,
        };
        let folder = folder_of(path);
        if !folder.is_dir() {
            return Err(invalid(format!(
                "its folder {} does not exist",
                folder.display()
            )));
        }
        // Each id is kept by a file written in the same folder: one that cannot be written
        // there would stop the client after its first event.
        tempfile::NamedTempFile::new_in(folder).map_err(|error| {
            invalid(format!(
                "nothing can be written in its folder {}: {error}",
                folder.display()
            ))
        })?;
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(invalid(format!("it cannot be read: {error}"))),
        };
        let trimmed = text.trim();
        let kept = if trimmed.is_empty() {
            None
        } else {
            let mut words = trimmed.split_ascii_whitespace();
            let id = words.next().and_then(|id| id.parse::<u64>().ok());
            let database = words.next().map(str::to_string);
            match (id, words.next()) {
                (Some(id), None) => Some(Kept { id, database }),
                _ => {
                    return Err(invalid(format!(
                        "it holds `{}`, not an event id (a whole number, and perhaps a database id after it); remove it to start from --since",
                        trimmed.escape_debug()
                    )))
                }
            }
        };
        let file = Self {
            path: path.to_path_buf(),
            written: kept.clone(),
        };
        Ok((file, kept))
    }

    /// Keeps `kept`: writes a new file of a name of its own in the same folder, then renames it
    /// over the file (no sync: a machine crash may lose the newest ids, and the client then
    /// gets those events again, never a gap). Two clients given the same file each write
    /// their own; the file holds what the last rename brought.
    ///
    /// Errors: the file system's, with the cursor file's path in their words.
    pub fn keep(&mut self, kept: Kept) -> std::io::Result<()> {
        if self.written.as_ref() == Some(&kept) {
            return Ok(());
        }
        let named = |error: std::io::Error| {
            std::io::Error::new(
                error.kind(),
                format!(
                    "keeping the event id in --cursor-file {}: {error}",
                    self.path.display()
                ),
            )
        };
        let mut file = tempfile::NamedTempFile::new_in(folder_of(&self.path)).map_err(named)?;
        match &kept.database {
            Some(database) => writeln!(file, "{} {database}", kept.id),
            None => writeln!(file, "{}", kept.id),
        }
        .map_err(named)?;
        file.persist(&self.path)
            .map_err(|error| named(error.error))?;
        self.written = Some(kept);
        Ok(())
    }
}

/// The folder `path` lies in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
