//! `Engine::prune_many`: a batch journals its intents in one durable write, applies each
//! message in its own transaction without waiting for durability, syncs the store once, then
//! journals its commits in one write and its refusals in another; each message keeps its own
//! receipt and event. A failed sync leaves the batch to recovery, which completes it from the
//! receipts.

use crate::common;

use std::sync::atomic::Ordering;

use common::counting::{CountingFile, CountingStore};
use common::*;
use pruning_engine::history::history_with;
use pruning_engine::{
    BlockedReason, Engine, EngineError, HistoryResult, IntentState, Journal, PruneRequest,
    PruneResult, StoreError,
};

/// An all-technical request for every prunable message of the many-turns session.
fn every_candidate(fx: &Fixture) -> Vec<PruneRequest> {
    let request = prune_listing(MANY_TURNS);
    let HistoryResult::Page(page) = history_with(&fx.store(0), &request, ROWS_ONLY)
        .unwrap()
        .result
    else {
        panic!()
    };
    page.candidates
        .into_iter()
        .map(|c| PruneRequest::all_technical(MANY_TURNS.into(), c.message_id, c.revision).unwrap())
        .collect()
}

#[test]
fn a_batch_costs_three_journal_writes_and_one_store_sync() {
    let fx = Fixture::new();
    let mut requests = every_candidate(&fx);
    assert_eq!(requests.len(), 10);
    // A stale request for a message the batch prunes first: refused on its own.
    let stale = PruneRequest::all_technical(
        MANY_TURNS.into(),
        requests[0].message_id.clone(),
        "0".repeat(64),
    )
    .unwrap();
    requests.push(stale.clone());

    let (file, syncs) = CountingFile::open(&fx.journal);
    let store = CountingStore::new(fx.store(30_000));
    let (durable_calls, deferred) = (store.durable_calls.clone(), store.deferred_commits.clone());
    let engine = Engine::open(store, Journal::open_with_backend(file).unwrap()).unwrap();

    // The journal's first write after opening may cost more; warm it up with a refusal.
    assert!(engine.prune(&stale).unwrap().refusal.is_some());
    let before = syncs.write_syncs();
    let results = engine.prune_many(&requests);
    let batch_syncs = syncs.write_syncs() - before;

    let answers: Vec<Result<u32, BlockedReason>> = results
        .iter()
        .map(|r| match &r.as_ref().unwrap().result {
            PruneResult::Pruned { removed_count, .. } => Ok(*removed_count),
            PruneResult::Blocked { reason } => Err(*reason),
        })
        .collect();
    assert!(
        answers[..10].iter().all(|a| matches!(a, Ok(n) if *n > 0)),
        "{answers:?}"
    );
    assert_eq!(answers[10], Err(BlockedReason::Conflict));
    assert_eq!(durable_calls.load(Ordering::SeqCst), 1);
    assert_eq!(deferred.load(Ordering::SeqCst), 10);

    // One prune alone costs two journal writes (intent, outcome): the batch costs three.
    let before = syncs.write_syncs();
    let single = engine.prune(&stale).unwrap();
    assert_eq!(
        single.result,
        PruneResult::Blocked {
            reason: BlockedReason::Conflict
        }
    );
    let per_write = (syncs.write_syncs() - before) / 2;
    assert!(per_write >= 1);
    assert_eq!(batch_syncs, 3 * per_write);
    assert_eq!(
        durable_calls.load(Ordering::SeqCst),
        1,
        "one prune syncs as it commits"
    );

    // Each message has its own receipt and event, in request order.
    let events = engine.events_after(0, 100).unwrap();
    let announced: Vec<(u64, &str)> = events
        .iter()
        .map(|e| (e.seq, e.data.message_id.as_str()))
        .collect();
    let expected: Vec<(u64, &str)> = requests[..10]
        .iter()
        .enumerate()
        .map(|(i, r)| (i as u64 + 1, r.message_id.as_str()))
        .collect();
    assert_eq!(announced, expected);
    assert_eq!(engine.receipts(None).unwrap().len(), 10);
    let intents = engine.journal().intents().unwrap();
    let refused = intents
        .iter()
        .filter(|i| {
            i.state
                == IntentState::Refused {
                    reason: "conflict".into(),
                }
        })
        .count();
    assert_eq!((intents.len(), refused), (13, 3));
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
}

/// The OpenCode store whose `make_durable` fails (an fsync error).
struct SyncFails(pruning_adapters::opencode::OpenCodeStore);

