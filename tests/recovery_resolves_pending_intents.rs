//! Recovery on open: an intent journaled but never applied is marked abandoned; an intent whose
//! prune committed in the database but was never marked committed in the journal (a stop
//! between the two steps) is completed, and its event is replayable.

mod common;

use common::*;
use pruning_engine::{
    request_key, Applied, Delivery, Intent, IntentState, Journal, PruneCommand, SessionStore,
};
use uuid::Uuid;

fn pending_intent(req: &pruning_engine::PruneRequest) -> Intent {
    Intent {
        intent_id: Uuid::now_v7(),
        request_key: request_key(req),
        session_id: req.session_id.clone(),
        message_id: req.message_id.clone(),
        revision: req.revision.clone(),
        selection: pruning_journal::Selection::Indexes(vec![1, 2]),
        created_at_ms: now_ms(),
        state: IntentState::Pending,
    }
}

#[test]
fn intent_journaled_but_not_applied_is_abandoned_on_open() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    drop(engine);
    let req = request(MANY_TURNS, TURN5, &revision, &indexes);
    let intent = pending_intent(&req);
    Journal::open(&fx.journal)
        .unwrap()
        .record_intent(&intent)
        .unwrap();
    let digest = fx.file_digest();

    let engine = fx.engine();
    assert_eq!(engine.recovery().abandoned, vec![intent.intent_id]);
    assert!(engine.recovery().completed.is_empty());
    assert!(matches!(
        engine
            .journal()
            .intent(intent.intent_id)
            .unwrap()
            .unwrap()
            .state,
        IntentState::Abandoned { .. }
    ));
    assert_eq!(engine.journal().last_seq().unwrap(), 0);
    drop(engine);
    assert_eq!(fx.file_digest(), digest);
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 1);

    // The same request can then run for real.
    let engine = fx.engine();
    assert_eq!(pruned(&engine.prune(&req).unwrap().result).2, 2);
}

#[test]
fn intent_applied_but_not_committed_is_completed_on_open_and_replayable() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let database_id = engine.database_id().to_string();
    drop(engine);
    let req = request(MANY_TURNS, TURN5, &revision, &indexes);
    let intent = pending_intent(&req);
    Journal::open(&fx.journal)
        .unwrap()
        .record_intent(&intent)
        .unwrap();

    // Step 4 ran (the prune committed with its receipt), then the process stopped before step 5.
    let receipt_id = Uuid::now_v7();
    let applied = fx
        .store(30_000)
        .apply(&PruneCommand {
            request: &req,
            intent_id: intent.intent_id,
            request_key: intent.request_key,
            receipt_id,
            database_id: &database_id,
            now_ms: now_ms(),
        })
        .unwrap();
    let receipt = match applied {
        Applied::Pruned {
            receipt,
            replayed: false,
        } => *receipt,
        other => panic!("{other:?}"),
    };

    let engine = fx.engine();
    assert_eq!(engine.recovery().completed, vec![intent.intent_id]);
    assert!(engine.recovery().abandoned.is_empty());
    let events = engine.events_after(0, 10).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].seq, 1);
    assert_eq!(events[0].id, receipt_id);
    assert_eq!(events[0].data.revision, receipt.revision_after);
    assert_eq!(events[0].data.message_id, TURN5);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut subscription = engine.subscribe(0);
    let delivered = runtime.block_on(subscription.recv()).unwrap();
    assert_eq!(delivered, Delivery::Event(events[0].clone()));

    // The retry now returns that receipt.
    let retry = engine.prune(&req).unwrap();
    assert!(retry.retried);
    assert_eq!(retry.receipt, Some(receipt));
}
