//! The store's side of the prune archive (docs/ARCHITECTURE.md, "Archive"): the archive handle a
//! store opened with `--archive`, what a prune's transaction captures of the rows it removes,
//! and when its entry becomes durable. The file format is `pruning_archive`'s.
//!
//! An entry is durable before the prune that names it commits. A single prune appends and syncs
//! its entry inside its transaction, before `COMMIT`. A batch writes its prunes' entries ahead
//! of their transactions, all synced at once ([`StoreArchive::write_ahead`]), and each prune
//! then commits without a sync of its own when the rows it removes hash to the entry written
//! ahead; when they do not (another connection changed them since), it appends and syncs its own
//! entry. An entry no receipt names (its prune was refused, stopped or rolled back) is
//! discarded: at the end of a batch, or by the recovery of the next open.

pub(crate) mod restore;
pub(crate) mod retention;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use pruning_archive::{
    content_hash, Archive, ArchiveError, ArchivedRows, EntryKey, NewEntry, SqlValue, TableRows,
};
use pruning_engine::{PruneCommand, StoreError};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row, Statement};
use uuid::Uuid;

use super::receipts;

/// The archive of a store opened with `--archive`.
#[derive(Debug)]
pub(crate) struct StoreArchive {
    archive: Archive,
    /// Entries written ahead of a batch's transactions: receipt id -> entry hash and bytes
    /// stored. Synced when [`Self::ahead_synced`] is true.
    ahead: HashMap<Uuid, ([u8; 32], u64)>,
    /// Whether every entry in `ahead` is durable.
    ahead_synced: bool,
    /// Bytes stored for the entries of the prunes this store committed.
    written: u64,
}

impl StoreArchive {
    /// Opens the archive beside the database (`<database>.prune-archive`, created when missing)
    /// and recovers it against the receipts `conn` reads (outside any transaction): frames a
    /// crash tore at the end are cut when no receipt names an entry there; entries no receipt
    /// names are discarded. A missing archive while receipts name entries is refused: it was
    /// moved or deleted, and a new file would split the entries (an empty file is an empty
    /// archive, the way to start anew on purpose).
    ///
    /// Errors: [`StoreError::Archive`] when the archive cannot be opened (held by another
    /// process, not an archive, unreadable) or when a receipt names an entry the unreadable
    /// part of the file may hold (then nothing is written to it); [`StoreError::Storage`].
    pub(crate) fn open(conn: &Connection, database: &Path) -> Result<Self, StoreError> {
        let path = pruning_archive::path_beside(database);
        let named = named_entries(conn).map_err(storage)?;
        if !named.is_empty() && !path.exists() {
            // Moved or deleted: a new archive beside the old one would split the entries
            // between two files that cannot be joined again.
            return Err(StoreError::Archive(format!(
                "archive {} is missing, while {} receipt(s) name entries in it: put it back \
                 beside the database (from the backup taken with it). To start a new, empty \
                 archive anyway (those prunes can then not be restored), create an empty file \
                 there: touch {}",
                path.display(),
                named.len(),
                path.display()
            )));
        }
        let mut archive = Archive::open(&path, file_mode(database)).map_err(archive_error)?;
        cut_torn_tail(&mut archive, &named)?;
        let orphans: Vec<EntryKey> = archive
            .index()
            .entries()
            .map(|entry| entry.key)
            .filter(|key| !named.contains(key))
            .collect();
        archive.discard(&orphans).map_err(archive_error)?;
        Ok(Self {
            archive,
            ahead: HashMap::new(),
            ahead_synced: true,
            written: 0,
        })
    }

    /// The archive itself, for a purge between prunes (never while a batch's entries are
    /// written ahead: the store's prunes and purges take turns on its connection).
    pub(crate) fn file(&mut self) -> &mut Archive {
        &mut self.archive
    }

    /// The archive file.
    pub(crate) fn path(&self) -> &Path {
        self.archive.path()
    }

    /// The rows of the live entry `key`, checked against its entry hash.
    ///
    /// Errors: [`StoreError::Archive`] (no such entry, or a damaged one).
    pub(crate) fn read(&self, key: &EntryKey) -> Result<ArchivedRows, StoreError> {
        self.archive.read(key).map_err(archive_error)
    }

    /// Whether `archive purge` removed entry `key` on purpose (and it is not in the archive).
    pub(crate) fn purged(&self, key: &EntryKey) -> bool {
        let index = self.archive.index();
        index.get(key).is_none() && index.purged_entry(key).is_some()
    }

