//! The writer: one process at a time (an exclusive `flock` on the file), appending frames with
//! `pwrite` at the end of the readable frames, syncing them on request, and rewriting the file
//! without removed entries. A failed write or sync poisons the handle: the bytes may or may not
//! be on disk, so nothing more is written through it (the next open scans the file again).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};
use uuid::Uuid;

use crate::entry::ArchivedRows;
use crate::error::ArchiveError;
use crate::frame::{self, Frame};
use crate::index::{self, EntryKey, Index};
use crate::reader::{no_entry, read_entry};

/// The zstd level entries are compressed with (zstd's default).
pub const ZSTD_LEVEL: i32 = 3;

/// An entry to append: the rows already encoded ([`ArchivedRows::encode`]) with their entry
/// hash ([`crate::content_hash`]).
#[derive(Debug, Clone, Copy)]
pub struct NewEntry<'a> {
    /// The receipt id the prune will commit with.
    pub receipt_id: Uuid,
    /// The pruned message's session.
    pub session_id: &'a str,
    /// The pruned message.
    pub message_id: &'a str,
    /// Now, ms since the Unix epoch.
    pub archived_at_ms: i64,
    /// The encoded rows.
    pub encoded: &'a [u8],
    /// Their SHA-256.
    pub content_hash: [u8; 32],
}

/// What [`Archive::append`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The entry's key.
    pub key: EntryKey,
    /// Bytes the frame takes in the file (head and compressed payload).
    pub stored_bytes: u64,
}

/// The archive opened for writing.
#[derive(Debug)]
pub struct Archive {
    path: PathBuf,
    file: File,
    index: Index,
    poisoned: bool,
}

