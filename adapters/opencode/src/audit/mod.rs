//! The store's side of the audit, read-only: the receipt chain walked and every link hashed
//! again (the chain is the receipts': `crate::receipts::chain`), then each receipt checked against the database: no part
//! it removed is back (in `part`, in a `message.part.updated.1` snapshot, in a V2 message's
//! content), and each pruned message still has its newest receipt's revision, or is reported as
//! changed since (written, deleted, unreadable).
//!
//! Source: docs/ARCHITECTURE.md, "Audit".

use std::collections::{HashMap, HashSet};

use pruning_engine::{
    AuditScope, BlockedReason, ChangeKind, Discrepancy, DiscrepancyKind, MessageChange, Operation,
    Receipt, StoreAudit, StoredMessage,
};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use pruning_archive::ArchiveReader;

use super::archive::entry_key;
use super::receipts;
use super::row_budget;
use super::schema::Schema;
use super::v1::compact::{self as v1_compact, SnapshotKind};
use super::v1::events::PART_UPDATED;
use super::v1::read::{self as v1_read, Texts};
use super::{v1, v2};
use crate::receipts::chain::{self as receipt_chain, Recorded};

/// One receipt row as the audit reads it: its place in the chain, the receipt (or why it cannot
/// be read as one), and its chain link's payload.
struct Row {
    /// `rowid`: insertion order.
    rowid: i64,
    /// `chain_seq`, NULL for a row outside the chain.
    chain_seq: Option<i64>,
    /// `chain_hash` as stored.
    chain_hash: Option<String>,
    /// `id` as stored.
    id: String,
    /// `session_id` as stored, when it is text (what scopes the row, even unreadable).
    session_id: Option<String>,
    /// `storage` (`v1`, `v2`).
    storage: String,
    /// The receipt, or why the row is not one.
    receipt: Result<Receipt, String>,
    /// [`receipt_chain::link_payload`] of the row.
    payload: String,
}

/// Audits the receipts in `scope` on `conn`, inside one read transaction the caller holds, with
/// the archive entries of archived receipts read from `archive` (`Ok(None)`: no archive file;
/// `Err`: why the file cannot be read as an archive).
pub(crate) fn audit(
    conn: &Connection,
    schema: &Schema,
    scope: AuditScope<'_>,
    archive: Result<&Option<ArchiveReader>, &String>,
) -> rusqlite::Result<StoreAudit> {
    let mut found = StoreAudit::default();
    // Without the receipt table there is no receipt, but a recorded head still says how many
    // there were.
    let mut rows = if receipts::table_exists(conn, receipts::RECEIPT_TABLE)? {
        read_rows(conn)?
    } else {
        Vec::new()
    };
    let head = if receipts::table_exists(conn, receipts::META_TABLE)? {
        receipt_chain::recorded(conn)?
    } else {
        Recorded::Absent
    };
    check_chain(&rows, head, &mut found);
    withhold_outside(&rows, scope, &mut found.discrepancies);
    // From here on, in the order the receipts were written: the chain's order where the rows
    // have places (their rowids may have been renumbered or reordered), insertion order for
    // rows without one.
    rows.sort_by_key(|row| (row.chain_seq.is_none(), row.chain_seq, row.rowid));
    for (place, row) in (1u64..).zip(&rows) {
        if let Ok(receipt) = &row.receipt {
            found.all_receipt_ids.insert(receipt.receipt_id);
            found.places.insert(receipt.receipt_id, place);
        }
    }
    let in_scope: Vec<&Row> = rows
        .iter()
        .filter(|row| match &row.receipt {
            Ok(receipt) => scope.admits(&receipt.session_id),
            // A row that is not a receipt names no session it can be scoped by.
            Err(_) => matches!(scope, AuditScope::All),
        })
        .collect();
    for row in &in_scope {
        if let Err(why) = &row.receipt {
            found.discrepancies.push(
                Discrepancy::new(
                    DiscrepancyKind::ReceiptUnreadable,
                    format!("receipt row {} cannot be read as a receipt: {why}", row.id),
                )
                .receipt(&row.id),
            );
        }
    }
    let checked: Vec<(&Row, &Receipt)> = in_scope
        .iter()
        .filter_map(|row| row.receipt.as_ref().ok().map(|receipt| (*row, receipt)))
        .collect();
    // A restore's receipt removed nothing, and a restored prune's parts are back by design.
    let restored: HashSet<uuid::Uuid> = checked.iter().filter_map(|(_, r)| r.restores).collect();
    let pruned: Vec<(&Row, &Receipt)> = checked
        .iter()
        .filter(|(_, r)| !r.is_restore() && !restored.contains(&r.receipt_id))
        .copied()
        .collect();
    check_removed_parts(conn, schema, &pruned, &mut found)?;
    // The removals of migrated 1.x rows and the emptied shell outputs are checked on their own,
    // by what each bound itself to: the former share a message id with the prunes of its
    // OpenCode 2 copy, the latter name rows that are not messages.
    let (rows, others): (Vec<Checked>, Vec<Checked>) = checked
        .iter()
        .partition(|(_, receipt)| RowsKind::of(receipt).is_some());
    let pruned_others: Vec<Checked> = pruned
        .iter()
        .filter(|(_, receipt)| RowsKind::of(receipt).is_none())
        .copied()
        .collect();
    check_messages(conn, &others, &pruned_others, &mut found)?;
    check_rows(conn, &rows, &restored, &mut found)?;
    // A restored prune's rows are back in the database: its entry is not needed any more.
    check_archive(archive, &pruned, &mut found);
    let mut receipts: Vec<Receipt> = checked.iter().map(|(_, r)| (*r).clone()).collect();
    receipts.sort_by_key(|r| (r.committed_at_ms, r.receipt_id));
    found.receipts = receipts;
    Ok(found)
}