    /// Bytes stored for the entries of the prunes this store committed.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Makes `rows`, what the prune of `command` removed inside its transaction, archived and
    /// durable before its commit, and returns the entry hash for its receipt (lowercase hex):
    /// the entry written ahead when its hash is the same and it was synced; else a new entry,
    /// appended and synced now.
    ///
    /// Errors: [`StoreError::Archive`]; the prune must not commit.
    pub(crate) fn commit_entry(
        &mut self,
        command: &PruneCommand<'_>,
        rows: &ArchivedRows,
    ) -> Result<String, StoreError> {
        let encoded = rows.encode().map_err(archive_error)?;
        let hash = content_hash(&encoded);
        let ahead = self.ahead.remove(&command.receipt_id);
        let stored = match ahead {
            Some((ahead_hash, stored)) if ahead_hash == hash && self.ahead_synced => stored,
            _ => {
                let appended = self
                    .archive
                    .append(&new_entry(command, &encoded, hash))
                    .map_err(archive_error)?;
                self.archive.sync().map_err(archive_error)?;
                appended.stored_bytes
            }
        };
        self.written += stored;
        Ok(hex::encode(hash))
    }

    /// Appends the entry of a prune `command` is about to make, with `rows` what it will
    /// remove, without waiting for the disk; [`Self::sync_ahead`] makes the batch's entries
    /// durable.
    ///
    /// Errors: [`StoreError::Archive`].
    pub(crate) fn write_ahead(
        &mut self,
        command: &PruneCommand<'_>,
        rows: &ArchivedRows,
    ) -> Result<(), StoreError> {
        let encoded = rows.encode().map_err(archive_error)?;
        let hash = content_hash(&encoded);
        let appended = self
            .archive
            .append(&new_entry(command, &encoded, hash))
            .map_err(archive_error)?;
        self.ahead_synced = false;
        self.ahead
            .insert(command.receipt_id, (hash, appended.stored_bytes));
        Ok(())
    }

    /// Makes the entries written ahead durable; when that fails they are not used (each prune
    /// then appends its own, which fails too on the poisoned handle).
    pub(crate) fn sync_ahead(&mut self) {
        self.ahead_synced = self.archive.sync().is_ok();
    }

    /// Discards the entries written ahead that no prune used (their prunes were refused,
    /// stopped or failed), without waiting for the disk.
    pub(crate) fn discard_unused(&mut self) {
        let unused: Vec<EntryKey> = self
            .ahead
            .drain()
            .map(|(receipt_id, (content_hash, _))| EntryKey {
                receipt_id,
                content_hash,
            })
            .collect();
        // Left undiscarded, they are discarded by the next open's recovery.
        let _ = self.archive.discard(&unused);
    }
}

/// Cuts the frames a crash tore at the end of `archive` when none of the entries the receipts
/// name (`named`) can be there: each is among the frames that read, or was purged.
///
/// Errors: [`StoreError::Archive`] (damage, not a torn append) when one may be there: nothing
/// is written to the archive then.
pub(crate) fn cut_torn_tail(
    archive: &mut Archive,
    named: &HashSet<EntryKey>,
) -> Result<(), StoreError> {
    let Some((offset, kind)) = archive.index().unreadable() else {
        return Ok(());
    };
    let index = archive.index();
    let unaccounted = named
        .iter()
        .filter(|key| index.get(key).is_none() && index.purged_entry(key).is_none())
        .count();
    if unaccounted > 0 {
        return Err(archive_error(ArchiveError::Corrupt {
            path: archive.path().to_path_buf(),
            offset,
            kind,
        }));
    }
    archive.truncate_unreadable_tail().map_err(archive_error)
}

/// The permission bits an archive of `database` is created with: the database file's (read and
/// write bits only), so that it is no more readable than the rows it keeps; `0o600` when they
/// cannot be read.
fn file_mode(database: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(database).map_or(0o600, |m| m.permissions().mode() & 0o666)
}

/// The entry of the prune `command` makes, with its encoded rows and their hash.
fn new_entry<'a>(command: &'a PruneCommand<'_>, encoded: &'a [u8], hash: [u8; 32]) -> NewEntry<'a> {
    NewEntry {
        receipt_id: command.receipt_id,
        session_id: &command.request.session_id,
        message_id: &command.request.message_id,
        archived_at_ms: command.now_ms,
        encoded,
        content_hash: hash,
    }
}

