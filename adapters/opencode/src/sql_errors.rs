//! SQLite errors in the contract's words: which are a refusal (a busy database is
//! `maintenance_required`, storage this version does not know is `unsupported_storage`) and
//! which are a storage failure (an error). Every read and write path of the store maps its SQL
//! errors here.
//!
//! Source: docs/ARCHITECTURE.md, "Contract" (the refusal reasons) and "Errors".

use pruning_engine::{BlockedReason, Refusal, StoreError};
use rusqlite::ErrorCode;

use super::schema::soundness::is_damage;

/// The words of a read that met damaged pages (`SQLITE_CORRUPT`): no SQLite text, what to do.
pub(crate) const DAMAGED_HERE: &str = "the database file is damaged where this is stored \
     (SQLite cannot read those pages): nothing was written. `session-prune audit` reports the \
     damage and what to do";

/// SQLITE_CORRUPT and SQLITE_NOTADB mean the file is damaged: [`StoreError::Damaged`] with an
/// empty path and SQLite's finding, for the store to word. SQLITE_BUSY and SQLITE_LOCKED mean another connection holds
/// the database: `maintenance_required`. A read-only file, a full disk or an I/O error is a storage failure
/// (an error, not a refusal). Anything else (a missing column, a failed constraint) means the
/// storage is not what the engine expects: `unsupported_storage`.
pub(crate) fn classify(error: &rusqlite::Error) -> Result<Refusal, StoreError> {
    if is_damage(error) {
        // SQLite's finding alone: the store names the file, words it and keeps it
        // (`OpenCodeStore::noting_damage`).
        return Err(StoreError::Damaged {
            path: String::new(),
            detail: error.to_string(),
        });
    }
    match error.sqlite_error_code() {
        Some(ErrorCode::ReadOnly)
        | Some(ErrorCode::DiskFull)
        | Some(ErrorCode::SystemIoFailure)
        | Some(ErrorCode::CannotOpen)
        | Some(ErrorCode::PermissionDenied) => Err(StoreError::Storage(
            format!(
                "{error}: check that the database file and its folder are writable and the disk has room"
            )
            .into(),
        )),
        _ => Ok(sql_refusal(error)),
    }
}

/// SQLITE_CORRUPT and SQLITE_NOTADB mean the file is damaged where the statement read:
/// `unsupported_storage`, in words ([`DAMAGED_HERE`]). SQLITE_BUSY and SQLITE_LOCKED mean
/// another connection holds the database: `maintenance_required`. Anything else means the storage is not what the engine expects.
pub(crate) fn sql_refusal(error: &rusqlite::Error) -> Refusal {
    if is_damage(error) {
        return Refusal::new(BlockedReason::UnsupportedStorage, DAMAGED_HERE);
    }
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => Refusal::new(
            BlockedReason::MaintenanceRequired,
            "the database is locked by another writer (OpenCode is busy); try again shortly",
        ),
        _ => Refusal::new(BlockedReason::UnsupportedStorage, unexpected(error)),
    }
}

/// A storage failure the schema profile did not foresee, in words: what is missing or what
/// the data broke, never SQLite's own message alone.
fn unexpected(error: &rusqlite::Error) -> String {
    let text = error.to_string();
    let after = |prefix: &str| {
        text.split_once(prefix)
            .map(|(_, rest)| rest.split([' ', '\n']).next().unwrap_or("").to_string())
    };
    if let Some(table) = after("no such table: ") {
        format!("the database has no table {table}, which this layout needs: a layout this version does not know")
    } else if let Some(column) = after("no such column: ") {
        format!("the database has no column {column}, which this layout needs: a layout this version does not know")
    } else if let Some(columns) = after("constraint failed: ") {
        format!("the prune would break the database's rule on {columns} (its rows are not as OpenCode writes them); nothing was written")
    } else {
        format!("the storage is not as this version expects (SQLite: {text}); nothing was written")
    }
}
