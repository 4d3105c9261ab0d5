//! What a scan of the file finds: the live entries (written and neither discarded nor purged),
//! the purge records, and where the readable frames end.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use uuid::Uuid;

use crate::error::{ArchiveError, CorruptKind};
use crate::frame::{self, Frame, HEADER_LEN, MAX_HEAD_LEN};

/// What names an entry: the receipt id of its prune and its entry hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey {
    /// The receipt id.
    pub receipt_id: Uuid,
    /// SHA-256 of the encoded rows.
    pub content_hash: [u8; 32],
}

/// One entry as its frame head describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// Its key.
    pub key: EntryKey,
    /// The pruned message's session.
    pub session_id: String,
    /// The pruned message.
    pub message_id: String,
    /// When it was written, ms since the Unix epoch.
    pub archived_at_ms: i64,
    /// Bytes of the encoded rows.
    pub raw_len: u64,
    /// Bytes stored (the compressed payload).
    pub stored_len: u64,
    /// Where the payload starts in the file.
    pub(crate) payload_offset: u64,
}

/// A purge record: the entry with `key` was removed on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PurgedInfo {
    /// The purged entry's key.
    pub key: EntryKey,
    /// When, ms since the Unix epoch.
    pub purged_at_ms: i64,
}

/// The scan of an archive file.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// Live entries in file order (`None`: discarded or purged since).
    slots: Vec<Option<EntryInfo>>,
    /// Key -> its slot.
    by_key: HashMap<EntryKey, usize>,
    /// Purge records, in file order.
    purged: Vec<PurgedInfo>,
    /// Key -> its newest purge record in `purged`.
    purged_by_key: HashMap<EntryKey, usize>,
    /// End of the last readable frame.
    pub(crate) end: u64,
    /// The file's length when scanned.
    pub(crate) file_len: u64,
    /// The first frame that does not read, and why (`None`: all of the file reads).
    pub(crate) unreadable: Option<(u64, CorruptKind)>,
}

impl Index {
    /// Live entries, in the order they were written.
    pub fn entries(&self) -> impl Iterator<Item = &EntryInfo> {
        self.slots.iter().flatten()
    }

    /// The live entry with `key`.
    pub fn get(&self, key: &EntryKey) -> Option<&EntryInfo> {
        self.by_key
            .get(key)
            .and_then(|&slot| self.slots[slot].as_ref())
    }

    /// The purge records, in the order they were written.
    pub fn purged(&self) -> &[PurgedInfo] {
        &self.purged
    }

    /// The purge record of `key`, if it was purged.
    pub fn purged_entry(&self, key: &EntryKey) -> Option<&PurgedInfo> {
        self.purged_by_key.get(key).map(|&at| &self.purged[at])
    }

    /// Bytes of the file, as scanned.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Where the first unreadable frame starts and what is wrong with it, when the file does
    /// not read to its end (a write torn by a crash, or damage).
    pub fn unreadable(&self) -> Option<(u64, CorruptKind)> {
        self.unreadable
    }

    /// Takes in one frame read at `offset`, its payload at `payload_offset`.
    pub(crate) fn add(&mut self, frame: Frame, payload_offset: u64) {
        match frame {
            Frame::Entry {
                receipt_id,
                content_hash,
                session_id,
                message_id,
                archived_at_ms,
                raw_len,
                stored_len,
            } => {
                let key = EntryKey {
                    receipt_id: Uuid::from_bytes(receipt_id),
                    content_hash,
                };
                if let Some(slot) = self.by_key.get(&key) {
                    self.slots[*slot] = None;
                }
                self.by_key.insert(key, self.slots.len());
                self.slots.push(Some(EntryInfo {
                    key,
                    session_id,
                    message_id,
                    archived_at_ms,
                    raw_len,
                    stored_len,
                    payload_offset,
                }));
            }
            Frame::Discard {
                receipt_id,
                content_hash,
            } => {
                self.remove(&EntryKey {
                    receipt_id: Uuid::from_bytes(receipt_id),
                    content_hash,
                });
            }
            Frame::Purged {
                receipt_id,
                content_hash,
                purged_at_ms,
            } => {
                let key = EntryKey {
                    receipt_id: Uuid::from_bytes(receipt_id),
                    content_hash,
                };
                self.remove(&key);
                self.purged_by_key.insert(key, self.purged.len());
                self.purged.push(PurgedInfo { key, purged_at_ms });
            }
        }
    }

