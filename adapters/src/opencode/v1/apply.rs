//! The V1 write transaction of one prune.
//!
//! Source: docs/ARCHITECTURE.md, "The write path of one prune", step 4. `BEGIN IMMEDIATE` with
//! `busy_timeout` 0 (a busy database is refused at once, never waited on); then the fence, the
//! receipt lookup by request key, the read, the planner, the revision compare, the deletes
//! (each matching the exact text read), the `event` rewrite, the receipt insert, `COMMIT`. Any
//! refusal or error rolls back: the database is unchanged.

use std::collections::HashSet;

use pruning_engine::{
    Applied, BlockedReason, Plan, PruneCommand, PruneRequest, Receipt, Refusal, StoreError,
    ENGINE_VERSION,
};
use rusqlite::{params, Connection, ErrorCode};

use super::events;
use super::fence::{self, FenceInput};
use super::foreign::ForeignSnapshots;
use super::read;
use crate::opencode::receipts;
use crate::opencode::schema::Schema;
use crate::opencode::v2;
use crate::opencode::v2::apply::V2Prepared;

/// `storage` column of receipts written by this store.
pub const STORAGE: &str = "v1";

/// Runs one prune transaction on `conn`.
///
/// Refusals: the connection is already in a transaction or the database is locked
/// (`maintenance_required`); the fence's refusals; the planner's (`not_deletable`, `conflict`);
/// a receipt under the same key for another message, or any SQL failure inside the transaction
/// (`unsupported_storage`). Errors: [`StoreError::DatabaseMismatch`] when the database holds
/// another identity than the journal's.
pub fn apply(
    conn: &Connection,
    schema: &Schema,
    foreign: &mut ForeignSnapshots,
    command: &PruneCommand<'_>,
    quiet_period_ms: i64,
) -> Result<Applied, StoreError> {
    if !conn.is_autocommit() {
        return Ok(Applied::Refused(Refusal::new(
            BlockedReason::MaintenanceRequired,
            "the connection is already inside a transaction",
        )));
    }
    if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
        return classify(&error).map(Applied::Refused);
    }
    let outcome = run(conn, schema, foreign, command, quiet_period_ms);
    if matches!(outcome, Ok(Step::Commit(_))) {
        if let Err(error) = conn.execute_batch("COMMIT") {
            let still_open = !conn.is_autocommit();
            if still_open {
                let _ = conn.execute_batch("ROLLBACK");
            }
            // BUSY leaves the transaction open (a reader holds the file): rolled back, nothing
            // was written. Any other failure of COMMIT (an fsync error, say) may or may not have
            // made the transaction durable: only the database, read again, can tell.
            return match classify(&error) {
                Ok(refusal)
                    if refusal.reason == BlockedReason::MaintenanceRequired && still_open =>
                {
                    Ok(Applied::Refused(refusal))
                }
                _ => Err(StoreError::OutcomeUnknown(error.to_string())),
            };
        }
    } else if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    match outcome {
        Ok(Step::Commit(receipt)) => Ok(Applied::Pruned {
            receipt: Box::new(receipt),
            replayed: false,
        }),
        Ok(Step::Replayed(receipt)) => Ok(Applied::Pruned {
            receipt: Box::new(receipt),
            replayed: true,
        }),
        Ok(Step::Refuse(refusal)) => Ok(Applied::Refused(refusal)),
        Err(Failure::Sql(error)) => classify(&error).map(Applied::Refused),
        Err(Failure::Store(error)) => Err(error),
    }
}

enum Step {
    Commit(Receipt),
    Replayed(Receipt),
    Refuse(Refusal),
}

enum Failure {
    Sql(rusqlite::Error),
    Store(StoreError),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sql(error)
    }
}

/// What the checks before any write decided.
pub(crate) enum Prepared {
    /// Refuse with this.
    Refuse(Refusal),
    /// An identical request already committed: this is its receipt.
    Replayed(Receipt),
    /// Go ahead with a V2 message.
    PlanV2(Box<v2::apply::V2Plan>),
    /// Go ahead: the message as read and the plan.
    Plan { loaded: read::V1Message, plan: Plan },
}

/// Everything before the first write: schema, fence, receipt lookup, read, planner. Runs inside
/// the caller's transaction (a write transaction for a prune, a read one for a dry run).
pub(crate) fn prepare(
    conn: &Connection,
    schema: &Schema,
    request: &PruneRequest,
    request_key: &str,
    now_ms: i64,
    quiet_period_ms: i64,
    texts: read::Texts,
) -> rusqlite::Result<Prepared> {
    if v2::holds_message(conn, schema, &request.session_id, &request.message_id)? {
        return Ok(
            match v2::apply::prepare(conn, schema, request, request_key)? {
                V2Prepared::Refuse(refusal) => Prepared::Refuse(refusal),
                V2Prepared::Replayed(receipt) => Prepared::Replayed(receipt),
                V2Prepared::Plan(planned) => Prepared::PlanV2(Box::new(planned)),
            },
        );
    }
    if let Some(why) = schema.v1_write_refusal() {
        return Ok(Prepared::Refuse(Refusal::new(
            BlockedReason::UnsupportedStorage,
            why,
        )));
    }
    let input = FenceInput {
        session_id: &request.session_id,
        scope: &request.scope,
        now_ms,
        quiet_period_ms,
    };
    if let Some(refusal) = fence::check(conn, schema, input)? {
        return Ok(Prepared::Refuse(refusal));
    }
    match receipts::replay(conn, request_key, &request.session_id, &request.message_id)? {
        Some(Ok(receipt)) => return Ok(Prepared::Replayed(receipt)),
        Some(Err(refusal)) => return Ok(Prepared::Refuse(refusal)),
        None => {}
    }
    let loaded = match read::read_message(conn, &request.session_id, &request.message_id, texts)? {
        Ok(loaded) => loaded,
        Err(refusal) => return Ok(Prepared::Refuse(refusal)),
    };
    match loaded.message.plan(&request.selection, &request.revision) {
        Ok(plan) => Ok(Prepared::Plan { loaded, plan }),
        Err(refusal) => Ok(Prepared::Refuse(refusal)),
    }
}

