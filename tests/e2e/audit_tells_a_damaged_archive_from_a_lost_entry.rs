//! `audit` checks each archived receipt's entry: an entry that is in the file but does not read
//! back, or that an unreadable frame before it hides, is `archive_damaged` (the bytes are there;
//! a backup of the archive or a repair gets it back); an entry the file does not hold, as in an
//! archive of another database, is `archive_missing`.

use crate::common;

use common::archive::{archive_of, audit_report, prune_archived};
use common::audit::kinds;
use common::*;

/// The fixture with two archived prunes (TURN5's, then TURN1's).
fn two_archived() -> Fixture {
    let fx = Fixture::new();
    fx.skip_audit();
    prune_archived(&fx.db, MANY_TURNS, TURN5, None);
    prune_archived(&fx.db, MANY_TURNS, TURN1, None);
    fx
}

/// The first frame's head starts after the 16-byte file header and its 4-byte length; its
/// payload after the head and the head's 4-byte checksum.
fn first_frame(bytes: &[u8]) -> (usize, usize) {
    let head_len = u32::from_le_bytes(bytes[16..20].try_into().expect("length")) as usize;
    (20, 20 + head_len + 4)
}

fn flip(fx: &Fixture, at: impl Fn(&[u8]) -> usize) {
    let path = archive_of(&fx.db);
    let mut bytes = std::fs::read(&path).expect("archive");
    let offset = at(&bytes);
    bytes[offset] ^= 0x01;
    std::fs::write(&path, bytes).expect("archive");
}

fn archive_kinds(fx: &Fixture) -> Vec<String> {
    let (code, report) = audit_report(&fx.db);
    assert_eq!(code, 1, "{report}");
    kinds(&report).into_iter().map(|found| found.0).collect()
}

#[test]
fn a_flipped_byte_in_an_entry_is_archive_damaged() {
    let fx = two_archived();
    flip(&fx, |bytes| first_frame(bytes).1 + 8);
    assert_eq!(archive_kinds(&fx), ["archive_damaged"]);
}

#[test]
fn a_flipped_byte_in_the_first_frame_head_makes_every_entry_after_it_archive_damaged() {
    let fx = two_archived();
    flip(&fx, |bytes| first_frame(bytes).0 + 2);
    assert_eq!(archive_kinds(&fx), ["archive_damaged", "archive_damaged"]);
}

#[test]
fn an_archive_of_another_database_misses_every_entry() {
    let fx = two_archived();
    let other = Fixture::new();
    prune_archived(&other.db, MANY_TURNS, TURN5, None);
    std::fs::copy(archive_of(&other.db), archive_of(&fx.db)).expect("copy");
    assert_eq!(archive_kinds(&fx), ["archive_missing", "archive_missing"]);
}
