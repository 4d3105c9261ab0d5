//! The wall clock may step back while a batch makes its intents (a clock set by hand or by
//! NTP): the intent ids still sort in the order the intents were made (UUID v7, monotonic in
//! the process), their times do not. Commit marks lost in a crash are completed by recovery in
//! intent order, so each event keeps the sequence number it was announced with
//! (docs/ARCHITECTURE.md, "Sequence numbers after a crash").

use crate::common;

use common::counting::CountingFile;
use common::*;
use pruning_engine::{Applied, Durability, Journal, PruneCommand, PruneRequest, SessionStore};
use pruning_journal::Commit;

#[test]
fn events_keep_their_numbers_when_the_clock_stepped_back_inside_a_batch() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let requests: Vec<PruneRequest> = [TURN1, TURN5]
        .iter()
        .map(|message| {
            let revision = preview(&engine, MANY_TURNS, message).0;
            PruneRequest::all_technical(MANY_TURNS.into(), (*message).into(), revision).unwrap()
        })
        .collect();
    let database_id = engine.database_id().to_string();
    drop(engine);

    // The batch's two intents, made in this order; the clock stepped back 5 s between them.
    let first = pending_intent(&requests[0]);
    let second = pruning_engine::Intent {
        created_at_ms: first.created_at_ms - 5_000,
        ..pending_intent(&requests[1])
    };
    assert!(second.intent_id > first.intent_id);

    // The batch as the engine runs it: its intents in one durable write, each prune committed
    // in the database, the store synced, the commit marks in one write that does not wait for
    // the disk, and announced with the seqs that write gave them.
    let (file, counters) = CountingFile::open(&fx.journal);
    let journal = Journal::open_with_backend(file).unwrap();
    journal
        .record_intents(&[first.clone(), second.clone()])
        .unwrap();
    let store = fx.store(30_000);
    let mut commits = Vec::new();
    for (intent, request) in [&first, &second].into_iter().zip(&requests) {
        let applied = store
            .apply(&PruneCommand {
                request,
                intent_id: intent.intent_id,
                request_key: intent.request_key,
                receipt_id: uuid::Uuid::now_v7(),
                database_id: &database_id,
                now_ms: now_ms(),
                durability: Durability::Deferred,
            })
            .unwrap();
        let Applied::Pruned { receipt, .. } = applied else {
            panic!("{applied:?}");
        };
        commits.push(Commit {
            intent_id: intent.intent_id,
            event_id: receipt.receipt_id,
            revision_after: receipt.revision_after.clone(),
            removed_count: receipt.removed_count,
            committed_at_ms: receipt.committed_at_ms,
            kind: pruning_journal::EventKind::Pruned,
            receipt_digest: Some(receipt.digest()),
        });
    }
    store.make_durable().unwrap();
    let announced: Vec<(u64, uuid::Uuid, String)> = journal
        .commit_lazily(&commits)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.event_id, e.message_id))
        .collect();
    assert_eq!(
        announced.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![1, 2]
    );
    // The process dies before any later durable write: the marks are lost.
    counters.fill_the_disk();
    drop(journal);
    drop(store);

    let engine = fx.engine();
    assert_eq!(
        engine.recovery().completed,
        vec![first.intent_id, second.intent_id]
    );
    let journaled: Vec<(u64, uuid::Uuid, String)> = engine
        .events_after(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.id, e.data.message_id))
        .collect();
    assert_eq!(journaled, announced);
}