fn run(
    conn: &Connection,
    schema: &Schema,
    foreign: &mut ForeignSnapshots,
    command: &PruneCommand<'_>,
    quiet_period_ms: i64,
) -> Result<Step, Failure> {
    let request = command.request;
    let key = hex::encode(command.request_key);
    let prepared = prepare(
        conn,
        schema,
        request,
        &key,
        command.now_ms,
        quiet_period_ms,
        read::Texts::Keep,
    )?;
    let (loaded, plan) = match prepared {
        Prepared::Refuse(refusal) => return Ok(Step::Refuse(refusal)),
        Prepared::Replayed(receipt) => return Ok(Step::Replayed(receipt)),
        Prepared::PlanV2(planned) => return run_v2(conn, command, &planned),
        Prepared::Plan { loaded, plan } => (loaded, plan),
    };

    claim_identity(conn, command)?;

    let mut delete =
        conn.prepare_cached("DELETE FROM part WHERE id = ?1 AND message_id = ?2 AND data = ?3")?;
    let mut part_ids = Vec::with_capacity(plan.remove.len());
    let mut bytes_removed = 0u64;
    for &index in &plan.remove {
        let row = &loaded.rows[index];
        if delete.execute(params![row.id, request.message_id, row.data])? != 1 {
            return Ok(Step::Refuse(Refusal::new(
                BlockedReason::Conflict,
                format!("part {} changed while it was being pruned", row.id),
            )));
        }
        bytes_removed += row.len as u64;
        part_ids.push(row.id.clone());
    }
    if schema.has_events() {
        let doomed: HashSet<&str> = part_ids.iter().map(String::as_str).collect();
        // Inside the write transaction: the rows appended since the store's last look.
        foreign.catch_up(conn)?;
        let (_, snapshot_bytes) = events::delete_snapshots(
            conn,
            &request.session_id,
            &request.message_id,
            &doomed,
            &foreign.of_parts(&doomed),
        )?;
        bytes_removed += snapshot_bytes;
        events::append_removed(
            conn,
            &request.session_id,
            &request.message_id,
            &part_ids,
            command.now_ms,
        )?;
        foreign.after_own_writes(conn)?;
    }

    let receipt = receipt_of(command, &plan, part_ids, bytes_removed);
    receipts::insert(conn, &receipt, STORAGE)?;
    Ok(Step::Commit(receipt))
}

/// Creates the receipt tables if needed and checks the database's identity against the
/// journal's (recording it on the first prune).
fn claim_identity(conn: &Connection, command: &PruneCommand<'_>) -> Result<(), Failure> {
    receipts::ensure_tables(conn)?;
    let held = receipts::claim_database_id(conn, command.database_id)?;
    if held != command.database_id {
        return Err(Failure::Store(StoreError::DatabaseMismatch {
            expected: command.database_id.to_string(),
            found: Some(held),
        }));
    }
    Ok(())
}

/// The writes of a V2 prune: identity, compare-and-swap of the content, receipt.
fn run_v2(
    conn: &Connection,
    command: &PruneCommand<'_>,
    planned: &v2::apply::V2Plan,
) -> Result<Step, Failure> {
    claim_identity(conn, command)?;
    let request = command.request;
    let (part_ids, bytes_removed) = match v2::apply::write(conn, request, planned)? {
        Ok(written) => written,
        Err(refusal) => return Ok(Step::Refuse(refusal)),
    };
    let receipt = receipt_of(command, &planned.plan, part_ids, bytes_removed);
    receipts::insert(conn, &receipt, v2::apply::STORAGE)?;
    Ok(Step::Commit(receipt))
}

/// The receipt of a prune of either generation: the command's ids and time, the plan's
/// revisions and indexes, the parts removed and the bytes of row data freed.
fn receipt_of(
    command: &PruneCommand<'_>,
    plan: &Plan,
    part_ids: Vec<String>,
    bytes_removed: u64,
) -> Receipt {
    Receipt {
        receipt_id: command.receipt_id,
        intent_id: command.intent_id,
        request_key: hex::encode(command.request_key),
        session_id: command.request.session_id.clone(),
        message_id: command.request.message_id.clone(),
        revision_before: plan.revision_before.clone(),
        revision_after: plan.revision_after.clone(),
        indexes: plan.remove.iter().map(|&i| i as u32).collect(),
        removed_count: part_ids.len() as u32,
        part_ids,
        bytes_removed,
        committed_at_ms: command.now_ms,
        engine_version: ENGINE_VERSION.to_string(),
    }
}

/// SQLITE_BUSY and SQLITE_LOCKED mean another connection holds the database:
/// `maintenance_required`. A read-only file, a full disk or an I/O error is a storage failure
/// (an error, not a refusal). Anything else (a missing column, a failed constraint) means the
/// storage is not what the engine expects: `unsupported_storage`.
pub fn classify(error: &rusqlite::Error) -> Result<Refusal, StoreError> {
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

/// SQLITE_BUSY and SQLITE_LOCKED mean another connection holds the database:
/// `maintenance_required`. Anything else means the storage is not what the engine expects.
pub fn sql_refusal(error: &rusqlite::Error) -> Refusal {
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
