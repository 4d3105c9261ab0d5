//! Errors of the engine layer: one enum for bad requests (`ContractError`), one for store
//! failures (`StoreError`), one gathering the journal's (`JournalError`) and one for the
//! engine's own operations (`EngineError`).

use thiserror::Error;

/// A request that breaks the contract. Nothing is journaled or written for it.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContractError {
    /// The body is larger than 1 MiB.
    #[error("request body is {bytes} bytes; the limit is {limit} bytes")]
    BodyTooLarge {
        /// Size of the body in bytes.
        bytes: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The body is not JSON of the expected shape.
    #[error("malformed request: {detail}")]
    Malformed {
        /// serde's description of what is wrong.
        detail: String,
        /// Where: the path of the offending value (`indexes[2]`, `candidates[0].revision`), or
        /// `None` when the body is not JSON at all or the fault is at its top level.
        field: Option<String>,
    },
    /// The body has a key the contract does not define.
    #[error("unknown key `{key}` in request")]
    UnknownKey {
        /// The key, by its path when it is nested (`candidates[0].content`).
        key: String,
    },
    /// An id is empty or longer than 256 characters.
    #[error("{field} must be 1 to {max} characters long, got {len}")]
    IdLength {
        /// `sessionID` or `messageID`.
        field: &'static str,
        /// Its length in UTF-16 code units.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The revision is not 64 lowercase hex characters.
    #[error("revision must be 64 lowercase hex characters (from a preview), got `{found}`")]
    Revision {
        /// What was given (at most 80 characters of it).
        found: String,
    },
    /// No index was given.
    #[error("indexes must name at least one part")]
    NoIndexes,
    /// More than 100,001 indexes.
    #[error("{count} indexes given; at most {max} are accepted")]
    TooManyIndexes {
        /// How many were given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// An index below 0 or above 100,000.
    #[error("index {index} is out of bounds: indexes are 0 to {max}")]
    IndexOutOfBounds {
        /// The index.
        index: i64,
        /// The largest valid index.
        max: i64,
    },
    /// The same index twice.
    #[error("index {index} is given twice")]
    DuplicateIndex {
        /// The repeated index.
        index: u32,
    },
    /// A text field is longer than the contract allows.
    #[error("{field} must be at most {max} characters long, got {len}")]
    TooLong {
        /// `query` or `cursor`.
        field: &'static str,
        /// Its length in UTF-16 code units.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// A history request with `purpose: "prune"` names no session.
    #[error("purpose \"prune\" needs a sessionID: a batch prune works on one session")]
    PruneNeedsSession,
    /// A history cursor is damaged or was made for another request.
    #[error("cursor: {detail}")]
    Cursor {
        /// What is wrong with it.
        detail: String,
    },
    /// A batch has no candidates, or more than 16.
    #[error("a batch takes 1 to {max} candidates, got {count}")]
    CandidateCount {
        /// How many were given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// The same message twice in a batch.
    #[error("message {message_id} is given twice in the batch")]
    DuplicateCandidate {
        /// The repeated message id.
        message_id: String,
    },
    /// A value breaks a bound of the browsing contract (`known`, `messageIDs`, an asset
    /// target).
    #[error("{detail}")]
    Invalid {
        /// The path of the value (`known[2].digest`).
        field: String,
        /// What is wrong, in words.
        detail: String,
    },
}

impl ContractError {
    /// The request field the error is about, for callers that answer with a field name (the
    /// HTTP API's 400 body): the unknown key itself, the field that is too long or out of
    /// bounds, or the path of a value of the wrong type (`indexes[2]`). `None` for a body that
    /// is too large or not JSON at all.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::BodyTooLarge { .. } => None,
            Self::Malformed { field, .. } => field.as_deref(),
            Self::UnknownKey { key } => Some(key),
            Self::IdLength { field, .. } | Self::TooLong { field, .. } => Some(field),
            Self::Revision { .. } => Some("revision"),
            Self::NoIndexes
            | Self::TooManyIndexes { .. }
            | Self::IndexOutOfBounds { .. }
            | Self::DuplicateIndex { .. } => Some("indexes"),
            Self::PruneNeedsSession => Some("sessionID"),
            Self::Cursor { .. } => Some("cursor"),
            Self::CandidateCount { .. } | Self::DuplicateCandidate { .. } => Some("candidates"),
            Self::Invalid { field, .. } => Some(field),
        }
    }

    /// Parses a request body into its raw shape, turning serde's error into a contract error
    /// that names the offending field (the shape of every route's 400).
    ///
    /// Errors: [`Self::Malformed`], [`Self::UnknownKey`].
    pub fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, Self> {
        let mut deserializer = serde_json::Deserializer::from_str(body);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            Self::from_json(error.into_inner(), path)
        })?;
        deserializer
            .end()
            .map_err(|error| Self::from_json(error, String::new()))?;
        Ok(value)
    }

    fn from_json(error: serde_json::Error, path: String) -> Self {
        // A syntax error or a body cut short is about the text, not about a field.
        if !error.is_data() {
            return Self::Malformed {
                detail: error.to_string(),
                field: None,
            };
        }
        let detail = error.to_string();
        // The path is "." at the top level and "?" where the parser stopped before a value.
        let path = (!matches!(path.as_str(), "" | "." | "?")).then_some(path);
        // serde's message for deny_unknown_fields: "unknown field `x`, expected one of ...". A
        // nested key is named by its path (`candidates[0].x`), as other fields are.
        if let Some(rest) = detail.strip_prefix("unknown field `") {
            if let Some(end) = rest.find('`') {
                let name = &rest[..end];
                let key = match &path {
                    None => name.to_string(),
                    Some(path) if path.ends_with(name) => path.clone(),
                    Some(parent) => format!("{parent}.{name}"),
                };
                return Self::UnknownKey { key };
            }
        }
        // serde names the raw type a body that is not an object failed to be ("expected struct
        // RawPrune"): say what it must be instead.
        if path.is_none() && detail.contains("struct Raw") {
            return Self::Malformed {
                detail: "the body must be a JSON object of the request's keys".into(),
                field: None,
            };
        }
        // serde's message for a missing key names it; the path then points at its parent.
        let missing = detail
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
            .map(|key| match &path {
                None => key.to_string(),
                Some(parent) => format!("{parent}.{key}"),
            });
        let field = missing.or(path);
        Self::Malformed { detail, field }
    }
}