impl Archive {
    /// Opens the archive at `path` for writing, creating it (its header synced, and its folder)
    /// when missing, and scans it. A file whose last frames do not read (a crash tore an
    /// append) opens; appends are refused until [`Archive::truncate_unreadable_tail`] drops them,
    /// which the caller does once it knows no receipt names an entry there.
    ///
    /// A file it creates gets the permission bits `mode` (as `open(2)` gives them, less the
    /// umask): the caller passes those of the database whose rows it keeps.
    ///
    /// Errors: [`ArchiveError::Locked`] when another process holds it;
    /// [`ArchiveError::Corrupt`] when it is not an archive of this format;
    /// [`ArchiveError::Io`].
    pub fn open(path: &Path, mode: u32) -> Result<Self, ArchiveError> {
        let file = open_locked(path, mode)?;
        let len = file
            .metadata()
            .map_err(|e| ArchiveError::io(path, "reading its length", e))?
            .len();
        if len < frame::HEADER_LEN {
            // New, or a crash cut its creation short before the header was whole.
            let mut start = vec![0u8; len as usize];
            file.read_exact_at(&mut start, 0)
                .map_err(|e| ArchiveError::io(path, "reading its header", e))?;
            if !frame::is_unwritten_header(&start) {
                return Err(ArchiveError::Corrupt {
                    path: path.to_path_buf(),
                    offset: 0,
                    kind: crate::CorruptKind::NotAnArchive,
                });
            }
            file.set_len(0)
                .and_then(|()| file.write_all_at(&frame::file_header(), 0))
                .and_then(|()| file.sync_all())
                .map_err(|e| ArchiveError::io(path, "writing its header", e))?;
            sync_folder(path)?;
        }
        let index = index::scan(&file, path)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            index,
            poisoned: false,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The scan at open, kept current by this handle's writes.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The rows of the live entry `key`, checked against its entry hash.
    ///
    /// Errors: as [`crate::ArchiveReader::read`].
    pub fn read(&self, key: &EntryKey) -> Result<ArchivedRows, ArchiveError> {
        let info = self.index.get(key).ok_or_else(|| no_entry(key))?;
        read_entry(&self.file, &self.path, info)
    }

    /// Compresses and appends one entry, without waiting for the disk ([`Archive::sync`]
    /// makes it durable).
    ///
    /// Errors: [`ArchiveError::Poisoned`]; [`ArchiveError::Corrupt`] while frames that do not
    /// read end the file; [`ArchiveError::Encode`]; [`ArchiveError::Io`] (poisons).
    pub fn append(&mut self, entry: &NewEntry<'_>) -> Result<Appended, ArchiveError> {
        self.writable()?;
        let payload = zstd::bulk::compress(entry.encoded, ZSTD_LEVEL)
            .map_err(|e| ArchiveError::Encode(e.to_string()))?;
        let head = Frame::Entry {
            receipt_id: entry.receipt_id.into_bytes(),
            content_hash: entry.content_hash,
            session_id: entry.session_id.to_string(),
            message_id: entry.message_id.to_string(),
            archived_at_ms: entry.archived_at_ms,
            raw_len: entry.encoded.len() as u64,
            stored_len: payload.len() as u64,
        };
        let stored_bytes = self.write_frame(head, &payload)?;
        Ok(Appended {
            key: EntryKey {
                receipt_id: entry.receipt_id,
                content_hash: entry.content_hash,
            },
            stored_bytes,
        })
    }

    /// Marks entries as not wanted (their prunes never committed), without waiting for the
    /// disk: an entry whose discard is lost is found again by the next recovery.
    ///
    /// Errors: as [`Archive::append`].
    pub fn discard(&mut self, keys: &[EntryKey]) -> Result<(), ArchiveError> {
        self.writable()?;
        for key in keys {
            if self.index.get(key).is_some() {
                self.write_frame(
                    Frame::Discard {
                        receipt_id: key.receipt_id.into_bytes(),
                        content_hash: key.content_hash,
                    },
                    &[],
                )?;
            }
        }
        Ok(())
    }

    /// Makes every frame appended so far durable (`fdatasync`).
    ///
    /// Errors: [`ArchiveError::Poisoned`]; [`ArchiveError::Io`] (poisons: whether the frames
    /// reached the disk is unknown).
    pub fn sync(&mut self) -> Result<(), ArchiveError> {
        if self.poisoned {
            return Err(self.poisoned_error());
        }
        self.file.sync_data().map_err(|e| {
            self.poisoned = true;
            ArchiveError::io(&self.path, "syncing", e)
        })
    }

    /// Cuts the file at the end of its last readable frame, dropping the frames a crash tore
    /// (see [`Archive::open`]), and syncs. Call only when no receipt names an entry there.
    ///
    /// Errors: [`ArchiveError::Io`] (poisons).
    pub fn truncate_unreadable_tail(&mut self) -> Result<(), ArchiveError> {
        if self.index.unreadable.is_none() {
            return Ok(());
        }
        let end = self.index.end;
        self.file
            .set_len(end)
            .and_then(|()| self.file.sync_all())
            .map_err(|e| {
                self.poisoned = true;
                ArchiveError::io(&self.path, "cutting its unreadable tail", e)
            })?;
        self.index.unreadable = None;
        self.index.file_len = end;
        Ok(())
    }

    /// Rewrites the file with its live entries except `remove`, whose keys are recorded as
    /// purged at `purged_at_ms` (ms since the Unix epoch) beside the earlier purge records;
    /// discarded entries are dropped. The new file is written beside the old one, synced, then
    /// renamed over it (a reader keeps the file it opened). Returns the bytes the file shrank
    /// by.
    ///
    /// Errors: [`ArchiveError::Poisoned`]; [`ArchiveError::Corrupt`] while frames that do not
    /// read end the file; [`ArchiveError::Io`] (the old file stays as it was).
    pub fn rewrite(&mut self, remove: &[EntryKey], purged_at_ms: i64) -> Result<u64, ArchiveError> {
        self.writable()?;
        let mut temp_path = self.path.clone().into_os_string();
        temp_path.push(".rewrite");
        let temp_path = PathBuf::from(temp_path);
        let temp = self.create_like_self(&temp_path)?;
        lock(&temp, &temp_path)?;
        let mut rewritten = Rewritten {
            file: temp,
            path: temp_path.clone(),
            end: 0,
        };
        let written = (|| {
            rewritten.write(&frame::file_header())?;
            let removed: std::collections::HashSet<&EntryKey> = remove.iter().collect();
            let mut payload = Vec::new();
            for info in self.index.entries() {
                if removed.contains(&info.key) {
                    continue;
                }
                payload.resize(info.stored_len as usize, 0);
                self.file
                    .read_exact_at(&mut payload, info.payload_offset)
                    .map_err(|e| ArchiveError::io(&self.path, "reading an entry", e))?;
                rewritten.write(&frame::encode_head(&Frame::Entry {
                    receipt_id: info.key.receipt_id.into_bytes(),
                    content_hash: info.key.content_hash,
                    session_id: info.session_id.clone(),
                    message_id: info.message_id.clone(),
                    archived_at_ms: info.archived_at_ms,
                    raw_len: info.raw_len,
                    stored_len: info.stored_len,
                })?)?;
                rewritten.write(&payload)?;
            }
            let new_purges = remove.iter().filter(|key| self.index.get(key).is_some());
            let purges = self
                .index
                .purged()
                .iter()
                .map(|p| (p.key, p.purged_at_ms))
                .chain(new_purges.map(|key| (*key, purged_at_ms)));
            for (key, at) in purges {
                rewritten.write(&frame::encode_head(&Frame::Purged {
                    receipt_id: key.receipt_id.into_bytes(),
                    content_hash: key.content_hash,
                    purged_at_ms: at,
                })?)?;
            }
            rewritten
                .file
                .sync_all()
                .map_err(|e| ArchiveError::io(&temp_path, "syncing the rewritten archive", e))?;
            std::fs::rename(&temp_path, &self.path)
                .map_err(|e| ArchiveError::io(&self.path, "replacing it with its rewrite", e))
        })();
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temp_path);
            return Err(error);
        }
        // Renamed: the rewritten file is the archive now, whatever happens next.
        let before = self.index.file_len;
        self.file = rewritten.file;
        if let Err(error) = sync_folder(&self.path) {
            self.poisoned = true;
            return Err(error);
        }
        self.index = index::scan(&self.file, &self.path)?;
        Ok(before.saturating_sub(self.index.file_len))
    }

    /// Creates the file a rewrite writes, with this file's permission bits and (where this
    /// process may give it) its owner, so that the rewrite is no more readable than the archive
    /// was. A file left there by a rewrite that was stopped is removed first; a link there is
    /// not followed.
    fn create_like_self(&self, temp_path: &Path) -> Result<File, ArchiveError> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
        let io = |e| ArchiveError::io(temp_path, "creating the rewritten archive", e);
        let old = self
            .file
            .metadata()
            .map_err(|e| ArchiveError::io(&self.path, "reading its permissions", e))?;
        match std::fs::remove_file(temp_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let temp = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(temp_path)
            .map_err(io)?;
        // Not root: the owner stays this process's, as it was when this process created it.
        let _ = rustix::fs::fchown(
            &temp,
            Some(rustix::fs::Uid::from_raw(old.uid())),
            Some(rustix::fs::Gid::from_raw(old.gid())),
        );
        temp.set_permissions(std::fs::Permissions::from_mode(
            old.permissions().mode() & 0o7777,
        ))
        .map_err(io)?;
        Ok(temp)
    }

    /// Refuses when poisoned or when unreadable frames end the file.
    fn writable(&self) -> Result<(), ArchiveError> {
        if self.poisoned {
            return Err(self.poisoned_error());
        }
        if let Some((offset, kind)) = self.index.unreadable {
            return Err(ArchiveError::Corrupt {
                path: self.path.clone(),
                offset,
                kind,
            });
        }
        Ok(())
    }

    fn poisoned_error(&self) -> ArchiveError {
        ArchiveError::Poisoned {
            path: self.path.clone(),
        }
    }

    /// Writes one frame at the end and takes it into the index; returns its bytes.
    fn write_frame(&mut self, head: Frame, payload: &[u8]) -> Result<u64, ArchiveError> {
        let mut bytes = frame::encode_head(&head)?;
        let payload_offset = self.index.end + bytes.len() as u64;
        bytes.extend_from_slice(payload);
        if let Err(e) = self.file.write_all_at(&bytes, self.index.end) {
            self.poisoned = true;
            return Err(ArchiveError::io(&self.path, "appending", e));
        }
        self.index.add(head, payload_offset);
        self.index.end += bytes.len() as u64;
        self.index.file_len = self.index.file_len.max(self.index.end);
        Ok(bytes.len() as u64)
    }
}