impl pruning_engine::SessionStore for SyncFails {
    fn database_id(&self) -> Result<Option<String>, StoreError> {
        self.0.database_id()
    }
    fn read_message(
        &self,
        request: &pruning_engine::PreviewRequest,
    ) -> Result<Result<pruning_engine::StoredMessage, pruning_engine::Refusal>, StoreError> {
        self.0.read_message(request)
    }
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        self.0.live_mutation(session_id, message_id)
    }
    fn apply(
        &self,
        command: &pruning_engine::PruneCommand<'_>,
    ) -> Result<pruning_engine::Applied, StoreError> {
        self.0.apply(command)
    }
    fn make_durable(&self) -> Result<(), StoreError> {
        Err(StoreError::OutcomeUnknown(
            "fsync: Input/output error".into(),
        ))
    }
    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<pruning_engine::DryRun, pruning_engine::Refusal>, StoreError> {
        self.0.dry_run(request, now_ms)
    }
    fn receipt_by_key(
        &self,
        key: &[u8; 32],
    ) -> Result<Option<pruning_engine::Receipt>, StoreError> {
        self.0.receipt_by_key(key)
    }
    fn receipts(
        &self,
        session_id: Option<&str>,
    ) -> Result<Vec<pruning_engine::Receipt>, StoreError> {
        self.0.receipts(session_id)
    }
}

#[test]
fn a_failed_sync_leaves_the_batch_to_recovery() {
    let fx = Fixture::new();
    let requests = every_candidate(&fx);
    let engine = Engine::open(
        SyncFails(fx.store(30_000)),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap();
    let results = engine.prune_many(&requests[..3]);
    assert!(results
        .iter()
        .all(|r| matches!(r, Err(EngineError::Store(StoreError::OutcomeUnknown(_))))));
    assert_eq!(engine.journal().pending_intents().unwrap().len(), 3);
    assert_eq!(engine.journal().last_seq().unwrap(), 0);
    drop(engine);

    // The process survived, so the commits did: recovery journals them, once each.
    let engine = fx.engine();
    assert_eq!(engine.recovery().completed.len(), 3);
    assert_eq!(engine.events_after(0, 10).unwrap().len(), 3);
    assert_eq!(engine.receipts(None).unwrap().len(), 3);
}

#[test]
fn a_request_repeated_in_a_batch_is_its_own_retry() {
    let fx = Fixture::new();
    let requests = every_candidate(&fx);
    let twice = vec![
        requests[0].clone(),
        requests[1].clone(),
        requests[0].clone(),
    ];
    let engine = fx.engine_with(fx.store(30_000));
    let results = engine.prune_many(&twice);
    let first = results[0].as_ref().unwrap();
    let again = results[2].as_ref().unwrap();
    assert_eq!(again.result, first.result);
    assert_eq!(again.receipt, first.receipt);
    assert_eq!(again.event, first.event);
    assert!(again.retried && !first.retried);
    assert_eq!(engine.receipts(None).unwrap().len(), 2);
    assert_eq!(engine.events_after(0, 10).unwrap().len(), 2);
    assert_eq!(engine.journal().intents().unwrap().len(), 2);
}

#[test]
fn a_journal_that_fills_up_after_the_commits_reports_each_committed_receipt() {
    let fx = Fixture::new();
    let requests = every_candidate(&fx);
    let (file, counters) = CountingFile::open(&fx.journal);
    let mut store = CountingStore::new(fx.store(30_000));
    store.fills_the_disk_of = Some(counters);
    let engine = Engine::open(store, Journal::open_with_backend(file).unwrap()).unwrap();
    let results = engine.prune_many(&requests[..4]);
    let committed: Vec<&str> = results
        .iter()
        .map(|r| match r {
            Err(EngineError::CommittedNotJournaled { receipt, cause }) => {
                assert!(cause.contains("No space left on device"), "{cause}");
                receipt.message_id.as_str()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    let asked: Vec<&str> = requests[..4]
        .iter()
        .map(|r| r.message_id.as_str())
        .collect();
    assert_eq!(committed, asked);
    assert_eq!(engine.receipts(None).unwrap().len(), 4);
    drop(engine);

    // The disk has room again: recovery journals the four commits and announces them.
    let engine = fx.engine();
    assert_eq!(engine.recovery().completed.len(), 4);
    assert_eq!(engine.events_after(0, 10).unwrap().len(), 4);
}
