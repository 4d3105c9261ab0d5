//! What a prune does the same way in both storage generations: the write transaction around it
//! (`BEGIN IMMEDIATE`, then `COMMIT`, or `ROLLBACK` on any refusal, error or panic; the guard
//! that runs them is [`super::txn::WriteTxn`]), the storage checks
//! that open both fences, the receipt lookup of an identical request, the database identity
//! claim, and the receipt. Each generation's own fence, read and row writes are in `v1::apply`
//! and `v2::apply`; `super::generation` picks one per request.
//!
//! Source: docs/ARCHITECTURE.md, "The write path of one prune", steps 3 and 4, and "Fence".

use pruning_engine::{
    AbandonedRun, Applied, BlockedReason, Plan, PruneCommand, PruneRequest, Receipt, Refusal,
    StoreError, ENGINE_VERSION,
};
use rusqlite::Connection;

use super::receipts;
use super::schema::Schema;
use super::sql_errors::classify;
use super::txn::{CommitError, WriteTxn, Writer};

/// What the checks before any write decided, with `P` a generation's planned prune.
pub(crate) enum Prepared<P> {
    /// Refuse with this.
    Refuse(Refusal),
    /// An identical request already committed: this is its receipt.
    Replayed(Box<Receipt>),
    /// Go ahead with this plan.
    Plan(P),
}

impl<P> Prepared<P> {
    /// The same decision, with the plan changed by `f`.
    pub(crate) fn map<Q>(self, f: impl FnOnce(P) -> Q) -> Prepared<Q> {
        match self {
            Self::Refuse(refusal) => Prepared::Refuse(refusal),
            Self::Replayed(receipt) => Prepared::Replayed(receipt),
            Self::Plan(plan) => Prepared::Plan(f(plan)),
        }
    }
}

/// What a generation's writes removed: the removed parts' ids, in plan order, the bytes of
/// row data freed, and, when asked for, the rows themselves as the archive keeps them.
pub(crate) struct Written {
    /// Ids of the removed parts (none for a prune of diffs or of snapshots).
    pub(crate) part_ids: Vec<String>,
    /// What a prune of one of the copies OpenCode keeps removed (the receipt's `operation`);
    /// `None` for a prune of parts.
    pub(crate) operation: Option<pruning_engine::Operation>,
    /// Bytes of row data freed.
    pub(crate) bytes_removed: u64,
    /// The rows removed (or rewritten), exactly as they were, when captured for the archive.
    pub(crate) removed_rows: Option<pruning_archive::ArchivedRows>,
}

/// How the work inside the transaction ended.
pub(crate) enum Step {
    /// Commit: the receipt is inserted.
    Commit(Box<Receipt>),
    /// Roll back: an identical request already committed with this receipt.
    Replayed(Box<Receipt>),
    /// Roll back and refuse.
    Refuse(Refusal),
}

/// A failure inside the transaction (rolled back).
pub(crate) enum Failure {
    /// SQLite's, mapped by [`classify`].
    Sql(rusqlite::Error),
    /// The store's own.
    Store(StoreError),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sql(error)
    }
}

