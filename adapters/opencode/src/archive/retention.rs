//! What the prune archive holds ([`ArchiveStats`]) and its retention: `purge` removes the entries
//! archived before a cutoff, never the entry of a message's newest prune that no restore undid
//! (the entry a restore of the message's present state needs), and drops the entries no receipt
//! names. The file is
//! rewritten without them (`pruning_archive::Archive::rewrite`); a purged entry leaves a record,
//! so that an audit tells it from a lost one. Source: docs/ARCHITECTURE.md, "Archive".

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use pruning_archive::{Archive, ArchiveReader, EntryKey};
use pruning_engine::StoreError;
use rusqlite::Connection;
use serde::Serialize;

use crate::archive::{archive_error, cut_torn_tail, named_entries};
use crate::receipts;

/// What the archive beside a database holds. JSON keys are camelCase; times are ms since the
/// Unix epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveStats {
    /// The archive file.
    pub path: PathBuf,
    /// Whether the file exists.
    pub exists: bool,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Live entries (neither discarded nor purged).
    pub entries: u64,
    /// Of `entries`, those no receipt names (a prune that never committed; the next prune
    /// with `--archive` discards them, `purge` drops them).
    pub orphans: u64,
    /// Bytes the live entries take (compressed).
    pub stored_bytes: u64,
    /// Bytes of the rows they hold (uncompressed).
    pub raw_bytes: u64,
    /// `rawBytes / storedBytes`, 0 without entries.
    pub compression_ratio: f64,
    /// When the oldest live entry was written.
    pub oldest_ms: Option<i64>,
    /// When the newest live entry was written.
    pub newest_ms: Option<i64>,
    /// Entries purged on purpose so far (their records are kept).
    pub purged: u64,
    /// Where frames that do not read begin (a crash tore an append, or damage), if they do.
    pub unreadable_at: Option<u64>,
    /// Entries the receipts name (archived prunes), whether or not the archive holds them:
    /// more than `entries - orphans` + purged means entries were lost (`audit` says which).
    pub named: u64,
}

/// What a purge removed (or, in a dry run, would remove).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PurgeReport {
    /// `purged` or `dry-run`.
    pub status: &'static str,
    /// Whether there is an archive beside the database.
    pub exists: bool,
    /// Entries archived before the cutoff and removed.
    pub purged: u64,
    /// Bytes those entries took (compressed).
    pub purged_bytes: u64,
    /// Entries archived before the cutoff kept because their prune is the newest of its
    /// message that no restore undid (the message's present state).
    pub kept_newest: u64,
    /// Entries no receipt names, dropped.
    pub orphans: u64,
    /// Bytes the file shrank by (0 in a dry run).
    pub file_bytes_freed: u64,
}

/// The stats of the archive beside `database`, read without a lock, with `conn` for the
/// receipts that name its entries.
///
/// Errors: [`StoreError::Archive`] when the file is not an archive; [`StoreError::Storage`].
pub(crate) fn stats(conn: &Connection, database: &Path) -> Result<ArchiveStats, StoreError> {
    let path = pruning_archive::path_beside(database);
    let mut stats = ArchiveStats {
        path: path.clone(),
        exists: false,
        file_bytes: 0,
        entries: 0,
        orphans: 0,
        stored_bytes: 0,
        raw_bytes: 0,
        compression_ratio: 0.0,
        oldest_ms: None,
        newest_ms: None,
        purged: 0,
        unreadable_at: None,
        named: 0,
    };
    let named = named_entries(conn).map_err(storage)?;
    stats.named = named.len() as u64;
    let Some(reader) = ArchiveReader::open(&path).map_err(archive_error)? else {
        return Ok(stats);
    };
    let index = reader.index();
    stats.exists = true;
    stats.file_bytes = index.file_len();
    for entry in index.entries() {
        stats.entries += 1;
        stats.orphans += u64::from(!named.contains(&entry.key));
        stats.stored_bytes += entry.stored_len;
        stats.raw_bytes += entry.raw_len;
        stats.oldest_ms = Some(
            stats
                .oldest_ms
                .map_or(entry.archived_at_ms, |t| t.min(entry.archived_at_ms)),
        );
        stats.newest_ms = Some(
            stats
                .newest_ms
                .map_or(entry.archived_at_ms, |t| t.max(entry.archived_at_ms)),
        );
    }
    if stats.stored_bytes > 0 {
        stats.compression_ratio = stats.raw_bytes as f64 / stats.stored_bytes as f64;
    }
    stats.purged = index.purged().len() as u64;
    stats.unreadable_at = index.unreadable().map(|(offset, _)| offset);
    Ok(stats)
}

