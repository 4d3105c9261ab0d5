//! A storage backend over a real file that models the page cache: writes stay in memory until
//! a successful `sync_data` writes them through and fsyncs; a failed `sync_data` (switched on
//! by the test) loses them, as the Linux kernel drops dirty pages after a failed fsync, and
//! so does closing without a sync (a crash). It also counts `sync_data` calls.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// Switches and counters a test keeps after handing the backend to the journal.
#[derive(Debug, Clone, Default)]
pub struct DiskControls {
    fail_sync: Arc<AtomicBool>,
    syncs: Arc<AtomicU64>,
}

impl DiskControls {
    /// From now on every `sync_data` fails (`true`) or works (`false`).
    pub fn fail_syncs(&self, fail: bool) {
        self.fail_sync.store(fail, Ordering::SeqCst);
    }

    /// How many times `sync_data` was called so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }
}

/// The backend (see the module doc).
#[derive(Debug)]
pub struct SimulatedDisk {
    file: FileBackend,
    /// Writes since the last successful sync, oldest first: (offset, bytes).
    unsynced: Mutex<Vec<(u64, Vec<u8>)>>,
    controls: DiskControls,
}

impl SimulatedDisk {
    /// Opens (creating if absent) the file at `path`.
    pub fn open(path: &Path) -> (SimulatedDisk, DiskControls) {
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        let controls = DiskControls::default();
        let disk = SimulatedDisk {
            file: FileBackend::new(file).unwrap(),
            unsynced: Mutex::new(Vec::new()),
            controls: controls.clone(),
        };
        (disk, controls)
    }

    fn unsynced(&self) -> MutexGuard<'_, Vec<(u64, Vec<u8>)>> {
        self.unsynced.lock().unwrap()
    }
}

impl StorageBackend for SimulatedDisk {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.file.read(offset, out)?;
        let end = offset + out.len() as u64;
        for (at, bytes) in self.unsynced().iter() {
            let from = offset.max(*at);
            let to = end.min(*at + bytes.len() as u64);
            if from < to {
                let dst = (from - offset) as usize..(to - offset) as usize;
                let src = (from - at) as usize..(to - at) as usize;
                out[dst].copy_from_slice(&bytes[src]);
            }
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.file.set_len(len)?;
        let mut unsynced = self.unsynced();
        unsynced.retain(|(at, _)| *at < len);
        for (at, bytes) in unsynced.iter_mut() {
            bytes.truncate((len - *at).min(bytes.len() as u64) as usize);
        }
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.controls.syncs.fetch_add(1, Ordering::SeqCst);
        let pending = std::mem::take(&mut *self.unsynced());
        if self.controls.fail_sync.load(Ordering::SeqCst) {
            return Err(io::Error::other("simulated fsync failure"));
        }
        for (at, bytes) in &pending {
            self.file.write(*at, bytes)?;
        }
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.unsynced().push((offset, data.to_vec()));
        Ok(())
    }

    fn close(&self) -> Result<(), io::Error> {
        self.unsynced().clear();
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
