//! A compaction deletes exactly the session's superseded snapshots (a `message.part.updated.1`,
//! `message.updated.1` or `session.updated.1` event with a newer one of the same entity and type
//! in the aggregate): every other event row stays byte for byte, the session's sequence does not
//! move, and the receipt lists what went. It is announced as
//! `rpc.codenomad.session-pruning.compacted`; an identical retry returns the same receipt and
//! announces the same event again; a snapshot OpenCode writes later makes a new compaction take
//! exactly the one it supersedes.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use pruning_engine::{Operation, PruneRequest, PruneResult, COMPACTED_EVENT_TYPE};
use pruning_opencode::{OpenCodeStore, PlannedCopy};

/// Every `event` row, id -> (aggregate, seq, type, data).
fn events(fx: &Fixture) -> BTreeMap<String, (String, i64, String, String)> {
    let conn = fx.sql();
    let mut stmt = conn
        .prepare("SELECT id, aggregate_id, seq, type, data FROM event")
        .expect("select");
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                (row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?),
            ))
        })
        .expect("query");
    rows.map(Result::unwrap).collect()
}

/// The compaction a clean would ask for of `session` now.
fn compaction(store: &OpenCodeStore, session: &str) -> PruneRequest {
    match store.clean_compaction(session).expect("plan") {
        // The fixture's sessions are small: one range each.
        PlannedCopy::Prune(mut requests) if requests.len() == 1 => requests.remove(0),
        other => panic!("no compaction of {session}: {other:?}"),
    }
}

#[test]
fn a_compaction_deletes_every_superseded_snapshot_and_nothing_else() {
    let fx = Fixture::new();
    let before = events(&fx);
    let doomed = superseded_of(&fx, MANY_TURNS);
    assert_eq!(doomed.len(), 180);
    let seq = fx.scalar(&format!(
        "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
    ));
    let engine = fx.engine_with(fx.store(0));
    let request = compaction(engine.store(), MANY_TURNS);
    assert_eq!(request.message_id, "");
    let outcome = engine.prune(&request).expect("compaction");
    let receipt = outcome.receipt.expect("receipt");
    let Some(Operation::Compaction(compacted)) = &receipt.operation else {
        panic!("not a compaction's receipt: {receipt:?}");
    };
    assert_eq!(
        (
            compacted.part_snapshots,
            compacted.message_snapshots,
            compacted.session_snapshots
        ),
        (70, 70, 40)
    );
    let listed: BTreeSet<String> = compacted.event_ids.iter().cloned().collect();
    assert_eq!(listed, doomed);
    assert_eq!(receipt.removed_count, 180);
    let freed: i64 = before
        .iter()
        .filter(|(id, _)| doomed.contains(*id))
        .map(|(_, (_, _, _, data))| data.len() as i64)
        .sum();
    assert_eq!(receipt.bytes_removed as i64, freed);
    assert_eq!(receipt.revision_before, receipt.revision_after);
    assert_eq!(receipt.revision_before, request.revision);
    assert!(receipt.part_ids.is_empty() && receipt.indexes.is_empty());
    assert_eq!(
        outcome.result,
        PruneResult::Pruned {
            message_id: String::new(),
            revision: request.revision.clone(),
            removed_count: 180
        }
    );
    drop(engine);

    // Every other row byte for byte: what replaying the log ends in is the same.
    let mut expected = before.clone();
    expected.retain(|id, _| !doomed.contains(id));
    assert_eq!(events(&fx), expected);
    assert!(superseded_of(&fx, MANY_TURNS).is_empty());
    assert_eq!(
        fx.scalar(&format!(
            "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
        )),
        seq,
        "a compaction appends no event"
    );
    // The other sessions' snapshots are untouched.
    assert!(!superseded_of(&fx, KILLED_MID_TOOL).is_empty());
}

#[test]
fn an_identical_retry_returns_the_same_receipt_and_announces_the_same_event() {
    let fx = Fixture::new();
    let engine = fx.engine_with(fx.store(0));
    let request = compaction(engine.store(), MANY_TURNS);
    let first = engine.prune(&request).expect("compaction");
    let event = first.event.clone().expect("event");
    assert_eq!(event.event_type, COMPACTED_EVENT_TYPE);
    assert_eq!(event.seq, 1);
    assert_eq!(event.data.session_id, MANY_TURNS);
    assert_eq!(event.removed_count, 180);
    let receipt = first.receipt.clone().expect("receipt");
    assert_eq!(event.id, receipt.receipt_id);
    assert_eq!(event.bytes_removed, Some(receipt.bytes_removed));
    assert_eq!(
        event.announced_data(),
        serde_json::json!({"sessionID": MANY_TURNS, "snapshots": 180, "bytes": receipt.bytes_removed})
    );
    let digest = fx.file_digest();

    let again = engine.prune(&request).expect("retry");
    assert!(again.retried);
    assert_eq!(again.receipt, first.receipt);
    assert_eq!(again.event, first.event);
    assert_eq!(again.result, first.result);
    assert_eq!(fx.file_digest(), digest, "a retry writes nothing");
    assert_eq!(
        journaled_events(&engine),
        vec![(1, String::new())],
        "one event, for the compaction"
    );
    drop(engine);

    // A new engine answers the retry from the journal and the receipt as well.
    let engine = fx.engine_with(fx.store(0));
    let later = engine.prune(&request).expect("retry after a restart");
    assert!(later.retried);
    assert_eq!(later.event, first.event);
    assert_eq!(receipts(&fx).len(), 1);
}

#[test]
fn a_snapshot_written_later_is_compacted_by_the_next_compaction_alone() {
    let fx = Fixture::new();
    let engine = fx.engine_with(fx.store(0));
    let first = compaction(engine.store(), MANY_TURNS);
    engine.prune(&first).expect("compaction");
    drop(engine);
    // OpenCode writes one more snapshot of the session (as it does after a step): the last one
    // is now superseded.
    let newest = fx
        .sql()
        .query_row(
            "SELECT id FROM event WHERE aggregate_id = ?1 AND type = 'session.updated.1' \
             ORDER BY seq DESC LIMIT 1",
            [MANY_TURNS],
            |row| row.get::<_, String>(0),
        )
        .expect("newest session snapshot");
    fx.exec(&format!(
        "UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{MANY_TURNS}';
         INSERT INTO event (id, aggregate_id, seq, type, data)
           SELECT 'evt_2266ffffffff0000000000000001', aggregate_id,
                  (SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'),
                  type, data
           FROM event WHERE id = '{newest}';"
    ));
    let engine = fx.engine_with(fx.store(0));
    let second = compaction(engine.store(), MANY_TURNS);
    assert_ne!(second.revision, first.revision, "the event log moved");
    let outcome = engine.prune(&second).expect("second compaction");
    assert!(!outcome.retried);
    let receipt = outcome.receipt.expect("receipt");
    let Some(Operation::Compaction(compacted)) = receipt.operation else {
        panic!("not a compaction's receipt");
    };
    assert_eq!(compacted.event_ids, vec![newest]);
    assert_eq!(compacted.session_snapshots, 1);
    assert_eq!(receipts(&fx).len(), 2);
}