/// Purges the entries of the archive beside `database` written before `cutoff_ms` (ms since the
/// Unix epoch), except each message's newest prune no restore undid, and drops the entries no
/// receipt names; with `dry_run`, only counts. `now_ms` is recorded as the purge time. `held` is
/// the archive this process holds (a store opened with `--archive`): the purge goes through it,
/// as a second handle would find the file locked.
///
/// Errors: [`StoreError::ArchiveBusy`] when another process holds the archive (a `serve` or a
/// clean with `--archive`; not for a dry run, which reads without the lock);
/// [`StoreError::Archive`] when it is damaged or cannot be rewritten (the old file then stays
/// whole); [`StoreError::Storage`].
pub(crate) fn purge(
    conn: &Connection,
    database: &Path,
    held: Option<&mut Archive>,
    cutoff_ms: i64,
    now_ms: i64,
    dry_run: bool,
) -> Result<PurgeReport, StoreError> {
    let path = pruning_archive::path_beside(database);
    let mut report = PurgeReport {
        status: if dry_run { "dry-run" } else { "purged" },
        exists: path.exists(),
        purged: 0,
        purged_bytes: 0,
        kept_newest: 0,
        orphans: 0,
        file_bytes_freed: 0,
    };
    if let Some(archive) = held {
        report.exists = true;
        let (purge, orphans) = select(conn, archive.index(), cutoff_ms, &mut report)?;
        if !dry_run {
            rewrite(archive, &purge, &orphans, now_ms, &mut report)?;
        }
        return Ok(report);
    }
    // A dry run only counts: it reads without the writer's lock.
    if dry_run {
        let Some(reader) = ArchiveReader::open(&path).map_err(archive_error)? else {
            return Ok(report);
        };
        select(conn, reader.index(), cutoff_ms, &mut report)?;
        return Ok(report);
    }
    if !path.exists() {
        return Ok(report);
    }
    // The file exists: the mode is not used.
    let mut archive = Archive::open(&path, 0o600).map_err(archive_error)?;
    // A crash tore an append: cut it, as the next archiving command would.
    cut_torn_tail(&mut archive, &named_entries(conn).map_err(storage)?)?;
    let (purge, orphans) = select(conn, archive.index(), cutoff_ms, &mut report)?;
    rewrite(&mut archive, &purge, &orphans, now_ms, &mut report)?;
    Ok(report)
}

/// The entries a purge removes (archived before `cutoff_ms`, but for each message's standing
/// prune) and the orphans it drops (no receipt names them), counted in `report`.
fn select(
    conn: &Connection,
    index: &pruning_archive::Index,
    cutoff_ms: i64,
    report: &mut PurgeReport,
) -> Result<(Vec<EntryKey>, Vec<EntryKey>), StoreError> {
    let named = named_entries(conn).map_err(storage)?;
    let newest = standing_prunes(conn).map_err(storage)?;
    let mut purge: Vec<EntryKey> = Vec::new();
    let mut orphans: Vec<EntryKey> = Vec::new();
    for entry in index.entries() {
        if !named.contains(&entry.key) {
            orphans.push(entry.key);
        } else if entry.archived_at_ms < cutoff_ms {
            if newest.contains(&entry.key.receipt_id) {
                report.kept_newest += 1;
            } else {
                purge.push(entry.key);
                report.purged_bytes += entry.stored_len;
            }
        }
    }
    report.purged = purge.len() as u64;
    report.orphans = orphans.len() as u64;
    Ok((purge, orphans))
}

/// Drops `orphans` and rewrites the file without `purge` (nothing when both are empty).
fn rewrite(
    archive: &mut Archive,
    purge: &[EntryKey],
    orphans: &[EntryKey],
    now_ms: i64,
    report: &mut PurgeReport,
) -> Result<(), StoreError> {
    if purge.is_empty() && orphans.is_empty() {
        return Ok(());
    }
    archive.discard(orphans).map_err(archive_error)?;
    report.file_bytes_freed = archive.rewrite(purge, now_ms).map_err(archive_error)?;
    Ok(())
}

/// For each message, the receipt id of its newest prune that no restore undid: the prune whose
/// restore gives back what the message held before it (a restore undoes the newest standing
/// prune, and the one before it stands again).
fn standing_prunes(conn: &Connection) -> rusqlite::Result<HashSet<uuid::Uuid>> {
    let mut standing: HashMap<(String, String), Vec<uuid::Uuid>> = HashMap::new();
    // Oldest commit first: each message's prunes in the order they were made and undone.
    for receipt in receipts::list(conn, None)? {
        let prunes = standing
            .entry((receipt.session_id, receipt.message_id))
            .or_default();
        match receipt.restores {
            Some(undone) => prunes.retain(|id| *id != undone),
            None => prunes.push(receipt.receipt_id),
        }
    }
    Ok(standing
        .into_values()
        .filter_map(|prunes| prunes.last().copied())
        .collect())
}

fn storage(error: rusqlite::Error) -> StoreError {
    StoreError::Storage(Box::new(error))
}