/// Every receipt row, in insertion order.
fn read_rows(conn: &Connection) -> rusqlite::Result<Vec<Row>> {
    let chain = if receipt_chain::has_chain_columns(conn)? {
        "chain_seq, chain_hash"
    } else {
        "NULL, NULL"
    };
    let sql = format!(
        "SELECT rowid, {chain}, {}, storage FROM session_prune_receipt ORDER BY rowid",
        receipts::select_list(conn)?
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([], |row| {
        // The linked columns in their chain order: storage goes after message_id.
        let selected = (3..3 + receipts::SELECTED_COLUMNS.len())
            .map(|i| row.get_ref(i))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let storage = row.get_ref(3 + receipts::SELECTED_COLUMNS.len())?;
        let mut linked = selected[..5].to_vec();
        linked.push(storage);
        linked.extend_from_slice(&selected[5..]);
        Ok(Row {
            rowid: row.get(0)?,
            chain_seq: row.get::<_, Option<i64>>(1).unwrap_or(None),
            chain_hash: row.get::<_, Option<String>>(2).unwrap_or(None),
            id: text_of(row.get_ref(3)?),
            session_id: match row.get_ref(6)? {
                ValueRef::Text(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                _ => None,
            },
            storage: text_of(storage),
            receipt: receipts::receipt_at(row, 3).map_err(|error| unreadable(&error, 3)),
            payload: receipt_chain::link_payload(&linked),
        })
    })?;
    rows.collect()
}

/// Why a receipt row selected with [`receipts::select_list`] from column `first` on cannot be
/// read, in words that name the column at fault.
fn unreadable(error: &rusqlite::Error, first: usize) -> String {
    let name = |index: usize| {
        index
            .checked_sub(first)
            .and_then(|i| receipts::SELECTED_COLUMNS.get(i))
            .copied()
            .unwrap_or("?")
    };
    match error {
        rusqlite::Error::InvalidColumnType(_, column, found) => {
            format!(
                "column {column} holds {}, not the type a receipt stores there",
                type_name(*found)
            )
        }
        rusqlite::Error::FromSqlConversionFailure(index, _, cause) => {
            format!(
                "column {} does not hold what a receipt stores there: {cause}",
                name(*index)
            )
        }
        rusqlite::Error::IntegralValueOutOfRange(index, value) => {
            format!(
                "column {} holds {value}, out of range for a receipt",
                name(*index)
            )
        }
        other => other.to_string(),
    }
}

/// SQLite's name of a storage class, as `typeof()` says it.
fn type_name(found: rusqlite::types::Type) -> &'static str {
    match found {
        rusqlite::types::Type::Null => "NULL",
        rusqlite::types::Type::Integer => "an integer",
        rusqlite::types::Type::Real => "a real",
        rusqlite::types::Type::Text => "text",
        rusqlite::types::Type::Blob => "a blob",
    }
}

/// A column value as text for the report.
fn text_of(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Text(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => x.to_string(),
        ValueRef::Null => "NULL".to_string(),
        ValueRef::Blob(bytes) => hex::encode(bytes),
    }
}

/// What a place's link is checked against: the row before it.
enum Before {
    /// Nothing: place 1.
    Start,
    /// Not known: the places before are missing.
    Unknown,
    /// The hash the previous place's row stores, and the hash it should have had (its link
    /// computed again; the same unless that row's hash was edited).
    Known { stored: String, computed: String },
}

/// Walks the chain by `chain_seq` from 1, hashing every link again, and compares its end with
/// the head the meta table records.
///
/// A place is held by the row that hashes to it: another row claiming the same place is
/// reported, not the one it copies. A link is checked against the stored hash of the row
/// before it, or the hash that row should have had: an edited hash is reported on its own row,
/// and the row after it still holds.
fn check_chain(rows: &[Row], head: Recorded, found: &mut StoreAudit) {
    let mut chained: Vec<&Row> = rows.iter().filter(|row| row.chain_seq.is_some()).collect();
    chained.sort_by_key(|row| (row.chain_seq, row.rowid));
    let chain_exists = !chained.is_empty() || !matches!(head, Recorded::Absent);
    if chain_exists {
        for row in rows.iter().filter(|row| row.chain_seq.is_none()) {
            found.discrepancies.push(
                Discrepancy::new(
                    DiscrepancyKind::ReceiptUnchained,
                    format!(
                        "receipt {} has no place in the receipt chain: it was inserted, or its chain columns cleared, behind the engine's back",
                        row.id
                    ),
                )
                .receipt(&row.id),
            );
        }
    }
    let edited = |row: &Row, detail: String| {
        Discrepancy::new(DiscrepancyKind::ReceiptEdited, detail).receipt(&row.id)
    };
    let mut expected = 1i64;
    let mut before = Before::Start;
    // The place, stored hash and link computed again of the newest place's row.
    let mut last: Option<(i64, String, String)> = None;
    for group in chained.chunk_by(|a, b| a.chain_seq == b.chain_seq) {
        let seq = group[0].chain_seq.unwrap_or_default();
        if seq < expected {
            // Places start at 1 and each later one is above the last: only a place below 1.
            for row in group {
                found.discrepancies.push(edited(
                    row,
                    format!(
                        "receipt {} claims place {seq} in the receipt chain, which has no such place: its row was edited",
                        row.id
                    ),
                ));
            }
            continue;
        }
        if seq > expected {
            let detail = if seq - 1 == expected {
                format!("receipt chain place {expected} is missing: a receipt was deleted, or its chain place edited")
            } else {
                format!(
                    "receipt chain places {expected} to {} are missing: receipts were deleted, or their chain places edited",
                    seq - 1
                )
            };
            found
                .discrepancies
                .push(Discrepancy::new(DiscrepancyKind::ReceiptMissing, detail));
            before = Before::Unknown;
        }
        // (row, its link holds, the link computed from the stored hash before it)
        let links: Vec<(&Row, bool, String)> = group
            .iter()
            .map(|row| {
                let stored = row.chain_hash.as_deref().unwrap_or_default();
                let (holds, computed) = match &before {
                    Before::Start => {
                        let computed = receipt_chain::link_hash(None, &row.payload);
                        (computed == stored, computed)
                    }
                    Before::Unknown => (true, stored.to_string()),
                    Before::Known {
                        stored: previous,
                        computed: should,
                    } => {
                        let computed = receipt_chain::link_hash(Some(previous), &row.payload);
                        let holds = computed == stored
                            || receipt_chain::link_hash(Some(should), &row.payload) == stored;
                        (holds, computed)
                    }
                };
                (*row, holds, computed)
            })
            .collect();
        let holder = links
            .iter()
            .find(|(_, holds, _)| *holds)
            .unwrap_or(&links[0]);
        let (row, holds, computed) = holder;
        if !holds {
            found.discrepancies.push(edited(
                row,
                format!(
                    "receipt {} (place {seq} in the receipt chain) does not match its chain hash: its row, or the receipt before it, was edited or replaced",
                    row.id
                ),
            ));
        }
        for (other, _, _) in &links {
            if other.rowid != row.rowid {
                found.discrepancies.push(edited(
                    other,
                    format!(
                        "receipt {} claims place {seq} in the receipt chain, which receipt {} holds: it is a copy, or its row was edited",
                        other.id, row.id
                    ),
                ));
            }
        }
        let stored = row.chain_hash.clone().unwrap_or_default();
        let should = if *holds {
            stored.clone()
        } else {
            computed.clone()
        };
        before = Before::Known {
            stored: stored.clone(),
            computed: should.clone(),
        };
        last = Some((seq, stored, should));
        // A place edited to the largest number has no next one: saturate, never overflow.
        expected = seq.saturating_add(1);
    }
    let missing = |detail: String| Discrepancy::new(DiscrepancyKind::ReceiptMissing, detail);
    match (&head, &last) {
        (Recorded::Absent, Some((seq, _, _))) => found.discrepancies.push(missing(format!(
            "the receipt chain's head is gone from session_prune_meta ({} key), though {seq} receipt(s) are chained",
            receipt_chain::HEAD_KEY
        ))),
        (Recorded::Unreadable(why), _) => found.discrepancies.push(Discrepancy::new(
            DiscrepancyKind::ReceiptEdited,
            format!(
                "the receipt chain's head in session_prune_meta ({} key) cannot be read: {why}",
                receipt_chain::HEAD_KEY
            ),
        )),
        (Recorded::Head(head), None) => found.discrepancies.push(missing(format!(
            "the receipt chain's head names {} receipt(s), and no receipt is chained: receipts were deleted",
            head.seq
        ))),
        (Recorded::Head(head), Some((seq, _, _))) if head.seq > *seq => {
            found.discrepancies.push(missing(format!(
                "the receipt chain's head names {} receipt(s), and the chain ends at {seq}: the newest receipt(s) were deleted",
                head.seq
            )))
        }
        (Recorded::Head(head), Some((seq, stored, should)))
            if head.seq < *seq || (head.hash != *stored && head.hash != *should) =>
        {
            found.discrepancies.push(Discrepancy::new(
                DiscrepancyKind::ReceiptEdited,
                format!(
                    "the receipt chain ends at place {seq} with hash {stored}, and the head session_prune_meta records is place {} with hash {}: the chain or its head was edited",
                    head.seq, head.hash
                ),
            ))
        }
        _ => {}
    }
    found.chain_length = chained.len() as u64;
    found.chain_head = last.map(|(_, stored, _)| stored);
}

/// No part a V1 receipt removed is in `part` or in a `message.part.updated.1` snapshot again, no
/// snapshot a compaction deleted is in `event` again, and no item a V2 receipt removed is in its
/// message's content again (that is checked with the message, in [`check_messages`]).
fn check_removed_parts(
    conn: &Connection,
    schema: &Schema,
    checked: &[(&Row, &Receipt)],
    found: &mut StoreAudit,
) -> rusqlite::Result<()> {
    check_compacted(conn, schema, checked, found)?;
    let mut removed: HashMap<&str, &Receipt> = HashMap::new();
    for (row, receipt) in checked {
        if row.storage == v1::apply::STORAGE {
            for part_id in &receipt.part_ids {
                removed.insert(part_id.as_str(), receipt);
            }
        }
    }
    if removed.is_empty() {
        return Ok(());
    }
    if schema.has_v1() {
        // A receipt removes only tool and reasoning parts: another kind of row under the same
        // id (a table without its primary key can hold two) is not the part it removed.
        let data = row_budget::data("", "part");
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT message_id FROM part WHERE id = ?1 AND CASE WHEN json_valid({data}) \
             THEN json_extract({data}, '$.type') IN ('tool', 'reasoning') ELSE 1 END"
        ))?;
        let mut ids: Vec<&&str> = removed.keys().collect();
        ids.sort();
        for part_id in ids {
            let mut rows = stmt.query([*part_id])?;
            if let Some(found_row) = rows.next()? {
                let message: String = found_row.get::<_, Option<String>>(0)?.unwrap_or_default();
                let receipt = removed[*part_id];
                found.discrepancies.push(
                    Discrepancy::new(
                        DiscrepancyKind::PartBack,
                        format!(
                            "part {part_id}, which receipt {} removed, is back in table part (message {message})",
                            receipt.receipt_id
                        ),
                    )
                    .receipt(receipt.receipt_id)
                    .part(*part_id),
                );
            }
        }
    }
    if schema.has_events() {
        let mut stmt = conn.prepare(&format!(
            "SELECT id, {} FROM event WHERE type = ?1 ORDER BY id",
            row_budget::data("", "event")
        ))?;
        let mut rows = stmt.query([PART_UPDATED])?;
        while let Some(row) = rows.next()? {
            let Some(part_id) =
                v1_compact::named(conn, SnapshotKind::Part, row.get_ref(1)?)?.entity
            else {
                continue;
            };
            if let Some(receipt) = removed.get(part_id.as_str()) {
                let event_id = text_of(row.get_ref(0)?);
                found.discrepancies.push(
                    Discrepancy::new(
                        DiscrepancyKind::SnapshotBack,
                        format!(
                            "snapshot event {event_id} of part {part_id}, which receipt {} removed, is back in table event",
                            receipt.receipt_id
                        ),
                    )
                    .receipt(receipt.receipt_id)
                    .part(part_id),
                );
            }
        }
    }
    Ok(())
}

