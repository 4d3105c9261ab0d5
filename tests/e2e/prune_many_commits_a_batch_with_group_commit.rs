//! `Engine::prune_many`: a batch journals its intents in one durable write, applies each
//! message in its own transaction without waiting for durability, syncs the store once, then
//! journals its commits in one write that does not wait for the disk and its refusals in one
//! durable write; each message keeps its own receipt and event. A failed sync leaves the batch
//! to recovery, which completes it from the receipts; commit marks lost with the journal's disk
//! are completed by recovery with the sequence numbers they were announced with.

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
fn a_batch_costs_two_journal_syncs_and_one_store_sync() {
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

    // One refused prune alone costs two journal syncs (intent, refusal): the batch costs two
    // (intents, refusals), its commit marks none.
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
    assert_eq!(batch_syncs, 2 * per_write);
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

/// The OpenCode store whose `make_durable` fails (an fsync error) its first `.1` times.
struct SyncFails(
    pruning_opencode::OpenCodeStore,
    std::sync::atomic::AtomicU32,
);

impl SyncFails {
    /// Fails every sync.
    fn always(store: pruning_opencode::OpenCodeStore) -> Self {
        Self(store, u32::MAX.into())
    }
}

impl pruning_engine::SessionStore for SyncFails {
    fn database_id(&self) -> Result<Option<String>, StoreError> {
        self.0.database_id()
    }
    fn journal_epoch(&self) -> Result<u64, StoreError> {
        self.0.journal_epoch()
    }
    fn set_journal_epoch(&self, epoch: u64) -> Result<bool, StoreError> {
        self.0.set_journal_epoch(epoch)
    }
    fn receipts_high_water(&self) -> Result<pruning_engine::ReceiptsHighWater, StoreError> {
        self.0.receipts_high_water()
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
        let failing = self
            .1
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if failing {
            Err(StoreError::OutcomeUnknown(
                "fsync: Input/output error".into(),
            ))
        } else {
            self.0.make_durable()
        }
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
        SyncFails::always(fx.store(30_000)),
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

/// The fsyncs one durable journal write costs on `syncs`' file, measured by refusing a stale
/// request for `request`'s message twice (a refusal writes its intent and its refusal); the
/// first refusal also warms up the journal's first write after opening.
fn syncs_per_journal_write<S: pruning_engine::SessionStore>(
    engine: &Engine<S>,
    syncs: &common::counting::FileCounters,
    request: &PruneRequest,
) -> u64 {
    let stale = PruneRequest::all_technical(
        MANY_TURNS.into(),
        request.message_id.clone(),
        "0".repeat(64),
    )
    .unwrap();
    assert!(engine.prune(&stale).unwrap().refusal.is_some());
    let before = syncs.write_syncs();
    assert!(engine.prune(&stale).unwrap().refusal.is_some());
    let per_write = (syncs.write_syncs() - before) / 2;
    assert!(per_write >= 1);
    per_write
}

#[test]
fn one_prune_of_a_running_engine_costs_one_journal_sync() {
    let fx = Fixture::new();
    let requests = every_candidate(&fx);
    let (file, syncs) = CountingFile::open(&fx.journal);
    let engine = Engine::open(fx.store(30_000), Journal::open_with_backend(file).unwrap()).unwrap();
    let per_write = syncs_per_journal_write(&engine, &syncs, &requests[0]);
    for request in &requests[..3] {
        let before = syncs.write_syncs();
        let outcome = engine.prune(request).unwrap();
        assert!(matches!(outcome.result, PruneResult::Pruned { .. }));
        // The intent; the commit mark rides the next durable write.
        assert_eq!(syncs.write_syncs() - before, per_write);
    }
    assert_eq!(engine.journal().last_seq().unwrap(), 3);
}

#[test]
fn once_an_outcome_is_unknown_commit_marks_are_durable() {
    let fx = Fixture::new();
    let requests = every_candidate(&fx);
    let (file, syncs) = CountingFile::open(&fx.journal);
    let engine = Engine::open(
        SyncFails(fx.store(30_000), 1.into()),
        Journal::open_with_backend(file).unwrap(),
    )
    .unwrap();
    let per_write = syncs_per_journal_write(&engine, &syncs, &requests[0]);

    // The first batch's sync fails: its two intents stay pending, their receipts in the
    // database. Recovery could complete them before later prunes, so the next batch's commit
    // marks are durable: two durable writes (intents, marks) instead of one.
    let first = engine.prune_many(&requests[..2]);
    assert!(first
        .iter()
        .all(|r| matches!(r, Err(EngineError::Store(StoreError::OutcomeUnknown(_))))));
    let before = syncs.write_syncs();
    let second = engine.prune_many(&requests[2..4]);
    assert_eq!(syncs.write_syncs() - before, 2 * per_write);
    let announced: Vec<(u64, String)> = second
        .iter()
        .map(|r| {
            let event = r.as_ref().unwrap().event.clone().unwrap();
            (event.seq, event.data.message_id)
        })
        .collect();
    assert_eq!(
        announced,
        vec![
            (1, requests[2].message_id.clone()),
            (2, requests[3].message_id.clone())
        ]
    );
    drop(engine);

    // Recovery completes the first batch after them.
    let engine = fx.engine();
    assert_eq!(engine.recovery().completed.len(), 2);
    let journaled = journaled_events(&engine);
    assert_eq!(
        journaled,
        vec![
            (1, requests[2].message_id.clone()),
            (2, requests[3].message_id.clone()),
            (3, requests[0].message_id.clone()),
            (4, requests[1].message_id.clone())
        ]
    );
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
fn commit_marks_lost_with_a_full_journal_disk_keep_their_announced_seqs() {
    let fx = Fixture::new();
    let requests = every_candidate(&fx);
    let (file, counters) = CountingFile::open(&fx.journal);
    let mut store = CountingStore::new(fx.store(30_000));
    store.fills_the_disk_of = Some(counters);
    let engine = Engine::open(store, Journal::open_with_backend(file).unwrap()).unwrap();
    // The journal's disk fills once the store made the batch durable: the commit marks wait
    // for a later durable write, so the batch is answered and announced.
    let results = engine.prune_many(&requests[..4]);
    let announced: Vec<(u64, String, String)> = results
        .iter()
        .map(|r| {
            let event = r.as_ref().unwrap().event.clone().unwrap();
            (event.seq, event.id.to_string(), event.data.message_id)
        })
        .collect();
    let asked: Vec<String> = requests[..4].iter().map(|r| r.message_id.clone()).collect();
    assert_eq!(
        announced.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(
        announced.iter().map(|a| a.2.clone()).collect::<Vec<_>>(),
        asked
    );
    assert_eq!(engine.receipts(None).unwrap().len(), 4);
    // Closing cannot write the marks either: they are lost.
    drop(engine);

    // The disk has room again: recovery completes the four from their receipts, in intent
    // order, with the seqs and event ids they were announced with.
    let engine = fx.engine();
    assert_eq!(engine.recovery().completed.len(), 4);
    let journaled: Vec<(u64, String, String)> = engine
        .events_after(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.id.to_string(), e.data.message_id))
        .collect();
    assert_eq!(journaled, announced);
}
