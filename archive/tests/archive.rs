//! The archive file on disk: what reads back after a reopen, a torn append, a discard, a
//! rewrite, damage, and a second writer.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use pruning_archive::{
    content_hash, Archive, ArchiveError, ArchiveReader, ArchivedRows, CorruptKind, EntryKey,
    NewEntry, SqlValue, TableRows,
};
use uuid::Uuid;

fn rows(text: &str) -> ArchivedRows {
    ArchivedRows {
        tables: vec![TableRows {
            table: "part".into(),
            columns: vec!["id".into(), "data".into()],
            rows: vec![vec![
                SqlValue::Text(b"prt_1".to_vec()),
                SqlValue::Text(text.repeat(200).into_bytes()),
            ]],
        }],
    }
}

fn append(archive: &mut Archive, text: &str) -> EntryKey {
    let encoded = rows(text).encode().unwrap();
    let appended = archive
        .append(&NewEntry {
            receipt_id: Uuid::now_v7(),
            session_id: "ses_1",
            message_id: "msg_1",
            archived_at_ms: 1_700_000_000_000,
            encoded: &encoded,
            content_hash: content_hash(&encoded),
        })
        .unwrap();
    assert!(appended.stored_bytes < encoded.len() as u64, "compressed");
    appended.key
}

#[test]
fn entries_read_back_exactly_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opencode.db.prune-archive");
    let mut archive = Archive::open(&path, 0o644).unwrap();
    let first = append(&mut archive, "one ");
    let second = append(&mut archive, "two ");
    archive.sync().unwrap();
    drop(archive);
    let reader = ArchiveReader::open(&path).unwrap().unwrap();
    assert_eq!(reader.read(&first).unwrap(), rows("one "));
    assert_eq!(reader.read(&second).unwrap(), rows("two "));
    assert_eq!(reader.index().entries().count(), 2);
    assert_eq!(reader.index().unreadable(), None);
}

#[test]
fn a_missing_archive_reads_as_none_and_is_not_created_by_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.prune-archive");
    assert!(ArchiveReader::open(&path).unwrap().is_none());
    assert!(!path.exists());
}

#[test]
fn a_torn_append_ends_the_readable_frames_and_refuses_appends_until_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.prune-archive");
    let mut archive = Archive::open(&path, 0o644).unwrap();
    let kept = append(&mut archive, "kept ");
    let torn = append(&mut archive, "torn ");
    archive.sync().unwrap();
    drop(archive);
    let len = std::fs::metadata(&path).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 3)
        .unwrap();

    let mut archive = Archive::open(&path, 0o644).unwrap();
    let (offset, kind) = archive.index().unreadable().unwrap();
    assert_eq!(kind, CorruptKind::Truncated);
    assert!(archive.index().get(&torn).is_none());
    assert_eq!(archive.read(&kept).unwrap(), rows("kept "));
    let refused = append_result(&mut archive);
    assert!(matches!(refused, Err(ArchiveError::Corrupt { offset: o, .. }) if o == offset));
    archive.truncate_unreadable_tail().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), offset);
    let after = append(&mut archive, "after ");
    archive.sync().unwrap();
    drop(archive);
    let reader = ArchiveReader::open(&path).unwrap().unwrap();
    assert_eq!(reader.read(&after).unwrap(), rows("after "));
    assert_eq!(reader.index().entries().count(), 2);
}

fn append_result(archive: &mut Archive) -> Result<pruning_archive::Appended, ArchiveError> {
    let encoded = rows("x").encode().unwrap();
    archive.append(&NewEntry {
        receipt_id: Uuid::now_v7(),
        session_id: "s",
        message_id: "m",
        archived_at_ms: 0,
        encoded: &encoded,
        content_hash: content_hash(&encoded),
    })
}

#[test]
fn a_discarded_entry_is_no_longer_live_and_a_rewrite_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.prune-archive");
    let mut archive = Archive::open(&path, 0o644).unwrap();
    let kept = append(&mut archive, "kept ");
    let orphan = append(&mut archive, "orphan ");
    archive.discard(&[orphan]).unwrap();
    archive.sync().unwrap();
    assert!(archive.index().get(&orphan).is_none());
    let shrunk = archive.rewrite(&[], 5).unwrap();
    assert!(shrunk > 0);
    assert!(archive.index().purged().is_empty(), "a discard is no purge");
    drop(archive);
    let reader = ArchiveReader::open(&path).unwrap().unwrap();
    assert_eq!(
        reader.index().entries().map(|e| e.key).collect::<Vec<_>>(),
        vec![kept]
    );
}