/// No snapshot event a compaction still standing deleted is in `event` again (looked up by id).
fn check_compacted(
    conn: &Connection,
    schema: &Schema,
    checked: &[(&Row, &Receipt)],
    found: &mut StoreAudit,
) -> rusqlite::Result<()> {
    if !schema.has_events() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached("SELECT count(*) FROM event WHERE id = ?1")?;
    for (_, receipt) in checked {
        let Some(Operation::Compaction(compacted)) = &receipt.operation else {
            continue;
        };
        for event_id in &compacted.event_ids {
            let back: i64 = stmt.query_row([event_id], |row| row.get(0))?;
            if back > 0 {
                found.discrepancies.push(
                    Discrepancy::new(
                        DiscrepancyKind::SnapshotBack,
                        format!(
                            "snapshot event {event_id}, which compaction receipt {} deleted, is \
                             back in table event",
                            receipt.receipt_id
                        ),
                    )
                    .receipt(receipt.receipt_id),
                );
            }
        }
    }
    Ok(())
}

/// A receipt row read and the receipt it holds.
type Checked<'a> = (&'a Row, &'a Receipt);

/// The receipts checked by [`check_rows`]: a removal of a message's migrated 1.x rows, or the
/// emptying of a `shell` row's output (or the restore of either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowsKind {
    MigratedV1,
    ShellOutput,
}

