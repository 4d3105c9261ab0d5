//! `events --cursor-file F`: the last event id a client has seen, kept in a file so that a
//! client started again resumes where the last one stopped. The file holds one decimal number
//! and a newline; it is replaced whole (written beside it, then renamed over it), so a client
//! killed at any moment leaves the old number or the new one, never a torn one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::error::ConfigError;

/// The cursor file of one client.
#[derive(Debug)]
pub struct CursorFile {
    path: PathBuf,
    /// The number the file holds now (not written again while unchanged).
    written: Option<u64>,
}

impl CursorFile {
    /// Reads `path`: `Some(id)` when it holds a number, `None` when it does not exist or is
    /// empty (a new client).
    ///
    /// Errors: [`ConfigError::CursorFile`] when it cannot be read, holds anything but one
    /// whole number, or its folder does not exist (nothing could be kept there).
    pub fn open(path: &Path) -> Result<(Self, Option<u64>), ConfigError> {
        let invalid = |detail: String| ConfigError::CursorFile {
            path: path.display().to_string(),
            detail,
        };
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !folder.is_dir() {
            return Err(invalid(format!(
                "its folder {} does not exist",
                folder.display()
            )));
        }
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(invalid(format!("it cannot be read: {error}"))),
        };
        let trimmed = text.trim();
        let cursor = if trimmed.is_empty() {
            None
        } else {
            Some(trimmed.parse::<u64>().map_err(|_| {
                invalid(format!(
                    "it holds `{}`, not an event id (a whole number); remove it to start from --since",
                    trimmed.escape_debug()
                ))
            })?)
        };
        let file = Self {
            path: path.to_path_buf(),
            written: cursor,
        };
        Ok((file, cursor))
    }

    /// Keeps `id` as the last event id seen: writes `<path>.tmp`, then renames it over the
    /// file (no sync: a machine crash may lose the newest ids, and the client then gets those
    /// events again, never a gap).
    ///
    /// Errors: the file system's.
    pub fn keep(&mut self, id: u64) -> std::io::Result<()> {
        if self.written == Some(id) {
            return Ok(());
        }
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let mut file = std::fs::File::create(&temporary)?;
        writeln!(file, "{id}")?;
        drop(file);
        std::fs::rename(&temporary, &self.path)?;
        self.written = Some(id);
        Ok(())
    }
}
