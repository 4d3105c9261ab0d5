//! Reading an archive without a lock, and reading one entry back (shared with the writer).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::entry::{content_hash, ArchivedRows};
use crate::error::ArchiveError;
use crate::index::{self, EntryInfo, EntryKey, Index};

/// An archive opened for reading: its scan, taken once at open.
#[derive(Debug)]
pub struct ArchiveReader {
    path: PathBuf,
    file: File,
    index: Index,
}

impl ArchiveReader {
    /// Opens the archive at `path` for reading; `Ok(None)` when there is no file. Takes no
    /// lock and writes nothing.
    ///
    /// Errors: [`ArchiveError::Io`]; [`ArchiveError::Corrupt`] when the file is not an
    /// archive of this format.
    pub fn open(path: &Path) -> Result<Option<Self>, ArchiveError> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ArchiveError::io(path, "opening", e)),
        };
        let index = index::scan(&file, path)?;
        Ok(Some(Self {
            path: path.to_path_buf(),
            file,
            index,
        }))
    }

    /// The scan taken at open.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The rows of the live entry `key`, checked against its entry hash.
    ///
    /// Errors: [`ArchiveError::NoEntry`] when no live entry has that key;
    /// [`ArchiveError::BadEntry`] when it does not decompress, decode or hash right;
    /// [`ArchiveError::Io`].
    pub fn read(&self, key: &EntryKey) -> Result<ArchivedRows, ArchiveError> {
        let info = self.index.get(key).ok_or_else(|| no_entry(key))?;
        read_entry(&self.file, &self.path, info)
    }
}

/// [`ArchiveError::NoEntry`] for `key`.
pub(crate) fn no_entry(key: &EntryKey) -> ArchiveError {
    ArchiveError::NoEntry {
        receipt_id: key.receipt_id,
        hash: hex(&key.content_hash),
    }
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The largest encoding an entry may claim (a message is at most 16 MiB, its snapshots copies
/// of its parts; a larger claim is damage).
const MAX_RAW_LEN: u64 = 8 << 30;

/// Reads, decompresses, checks and decodes the entry `info` describes.
pub(crate) fn read_entry(
    file: &File,
    path: &Path,
    info: &EntryInfo,
) -> Result<ArchivedRows, ArchiveError> {
    let bad = |detail: String| ArchiveError::BadEntry {
        receipt_id: info.key.receipt_id,
        detail,
    };
    if info.raw_len > MAX_RAW_LEN {
        return Err(bad(format!("it claims {} bytes", info.raw_len)));
    }
    let mut stored =
        vec![0u8; usize::try_from(info.stored_len).map_err(|_| bad("too large".into()))?];
    file.read_exact_at(&mut stored, info.payload_offset)
        .map_err(|e| ArchiveError::io(path, "reading an entry", e))?;
    let raw = zstd::bulk::decompress(&stored, info.raw_len as usize)
        .map_err(|e| bad(format!("it does not decompress: {e}")))?;
    if raw.len() as u64 != info.raw_len || content_hash(&raw) != info.key.content_hash {
        return Err(bad("its rows do not match its entry hash".into()));
    }
    ArchivedRows::decode(&raw).ok_or_else(|| bad("its rows do not decode".into()))
}
