//! `pruning-archive`: the prune archive, an append-only file beside the OpenCode database
//! (`<database>.prune-archive`) that keeps, for each prune made with `--archive`, the exact rows
//! it removed, compressed with zstd, keyed by the prune's receipt id and the SHA-256 of the
//! rows (the entry hash the receipt records).
//!
//! The crate knows nothing of OpenCode: an entry is a list of tables, each with its column
//! names and rows of SQLite values ([`ArchivedRows`]). What is captured, when an entry is made
//! durable, and which entries are live is the store's to decide (docs/ARCHITECTURE.md,
//! "Archive").
//!
//! - [`Archive`] is the writer: one per process (an exclusive `flock`), appending frames,
//!   syncing them ([`Archive::sync`]; a failed sync poisons the handle), marking entries
//!   discarded, and rewriting the file without purged or discarded entries.
//! - [`ArchiveReader`] reads without a lock: frames are only ever appended, and a rewrite
//!   replaces the file by a rename, so a reader sees a whole file, old or new.
//!
//! The file format (its version is [`FORMAT_VERSION`]) is in [`frame`].

#![warn(missing_docs)]

mod entry;
mod error;
pub mod frame;
mod index;
mod reader;
mod writer;

pub use entry::{content_hash, ArchivedRows, SqlValue, TableRows};
pub use error::{ArchiveError, CorruptKind};
pub use frame::FORMAT_VERSION;
pub use index::{EntryInfo, EntryKey, Index, PurgedInfo};
pub use reader::ArchiveReader;
pub use writer::{Appended, Archive, NewEntry};

/// The archive file of the database at `database`: `<database>.prune-archive`.
pub fn path_beside(database: &std::path::Path) -> std::path::PathBuf {
    let mut name = database.as_os_str().to_os_string();
    name.push(".prune-archive");
    std::path::PathBuf::from(name)
}