impl RowsKind {
    fn of(receipt: &Receipt) -> Option<Self> {
        match receipt.operation {
            Some(Operation::MigratedV1(_)) => Some(Self::MigratedV1),
            Some(Operation::ShellOutput(_)) => Some(Self::ShellOutput),
            _ => None,
        }
    }

    /// The revision such a receipt is bound to, read now (`None`: the row cannot be read as
    /// one now).
    fn revision_now(
        self,
        conn: &Connection,
        session_id: &str,
        message_id: &str,
    ) -> rusqlite::Result<Option<String>> {
        use crate::migrated::remove::{self, Unread};
        Ok(match self {
            Self::MigratedV1 => match remove::revision_of(conn, session_id, message_id)? {
                Ok(revision) => Some(revision),
                Err(Unread::Missing) => Some(remove::removed_revision()),
                Err(_) => None,
            },
            Self::ShellOutput => v2::shell::revision_of(conn, session_id, message_id)?,
        })
    }

    /// What such a receipt removed, in words.
    fn what(self, message_id: &str) -> String {
        match self {
            Self::MigratedV1 => format!("the OpenCode 1.x rows of message {message_id}"),
            Self::ShellOutput => format!("the output of shell row {message_id}"),
        }
    }
}

/// Each message (or row) whose rows a receipt of [`RowsKind`] changed, against its newest such
/// receipt (a prune's or a restore's): its revision now is the one that receipt left; what a
/// prune still standing removed, back as it was, is a discrepancy; anything else is a change.
fn check_rows(
    conn: &Connection,
    receipts: &[Checked],
    restored: &HashSet<uuid::Uuid>,
    found: &mut StoreAudit,
) -> rusqlite::Result<()> {
    let mut newest: HashMap<(&str, &str, bool), &Receipt> = HashMap::new();
    let mut order = Vec::new();
    for (_, receipt) in receipts {
        let migrated = RowsKind::of(receipt) == Some(RowsKind::MigratedV1);
        let key = (
            receipt.session_id.as_str(),
            receipt.message_id.as_str(),
            migrated,
        );
        if newest.insert(key, receipt).is_none() {
            order.push(key);
        }
    }
    found.messages += order.len() as u64;
    for key in order {
        let receipt = newest[&key];
        let (session_id, message_id, _) = key;
        let Some(kind) = RowsKind::of(receipt) else {
            continue;
        };
        let change = |change: ChangeKind, detail: String| MessageChange {
            change,
            receipt_id: receipt.receipt_id,
            session_id: session_id.to_string(),
            message_id: message_id.to_string(),
            detail,
        };
        let Some(now) = kind.revision_now(conn, session_id, message_id)? else {
            found.changes.push(change(
                ChangeKind::Unreadable,
                format!(
                    "{} cannot be read as it was pruned now",
                    kind.what(message_id)
                ),
            ));
            continue;
        };
        if now == receipt.revision_after {
            continue;
        }
        let standing = !receipt.is_restore() && !restored.contains(&receipt.receipt_id);
        if standing && now == receipt.revision_before {
            found.discrepancies.push(
                Discrepancy::new(
                    DiscrepancyKind::ContentBack,
                    format!(
                        "{}, which receipt {} removed, are back",
                        kind.what(message_id),
                        receipt.receipt_id
                    ),
                )
                .receipt(receipt.receipt_id),
            );
            continue;
        }
        found.changes.push(change(
            ChangeKind::Written,
            format!(
                "{} were written since receipt {}",
                kind.what(message_id),
                receipt.receipt_id
            ),
        ));
    }
    Ok(())
}