/// The file a rewrite writes, with where its next byte goes.
struct Rewritten {
    file: File,
    path: PathBuf,
    end: u64,
}

impl Rewritten {
    fn write(&mut self, bytes: &[u8]) -> Result<(), ArchiveError> {
        self.file
            .write_all_at(bytes, self.end)
            .map_err(|e| ArchiveError::io(&self.path, "writing the rewritten archive", e))?;
        self.end += bytes.len() as u64;
        Ok(())
    }
}

/// Opens (creating when missing) and locks the file that `path` names when the lock is taken: a
/// rewrite by another process may rename a new file over the path between the open and the
/// lock, and a lock on the file it replaced guards nothing (its appends would go to a file no
/// one reads). Tries again while that happens.
fn open_locked(path: &Path, mode: u32) -> Result<File, ArchiveError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    for _ in 0..100 {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode)
            .open(path)
            .map_err(|e| ArchiveError::io(path, "opening", e))?;
        lock(&file, path)?;
        let held = file
            .metadata()
            .map_err(|e| ArchiveError::io(path, "reading its identity", e))?;
        match std::fs::metadata(path) {
            Ok(named) if named.dev() == held.dev() && named.ino() == held.ino() => return Ok(file),
            // Replaced (or removed) meanwhile: open what the path names now.
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ArchiveError::io(path, "reading its identity", e)),
        }
    }
    Err(ArchiveError::Locked {
        path: path.to_path_buf(),
    })
}

/// Takes the exclusive lock on `file`, without waiting.
fn lock(file: &File, path: &Path) -> Result<(), ArchiveError> {
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(ArchiveError::Locked {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(ArchiveError::io(path, "locking", e.into())),
    }
}

/// Syncs the folder holding `path`, so that a file created or renamed there stays.
fn sync_folder(path: &Path) -> Result<(), ArchiveError> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(folder)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| ArchiveError::io(folder, "syncing its folder", e))
}
