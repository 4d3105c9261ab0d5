//! The file format, version [`FORMAT_VERSION`].
//!
//! ```text
//! file    := header frame*
//! header  := "SPARCHIV" version:u32le crc:u32le          (crc: CRC-32 of the 12 bytes before it)
//! frame   := len:u32le head:[u8; len] crc:u32le payload  (crc: CRC-32 of len's 4 bytes and head)
//! head    := postcard(Frame)
//! payload := zstd(postcard(ArchivedRows))                 (Frame::Entry only; stored_len bytes)
//! ```
//!
//! Frames are only appended. An entry is live until a [`Frame::Discard`] or a rewrite removes
//! it; a [`Frame::Purged`] record says an entry was removed on purpose and survives rewrites, so
//! that an audit can tell a purged entry from a lost one. A frame whose head does not check, or
//! that runs past the end of the file, ends what can be read.

use serde::{Deserialize, Serialize};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"SPARCHIV";
/// The format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the file header.
pub const HEADER_LEN: u64 = 16;
/// The largest head a frame may have (its ids and counts are far smaller).
pub const MAX_HEAD_LEN: u32 = 64 * 1024;

/// A frame's head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// An entry; its payload follows.
    Entry {
        /// The receipt id (UUID bytes).
        receipt_id: [u8; 16],
        /// SHA-256 of the encoded rows.
        content_hash: [u8; 32],
        /// The pruned message's session.
        session_id: String,
        /// The pruned message.
        message_id: String,
        /// When the entry was written, ms since the Unix epoch.
        archived_at_ms: i64,
        /// Bytes of the encoded rows.
        raw_len: u64,
        /// Bytes of the payload (compressed).
        stored_len: u64,
    },
    /// The entry with this key is not wanted (its prune never committed).
    Discard {
        /// The receipt id.
        receipt_id: [u8; 16],
        /// The entry hash.
        content_hash: [u8; 32],
    },
    /// The entry with this key was purged at `purged_at_ms` (ms since the Unix epoch).
    Purged {
        /// The receipt id.
        receipt_id: [u8; 16],
        /// The entry hash.
        content_hash: [u8; 32],
        /// When, ms since the Unix epoch.
        purged_at_ms: i64,
    },
}

impl Frame {
    /// Bytes of payload after the head.
    pub fn payload_len(&self) -> u64 {
        match self {
            Frame::Entry { stored_len, .. } => *stored_len,
            _ => 0,
        }
    }
}

/// The file header's 16 bytes.
pub fn file_header() -> [u8; HEADER_LEN as usize] {
    let mut header = [0u8; HEADER_LEN as usize];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let crc = crc32fast::hash(&header[..12]);
    header[12..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Whether `start`, the whole of a file shorter than the header, is a header not yet written
/// whole: nothing, a part of this format's header, or zeros (a crash while the archive was
/// created). Such a file holds no entry: it reads as empty, and the writer writes its header.
pub fn is_unwritten_header(start: &[u8]) -> bool {
    start.len() < HEADER_LEN as usize
        && (file_header().starts_with(start) || start.iter().all(|&b| b == 0))
}

/// What the file header says: `Ok(())` for this format; else what is wrong.
pub fn check_file_header(header: &[u8]) -> Result<(), crate::CorruptKind> {
    if header.len() < HEADER_LEN as usize || header[..8] != MAGIC {
        return Err(crate::CorruptKind::NotAnArchive);
    }
    let crc = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
    if crc != crc32fast::hash(&header[..12]) {
        return Err(crate::CorruptKind::NotAnArchive);
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version != FORMAT_VERSION {
        return Err(crate::CorruptKind::UnknownVersion(version));
    }
    Ok(())
}

/// A frame's bytes before its payload: length, head, checksum.
pub fn encode_head(frame: &Frame) -> Result<Vec<u8>, crate::ArchiveError> {
    let head =
        postcard::to_allocvec(frame).map_err(|e| crate::ArchiveError::Encode(e.to_string()))?;
    let len = u32::try_from(head.len())
        .ok()
        .filter(|&n| n <= MAX_HEAD_LEN)
        .ok_or_else(|| {
            crate::ArchiveError::Encode(format!("a frame head of {} bytes", head.len()))
        })?;
    let mut bytes = Vec::with_capacity(head.len() + 8);
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(&head);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    Ok(bytes)
}

/// Decodes a head from its length prefix's 4 bytes, the head bytes and the checksum; `None`
/// when the checksum or the encoding is wrong.
pub fn decode_head(len: [u8; 4], head: &[u8], crc: [u8; 4]) -> Option<Frame> {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&len);
    hasher.update(head);
    if hasher.finalize() != u32::from_le_bytes(crc) {
        return None;
    }
    match postcard::take_from_bytes::<Frame>(head) {
        Ok((frame, [])) => Some(frame),
        _ => None,
    }
}