/// A diffs-pruned message against its newest receipt: its diffs revision now is the revision
/// after that receipt; the revision before a prune still standing is a discrepancy (the bodies
/// are back), as is a body back in the snapshot the prune rewrote; anything else is a change.
fn check_diffs(
    conn: &Connection,
    receipt: &Receipt,
    standing: Option<&Receipt>,
    found: &mut StoreAudit,
) -> rusqlite::Result<Option<MessageChange>> {
    let (session_id, message_id) = (receipt.session_id.as_str(), receipt.message_id.as_str());
    let change = |change: ChangeKind, detail: String| MessageChange {
        change,
        receipt_id: receipt.receipt_id,
        session_id: session_id.to_string(),
        message_id: message_id.to_string(),
        detail,
    };
    if let Some(Receipt {
        operation: Some(Operation::Diffs(diffs)),
        ..
    }) = standing
    {
        if let Some(id) = &diffs.snapshot_id {
            let data: Option<String> = conn
                .query_row(
                    "SELECT CASE typeof(data) WHEN 'text' THEN data END FROM event WHERE id = ?1",
                    [id],
                    |row| row.get(0),
                )
                .optional()?
                .flatten();
            let back = data
                .and_then(|data| v1::diffs::empty_bodies(&data, "/info/summary/diffs").ok())
                .is_some_and(|emptied| emptied.entries > 0);
            if back {
                found.discrepancies.push(
                    Discrepancy::new(
                        DiscrepancyKind::SnapshotBack,
                        format!(
                            "snapshot event {id} of message {message_id} holds file bodies in its \
                             summary diffs again, which receipt {} emptied",
                            receipt.receipt_id
                        ),
                    )
                    .receipt(receipt.receipt_id),
                );
            }
        }
    }
    let Some(revision) = v1::diffs::revision_of(conn, session_id, message_id)? else {
        let gone = !v1_read::has_message(conn, session_id, message_id)?;
        return Ok(Some(if gone {
            change(
                ChangeKind::Deleted,
                format!(
                    "message {message_id} is gone: it was deleted since receipt {}",
                    receipt.receipt_id
                ),
            )
        } else {
            change(
                ChangeKind::Unreadable,
                format!("message {message_id} is no longer a JSON object"),
            )
        }));
    };
    if revision == receipt.revision_after {
        return Ok(None);
    }
    if standing.is_some_and(|pruned| revision == pruned.revision_before) {
        found.discrepancies.push(
            Discrepancy::new(
                DiscrepancyKind::ContentBack,
                format!(
                    "the file bodies receipt {} emptied from message {message_id}'s summary diffs \
                     are back in its row",
                    receipt.receipt_id
                ),
            )
            .receipt(receipt.receipt_id),
        );
        return Ok(None);
    }
    Ok(Some(change(
        ChangeKind::Written,
        format!(
            "message {message_id}'s summary diffs were written since receipt {}: their revision \
             is {revision}, not {}",
            receipt.receipt_id, receipt.revision_after
        ),
    )))
}