/// A failure of a [`crate::SessionStore`] that is not a refusal: the store could not answer.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened.
    #[error("cannot open database {path}: {detail}")]
    Open {
        /// The path.
        path: String,
        /// Why.
        detail: String,
    },
    /// The database cannot be written here (a read-only file, folder or mount): nothing was
    /// written. Read commands work on it.
    #[error("database {path} is read-only: {detail}")]
    ReadOnly {
        /// The path.
        path: String,
        /// Why, and what to do.
        detail: String,
    },
    /// The database file is damaged: SQLite's integrity check, or a statement, found damaged
    /// pages or an index out of step with its table. Nothing was written, and the store writes
    /// nothing more (docs/ARCHITECTURE.md, "Sound files").
    #[error("database {path} is damaged: {detail}")]
    Damaged {
        /// The path.
        path: String,
        /// What was found and what to do, in words.
        detail: String,
    },
    /// A process holds a database, `-wal` or `-shm` file that was deleted or replaced at its
    /// path: what this store writes there, that process would never see, or would delete.
    /// Nothing was written (docs/ARCHITECTURE.md, "Sound files").
    #[error("database {path} cannot be written safely: {detail}")]
    Detached {
        /// The path.
        path: String,
        /// Which process holds which file, and what to do, in words.
        detail: String,
    },
    /// The session or message does not exist.
    #[error("{what} not found")]
    NotFound {
        /// What was looked up (e.g. `message msg_...`).
        what: String,
    },
    /// The database's identity does not match the journal's.
    #[error("database id {found:?} does not match the journal's {expected}: this journal belongs to another database (use the journal beside this database, or --journal)")]
    DatabaseMismatch {
        /// The id the journal is bound to.
        expected: String,
        /// The id the database holds, if any.
        found: Option<String>,
    },
    /// COMMIT failed in a way that may or may not have made the prune durable (an fsync error,
    /// say). The engine leaves the intent pending; recovery decides from the receipt.
    #[error("the prune's commit failed and may or may not have taken effect ({0}); run the command again to resolve it from the database")]
    OutcomeUnknown(String),
    /// SQLite or the data failed in a way the engine cannot map to a refusal; the store's own
    /// error (for OpenCode's store, `rusqlite::Error`) is kept as the source.
    #[error("storage error: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The prune archive could not be opened, read or written (its words say which and what
    /// to do); a prune that needed it was not committed.
    #[error("{0}")]
    Archive(String),
    /// Another process holds the prune archive for writing (a `serve --archive`, a clean with
    /// `--archive`, an `archive purge`): nothing was done; try again when it is done.
    #[error("{0}")]
    ArchiveBusy(String),
}

