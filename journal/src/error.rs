//! The error enums, one per operation family: [`OpenError`] (opening the file),
//! [`ReadError`] (queries), [`WriteError`] (durable writes), [`BindError`] (database binding),
//! and [`CodecError`] (one record value), which the others wrap.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;
use uuid::Uuid;

use crate::record::IntentState;

/// One record value could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The value has no bytes at all, so not even a format-version byte.
    #[error("record value is empty (no format-version byte)")]
    Empty,
    /// The value's leading format-version byte is not one this build reads.
    #[error("record format version {found} is unknown (this build reads version {supported})")]
    UnknownFormatVersion {
        /// The version byte found.
        found: u8,
        /// The one version this build reads (`FORMAT_VERSION`).
        supported: u8,
    },
    /// The bytes after the version byte are not a valid postcard value of the expected type.
    #[error("record value does not decode")]
    Decode(#[source] postcard::Error),
    /// A valid value was followed by `count` more bytes.
    #[error("record value has {count} trailing bytes")]
    TrailingBytes {
        /// How many bytes followed the value.
        count: usize,
    },
    /// postcard could not serialize the value.
    #[error("record value does not encode")]
    Encode(#[source] postcard::Error),
}

/// The journal file could not be opened.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Another handle (in this or another process) holds the file, and it stayed held for the
    /// whole retry window.
    #[error("journal {} is locked by another handle (waited {} ms)", path.display(), waited.as_millis())]
    Locked {
        /// The journal file.
        path: PathBuf,
        /// How long the open kept retrying.
        waited: Duration,
    },
    /// The storage backend given to `open_with_backend` is held by another handle.
    #[error("journal storage is locked by another handle")]
    BackendLocked,
    /// The file's `format_version` meta entry names a version this build does not read.
    /// Nothing was written to the file.
    #[error("journal format version {found} is unknown (this build reads version {supported})")]
    UnknownFormatVersion {
        /// The version found in the file.
        found: u8,
        /// The one version this build reads (`FORMAT_VERSION`).
        supported: u8,
    },
    /// The file holds journal records but no `format_version` meta entry.
    #[error("journal holds records but no format version")]
    MissingFormatVersion,
    /// The `format_version` meta entry is not exactly one byte long.
    #[error("journal meta entry {key:?} is malformed ({len} bytes)")]
    MalformedMeta {
        /// The meta key.
        key: &'static str,
        /// The length found.
        len: usize,
    },
    /// A new journal could not be created and moved into place.
    #[error("journal {} could not be created", path.display())]
    Create {
        /// The journal file.
        path: PathBuf,
        /// The I/O failure.
        #[source]
        source: std::io::Error,
    },
    /// A read-only open found a file that was not closed cleanly (a process holding it was
    /// killed): redb must repair it, which only a writable open does. Nothing was written.
    #[error("journal {} was not closed cleanly and needs a repair, which a read-only open cannot make", path.display())]
    NeedsRepair {
        /// The journal file.
        path: PathBuf,
    },
    /// The file is not a journal: not a redb file at all (another file named as the journal, or
    /// one overwritten). Nothing was written to it.
    #[error("{} is not a session-prune journal (its first bytes are not a journal's); nothing was changed", path.display())]
    NotAJournal {
        /// The file.
        path: PathBuf,
    },
    /// The file is a redb file whose structure is damaged (truncated, say). Nothing was written
    /// to it.
    #[error("journal {} is damaged (found: {detail}); nothing was changed", path.display())]
    Damaged {
        /// The journal file.
        path: PathBuf,
        /// redb's finding.
        detail: String,
    },
    /// redb could not open the file (an I/O error, a file that needs an upgrade, ...).
    #[error("journal database could not be opened")]
    Database(#[source] redb::DatabaseError),
    /// A storage error while checking or initialising the file.
    #[error("journal storage error while opening")]
    Storage(#[from] redb::Error),
    /// A meta entry of a new journal could not be encoded.
    #[error("journal meta entry could not be encoded")]
    Codec(#[from] CodecError),
}

/// A journal epoch could not be started ([`crate::Journal::create_epoch`]). Nothing was
/// written at the journal's path, but for an empty file there, which may be gone.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EpochError {
    /// The path holds a file that is not empty (a journal, maybe another database's, or
    /// something else): it is never written over.
    #[error("{} is not empty: a journal is never written over (move it aside if it is not this database's journal)", path.display())]
    Occupied {
        /// The journal path.
        path: std::path::PathBuf,
    },
    /// The database id is empty.
    #[error("a journal epoch needs a database id")]
    EmptyDatabaseId,
    /// The new file could not be made or opened.
    #[error(transparent)]
    Open(#[from] OpenError),
}

/// A query failed. Queries never change the file.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A stored record could not be decoded (e.g. an unknown format version).
    #[error("journal record is unreadable")]
    Codec(#[from] CodecError),
    /// An index (`request_keys` or `pending`) names an intent that is not stored (a damaged file).
    #[error("an index names intent {intent_id}, which is not stored")]
    MissingIntent {
        /// The missing intent.
        intent_id: Uuid,
    },
    /// A storage error (I/O, or redb's own refusal after an earlier I/O failure).
    #[error("journal storage error while reading")]
    Storage(#[from] redb::Error),
    /// A page of the file does not read as redb wrote it (redb met it with a panic): the
    /// journal is damaged. Nothing was written.
    #[error("the journal is damaged (found: {detail}); nothing was changed")]
    Damaged {
        /// What was found.
        detail: String,
    },
}

/// A durable write failed. Whatever the variant, the write changed nothing: each write is one
/// transaction, and a failed one is rolled back.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WriteError {
    /// An earlier commit of this handle failed, so it refuses all writes (fail-stop). Drop the
    /// handle and open the file again to continue from its last durable state.
    #[error("journal refuses writes after a failed commit; reopen it")]
    Poisoned,
    /// The handle was opened read-only ([`crate::Journal::open_read_only`]): nothing was written.
    #[error("journal was opened read-only; nothing was written")]
    ReadOnly,
    /// The commit of this write failed (for example a failed fsync). Nothing of this write is
    /// durable, and the handle is now poisoned.
    #[error("journal commit failed; the journal is now poisoned")]
    Commit(#[source] redb::CommitError),
    /// A page of the file does not read as redb wrote it (redb met it with a panic) while this
    /// write ran: the journal is damaged, and the handle is now poisoned.
    #[error(
        "the journal is damaged (found: {detail}); the write stopped and the handle refuses more"
    )]
    Damaged {
        /// What was found.
        detail: String,
    },
    /// An intent with this id is already stored (or appears twice in one batch).
    #[error("intent {intent_id} is already journaled")]
    DuplicateIntent {
        /// The repeated id.
        intent_id: Uuid,
    },
    /// No intent with this id is stored.
    #[error("intent {intent_id} is not journaled")]
    UnknownIntent {
        /// The missing id.
        intent_id: Uuid,
    },
    /// The intent is not `Pending` (it already has a terminal state, or a new intent was
    /// offered in a state other than `Pending`).
    #[error("intent {intent_id} is not pending (state {state:?})")]
    NotPending {
        /// The intent.
        intent_id: Uuid,
        /// Its current (or offered) state.
        state: IntentState,
    },
    /// A rebuilt `(Intent, Commit)` pair names two different intents.
    #[error("commit for intent {commit_intent_id} was paired with intent {intent_id}")]
    IntentMismatch {
        /// The intent's id.
        intent_id: Uuid,
        /// The id the commit names.
        commit_intent_id: Uuid,
    },
    /// The sequence counter reached `u64::MAX`.
    #[error("journal sequence numbers are exhausted")]
    SequenceExhausted,
    /// A stored record could not be decoded, or a new one encoded.
    #[error("journal record is unreadable or unwritable")]
    Codec(#[from] CodecError),
    /// A storage error before the commit (the transaction was rolled back).
    #[error("journal storage error while writing")]
    Storage(#[from] redb::Error),
}

/// The journal could not be bound to an OpenCode database.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BindError {
    /// The journal is bound to another database: a copied database, or another channel's
    /// journal file.
    #[error("journal is bound to database {bound:?}, not {found:?}")]
    Mismatch {
        /// The id the journal is bound to.
        bound: String,
        /// The id offered.
        found: String,
    },
    /// The offered database id is empty.
    #[error("database id is empty")]
    EmptyDatabaseId,
    /// An earlier commit of this handle failed (see [`WriteError::Poisoned`]).
    #[error("journal refuses writes after a failed commit; reopen it")]
    Poisoned,
    /// The handle was opened read-only ([`crate::Journal::open_read_only`]): nothing was written.
    #[error("journal was opened read-only; nothing was written")]
    ReadOnly,
    /// The commit of the binding failed; the handle is now poisoned.
    #[error("journal commit failed; the journal is now poisoned")]
    Commit(#[source] redb::CommitError),
    /// A page of the file does not read as redb wrote it (redb met it with a panic): the
    /// journal is damaged, and the handle is now poisoned.
    #[error("the journal is damaged (found: {detail}); nothing was bound")]
    Damaged {
        /// What was found.
        detail: String,
    },
    /// The stored binding could not be decoded, or the new one encoded.
    #[error("journal binding is unreadable or unwritable")]
    Codec(#[from] CodecError),
    /// A storage error (the transaction was rolled back).
    #[error("journal storage error while binding")]
    Storage(#[from] redb::Error),
}