/// Each pruned message against its newest receipt (a prune's or a restore's): the revision after
/// that receipt, or a change reported; for V2, no item a prune still standing (`pruned`: not
/// restored) removed back in the content. A compaction names no message and is not among them;
/// a message whose prunes emptied its diffs is checked by its diffs revision ([`check_diffs`]).
fn check_messages(
    conn: &Connection,
    checked: &[(&Row, &Receipt)],
    pruned: &[(&Row, &Receipt)],
    found: &mut StoreAudit,
) -> rusqlite::Result<()> {
    // The newest receipt of each message (rows come in the order they were written), and every
    // part id removed from it.
    let mut newest: HashMap<(&str, &str), (&Row, &Receipt)> = HashMap::new();
    let mut removed: HashMap<(&str, &str), HashSet<&str>> = HashMap::new();
    let mut order: Vec<(&str, &str)> = Vec::new();
    // Messages whose receipts emptied diffs, with the newest such prune still standing.
    let mut diffs: HashMap<(&str, &str), Option<&Receipt>> = HashMap::new();
    for (row, receipt) in checked {
        if receipt.message_id.is_empty() {
            // A compaction's, or its restore's: no message.
            continue;
        }
        let key = (receipt.session_id.as_str(), receipt.message_id.as_str());
        if newest.insert(key, (row, receipt)).is_none() {
            order.push(key);
        }
        removed.entry(key).or_default();
        if matches!(receipt.operation, Some(Operation::Diffs(_))) {
            diffs.entry(key).or_default();
        }
    }
    for (_, receipt) in pruned {
        if matches!(receipt.operation, Some(Operation::Diffs(_))) {
            let key = (receipt.session_id.as_str(), receipt.message_id.as_str());
            diffs.insert(key, Some(receipt));
        }
    }
    for (_, receipt) in pruned {
        let key = (receipt.session_id.as_str(), receipt.message_id.as_str());
        removed
            .entry(key)
            .or_default()
            .extend(receipt.part_ids.iter().map(String::as_str));
    }
    found.messages = order.len() as u64;
    for key in order {
        let (row, receipt) = newest[&key];
        let (session_id, message_id) = key;
        if let Some(standing) = diffs.get(&key) {
            // The newest prune of the diffs still standing is the newest receipt's own, unless
            // a restore came after it.
            let standing = standing.filter(|pruned| pruned.receipt_id == receipt.receipt_id);
            if let Some(change) = check_diffs(conn, receipt, standing, found)? {
                found.changes.push(change);
            }
            continue;
        }
        let loaded = if row.storage == v2::apply::STORAGE {
            v2::load(conn, session_id, message_id)?.map(|(message, _)| message)
        } else {
            v1_read::read_message(conn, session_id, message_id, Texts::Skip)?
                .map(|loaded| loaded.message)
        };
        let change = |change: ChangeKind, detail: String| MessageChange {
            change,
            receipt_id: receipt.receipt_id,
            session_id: session_id.to_string(),
            message_id: message_id.to_string(),
            detail,
        };
        let message: StoredMessage = match loaded {
            Ok(message) => message,
            Err(refusal)
                if refusal.reason == BlockedReason::NotDeletable && is_missing(conn, row, key)? =>
            {
                found.changes.push(change(
                    ChangeKind::Deleted,
                    format!(
                        "message {message_id} is gone: it was deleted since receipt {}",
                        receipt.receipt_id
                    ),
                ));
                continue;
            }
            Err(refusal) => {
                found.changes.push(change(
                    ChangeKind::Unreadable,
                    format!(
                        "message {message_id} cannot be read as prunable content now: {}",
                        refusal.detail
                    ),
                ));
                continue;
            }
        };
        let revision = message.revision();
        if revision == receipt.revision_after {
            // The content is what the newest prune left: nothing it removed can be back (an item
            // it kept may share an id with one a prune removed).
            continue;
        }
        if row.storage == v2::apply::STORAGE {
            let gone = &removed[&key];
            for part in &message.parts {
                let Some(id) = part.value.get("id").and_then(Value::as_str) else {
                    continue;
                };
                if gone.contains(id) {
                    found.discrepancies.push(
                        Discrepancy::new(
                            DiscrepancyKind::ContentBack,
                            format!(
                                "item {id}, which a receipt removed from message {message_id}, is back in its content"
                            ),
                        )
                        .receipt(receipt.receipt_id)
                        .part(id),
                    );
                }
            }
        }
        found.changes.push(change(
            ChangeKind::Written,
            format!(
                "message {message_id} was written since receipt {}: its revision is {revision}, not {}",
                receipt.receipt_id, receipt.revision_after
            ),
        ));
    }
    Ok(())
}