/// A failure of an [`crate::Engine`] operation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The request breaks the contract; nothing was journaled.
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The journal failed to read or write; the journal's typed error, shared by every prune
    /// of a batch it failed.
    #[error("journal: {}", chain(.0.as_ref()))]
    Journal(std::sync::Arc<JournalError>),
    /// An invariant of the engine did not hold (a bug, never a refusal): the words say which.
    #[error("internal error of the engine: {0}")]
    Internal(&'static str),
    /// The same request earlier in the batch failed, and so this repetition of it did.
    #[error("the same request earlier in the batch failed: {0}")]
    SameRequestFailed(String),
    /// The journal holds committed prunes of a database, and this database has no identity.
    #[error("the journal is bound to database {bound} and holds its prune history, but this database has no identity: it is another file (a copy?) or a backup restored from before its first prune; give it its own journal (--journal NEW_PATH)")]
    UnknownDatabase {
        /// The id the journal holds.
        bound: String,
    },
    /// The journal has unresolved intents, and this database has no identity to tell whether
    /// they belong to it.
    #[error("the journal (bound to database {bound}) has {pending} unresolved prune intent(s), and this database holds no identity: if the journal belongs to it, its first prune never committed, so move the journal aside and run again; otherwise use this database's own journal (--journal PATH)")]
    UnresolvedIntents {
        /// The id the journal holds.
        bound: String,
        /// How many intents are pending.
        pending: usize,
    },
    /// The prune committed in the database (its receipt is there), but its commit mark could
    /// not be journaled (a full disk, a failed fsync): the journal is poisoned for this run,
    /// and the next open's recovery journals the commit and announces its event. Counts as
    /// pruned.
    #[error("committed in the database (receipt {}) but not journaled: {cause}; the next run journals it and announces its event", receipt.receipt_id)]
    CommittedNotJournaled {
        /// The receipt written with the prune.
        receipt: Box<crate::Receipt>,
        /// Why the journal write failed, with its causes.
        cause: String,
    },
    /// A batch was stopped before this prune was applied; nothing of it was written.
    #[error("stopped before this prune was applied; nothing was written")]
    Interrupted,
    /// The database holds receipts (its identity) and the journal is new: the journal that
    /// numbered their events was lost (deleted, emptied) or is elsewhere. Starting again at seq
    /// 1 would give their numbers to other events, so nothing is written.
    #[error("this database holds the receipts of {receipts} prune(s) (database {database_id}), but their journal is missing or empty: nothing was changed; put the journal back (the file, or name it with --journal PATH), or start a new journal from the receipts with `session-prune journal new-epoch` (event streams then resync)")]
    JournalMissing {
        /// The database's id.
        database_id: String,
        /// How many receipts it holds.
        receipts: u64,
    },
    /// The journal is of another epoch than the one the database is on (docs/ARCHITECTURE.md,
    /// "Journal epochs"): an older journal put back after a newer one was started, say.
    #[error("the journal is of epoch {journal}, but this database is on journal epoch {database}: nothing was changed; use the journal of epoch {database} (--journal PATH)")]
    JournalEpochMismatch {
        /// The journal's epoch number.
        journal: u64,
        /// The epoch number the database records.
        database: u64,
    },
    /// A journal epoch was asked for a database no prune has written to (it has no identity):
    /// its first prune creates the journal.
    #[error("this database holds no receipt: there is no journal history to continue, and the first prune creates the journal")]
    NothingJournaled,
    /// Another start of a journal epoch moved the database first ([`crate::start_journal_epoch`]
    /// compares and sets the epoch): nothing was written. `epoch` is where the database is now.
    #[error("another journal epoch was started meanwhile: the database is on journal epoch {epoch} now; nothing was changed")]
    JournalEpochRaced {
        /// The epoch the database is on.
        epoch: u64,
    },
    /// The journal is bound to another database.
    #[error("the journal is bound to database {bound}, but this database is {found}: nothing was changed; use the journal that belongs to this database (--journal PATH)")]
    JournalMismatch {
        /// The id the journal holds.
        bound: String,
        /// The database's id.
        found: String,
    },
}

