//! Recovery on open: an intent journaled but never applied is marked abandoned; an intent whose
//! prune committed in the database but was never marked committed in the journal (a stop
//! between the two steps) is completed, and its event is replayable.

use crate::common;

use common::*;
use pruning_engine::{Applied, Delivery, IntentState, Journal, PruneCommand, SessionStore};

#[test]
fn intent_journaled_but_not_applied_is_abandoned_on_open() {
    let fx = Fixture::new();
    let (intent, req, _) = journal_turn5_intent(&fx);
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
    let (intent, receipt) = prune_stopped_before_journal_commit(&fx);
    let receipt_id = receipt.receipt_id;
    let req = request(MANY_TURNS, TURN5, &receipt.revision_before, &[1, 2]);

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

/// A store whose commit reports a failure (as an fsync error on COMMIT can), its first `failures`
/// times: the outcome is unknown to the engine. With `commits`, the transaction did commit
/// before the failure; without, it did not.
struct CommitReportsFailure {
    store: pruning_opencode::OpenCodeStore,
    commits: bool,
    failures: std::sync::atomic::AtomicU32,
}

impl CommitReportsFailure {
    /// Every commit commits and reports a failure.
    fn always(store: pruning_opencode::OpenCodeStore) -> Self {
        Self::first(store, true, u32::MAX)
    }

    /// The first `failures` commits report a failure, having committed when `commits`.
    fn first(store: pruning_opencode::OpenCodeStore, commits: bool, failures: u32) -> Self {
        Self {
            store,
            commits,
            failures: failures.into(),
        }
    }
}

impl SessionStore for CommitReportsFailure {
    fn database_id(&self) -> Result<Option<String>, pruning_engine::StoreError> {
        self.store.database_id()
    }
    fn journal_epoch(&self) -> Result<u64, pruning_engine::StoreError> {
        self.store.journal_epoch()
    }
    fn set_journal_epoch(&self, epoch: u64) -> Result<bool, pruning_engine::StoreError> {
        self.store.set_journal_epoch(epoch)
    }
    fn receipts_high_water(
        &self,
    ) -> Result<pruning_engine::ReceiptsHighWater, pruning_engine::StoreError> {
        self.store.receipts_high_water()
    }
    fn read_message(
        &self,
        request: &pruning_engine::PreviewRequest,
    ) -> Result<
        Result<pruning_engine::StoredMessage, pruning_engine::Refusal>,
        pruning_engine::StoreError,
    > {
        self.store.read_message(request)
    }
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        self.store.live_mutation(session_id, message_id)
    }
    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, pruning_engine::StoreError> {
        let failing = self
            .failures
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |left| left.checked_sub(1),
            )
            .is_ok();
        if !failing {
            return self.store.apply(command);
        }
        if self.commits {
            self.store.apply(command)?;
        }
        Err(pruning_engine::StoreError::OutcomeUnknown(
            "fsync: Input/output error".into(),
        ))
    }
    fn dry_run(
        &self,
        request: &pruning_engine::PruneRequest,
        now_ms: i64,
    ) -> Result<Result<pruning_engine::DryRun, pruning_engine::Refusal>, pruning_engine::StoreError>
    {
        self.store.dry_run(request, now_ms)
    }
    fn receipt_by_key(
        &self,
        key: &[u8; 32],
    ) -> Result<Option<pruning_engine::Receipt>, pruning_engine::StoreError> {
        self.store.receipt_by_key(key)
    }
    fn receipts(
        &self,
        session_id: Option<&str>,
    ) -> Result<Vec<pruning_engine::Receipt>, pruning_engine::StoreError> {
        self.store.receipts(session_id)
    }
}

