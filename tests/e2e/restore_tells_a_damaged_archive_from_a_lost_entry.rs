//! A restore whose entry an unreadable frame hides says the archive is damaged, as the audit
//! does (`archive_damaged`, docs/ARCHITECTURE.md, "Archive"): the bytes are still there, and a
//! backup or a repair of the archive gets the entry back. Only an entry the file does not hold,
//! read to its end, is missing.

use crate::common;

use common::archive::{archive_of, audit_report, prune_archived, restore_out};
use common::audit::kinds;
use common::cli::{assert_exit, json};
use common::*;

#[test]
fn a_restore_behind_a_damaged_frame_says_the_archive_is_damaged() {
    let fx = Fixture::new();
    fx.skip_audit();
    prune_archived(&fx.db, MANY_TURNS, TURN5, None);
    let turn1 = prune_archived(&fx.db, MANY_TURNS, TURN1, None);
    let path = archive_of(&fx.db);
    let original = std::fs::read(&path).expect("archive");

    // One bit of the first frame's head (after the 16-byte header and its 4-byte length): its
    // checksum fails, and nothing after it reads.
    let mut damaged = original.clone();
    damaged[20] ^= 0x01;
    std::fs::write(&path, &damaged).expect("archive");
    let (_, report) = audit_report(&fx.db);
    let found: Vec<String> = kinds(&report).into_iter().map(|f| f.0).collect();
    assert_eq!(found, ["archive_damaged", "archive_damaged"], "{report}");

    let out = restore_out(&fx.db, &turn1);
    assert_exit(&out, 1);
    let doc = json(&out);
    assert!(
        doc["error"].as_str().expect("error").contains("is damaged"),
        "the entry behind the damaged frame is reported as lost: {doc}"
    );

    // Repaired, the same restore goes through.
    std::fs::write(&path, &original).expect("archive");
    let out = restore_out(&fx.db, &turn1);
    assert_exit(&out, 0);
    assert_eq!(json(&out)["status"], "restored");
}