/// Every archived receipt of a standing prune (`checked`: restores and restored prunes left out)
/// has its entry in the archive, reading back to its entry hash, or was purged on purpose
/// (counted, not a discrepancy).
fn check_archive(
    archive: Result<&Option<ArchiveReader>, &String>,
    checked: &[(&Row, &Receipt)],
    found: &mut StoreAudit,
) {
    // A restore's receipt names the entry of the prune it undid: that prune's receipt checks it.
    for (_, receipt) in checked.iter().filter(|(_, r)| !r.is_restore()) {
        let Some(hash) = receipt.archive_hash.as_deref() else {
            continue;
        };
        let id = receipt.receipt_id;
        let missing =
            |detail: String| Discrepancy::new(DiscrepancyKind::ArchiveMissing, detail).receipt(id);
        let Some(key) = entry_key(&id.to_string(), hash) else {
            found.discrepancies.push(
                Discrepancy::new(
                    DiscrepancyKind::ReceiptUnreadable,
                    format!("receipt {id} records an archive hash that is not one: {hash}"),
                )
                .receipt(id),
            );
            continue;
        };
        let archive = match archive {
            Ok(Some(archive)) => archive,
            Ok(None) => {
                found.discrepancies.push(missing(format!(
                    "receipt {id} was archived, and there is no archive beside the database"
                )));
                continue;
            }
            Err(why) => {
                found.discrepancies.push(
                    Discrepancy::new(
                        DiscrepancyKind::ArchiveDamaged,
                        format!("receipt {id} was archived, and the archive cannot be read: {why}"),
                    )
                    .receipt(id),
                );
                continue;
            }
        };
        if archive.index().purged_entry(&key).is_some() {
            found.archive_purged += 1;
            continue;
        }
        match archive.read(&key) {
            Ok(_) => found.archive_checked += 1,
            Err(pruning_archive::ArchiveError::NoEntry { .. }) => {
                match archive.index().unreadable() {
                    // The entry may be in the part of the file that does not read.
                    Some((offset, kind)) => found.discrepancies.push(
                        Discrepancy::new(
                            DiscrepancyKind::ArchiveDamaged,
                            format!(
                                "the archive entry of receipt {id} is not among the frames that \
                                 read: the archive does not read past byte {offset} ({kind:?})"
                            ),
                        )
                        .receipt(id),
                    ),
                    None => found.discrepancies.push(missing(format!(
                        "receipt {id} was archived, and its entry (hash {hash}) is not in the archive"
                    ))),
                }
            }
            Err(error) => found.discrepancies.push(
                Discrepancy::new(
                    DiscrepancyKind::ArchiveDamaged,
                    format!("the archive entry of receipt {id} does not read back: {error}"),
                )
                .receipt(id),
            ),
        }
    }
}

