//! A restore inside one write transaction (docs/ARCHITECTURE.md, "Restore"): the prune's receipt
//! is checked, the fence of its message's generation passes, the message's revision is still the
//! one the prune left, and the rows its archive entry holds go back exactly (same ids, same
//! bytes), with the restore's receipt. V1: the part rows and their snapshot events are inserted
//! again and the `message.part.removed.1` events the prune appended are deleted; V2: the
//! message row's `data` is set back (compare-and-swap on the text the prune left).

use pruning_archive::{ArchiveReader, ArchivedRows, EntryKey, SqlValue, TableRows};
use pruning_engine::{
    BlockedReason, Receipt, Refusal, RestoreCommand, RestorePlan, RestoreRequest, StoreError,
    ENGINE_VERSION,
};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension};
use uuid::Uuid;

use crate::archive::{archive_error, entry_key, StoreArchive};
use crate::generation::Generation;
use crate::receipts;
use crate::row_budget;
use crate::schema::Schema;
use crate::standing::{revision_of, Kind};
use crate::txn::Writer;
use crate::v1::events::PART_REMOVED;
use crate::v1::fence::{self, FenceInput, FenceLimits};
use crate::v1::known::Known;
use crate::write::{self, Failure, Step};
use crate::{v1, v2};

/// Where a restore reads the archive: the store's own archive handle (a store that archives
/// prunes), or the file beside the database.
pub(crate) enum ArchiveSource<'a> {
    /// The store archives prunes: its handle.
    Held(&'a StoreArchive),
    /// The archive file beside the database, read without a lock.
    Beside(&'a std::path::Path),
}

impl ArchiveSource<'_> {
    /// The rows of entry `key`, or a refusal (`not_deletable`) when `archive purge` removed
    /// it on purpose.
    ///
    /// Errors: [`StoreError::Archive`] when the archive is missing, or the entry is lost or
    /// damaged.
    fn read(&self, key: &EntryKey) -> Result<Result<ArchivedRows, Refusal>, StoreError> {
        let purged = || {
            Ok(Err(refuse(
                BlockedReason::NotDeletable,
                format!(
                    "the archive entry of receipt {} was purged (`archive purge`): its prune can \
                     no longer be restored",
                    key.receipt_id
                ),
            )))
        };
        match self {
            Self::Held(archive) => {
                if archive.purged(key) {
                    return purged();
                }
                archive.read(key).map(Ok)
            }
            Self::Beside(database) => {
                let path = pruning_archive::path_beside(database);
                let reader = ArchiveReader::open(&path).map_err(archive_error)?;
                let Some(reader) = reader else {
                    return Err(StoreError::Archive(format!(
                        "archive {} is missing: the prune's rows cannot be put back",
                        path.display()
                    )));
                };
                let index = reader.index();
                if index.get(key).is_none() {
                    if index.purged_entry(key).is_some() {
                        return purged();
                    }
                    if let Some((offset, kind)) = index.unreadable() {
                        return Err(StoreError::Archive(format!(
                            "archive {} is damaged at byte {offset} ({kind:?}), and the entry of \
                             receipt {} is not among the frames before it: put the archive back \
                             from the backup taken with the database",
                            path.display(),
                            key.receipt_id
                        )));
                    }
                }

                reader.read(key).map(Ok).map_err(archive_error)
            }
        }
    }
}

/// What the work inside the transaction needs.
pub(crate) struct RestoreInput<'a> {
    /// The request.
    pub(crate) request: &'a RestoreRequest,
    /// The restore's request key, lowercase hex.
    pub(crate) request_key: String,
    /// The restore's receipt id, intent and identity: `None` for a dry run (nothing is kept).
    pub(crate) command: Option<&'a RestoreCommand<'a>>,
    /// Now, ms since the Unix epoch.
    pub(crate) now_ms: i64,
    /// The V1 fence's limits.
    pub(crate) limits: FenceLimits,
}