#[test]
fn commit_with_unknown_outcome_leaves_the_intent_for_recovery() {
    let fx = Fixture::new();
    let engine = pruning_engine::Engine::open(
        CommitReportsFailure::always(fx.store(30_000)),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap();
    let (revision, indexes) = {
        let request = pruning_engine::PreviewRequest::new(MANY_TURNS.into(), TURN5.into()).unwrap();
        match engine.preview(&request).unwrap() {
            pruning_engine::PreviewResult::Preview {
                revision, parts, ..
            } => (
                revision,
                parts.iter().map(|p| i64::from(p.index)).collect::<Vec<_>>(),
            ),
            other => panic!("{other:?}"),
        }
    };
    let result = engine.prune(&request(MANY_TURNS, TURN5, &revision, &indexes));
    assert!(matches!(
        result,
        Err(pruning_engine::EngineError::Store(
            pruning_engine::StoreError::OutcomeUnknown(_)
        ))
    ));
    let pending = engine.journal().pending_intents().unwrap();
    assert_eq!(pending.len(), 1);
    drop(engine);

    let engine = fx.engine();
    assert_eq!(engine.recovery().completed, vec![pending[0].intent_id]);
    assert_eq!(engine.events_after(0, 10).unwrap().len(), 1);
}

/// The revision and technical indexes of turn 5, previewed through `engine`.
fn turn5_request<S: SessionStore>(
    engine: &pruning_engine::Engine<S>,
) -> pruning_engine::PruneRequest {
    let preview = pruning_engine::PreviewRequest::new(MANY_TURNS.into(), TURN5.into()).unwrap();
    match engine.preview(&preview).unwrap() {
        pruning_engine::PreviewResult::Preview {
            revision, parts, ..
        } => request(
            MANY_TURNS,
            TURN5,
            &revision,
            &parts.iter().map(|p| i64::from(p.index)).collect::<Vec<_>>(),
        ),
        other => panic!("{other:?}"),
    }
}

/// `(seq, event id)` of every journaled event.
fn journaled<S: SessionStore>(engine: &pruning_engine::Engine<S>) -> Vec<(u64, uuid::Uuid)> {
    engine
        .events_after(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.id))
        .collect()
}

/// A prune whose commit did happen but was reported failed, then retried in the same engine:
/// the retry finds its receipt and completes that intent, as recovery would, with one event;
/// the next open has nothing left to recover and the prune keeps that one event.
#[test]
fn a_retry_after_an_unknown_outcome_that_committed_journals_one_event() {
    let fx = Fixture::new();
    let engine = pruning_engine::Engine::open(
        CommitReportsFailure::first(fx.store(30_000), true, 1),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap();
    let req = turn5_request(&engine);
    assert!(matches!(
        engine.prune(&req),
        Err(pruning_engine::EngineError::Store(
            pruning_engine::StoreError::OutcomeUnknown(_)
        ))
    ));
    let pending = engine.journal().pending_intents().unwrap();
    assert_eq!(pending.len(), 1);

    let retry = engine.prune(&req).unwrap();
    assert!(retry.retried);
    let receipt = retry.receipt.clone().expect("the receipt");
    assert_eq!(receipt.intent_id, pending[0].intent_id);
    let event = retry.event.clone().expect("the event");
    assert_eq!((event.seq, event.id), (1, receipt.receipt_id));
    assert_eq!(journaled(&engine), vec![(1, receipt.receipt_id)]);
    assert!(engine.journal().pending_intents().unwrap().is_empty());
    drop(engine);

    let engine = fx.engine();
    assert_eq!(engine.recovery(), &pruning_engine::Recovery::default());
    assert_eq!(journaled(&engine), vec![(1, receipt.receipt_id)]);
    assert_eq!(engine.receipts(None).unwrap(), vec![receipt]);
}

/// A prune whose commit did not happen but was reported failed, then retried in the same
/// engine: the first intent is abandoned (no receipt of its own), the retry prunes with one
/// event, and the next open does not give that receipt a second event.
#[test]
fn a_retry_after_an_unknown_outcome_that_did_not_commit_journals_one_event() {
    let fx = Fixture::new();
    let engine = pruning_engine::Engine::open(
        CommitReportsFailure::first(fx.store(30_000), false, 1),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap();
    let req = turn5_request(&engine);
    assert!(engine.prune(&req).is_err());
    let first = engine.journal().pending_intents().unwrap();
    assert_eq!(first.len(), 1);

    let retry = engine.prune(&req).unwrap();
    assert!(!retry.retried);
    let receipt = retry.receipt.clone().expect("the receipt");
    assert_ne!(receipt.intent_id, first[0].intent_id);
    assert_eq!(journaled(&engine), vec![(1, receipt.receipt_id)]);
    assert!(matches!(
        engine
            .journal()
            .intent(first[0].intent_id)
            .unwrap()
            .unwrap()
            .state,
        IntentState::Abandoned { .. }
    ));
    drop(engine);

    let engine = fx.engine();
    assert_eq!(engine.recovery(), &pruning_engine::Recovery::default());
    assert_eq!(journaled(&engine), vec![(1, receipt.receipt_id)]);
}