/// Whether the message of `key` has no row in its receipt's storage generation.
fn is_missing(conn: &Connection, row: &Row, key: (&str, &str)) -> rusqlite::Result<bool> {
    let (session_id, message_id) = key;
    Ok(if row.storage == v2::apply::STORAGE {
        !v2::has_message(conn, Some(session_id), message_id)?
    } else {
        !v1_read::has_message(conn, session_id, message_id)?
    })
}

/// A scoped audit (one session, a server's workspace) still walks the whole chain, but does not
/// name a receipt outside its scope: the chain's discrepancies on such rows keep their kind and
/// say only that the row lies outside, so that `ok` stays false without showing another
/// workspace's ids. A row is placed by its `session_id` column as stored; one without a text
/// `session_id` counts as outside.
fn withhold_outside(rows: &[Row], scope: AuditScope<'_>, discrepancies: &mut [Discrepancy]) {
    if matches!(scope, AuditScope::All) {
        return;
    }
    let outside: HashSet<&str> = rows
        .iter()
        .filter(|row| !row.session_id.as_deref().is_some_and(|id| scope.admits(id)))
        .map(|row| row.id.as_str())
        .collect();
    for discrepancy in discrepancies.iter_mut() {
        if discrepancy
            .receipt_id
            .as_deref()
            .is_some_and(|id| outside.contains(id))
        {
            discrepancy.receipt_id = None;
            discrepancy.detail = format!(
                "a receipt of a session outside this audit's scope does not fit the receipt chain \
                 ({}); audit the whole database to see which",
                kind_in_words(discrepancy.kind)
            );
        }
    }
}

/// The chain discrepancy `kind` in a few words, for a row whose id is withheld.
fn kind_in_words(kind: DiscrepancyKind) -> &'static str {
    match kind {
        DiscrepancyKind::ReceiptEdited => "edited",
        DiscrepancyKind::ReceiptUnchained => "without a place in the chain",
        DiscrepancyKind::ReceiptUnreadable => "unreadable",
        _ => "does not hold",
    }
}