/// What a restore did inside its transaction.
pub(crate) enum Done {
    /// Committed (or, for a dry run, would commit) with this receipt (a dry run's has no
    /// meaning beyond its counts).
    Restored {
        receipt: Box<Receipt>,
        plan: Box<RestorePlan>,
    },
    /// An identical restore committed before with this receipt.
    Replayed(Box<Receipt>),
}

/// Runs the restore's work inside the caller's write transaction. Any `Err` or refusal rolls
/// back.
pub(crate) fn restore(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    archive: &ArchiveSource<'_>,
    input: &RestoreInput<'_>,
) -> Result<Result<Done, Refusal>, Failure> {
    if let Some(refusal) = write::storage_checks(conn)? {
        return Ok(Err(refusal));
    }
    if let Some(receipt) = receipts::by_key(conn, &input.request_key)? {
        return Ok(Ok(Done::Replayed(Box::new(receipt))));
    }
    let receipt_id = input.request.receipt_id;
    let Some(pruned) = receipts::by_id(conn, receipt_id)? else {
        return Ok(Err(refuse(
            BlockedReason::NotDeletable,
            format!("no receipt {receipt_id} in this database"),
        )));
    };
    if pruned.is_restore() {
        return Ok(Err(refuse(
            BlockedReason::NotDeletable,
            format!("receipt {receipt_id} is a restore's; restore names the receipt of a prune"),
        )));
    }
    let key = match pruned.archive_hash.as_deref() {
        None => {
            return Ok(Err(refuse(
                BlockedReason::NotDeletable,
                format!(
                    "the prune of receipt {receipt_id} was not archived: only prunes made with \
                     --archive can be restored"
                ),
            )))
        }
        Some(hash) => match entry_key(&receipt_id.to_string(), hash) {
            Some(key) => key,
            None => {
                return Ok(Err(refuse(
                    BlockedReason::UnsupportedStorage,
                    format!("receipt {receipt_id} records an archive hash that is not one"),
                )))
            }
        },
    };
    let session_id = pruned.session_id.as_str();
    let message_id = pruned.message_id.as_str();
    let kind = Kind::of(&pruned);
    let generation = Generation::of(conn, schema, session_id, message_id)?;
    if let Some(why) = generation.read_only(conn)? {
        return Ok(Err(refuse(BlockedReason::UnsupportedStorage, why)));
    }
    let fenced = match generation {
        // 1.x rows OpenCode 2 never reads: no run of it can be using them.
        _ if kind == Kind::MigratedV1 => migrated_session(conn, schema, session_id, input)?,
        Generation::V1 => {
            if let Some(why) = schema.v1_write_refusal() {
                return Ok(Err(refuse(BlockedReason::UnsupportedStorage, why)));
            }
            let fence_input = FenceInput {
                session_id,
                scope: &input.request.scope,
                clock: input.limits.at(input.now_ms),
            };
            fence::check(conn, schema, known, fence_input)?.err()
        }
        Generation::V2 => v2::fence::check(
            conn,
            schema,
            session_id,
            &input.request.scope,
            input.limits.at(input.now_ms),
        )?
        .err(),
    };
    if let Some(refusal) = fenced {
        return Ok(Err(refusal));
    }
    // A compaction's rows are checked one by one instead (`put_back_snapshots`): the event log
    // moves with every later prune, and what matters is that each row is still superseded.
    if kind != Kind::Compaction {
        match revision_of(conn, generation, kind, session_id, message_id)? {
            Err(refusal) => return Ok(Err(refusal)),
            Ok(now) if now != pruned.revision_after => {
                return Ok(Err(refuse(
                    BlockedReason::Conflict,
                    "the message changed since the prune (OpenCode wrote to it): putting the \
                     parts back now would undo that",
                )))
            }
            Ok(_) => {}
        }
    }
    let rows = match archive.read(&key).map_err(Failure::Store)? {
        Ok(rows) => rows,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let put_back = match (kind, generation) {
        (Kind::Compaction, _) => put_back_snapshots(conn, schema, session_id, &rows)?,
        (Kind::Diffs, _) => put_back_diffs(conn, &pruned, &rows)?,
        (Kind::Parts, Generation::V1) => put_back_v1(conn, schema, &pruned, &rows)?,
        (Kind::Parts, Generation::V2) => put_back_v2(conn, &pruned, &rows)?,
        (Kind::MigratedV1, _) => put_back_migrated(conn, &rows)?,
        (Kind::ShellOutput, _) => put_back_shell(conn, &pruned, &rows)?,
    };
    if let Err(refusal) = put_back {
        return Ok(Err(refusal));
    }
    if kind != Kind::Compaction {
        match revision_of(conn, generation, kind, session_id, message_id)? {
            Ok(after) if after == pruned.revision_before => {}
            _ => {
                return Ok(Err(refuse(
                    BlockedReason::Conflict,
                    "the archived rows do not give the message back as it was before the prune",
                )))
            }
        }
    }
    let plan = Box::new(RestorePlan {
        pruned: pruned.clone(),
        rows: rows.row_count(),
        bytes: data_bytes(&rows),
        already: None,
    });
    let (receipt_id, intent_id, database_id) = match input.command {
        Some(command) => (command.receipt_id, command.intent_id, command.database_id),
        None => (Uuid::nil(), Uuid::nil(), ""),
    };
    let receipt = Receipt {
        receipt_id,
        intent_id,
        request_key: input.request_key.clone(),
        session_id: pruned.session_id.clone(),
        message_id: pruned.message_id.clone(),
        revision_before: pruned.revision_after.clone(),
        revision_after: pruned.revision_before.clone(),
        indexes: pruned.indexes.clone(),
        part_ids: pruned.part_ids.clone(),
        removed_count: 0,
        bytes_removed: 0,
        committed_at_ms: input.now_ms,
        engine_version: ENGINE_VERSION.to_string(),
        abandoned_run: None,
        archive_hash: pruned.archive_hash.clone(),
        restores: Some(pruned.receipt_id),
        operation: pruned.operation.clone(),
    };
    if input.command.is_some() {
        write::claim_identity(conn, schema, database_id)?;
        let storage = match generation {
            _ if kind == Kind::MigratedV1 => v1::apply::STORAGE,
            Generation::V1 => v1::apply::STORAGE,
            Generation::V2 => v2::apply::STORAGE,
        };
        receipts::insert(conn, &receipt, storage)?;
    }
    Ok(Ok(Done::Restored {
        receipt: Box::new(receipt),
        plan,
    }))
}

/// Runs [`restore`] as one write transaction taken by `writer` and commits it (a dry run rolls
/// back), recording the write lock's hold in the writer's lock times.
pub(crate) fn in_transaction(
    writer: Writer<'_>,
    schema_of: impl Fn(&Connection) -> rusqlite::Result<std::sync::Arc<Schema>>,
    known: &mut Known,
    archive: &ArchiveSource<'_>,
    input: &RestoreInput<'_>,
) -> Result<Result<Done, Refusal>, StoreError> {
    let mut done = None;
    let dry_run = input.command.is_none();
    let applied = write::in_transaction(writer, |txn| {
        let conn = txn.conn();
        let schema = schema_of(conn)?;
        known.refresh(conn)?;
        match restore(conn, &schema, known, archive, input)? {
            Err(refusal) => Ok(Step::Refuse(refusal)),
            Ok(Done::Replayed(receipt)) => Ok(Step::Replayed(receipt)),
            Ok(Done::Restored { receipt, plan }) => {
                let step = if dry_run {
                    // Rolled back: the checks ran whole, nothing stays.
                    Step::Refuse(refuse(BlockedReason::Unavailable, "dry run"))
                } else {
                    Step::Commit(receipt.clone())
                };
                done = Some(Done::Restored { receipt, plan });
                Ok(step)
            }
        }
    });
    // The rows put back are not in what the connection learnt of the V1 tables.
    known.forget();
    match applied? {
        pruning_engine::Applied::Pruned {
            receipt,
            replayed: true,
        } => Ok(Ok(Done::Replayed(receipt))),
        pruning_engine::Applied::Pruned { .. } => Ok(done
            .ok_or_else(|| StoreError::Storage("a committed restore left no receipt".into()))
            .map(Ok)?),
        pruning_engine::Applied::Refused(refusal) => match done {
            Some(done) if dry_run => Ok(Ok(done)),
            _ => Ok(Err(refusal)),
        },
    }
}

/// The checks before the 1.x rows of a message OpenCode 2 migrated go back: the 1.x session is
/// there and inside the request's scope; `None` when they pass. Nothing else: the rows put back
/// are what was there (a 1.x may have written to the session since, or OpenCode 2 deleted its
/// copy, which is when an undo is wanted most), and a row that is there again is a `conflict`.
fn migrated_session(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    input: &RestoreInput<'_>,
) -> rusqlite::Result<Option<Refusal>> {
    let there = schema.has("session")
        && conn.query_row(
            "SELECT count(*) > 0 FROM session WHERE id = ?1",
            [session_id],
            |row| row.get::<_, bool>(0),
        )?;
    if !there {
        return Ok(Some(refuse(
            BlockedReason::NotDeletable,
            crate::ownership::missing_session(session_id),
        )));
    }
    crate::ownership::check(
        conn,
        crate::ownership::SessionTable::Shared,
        session_id,
        &input.request.scope,
    )
}

/// The text of the `data` of the one `session_message` row `rows` holds, when they hold just
/// that (what a V2 prune archives).
fn one_row_data(rows: &ArchivedRows) -> Option<&[u8]> {
    match rows.tables.as_slice() {
        [table] if table.table == "session_message" && table.rows.len() == 1 => {
            let at = table.columns.iter().position(|c| c == "data")?;
            match &table.rows[0][at] {
                SqlValue::Text(text) => Some(text.as_slice()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Puts a `shell` row back as it was before its output was emptied: by a compare-and-swap on
/// the text the emptying left (the archived text emptied again), so that anything OpenCode wrote
/// to the row since is a `conflict`, never undone.
fn put_back_shell(
    conn: &Connection,
    pruned: &Receipt,
    rows: &ArchivedRows,
) -> rusqlite::Result<Result<(), Refusal>> {
    let Some(original) = one_row_data(rows) else {
        return Ok(Err(refuse(
            BlockedReason::UnsupportedStorage,
            "the archive entry does not hold one shell row with its data",
        )));
    };
    let original = String::from_utf8_lossy(original).into_owned();
    let left = v2::shell::emptied(conn, &original)?;
    let changed = conn.execute(
        "UPDATE session_message SET data = ?1 WHERE session_id = ?2 AND id = ?3 AND data = ?4",
        params![original, pruned.session_id, pruned.message_id, left],
    )?;
    if changed != 1 {
        return Ok(Err(refuse(
            BlockedReason::Conflict,
            "the shell row changed since its output was emptied (OpenCode wrote to it): putting \
             it back would undo that",
        )));
    }
    Ok(Ok(()))
}

/// Puts the 1.x rows of a message OpenCode 2 migrated back as they were: its `message` row,
/// then its `part` rows. A row that is there again is a `conflict`.
fn put_back_migrated(
    conn: &Connection,
    rows: &ArchivedRows,
) -> rusqlite::Result<Result<(), Refusal>> {
    for table in &rows.tables {
        if !matches!(table.table.as_str(), "message" | "part") {
            return Ok(Err(refuse(
                BlockedReason::UnsupportedStorage,
                format!(
                    "the archive entry holds rows of table {:?}, not of a removal of migrated rows",
                    table.table
                ),
            )));
        }
        if let Err(refusal) = insert_rows(conn, table)? {
            return Ok(Err(refusal));
        }
    }
    Ok(Ok(()))
}

/// Puts a compaction's snapshot events back, as they were, where each is still superseded: its
/// entity has a snapshot with a higher seq in the session's aggregate now. Then putting it back
/// changes what replaying the log ends in for no entity, and brings back nothing a prune
/// removed since (a prune of a part deletes every snapshot of it, the newer ones too). A row
/// that is no longer superseded, or that is there again, is a `conflict`.
fn put_back_snapshots(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    rows: &ArchivedRows,
) -> rusqlite::Result<Result<(), Refusal>> {
    let newest = v1::compact::newest_seqs(conn, session_id)?;
    for table in &rows.tables {
        let columns = (
            table.columns.iter().position(|c| c == "id"),
            table.columns.iter().position(|c| c == "type"),
            table.columns.iter().position(|c| c == "seq"),
            table.columns.iter().position(|c| c == "data"),
        );
        let (Some(id_at), Some(type_at), Some(seq_at), Some(data_at)) = columns else {
            return Ok(Err(refuse(
                BlockedReason::UnsupportedStorage,
                "the archive entry's rows lack the event columns a compaction deletes",
            )));
        };
        if table.table != "event" || !schema.has_events() {
            return Ok(Err(refuse(
                BlockedReason::UnsupportedStorage,
                format!(
                    "the archive entry holds rows of table {:?}, not of a compaction",
                    table.table
                ),
            )));
        }
        for row in &table.rows {
            let (SqlValue::Text(event_type), SqlValue::Integer(seq), SqlValue::Text(data)) =
                (&row[type_at], &row[seq_at], &row[data_at])
            else {
                return Ok(Err(refuse(
                    BlockedReason::UnsupportedStorage,
                    "an archived snapshot has no text type and data or no integer seq",
                )));
            };
            let kind = std::str::from_utf8(event_type)
                .ok()
                .and_then(v1::compact::SnapshotKind::of);
            let entity = match kind {
                Some(kind) => v1::compact::entity_of(conn, kind, data)?.map(|e| (kind, e)),
                None => None,
            };
            let superseded = entity
                .as_ref()
                .and_then(|entity| newest.get(entity))
                .is_some_and(|top| top > seq);
            // A message snapshot holding file bodies a standing diffs prune of the message
            // emptied would bring them back into the log.
            if let (Some((v1::compact::SnapshotKind::Message, message)), true) = (
                &entity,
                v1::diffs::empty_bodies(&String::from_utf8_lossy(data), "/info/summary/diffs")
                    .is_ok_and(|emptied| emptied.entries > 0),
            ) {
                if let Some(receipt) =
                    standing_prune_of(conn, session_id, Standing::DiffsPrune(message))?
                {
                    return Ok(Err(refuse(
                        BlockedReason::Conflict,
                        format!(
                            "a snapshot of message {message} holds file bodies receipt {receipt} \
                             emptied from its summary diffs: restore receipt {receipt} first"
                        ),
                    )));
                }
            }
            if !superseded {
                let id = match &row[id_at] {
                    SqlValue::Text(id) => String::from_utf8_lossy(id).into_owned(),
                    _ => "?".into(),
                };
                let first = match &entity {
                    Some((v1::compact::SnapshotKind::Part, part)) => {
                        standing_prune_of(conn, session_id, Standing::PartPrune(part))?
                            .map(|receipt| format!(": restore receipt {receipt} first"))
                    }
                    _ => None,
                };
                return Ok(Err(refuse(
                    BlockedReason::Conflict,
                    format!(
                        "snapshot {id} would no longer be superseded: the newer snapshots of what \
                         it holds are gone (a prune removed them), and putting it back would \
                         bring back what that prune removed{}",
                        first.unwrap_or_default()
                    ),
                )));
            }
        }
        if let Err(refusal) = insert_rows(conn, table)? {
            return Ok(Err(refusal));
        }
    }
    Ok(Ok(()))
}

/// Whether the session's aggregate holds a `message.updated.1` of `pruned`'s message newer (a
/// higher `seq`) than the archived event `row` of `table`.
fn newer_message_snapshot(
    conn: &Connection,
    pruned: &Receipt,
    table: &TableRows,
    row: &[SqlValue],
) -> rusqlite::Result<bool> {
    let Some(SqlValue::Integer(seq)) = table
        .columns
        .iter()
        .position(|c| c == "seq")
        .map(|at| &row[at])
    else {
        return Ok(true);
    };
    let data = row_budget::data("", "event");
    let newer: i64 = conn.query_row(
        &format!(
            "SELECT count(*) FROM event WHERE aggregate_id = ?1 AND type = 'message.updated.1' \
               AND seq > ?2 AND CASE WHEN json_valid({data}) \
                    THEN json_extract({data}, '$.info.id') = ?3 END"
        ),
        params![pruned.session_id, seq, pruned.message_id],
        |row| row.get(0),
    )?;
    Ok(newer > 0)
}

/// What [`standing_prune_of`] looks for.
enum Standing<'a> {
    /// A prune that removed this part.
    PartPrune(&'a str),
    /// A diffs prune of this message.
    DiffsPrune(&'a str),
}

/// The newest receipt of session `session_id` of the prune `what` names that no restore undid,
/// if any.
fn standing_prune_of(
    conn: &Connection,
    session_id: &str,
    what: Standing<'_>,
) -> rusqlite::Result<Option<String>> {
    let undone = if receipts::has_restores_column(conn)? {
        "AND r.restores IS NULL AND NOT EXISTS \
           (SELECT 1 FROM session_prune_receipt u WHERE u.restores = r.id)"
    } else {
        ""
    };
    let (which, id) = match what {
        Standing::PartPrune(part) => (
            "EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(r.part_ids) \
               THEN r.part_ids ELSE '[]' END) WHERE value = ?2)",
            part,
        ),
        Standing::DiffsPrune(message) => {
            if !receipts::has_operation_column(conn)? {
                return Ok(None);
            }
            (
                "r.message_id = ?2 AND CASE WHEN json_valid(r.operation) \
                   THEN json_extract(r.operation, '$.kind') = 'diffs' END",
                message,
            )
        }
    };
    let sql = format!(
        "SELECT r.id FROM session_prune_receipt r WHERE r.session_id = ?1 {undone} \
           AND {which} ORDER BY r.rowid DESC LIMIT 1"
    );
    conn.query_row(&sql, [session_id, id], |row| row.get(0))
        .optional()
}

/// Puts a diffs prune's rows back: the message row's and the snapshot's `data` as they were,
/// where each still holds exactly what the prune left (the prune's own emptying done again on
/// the archived text: compare-and-swap).
fn put_back_diffs(
    conn: &Connection,
    pruned: &Receipt,
    rows: &ArchivedRows,
) -> rusqlite::Result<Result<(), Refusal>> {
    for table in &rows.tables {
        // The message row is found in its session, the snapshot in the session's aggregate.
        let (sql, pointer) = match table.table.as_str() {
            "message" => (
                "UPDATE message SET data = ?1 WHERE id = ?2 AND session_id = ?3 AND data = ?4",
                "/summary/diffs",
            ),
            "event" => (
                "UPDATE event SET data = ?1 WHERE id = ?2 AND aggregate_id = ?3 AND data = ?4",
                "/info/summary/diffs",
            ),
            other => {
                return Ok(Err(refuse(
                    BlockedReason::UnsupportedStorage,
                    format!(
                        "the archive entry holds rows of table {other:?}, not of a diffs prune"
                    ),
                )))
            }
        };
        let (Some(id_at), Some(data_at)) = (
            table.columns.iter().position(|c| c == "id"),
            table.columns.iter().position(|c| c == "data"),
        ) else {
            return Ok(Err(refuse(
                BlockedReason::UnsupportedStorage,
                "the archive entry's rows have no id or data column",
            )));
        };
        for row in &table.rows {
            let (SqlValue::Text(id), SqlValue::Text(original)) = (&row[id_at], &row[data_at])
            else {
                return Ok(Err(refuse(
                    BlockedReason::UnsupportedStorage,
                    "the archive entry's rows do not hold text ids and data",
                )));
            };
            // The snapshot set back must still be the message's newest: putting the bodies back
            // in an older one than the log ends in would leave replay and row apart.
            if table.table == "event" && newer_message_snapshot(conn, pruned, table, row)? {
                return Ok(Err(refuse(
                    BlockedReason::Conflict,
                    format!(
                        "message {} has a newer snapshot than the one receipt {} rewrote \
                         (OpenCode wrote one since): putting the bodies back would undo that",
                        pruned.message_id, pruned.receipt_id
                    ),
                )));
            }
            let original = String::from_utf8_lossy(original);
            let Ok(left) = v1::diffs::empty_bodies(&original, pointer) else {
                return Ok(Err(refuse(
                    BlockedReason::UnsupportedStorage,
                    "the archived row is not one the diffs prune could have rewritten",
                )));
            };
            let id = String::from_utf8_lossy(id);
            let changed = conn.execute(
                sql,
                params![
                    original.as_ref(),
                    id.as_ref(),
                    pruned.session_id,
                    left.after
                ],
            )?;
            if changed != 1 {
                return Ok(Err(refuse(
                    BlockedReason::Conflict,
                    format!(
                        "{} row {id} changed since the diffs prune (OpenCode wrote to it): putting \
                         it back would undo that",
                        table.table
                    ),
                )));
            }
        }
    }
    Ok(Ok(()))
}

/// Puts a V1 prune's rows back: its part rows and snapshot events inserted as they were, and the
/// `message.part.removed.1` events it appended deleted.
fn put_back_v1(
    conn: &Connection,
    schema: &Schema,
    pruned: &Receipt,
    rows: &ArchivedRows,
) -> rusqlite::Result<Result<(), Refusal>> {
    for table in &rows.tables {
        let allowed = match table.table.as_str() {
            "part" => true,
            "event" => schema.has_events(),
            _ => false,
        };
        if !allowed {
            return Ok(Err(refuse(
                BlockedReason::UnsupportedStorage,
                format!(
                    "the archive entry holds rows of table {:?}, not of a V1 prune",
                    table.table
                ),
            )));
        }
        if let Err(refusal) = insert_rows(conn, table)? {
            return Ok(Err(refusal));
        }
    }
    if schema.has_events() {
        let data = row_budget::data("", "event");
        let mut delete = conn.prepare_cached(&format!(
            "DELETE FROM event WHERE aggregate_id = ?1 AND type = ?2 \
             AND json_valid({data}) AND json_extract({data}, '$.messageID') = ?3 \
             AND json_extract({data}, '$.partID') = ?4"
        ))?;
        for part_id in &pruned.part_ids {
            delete.execute(params![
                pruned.session_id,
                PART_REMOVED,
                pruned.message_id,
                part_id
            ])?;
        }
    }
    Ok(Ok(()))
}

/// Puts a V2 prune's row back: `data` as it was, where the row still holds exactly what the
/// prune left.
fn put_back_v2(
    conn: &Connection,
    pruned: &Receipt,
    rows: &ArchivedRows,
) -> rusqlite::Result<Result<(), Refusal>> {
    let Some(original) = one_row_data(rows) else {
        return Ok(Err(refuse(
            BlockedReason::UnsupportedStorage,
            "the archive entry does not hold one V2 message row with its data",
        )));
    };
    // The row must hold exactly what the prune left (compare-and-swap): the revision covers
    // only `content`, and OpenCode may have written elsewhere in the row since (its cost, say),
    // which putting the old text back would undo. What the prune left is the prune's own write
    // (`v2::apply`) done again on the archived text.
    let Some(left) = left_by_prune(conn, original, &pruned.indexes)? else {
        return Ok(Err(refuse(
            BlockedReason::UnsupportedStorage,
            "the archived V2 message row has no content array the prune could have read",
        )));
    };
    let changed = conn.execute(
        "UPDATE session_message SET data = ?1 WHERE session_id = ?2 AND id = ?3 AND data = ?4",
        params![
            ToSqlOutput::Borrowed(ValueRef::Text(original)),
            pruned.session_id,
            pruned.message_id,
            left
        ],
    )?;
    if changed != 1 {
        return Ok(Err(refuse(
            BlockedReason::Conflict,
            "the message row changed since the prune outside its content (OpenCode wrote to it): \
             putting the row back would undo that",
        )));
    }
    Ok(Ok(()))
}

/// The `data` text a V2 prune of the items at `indexes` wrote over `original`: its `content`
/// without them, set as `v2::apply` sets it. `None` when `original` has no content array.
fn left_by_prune(
    conn: &Connection,
    original: &[u8],
    indexes: &[u32],
) -> rusqlite::Result<Option<String>> {
    let Ok(data) = serde_json::from_slice::<serde_json::Value>(original) else {
        return Ok(None);
    };
    let Some(content) = data.get("content").and_then(serde_json::Value::as_array) else {
        return Ok(None);
    };
    let kept: Vec<serde_json::Value> = content
        .iter()
        .enumerate()
        .filter(|(i, _)| !indexes.iter().any(|&removed| removed as usize == *i))
        .map(|(_, item)| item.clone())
        .collect();
    let kept = pruning_engine::revision::stringify(&serde_json::Value::Array(kept));
    conn.query_row(
        "SELECT json_set(?1, '$.content', json(?2))",
        params![ToSqlOutput::Borrowed(ValueRef::Text(original)), kept],
        |row| row.get(0),
    )
    .map(Some)
}

/// Inserts `table`'s rows as they were: every column, every value with its exact bytes. A row
/// that is there again (its id taken) is a `conflict`.
fn insert_rows(conn: &Connection, table: &TableRows) -> rusqlite::Result<Result<(), Refusal>> {
    let quoted = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    let columns: Vec<String> = table.columns.iter().map(|c| quoted(c)).collect();
    let placeholders: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        quoted(&table.table),
        columns.join(", "),
        placeholders.join(", ")
    );
    let mut insert = conn.prepare_cached(&sql)?;
    for row in &table.rows {
        let values = row.iter().map(|value| match value {
            SqlValue::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            SqlValue::Integer(n) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            SqlValue::Real(bits) => ToSqlOutput::Borrowed(ValueRef::Real(f64::from_bits(*bits))),
            SqlValue::Text(bytes) => ToSqlOutput::Borrowed(ValueRef::Text(bytes)),
            SqlValue::Blob(bytes) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
        });
        match insert.execute(rusqlite::params_from_iter(values)) {
            Ok(_) => {}
            Err(error) if error.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                return Ok(Err(refuse(
                    BlockedReason::Conflict,
                    format!(
                        "a row the prune removed from table {} is there again (its id, or another \
                         unique value of it, is taken): OpenCode wrote it since",
                        table.table
                    ),
                )))
            }
            Err(error) => return Err(error),
        }
    }
    Ok(Ok(()))
}

/// Bytes of the `data` columns of `rows`.
fn data_bytes(rows: &ArchivedRows) -> u64 {
    rows.tables
        .iter()
        .map(
            |table| match table.columns.iter().position(|c| c == "data") {
                Some(at) => table
                    .rows
                    .iter()
                    .map(|row| match &row[at] {
                        SqlValue::Text(bytes) | SqlValue::Blob(bytes) => bytes.len() as u64,
                        _ => 0,
                    })
                    .sum(),
                None => 0,
            },
        )
        .sum()
}

fn refuse(reason: BlockedReason, detail: impl Into<String>) -> Refusal {
    Refusal::new(reason, detail)
}
