//! `events --cursor-file F`: the last event id a client has seen, kept in a file so that a
//! client started again resumes where the last one stopped. The file holds one line: the
//! decimal id, then, after a space, the `databaseID` of the server's database (`GET /health`),
//! so that a client started again against a server that now serves another database (whose
//! journal numbers its events anew) knows its id means nothing there, and after another space
//! the server's `journalEpoch` (a journal started after the loss of the one before, whose
//! numbers go on after the epochs before). A file of the id alone, or without the epoch, is
//! read too. It is replaced whole (written beside it, then renamed over it), so a client
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
    /// The epoch of that journal, when it was known.
    pub epoch: Option<u64>,
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
        remove_left_over(path);
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
            let epoch = words.next().map(|epoch| epoch.parse::<u64>().ok());
            match (id, epoch, words.next()) {
                (Some(id), None, None) => Some(Kept {
                    id,
                    database,
                    epoch: None,
                }),
                (Some(id), Some(Some(epoch)), None) => Some(Kept {
                    id,
                    database,
                    epoch: Some(epoch),
                }),
                _ => {
                    return Err(invalid(format!(
                        "it holds `{}`, not an event id (a whole number, and perhaps a database id and a journal epoch after it); remove it to start from --since",
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
        let mut file = tempfile::Builder::new()
            .prefix(&temporary_prefix(&self.path))
            .tempfile_in(folder_of(&self.path))
            .map_err(named)?;
        if let Ok(meta) = std::fs::metadata(&self.path) {
            // The file keeps the permissions it was given.
            file.as_file()
                .set_permissions(meta.permissions())
                .map_err(named)?;
        }
        match (&kept.database, kept.epoch) {
            (Some(database), Some(epoch)) => writeln!(file, "{} {database} {epoch}", kept.id),
            (Some(database), None) => writeln!(file, "{} {database}", kept.id),
            (None, _) => writeln!(file, "{}", kept.id),
        }
        .map_err(named)?;
        file.persist(&self.path)
            .map_err(|error| named(error.error))?;
        self.written = Some(kept);
        Ok(())
    }
}

/// The start of the names of the files a client writes before renaming them over `path`
/// (`.NAME.`), by which one a killed client left is found and removed.
fn temporary_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.")
}

/// Removes the files a killed client left while keeping `path` (those named after it).
fn remove_left_over(path: &Path) {
    let prefix = temporary_prefix(path);
    let Ok(entries) = std::fs::read_dir(folder_of(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let temporary = name.len() == prefix.len() + 6 && name.starts_with(&prefix);
        if temporary && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The folder `path` lies in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_kept_line_is_read_back_and_an_id_alone_or_without_an_epoch_is_read_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        std::fs::write(&path, "7\n").unwrap();
        let (mut file, kept) = CursorFile::open(&path).unwrap();
        assert_eq!(
            kept,
            Some(Kept {
                id: 7,
                database: None,
                epoch: None,
            })
        );
        let next = Kept {
            id: 9,
            database: Some("db-1".into()),
            epoch: None,
        };
        file.keep(next.clone()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "9 db-1\n");
        assert_eq!(CursorFile::open(&path).unwrap().1, Some(next));
        let (mut file, _) = CursorFile::open(&path).unwrap();
        let epoch = Kept {
            id: 41,
            database: Some("db-1".into()),
            epoch: Some(2),
        };
        file.keep(epoch.clone()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "41 db-1 2\n");
        assert_eq!(CursorFile::open(&path).unwrap().1, Some(epoch));
        for bad in ["x", "1 2 x", "1 2 3 4", "-1", "1.5"] {
            std::fs::write(&path, bad).unwrap();
            assert!(CursorFile::open(&path).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_kept_file_keeps_its_permissions_and_files_left_by_a_killed_client_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        std::fs::write(&path, "1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let left = dir.path().join(".c.abcdef");
        std::fs::write(&left, "2\n").unwrap();
        let unrelated = dir.path().join(".other.abcdef");
        std::fs::write(&unrelated, "").unwrap();
        let (mut file, _) = CursorFile::open(&path).unwrap();
        assert!(!left.exists());
        assert!(unrelated.exists());
        file.keep(Kept {
            id: 2,
            database: None,
            epoch: None,
        })
        .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