    fn remove(&mut self, key: &EntryKey) {
        if let Some(slot) = self.by_key.remove(key) {
            self.slots[slot] = None;
        }
    }
}

/// Scans `file` (at `path`, for errors) from its header to the first frame that does not read.
///
/// A file shorter than the header that holds only the start of one (see
/// [`frame::is_unwritten_header`]) scans as empty.
///
/// Errors: [`ArchiveError::Io`]; [`ArchiveError::Corrupt`] when the file header is not this
/// format's (a damaged frame is not an error here: it ends the scan, see
/// [`Index::unreadable`]).
pub(crate) fn scan(file: &File, path: &Path) -> Result<Index, ArchiveError> {
    let file_len = file
        .metadata()
        .map_err(|e| ArchiveError::io(path, "reading its length", e))?
        .len();
    if file_len < HEADER_LEN {
        let mut start = vec![0u8; file_len as usize];
        file.read_exact_at(&mut start, 0)
            .map_err(|e| ArchiveError::io(path, "reading its header", e))?;
        if frame::is_unwritten_header(&start) {
            // Created, and its header not written whole yet: no entry.
            return Ok(Index {
                end: file_len,
                file_len,
                ..Index::default()
            });
        }
    }
    let mut header = [0u8; HEADER_LEN as usize];
    let header_read = if file_len >= HEADER_LEN {
        file.read_exact_at(&mut header, 0)
            .map_err(|e| ArchiveError::io(path, "reading its header", e))?;
        frame::check_file_header(&header)
    } else {
        Err(CorruptKind::NotAnArchive)
    };
    if let Err(kind) = header_read {
        return Err(ArchiveError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            kind,
        });
    }
    let mut index = Index {
        end: HEADER_LEN,
        file_len,
        ..Index::default()
    };
    let mut offset = HEADER_LEN;
    let mut head = Vec::new();
    while offset < file_len {
        match read_frame(file, path, offset, file_len, &mut head)? {
            Ok((frame, payload_offset)) => {
                let next = payload_offset + frame.payload_len();
                index.add(frame, payload_offset);
                offset = next;
                index.end = next;
            }
            Err(kind) => {
                index.unreadable = Some((offset, kind));
                break;
            }
        }
    }
    Ok(index)
}

/// Reads the frame head at `offset`: the frame and where its payload starts, or why it does
/// not read.
fn read_frame(
    file: &File,
    path: &Path,
    offset: u64,
    file_len: u64,
    head: &mut Vec<u8>,
) -> Result<Result<(Frame, u64), CorruptKind>, ArchiveError> {
    let io = |e| ArchiveError::io(path, "reading a frame", e);
    if file_len - offset < 8 {
        return Ok(Err(CorruptKind::Truncated));
    }
    let mut len = [0u8; 4];
    file.read_exact_at(&mut len, offset).map_err(io)?;
    let head_len = u32::from_le_bytes(len);
    if head_len > MAX_HEAD_LEN {
        return Ok(Err(CorruptKind::BadHeader));
    }
    let payload_offset = offset + 8 + u64::from(head_len);
    if payload_offset > file_len {
        return Ok(Err(CorruptKind::Truncated));
    }
    head.resize(head_len as usize + 4, 0);
    file.read_exact_at(head, offset + 4).map_err(io)?;
    let (bytes, crc) = head.split_at(head_len as usize);
    let crc = [crc[0], crc[1], crc[2], crc[3]];
    let Some(frame) = frame::decode_head(len, bytes, crc) else {
        return Ok(Err(CorruptKind::BadHeader));
    };
    if frame.payload_len() > file_len - payload_offset {
        return Ok(Err(CorruptKind::Truncated));
    }
    Ok(Ok((frame, payload_offset)))
}