/// Runs `work` inside one write transaction taken by `writer` and commits when it returns
/// [`Step::Commit`]; anything else rolls back, and so does a panic unwinding out of `work` (the
/// transaction's guard, [`WriteTxn`], is dropped). How long the write lock was held is recorded
/// in the writer's lock times.
///
/// Refusals: the connection is already in a transaction or the database is locked
/// (`maintenance_required`); the refusals of `work`; any SQL failure inside the transaction
/// (see [`classify`]). Errors: the store errors of `work`; [`StoreError::OutcomeUnknown`] when
/// `COMMIT` fails in a way that may or may not have made the transaction durable.
pub(crate) fn in_transaction(
    writer: Writer<'_>,
    work: impl FnOnce(&WriteTxn<'_>) -> Result<Step, Failure>,
) -> Result<Applied, StoreError> {
    let txn = match begin(writer) {
        Ok(txn) => txn,
        Err(refused) => return refused,
    };
    let outcome = work(&txn);
    if matches!(outcome, Ok(Step::Commit(_))) {
        if let Err(failed) = commit(txn) {
            return failed.answer();
        }
    } else {
        txn.rollback();
    }
    answer(outcome)
}

/// Takes the write lock (`BEGIN IMMEDIATE`, after the rest the lock's pace asks for) and
/// answers its guard; or the answer of a prune that could not take it (`maintenance_required`
/// for a connection already inside a transaction or a locked database, else as [`classify`]
/// maps the failure).
pub(crate) fn begin(writer: Writer<'_>) -> Result<WriteTxn<'_>, Result<Applied, StoreError>> {
    if !writer.conn().is_autocommit() {
        return Err(Ok(Applied::Refused(Refusal::new(
            BlockedReason::MaintenanceRequired,
            "the connection is already inside a transaction",
        ))));
    }
    writer
        .begin()
        .map_err(|error| classify(&error).map(Applied::Refused))
}

/// A `COMMIT` that failed, as every prune of its transaction that wrote answers it.
#[derive(Debug, Clone)]
pub(crate) enum CommitFailed {
    /// Rolled back, nothing written (BUSY leaves the transaction open: a reader holds the
    /// file).
    RolledBack(Refusal),
    /// Any other failure (an fsync error, say): the transaction may or may not be durable, and
    /// only the database, read again, can tell.
    Unknown(String),
}

impl CommitFailed {
    /// The answer of a prune that wrote in the transaction.
    pub(crate) fn answer(&self) -> Result<Applied, StoreError> {
        match self {
            Self::RolledBack(refusal) => Ok(Applied::Refused(refusal.clone())),
            Self::Unknown(detail) => Err(StoreError::OutcomeUnknown(detail.clone())),
        }
    }
}

/// Commits `txn`; on failure it is rolled back where SQLite left it open
/// ([`WriteTxn::commit`]), and the failure is worded as [`CommitFailed`].
pub(crate) fn commit(txn: WriteTxn<'_>) -> Result<(), CommitFailed> {
    txn.commit()
        .map(|_| ())
        .map_err(|CommitError { error, was_open }| match classify(&error) {
            Ok(refusal) if refusal.reason == BlockedReason::MaintenanceRequired && was_open => {
                CommitFailed::RolledBack(refusal)
            }
            _ => CommitFailed::Unknown(error.to_string()),
        })
}

/// The answer of a prune whose work ended in `outcome` and whose commit, if it had one,
/// succeeded: pruned, replayed, refused, or the failure (SQL failures mapped by [`classify`]).
pub(crate) fn answer(outcome: Result<Step, Failure>) -> Result<Applied, StoreError> {
    match outcome {
        Ok(Step::Commit(receipt)) => Ok(Applied::Pruned {
            receipt,
            replayed: false,
        }),
        Ok(Step::Replayed(receipt)) => Ok(Applied::Pruned {
            receipt,
            replayed: true,
        }),
        Ok(Step::Refuse(refusal)) => Ok(Applied::Refused(refusal)),
        Err(Failure::Sql(error)) => classify(&error).map(Applied::Refused),
        Err(Failure::Store(error)) => Err(error),
    }
}

/// The checks both generations' fences open with: another database attached on the connection,
/// or any trigger in the schema, is `unsupported_storage` (CodeNomad `claim-fence.ts`).
pub(crate) fn storage_checks(conn: &Connection) -> rusqlite::Result<Option<Refusal>> {
    let attached: i64 = super::cached::query_row(
        conn,
        "SELECT count(*) FROM pragma_database_list WHERE name NOT IN ('main', 'temp')",
        [],
        |row| row.get(0),
    )?;
    if attached > 0 {
        return Ok(Some(Refusal::new(
            BlockedReason::UnsupportedStorage,
            "another database is attached to the connection",
        )));
    }
    let triggers = super::schema::trigger_count(conn)?;
    if triggers > 0 {
        return Ok(Some(Refusal::new(
            BlockedReason::UnsupportedStorage,
            format!("the database has {triggers} trigger(s); a prune could fire unknown writes"),
        )));
    }
    Ok(None)
}

/// The receipt lookup by request key (`request_key`, lowercase hex): `Some` when a receipt is
/// stored under it, as the earlier prune's receipt when it names the request's message, else
/// as a refusal (`unsupported_storage`); `None` when there is none.
pub(crate) fn replayed<P>(
    conn: &Connection,
    request_key: &str,
    request: &PruneRequest,
) -> rusqlite::Result<Option<Prepared<P>>> {
    Ok(
        match receipts::replay(conn, request_key, &request.session_id, &request.message_id)? {
            Some(Ok(receipt)) => Some(Prepared::Replayed(Box::new(receipt))),
            Some(Err(refusal)) => Some(Prepared::Refuse(refusal)),
            None => None,
        },
    )
}

/// Creates the receipt tables where `schema` (read inside this transaction) lacks them, and
/// checks the database's identity against the journal's (recording it on the first prune).
/// Runs before a generation's first write.
///
/// Errors: [`StoreError::DatabaseMismatch`] (as [`Failure::Store`]) when the database holds
/// another identity than the journal's.
pub(crate) fn claim_identity(
    conn: &Connection,
    schema: &Schema,
    database_id: &str,
) -> Result<(), Failure> {
    if !(schema.has(receipts::META_TABLE) && schema.has(receipts::RECEIPT_TABLE)) {
        receipts::ensure_tables(conn)?;
    }
    let held = receipts::claim_database_id(conn, database_id)?;
    if held != database_id {
        return Err(Failure::Store(StoreError::DatabaseMismatch {
            expected: database_id.to_string(),
            found: Some(held),
        }));
    }
    Ok(())
}

/// Builds the receipt of a prune of either generation and inserts it with `storage` (`v1`,
/// `v2`): the command's ids and time, the plan's revisions and indexes, what was written, the
/// abandoned run the fence admitted it beside, and the entry hash of its archive entry.
pub(crate) fn record(
    conn: &Connection,
    command: &PruneCommand<'_>,
    plan: &Plan,
    written: Written,
    storage: &str,
    abandoned_run: Option<AbandonedRun>,
    archive_hash: Option<String>,
) -> rusqlite::Result<Receipt> {
    let receipt = Receipt {
        receipt_id: command.receipt_id,
        intent_id: command.intent_id,
        request_key: hex::encode(command.request_key),
        session_id: command.request.session_id.clone(),
        message_id: command.request.message_id.clone(),
        revision_before: plan.revision_before.clone(),
        revision_after: plan.revision_after.clone(),
        indexes: plan.remove.iter().map(|&i| i as u32).collect(),
        removed_count: removed_count(&written),
        part_ids: written.part_ids,
        bytes_removed: written.bytes_removed,
        committed_at_ms: command.now_ms,
        engine_version: ENGINE_VERSION.to_string(),
        abandoned_run,
        archive_hash,
        restores: None,
        operation: written.operation,
    };
    receipts::insert(conn, &receipt, storage)?;
    Ok(receipt)
}

/// A receipt's `removed_count`: the parts removed, or for a prune of one of the copies OpenCode
/// keeps, the diff entries emptied, the snapshots deleted, the 1.x rows deleted (the message
/// row and its parts), or the one shell output emptied.
fn removed_count(written: &Written) -> u32 {
    match &written.operation {
        None => written.part_ids.len() as u32,
        Some(pruning_engine::Operation::Diffs(diffs)) => diffs.entries,
        Some(pruning_engine::Operation::Compaction(compacted)) => compacted.total(),
        Some(pruning_engine::Operation::MigratedV1(removed)) => removed.parts.saturating_add(1),
        Some(pruning_engine::Operation::ShellOutput(_)) => 1,
    }
}