#[test]
fn a_purge_removes_the_entry_and_keeps_its_record_through_later_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.prune-archive");
    let mut archive = Archive::open(&path, 0o644).unwrap();
    let old = append(&mut archive, "old ");
    let new = append(&mut archive, "new ");
    archive.sync().unwrap();
    archive.rewrite(&[old], 42).unwrap();
    archive.rewrite(&[], 43).unwrap();
    drop(archive);
    let reader = ArchiveReader::open(&path).unwrap().unwrap();
    assert!(matches!(
        reader.read(&old),
        Err(ArchiveError::NoEntry { .. })
    ));
    assert_eq!(reader.index().purged_entry(&old).unwrap().purged_at_ms, 42);
    assert_eq!(reader.read(&new).unwrap(), rows("new "));
    assert!(!dir.path().join("p.prune-archive.rewrite").exists());
}

#[test]
fn a_damaged_payload_is_reported_as_a_bad_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.prune-archive");
    let mut archive = Archive::open(&path, 0o644).unwrap();
    let key = append(&mut archive, "data ");
    archive.sync().unwrap();
    drop(archive);
    let len = std::fs::metadata(&path).unwrap().len();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, len - 2).unwrap();
    file.write_all_at(&[byte[0] ^ 0xff], len - 2).unwrap();
    let reader = ArchiveReader::open(&path).unwrap().unwrap();
    assert!(matches!(
        reader.read(&key),
        Err(ArchiveError::BadEntry { .. })
    ));
}

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.prune-archive");
    let first = Archive::open(&path, 0o644).unwrap();
    assert!(matches!(
        Archive::open(&path, 0o644),
        Err(ArchiveError::Locked { .. })
    ));
    drop(first);
    Archive::open(&path, 0o644).unwrap();
}

#[test]
fn a_file_that_is_not_an_archive_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.prune-archive");
    std::fs::write(&path, b"SQLite format 3\0 and more bytes").unwrap();
    assert!(matches!(
        Archive::open(&path, 0o644),
        Err(ArchiveError::Corrupt {
            offset: 0,
            kind: CorruptKind::NotAnArchive,
            ..
        })
    ));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"SQLite format 3\0 and more bytes"
    );
}

#[test]
fn a_file_whose_header_was_never_written_whole_reads_as_empty_and_gets_one() {
    let dir = tempfile::tempdir().unwrap();
    for start in [&b""[..], &b"SPARC"[..], &[0u8; 9][..]] {
        let path = dir.path().join("c.prune-archive");
        std::fs::write(&path, start).unwrap();
        let reader = ArchiveReader::open(&path).unwrap().unwrap();
        assert_eq!(reader.index().entries().count(), 0, "{start:?}");
        assert_eq!(reader.index().unreadable(), None, "{start:?}");
        let mut archive = Archive::open(&path, 0o644).unwrap();
        let key = append(&mut archive, "first ");
        archive.sync().unwrap();
        drop(archive);
        let reader = ArchiveReader::open(&path).unwrap().unwrap();
        assert_eq!(reader.read(&key).unwrap(), rows("first "), "{start:?}");
        std::fs::remove_file(&path).unwrap();
    }
    // Short, but not the start of a header: not an archive, left alone.
    let path = dir.path().join("d.prune-archive");
    std::fs::write(&path, b"hello").unwrap();
    assert!(matches!(
        ArchiveReader::open(&path),
        Err(ArchiveError::Corrupt {
            offset: 0,
            kind: CorruptKind::NotAnArchive,
            ..
        })
    ));
    assert!(matches!(
        Archive::open(&path, 0o644),
        Err(ArchiveError::Corrupt {
            offset: 0,
            kind: CorruptKind::NotAnArchive,
            ..
        })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"hello");
}

#[test]
fn a_writer_never_holds_a_file_a_rewrite_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.prune-archive");
    let mut first = Archive::open(&path, 0o644).unwrap();
    let kept = append(&mut first, "kept ");
    first.sync().unwrap();
    // A rewrite renames a new file over the path; the old one is no archive any more.
    first.rewrite(&[], 1).unwrap();
    drop(first);
    let mut second = Archive::open(&path, 0o644).unwrap();
    let later = append(&mut second, "later ");
    second.sync().unwrap();
    drop(second);
    let reader = ArchiveReader::open(&path).unwrap().unwrap();
    assert_eq!(reader.read(&kept).unwrap(), rows("kept "));
    assert_eq!(reader.read(&later).unwrap(), rows("later "));
}