/// The entry keys the prune receipts name (receipt id and `archive_hash`); none where the
/// receipt table or its archive column is missing. A restore's receipt records the hash of the
/// entry of the prune it undid, whose own receipt names that entry: it names none of its own.
/// A hash that is not 64 hex characters names nothing.
pub(crate) fn named_entries(conn: &Connection) -> rusqlite::Result<HashSet<EntryKey>> {
    if !receipts::table_exists(conn, receipts::RECEIPT_TABLE)?
        || !receipts::has_archive_column(conn)?
    {
        return Ok(HashSet::new());
    }
    let prunes_only = if receipts::has_restores_column(conn)? {
        " AND restores IS NULL"
    } else {
        ""
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT id, archive_hash FROM session_prune_receipt \
         WHERE archive_hash IS NOT NULL{prunes_only}"
    ))?;
    let rows = stmt.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    let mut named = HashSet::new();
    for row in rows {
        let (id, hash) = row?;
        if let Some(key) = entry_key(&id, &hash) {
            named.insert(key);
        }
    }
    Ok(named)
}

/// The entry key of a receipt id and its `archive_hash` text; `None` when either does not parse.
pub(crate) fn entry_key(receipt_id: &str, archive_hash: &str) -> Option<EntryKey> {
    let receipt_id = Uuid::parse_str(receipt_id).ok()?;
    let content_hash: [u8; 32] = hex::decode(archive_hash).ok()?.try_into().ok()?;
    Some(EntryKey {
        receipt_id,
        content_hash,
    })
}

/// Runs `stmt` (a `SELECT *` or `... RETURNING *` of `table`) with `params` and adds the rows it
/// gives to `into`, whose columns are the statement's. Returns how many rows it gave.
pub(crate) fn capture_rows<P: rusqlite::Params>(
    stmt: &mut Statement<'_>,
    table: &str,
    params: P,
    into: &mut Option<TableRows>,
) -> rusqlite::Result<usize> {
    let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let target = into.get_or_insert_with(|| TableRows {
        table: table.to_string(),
        columns,
        rows: Vec::new(),
    });
    let width = target.columns.len();
    let mut rows = stmt.query(params)?;
    let mut count = 0;
    while let Some(row) = rows.next()? {
        target.rows.push(values_of(row, width)?);
        count += 1;
    }
    Ok(count)
}

/// The first `width` values of `row`, exactly as stored.
fn values_of(row: &Row<'_>, width: usize) -> rusqlite::Result<Vec<SqlValue>> {
    (0..width)
        .map(|i| {
            Ok(match row.get_ref(i)? {
                ValueRef::Null => SqlValue::Null,
                ValueRef::Integer(n) => SqlValue::Integer(n),
                ValueRef::Real(x) => SqlValue::Real(x.to_bits()),
                ValueRef::Text(bytes) => SqlValue::Text(bytes.to_vec()),
                ValueRef::Blob(bytes) => SqlValue::Blob(bytes.to_vec()),
            })
        })
        .collect()
}

/// Sorts captured rows by their `id` column (byte order), so that rows found in another order
/// encode the same.
pub(crate) fn sort_by_id(rows: &mut TableRows) {
    if let Some(at) = rows.columns.iter().position(|c| c == "id") {
        rows.rows
            .sort_by(|a, b| id_bytes(&a[at]).cmp(id_bytes(&b[at])));
    }
}

fn id_bytes(value: &SqlValue) -> &[u8] {
    match value {
        SqlValue::Text(bytes) | SqlValue::Blob(bytes) => bytes,
        _ => &[],
    }
}

/// The bytes of the `data` column of the last row captured in `rows` (0 when none).
pub(crate) fn last_data_len(rows: &TableRows) -> u64 {
    let at = rows.columns.iter().position(|c| c == "data");
    match (at, rows.rows.last()) {
        (Some(at), Some(row)) => match &row[at] {
            SqlValue::Text(bytes) | SqlValue::Blob(bytes) => bytes.len() as u64,
            _ => 0,
        },
        _ => 0,
    }
}

/// [`StoreError::Archive`] with the archive's words ([`StoreError::ArchiveBusy`] when another
/// process holds it).
pub(crate) fn archive_error(error: ArchiveError) -> StoreError {
    match error {
        ArchiveError::Locked { .. } => StoreError::ArchiveBusy(error.to_string()),
        other => StoreError::Archive(other.to_string()),
    }
}

fn storage(error: rusqlite::Error) -> StoreError {
    StoreError::Storage(Box::new(error))
}
