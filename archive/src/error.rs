//! The archive's one error enum: every operation fails with [`ArchiveError`], whose variants say
//! which step failed and what to do.

use std::path::PathBuf;

use thiserror::Error;
use uuid::Uuid;

/// What is wrong with a frame that does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptKind {
    /// The file does not start with the archive's magic bytes.
    NotAnArchive,
    /// The file's format version is not one this build reads.
    UnknownVersion(u32),
    /// A frame's header does not match its checksum, or does not decode.
    BadHeader,
    /// A frame claims more bytes than the file holds.
    Truncated,
}

/// An archive operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// An I/O call failed.
    #[error("archive {}: {step}: {source}", path.display())]
    Io {
        /// The archive file.
        path: PathBuf,
        /// What was being done (`"opening"`, `"appending"`, ...).
        step: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the archive for writing.
    #[error("archive {} is in use by another process (one process writes an archive at a time; stop the other session-prune, or use its server)", path.display())]
    Locked {
        /// The archive file.
        path: PathBuf,
    },
    /// The file is not an archive this build reads, or a frame in it does not read.
    #[error("archive {} is damaged at byte {offset} ({kind:?}); nothing was written to it. Move it aside to archive new prunes; its entries before byte {offset} still read", path.display())]
    Corrupt {
        /// The archive file.
        path: PathBuf,
        /// Where the unreadable frame starts.
        offset: u64,
        /// What is wrong there.
        kind: CorruptKind,
    },
    /// A write or sync failed earlier: this handle writes nothing more (what it wrote may or
    /// may not be on disk; the next open reads the file again).
    #[error("archive {} refuses writes after a failed write or sync; open it again", path.display())]
    Poisoned {
        /// The archive file.
        path: PathBuf,
    },
    /// No entry with this receipt id and entry hash is in the archive (never archived, or
    /// purged).
    #[error("no archive entry for receipt {receipt_id} with entry hash {hash}")]
    NoEntry {
        /// The receipt id.
        receipt_id: Uuid,
        /// The entry hash, lowercase hex.
        hash: String,
    },
    /// An entry's bytes do not decompress, do not decode, or do not hash to its entry hash.
    #[error("archive entry of receipt {receipt_id} is damaged: {detail}")]
    BadEntry {
        /// The receipt id.
        receipt_id: Uuid,
        /// What is wrong, in words.
        detail: String,
    },
    /// An entry could not be encoded or compressed.
    #[error("archive entry could not be encoded: {0}")]
    Encode(String),
}

impl ArchiveError {
    /// An [`ArchiveError::Io`] at `path`.
    pub(crate) fn io(path: &std::path::Path, step: &'static str, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            step,
            source,
        }
    }
}