#[cfg(test)]
mod tests {
    use crate::contract::{PreviewRequest, PruneRequest};
    use crate::PruneBatchRequest;

    fn field_of<T: std::fmt::Debug>(parsed: Result<T, super::ContractError>) -> Option<String> {
        parsed.unwrap_err().field().map(str::to_string)
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_by_its_path() {
        let body = r#"{"sessionID":"s","messageID":"m","revision":"r","indexes":[1,"a"]}"#;
        assert_eq!(
            field_of(PruneRequest::from_json(body)),
            Some("indexes[1]".into())
        );
        let body = r#"{"sessionID":"s","candidates":[{"messageID":"m","revision":7,"toolCount":1,"reasoningCount":0}]}"#;
        assert_eq!(
            field_of(PruneBatchRequest::from_json(body)),
            Some("candidates[0].revision".into())
        );
    }

    #[test]
    fn a_missing_key_and_an_unknown_key_are_named() {
        assert_eq!(
            field_of(PreviewRequest::from_json(r#"{"sessionID":"s"}"#)),
            Some("messageID".into())
        );
        assert_eq!(
            field_of(PreviewRequest::from_json(
                r#"{"sessionID":"s","messageID":"m","content":[]}"#
            )),
            Some("content".into())
        );
    }

    #[test]
    fn a_body_that_is_not_json_names_no_field() {
        assert_eq!(field_of(PreviewRequest::from_json("{")), None);
        assert_eq!(
            field_of(PreviewRequest::from_json(r#"{"sessionID":"#)),
            None
        );
        let not_an_object = PruneBatchRequest::from_json("[]").unwrap_err();
        assert_eq!(
            not_an_object.to_string(),
            "malformed request: the body must be a JSON object of the request's keys"
        );
        assert_eq!(
            field_of(PreviewRequest::from_json(
                r#"{"sessionID":"s","messageID":"m"} trailing"#
            )),
            None
        );
    }
}

/// A failure of the journal (`pruning-journal`), one variant per kind of operation, each
/// keeping the journal's own typed error and its causes (a full disk, a read-only file).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum JournalError {
    /// Opening the file.
    #[error(transparent)]
    Open(#[from] pruning_journal::OpenError),
    /// A query.
    #[error(transparent)]
    Read(#[from] pruning_journal::ReadError),
    /// A durable write.
    #[error(transparent)]
    Write(#[from] pruning_journal::WriteError),
    /// Binding to the database.
    #[error(transparent)]
    Bind(#[from] pruning_journal::BindError),
    /// Starting a journal epoch.
    #[error(transparent)]
    Epoch(#[from] pruning_journal::EpochError),
}

impl<E: Into<JournalError>> From<E> for EngineError {
    fn from(error: E) -> Self {
        EngineError::Journal(std::sync::Arc::new(error.into()))
    }
}

/// `error: cause: cause...`, each cause once: the journal's errors keep the I/O failure (a full
/// disk, a read-only file) in their sources, which a person must see.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let words = cause.to_string();
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        source = cause.source();
    }
    text
}
