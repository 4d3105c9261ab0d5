//! Counters of durable writes: a journal backend that counts `sync_data` calls, and a store
//! that counts `make_durable` calls, around the real file and the real OpenCode store.
#![allow(dead_code)]

use std::fs::OpenOptions;
use std::io;
use std::ops::{Bound, ControlFlow};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use pruning_engine::history::{HistoryScan, ScanEnd, ScannedMessage};
use pruning_engine::{
    Applied, DryRun, PreviewRequest, PruneCommand, PruneRequest, Receipt, Refusal, SessionStore,
    StoreError, StoredMessage,
};
use pruning_opencode::OpenCodeStore;
use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// A journal file that counts its fsyncs, and how often it grew (redb syncs once more when a
/// commit grows the file).
#[derive(Debug)]
pub struct CountingFile {
    file: FileBackend,
    syncs: Arc<AtomicU64>,
    grows: Arc<AtomicU64>,
    full: Arc<AtomicBool>,
}

/// The counters of a [`CountingFile`].
#[derive(Debug, Clone)]
pub struct FileCounters {
    syncs: Arc<AtomicU64>,
    grows: Arc<AtomicU64>,
    full: Arc<AtomicBool>,
}

impl FileCounters {
    /// Fsyncs so far, less one per growth of the file: the syncs that durable writes cost.
    pub fn write_syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst) - self.grows.load(Ordering::SeqCst)
    }

    /// From now on every write and sync of the file fails as on a full disk (`ENOSPC`).
    pub fn fill_the_disk(&self) {
        self.full.store(true, Ordering::SeqCst);
    }
}

impl CountingFile {
    /// Opens (creating) `path`; the counters are shared with the caller.
    pub fn open(path: &Path) -> (Self, FileCounters) {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        let counters = FileCounters {
            syncs: Arc::default(),
            grows: Arc::default(),
            full: Arc::default(),
        };
        let backend = Self {
            file: FileBackend::new(file).unwrap(),
            syncs: counters.syncs.clone(),
            grows: counters.grows.clone(),
            full: counters.full.clone(),
        };
        (backend, counters)
    }
}

impl StorageBackend for CountingFile {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        if len > self.file.len()? {
            self.grows.fetch_add(1, Ordering::SeqCst);
        }
        self.file.set_len(len)
    }
    fn sync_data(&self) -> Result<(), io::Error> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(28));
        }

        self.file.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        if self.full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(28));
        }
        self.file.write(offset, data)
    }
    fn close(&self) -> Result<(), io::Error> {
        self.file.close()
    }
    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }
    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }
    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}

/// The OpenCode store, counting `make_durable` calls and the commits it made deferred.
pub struct CountingStore {
    pub inner: OpenCodeStore,
    pub durable_calls: Arc<AtomicU64>,
    pub deferred_commits: Arc<AtomicU64>,
    /// When set, the store's sync fills this journal file's disk first: the batch's SQLite
    /// commits are made, and the journal write of their commit marks fails.
    pub fills_the_disk_of: Option<FileCounters>,
}

impl CountingStore {
    pub fn new(inner: OpenCodeStore) -> Self {
        Self {
            inner,
            durable_calls: Arc::default(),
            deferred_commits: Arc::default(),
            fills_the_disk_of: None,
        }
    }
}

impl SessionStore for CountingStore {
    fn location(&self) -> Option<String> {
        self.inner.location()
    }
    fn database_id(&self) -> Result<Option<String>, StoreError> {
        self.inner.database_id()
    }
    fn journal_epoch(&self) -> Result<u64, StoreError> {
        self.inner.journal_epoch()
    }
    fn set_journal_epoch(&self, epoch: u64) -> Result<bool, StoreError> {
        self.inner.set_journal_epoch(epoch)
    }
    fn receipts_high_water(&self) -> Result<pruning_engine::ReceiptsHighWater, StoreError> {
        self.inner.receipts_high_water()
    }
    fn read_message(
        &self,
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError> {
        self.inner.read_message(request)
    }
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        self.inner.live_mutation(session_id, message_id)
    }
    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError> {
        let applied = self.inner.apply(command)?;
        if matches!(
            applied,
            Applied::Pruned {
                replayed: false,
                ..
            }
        ) && command.durability == pruning_engine::Durability::Deferred
        {
            self.deferred_commits.fetch_add(1, Ordering::SeqCst);
        }
        Ok(applied)
    }
    fn make_durable(&self) -> Result<(), StoreError> {
        self.durable_calls.fetch_add(1, Ordering::SeqCst);
        if let Some(journal) = &self.fills_the_disk_of {
            journal.fill_the_disk();
        }
        self.inner.make_durable()
    }
    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError> {
        self.inner.dry_run(request, now_ms)
    }
    fn receipt_by_key(&self, key: &[u8; 32]) -> Result<Option<Receipt>, StoreError> {
        self.inner.receipt_by_key(key)
    }
    fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, StoreError> {
        self.inner.receipts(session_id)
    }
    fn scan_history(
        &self,
        scan: &HistoryScan<'_>,
        visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
    ) -> Result<Result<ScanEnd, Refusal>, StoreError> {
        self.inner.scan_history(scan, visit)
    }
}
