//! A session whose superseded snapshots are more than one transaction should hold is compacted
//! as several requests, one per range of its event log's seqs: each deletes at most
//! `RANGE_BYTES` of row data (or one snapshot), all of them together exactly the superseded
//! snapshots, each with a receipt and an event of its own; an identical retry of one range
//! returns its receipt and writes nothing; a clean reports the session once, with every range's
//! snapshots and bytes summed; with `--archive`, restoring every range puts the event log back
//! byte for byte.

use crate::common;

use std::collections::BTreeSet;

use common::archive::{clean_archived_with, restore_out, table_rows, unrestored};
use common::cli::{assert_exit, document, json};
use common::*;
use pruning_engine::{Operation, PruneRequest};
use pruning_opencode::{OpenCodeStore, PlannedCopy, RANGE_BYTES};

/// Bytes added to each superseded part snapshot of the session: 200 KB, as a long tool output
/// streamed in many snapshots makes them.
const PAD: usize = 100_000;

/// The fixture with every superseded part snapshot of `MANY_TURNS` made [`PAD`] hex pairs
/// longer: 70 of them, about 14 MB.
fn padded() -> Fixture {
    let fx = Fixture::new();
    fx.exec(&format!(
        "UPDATE event SET data = json_set(data, '$.part.pad', hex(zeroblob({PAD}))) \
         WHERE type = 'message.part.updated.1' \
           AND id IN (SELECT id FROM ({SUPERSEDED_SQL}) WHERE aggregate_id = '{MANY_TURNS}')"
    ));
    fx
}

/// The compaction requests a clean would make of `session` now.
fn compaction(store: &OpenCodeStore, session: &str) -> Vec<PruneRequest> {
    match store.clean_compaction(session).expect("plan") {
        PlannedCopy::Prune(requests) => requests,
        other => panic!("no compaction of {session}: {other:?}"),
    }
}

#[test]
fn each_range_deletes_at_most_its_bound_and_together_they_delete_every_superseded_snapshot() {
    let fx = padded();
    let doomed = superseded_of(&fx, MANY_TURNS);
    assert_eq!(doomed.len(), 180);
    let engine = fx.engine_with(fx.store(0));
    let requests = compaction(engine.store(), MANY_TURNS);
    // 70 snapshots of 200 KB and 110 small ones: 20 of the large ones fill 4 MiB.
    assert_eq!(requests.len(), 4, "{requests:?}");
    let revision = &requests[0].revision;
    assert!(requests.iter().all(|r| &r.revision == revision));
    let keys: BTreeSet<[u8; 32]> = requests.iter().map(pruning_engine::request_key).collect();
    assert_eq!(
        keys.len(),
        requests.len(),
        "each range has a key of its own"
    );

    let outcomes = engine.prune_many(&requests);
    let mut deleted = BTreeSet::new();
    let mut receipts_seen = BTreeSet::new();
    for outcome in outcomes {
        let outcome = outcome.expect("a range's compaction");
        assert!(!outcome.retried);
        let receipt = outcome.receipt.expect("receipt");
        assert!(
            receipt.bytes_removed <= RANGE_BYTES,
            "{} bytes in one range",
            receipt.bytes_removed
        );
        let Some(Operation::Compaction(compacted)) = &receipt.operation else {
            panic!("not a compaction's receipt: {receipt:?}");
        };
        assert_eq!(compacted.total(), receipt.removed_count);
        for id in &compacted.event_ids {
            assert!(deleted.insert(id.clone()), "{id} deleted twice");
        }
        receipts_seen.insert(receipt.receipt_id);
        assert_eq!(outcome.event.expect("event").id, receipt.receipt_id);
    }
    assert_eq!(deleted, doomed);
    assert_eq!(receipts_seen.len(), 4);
    assert!(superseded_of(&fx, MANY_TURNS).is_empty());

    // An identical retry of one range: its receipt, nothing written.
    let digest = fx.file_digest();
    let retry = engine.prune(&requests[1]).expect("retry");
    assert!(retry.retried);
    assert!(receipts_seen.contains(&retry.receipt.expect("receipt").receipt_id));
    assert_eq!(fx.file_digest(), digest, "a retry writes nothing");
    assert_eq!(
        engine.store().clean_compaction(MANY_TURNS).expect("plan"),
        PlannedCopy::Nothing
    );
}

#[test]
fn a_clean_counts_a_session_compacted_in_ranges_once() {
    let fx = padded();
    let sessions_with_superseded: i64 = fx.scalar(&format!(
        "SELECT count(DISTINCT aggregate_id) FROM ({SUPERSEDED_SQL}) \
         WHERE aggregate_id IN (SELECT id FROM session)"
    ));
    let doomed = superseded_of(&fx, MANY_TURNS);
    let dry = document(&fx.db, &["clean", "--all", "--abandoned-after", "never"]);
    let report = document(
        &fx.db,
        &["clean", "--all", "--abandoned-after", "never", "--apply"],
    );
    assert_eq!(
        dry["compaction"], report["compaction"],
        "the dry run says what the apply does"
    );
    let compaction = &report["compaction"];
    let receipts = receipts(&fx);
    let of_session: Vec<_> = receipts
        .iter()
        .filter(|r| r.session_id == MANY_TURNS && r.message_id.is_empty())
        .collect();
    assert_eq!(of_session.len(), 4);
    let snapshots: u32 = of_session.iter().map(|r| r.removed_count).sum();
    assert_eq!(snapshots as usize, doomed.len());
    let sessions: BTreeSet<&str> = receipts
        .iter()
        .filter(|r| r.message_id.is_empty())
        .map(|r| r.session_id.as_str())
        .collect();
    assert_eq!(
        compaction["sessions"],
        sessions.len() as u64,
        "{compaction}"
    );
    assert!(sessions.len() as i64 <= sessions_with_superseded);
    let bytes: u64 = receipts
        .iter()
        .filter(|r| r.message_id.is_empty())
        .map(|r| r.bytes_removed)
        .sum();
    assert_eq!(compaction["bytes"], bytes, "{compaction}");
    let removed: u64 = receipts
        .iter()
        .filter(|r| r.message_id.is_empty())
        .map(|r| u64::from(r.removed_count))
        .sum();
    assert_eq!(compaction["snapshots"], removed, "{compaction}");
}

#[test]
fn every_range_is_restored_and_the_event_log_is_back_byte_for_byte() {
    let fx = padded();
    let before = table_rows(&fx.db, "event");
    let report = clean_archived_with(&fx.db, &[MANY_TURNS], &[]);
    assert_eq!(report["compaction"]["sessions"], 1, "{report}");
    let ranges = receipts(&fx)
        .iter()
        .filter(|r| r.message_id.is_empty())
        .count();
    assert_eq!(ranges, 4, "{report}");
    assert_ne!(table_rows(&fx.db, "event"), before);
    // Newest first: the prunes of parts, then the ranges, the last one first.
    for receipt in &unrestored(&fx.db) {
        let out = restore_out(&fx.db, receipt);
        assert_exit(&out, 0);
        assert_eq!(json(&out)["status"], "restored");
    }
    assert_eq!(table_rows(&fx.db, "event"), before, "byte for byte");
    assert_eq!(superseded_of(&fx, MANY_TURNS).len(), 180);
}
