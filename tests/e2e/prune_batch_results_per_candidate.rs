//! `pruneBatch`: each history candidate is pruned of all its technical parts in its own
//! transaction with its own receipt and event; a stale candidate is refused alone; an identical
//! retry returns the same results without writing; a claimed session refuses every candidate
//! and changes nothing; an error in one candidate is `blocked/unavailable` for it only.

use crate::common;

use common::{prune_listing, ROWS_ONLY};

use std::ops::ControlFlow;

use common::v2::{V2Fixture, V2_ASSISTANT, V2_SESSION};
use pruning_engine::history::{HistoryCandidate, HistoryScan, ScanEnd, ScannedMessage};
use pruning_engine::{
    Applied, BatchItem, BlockedReason, DryRun, Engine, HistoryResult, IntentState, Journal,
    PreviewRequest, PreviewResult, PruneBatchRequest, PruneCommand, PruneRequest, PruneResult,
    Receipt, Refusal, SessionStore, StoreError, StoredMessage,
};
use pruning_opencode::{OpenCodeStore, StoreOptions};

const MORE: [&str; 3] = ["msg_v2_more_0003", "msg_v2_more_0004", "msg_v2_more_0005"];

/// The V2 fixture plus three assistant messages with one reasoning and one tool part each.
fn fixture() -> V2Fixture {
    let fx = V2Fixture::new();
    for (i, id) in MORE.iter().enumerate() {
        let seq = 3 + i as i64;
        let data = format!(
            r#"{{"time":{{"created":{seq},"completed":{seq}}},"content":[{{"type":"reasoning","id":"r{seq}","text":"thinking {seq}"}},{{"type":"tool","id":"call_{seq}","name":"bash","state":{{"status":"completed","input":"{{}}","content":[{{"type":"text","text":"output {seq}"}}],"structured":{{}}}},"time":{{"created":{seq}}}}},{{"type":"text","id":"t","text":"kept {seq}"}}]}}"#
        );
        fx.insert_message(V2_SESSION, id, "assistant", seq, &data);
    }
    fx
}

fn engine<S: SessionStore>(store: S, fx: &V2Fixture) -> Engine<S> {
    Engine::open(store, Journal::open(&fx.journal).unwrap()).unwrap()
}

fn store(fx: &V2Fixture) -> OpenCodeStore {
    OpenCodeStore::open(&fx.db, StoreOptions::default()).unwrap()
}

fn candidates<S: SessionStore>(store: &S) -> Vec<HistoryCandidate> {
    let request = prune_listing(V2_SESSION);
    match pruning_engine::history::history_with(store, &request, ROWS_ONLY)
        .unwrap()
        .result
    {
        HistoryResult::Page(page) => page.candidates,
        other => panic!("{other:?}"),
    }
}

#[test]
fn candidates_carry_the_preview_revision_and_part_counts() {
    let fx = fixture();
    let store = store(&fx);
    let found = candidates(&store);
    let ids: Vec<&str> = found.iter().map(|c| c.message_id.as_str()).collect();
    assert_eq!(ids, [V2_ASSISTANT, MORE[0], MORE[1], MORE[2]]);
    for candidate in &found {
        let preview = PreviewRequest::new(V2_SESSION.into(), candidate.message_id.clone()).unwrap();
        let PreviewResult::Preview { revision, .. } =
            pruning_engine::preview(&store, &preview).unwrap().result
        else {
            panic!()
        };
        assert_eq!(candidate.revision, revision);
        assert_eq!((candidate.tool_count, candidate.reasoning_count), (1, 1));
    }
}

#[test]
fn each_candidate_gets_its_own_result_and_a_stale_one_is_refused_alone() {
    let fx = fixture();
    let engine = engine(store(&fx), &fx);
    let found = candidates(engine.store());
    // Another writer changes one message after the page was read.
    fx.exec(&format!(
        "UPDATE session_message SET data = json_set(data, '$.content[2].text', 'edited') WHERE id = '{}'",
        MORE[1]
    ));
    let batch = PruneBatchRequest::new(V2_SESSION.into(), found.clone()).unwrap();
    let first = engine.prune_batch(&batch).result();
    let statuses: Vec<(&str, Option<u32>, Option<BlockedReason>)> = first
        .results
        .iter()
        .map(|item| match &item.result {
            PruneResult::Pruned { removed_count, .. } => {
                (item.message_id.as_str(), Some(*removed_count), None)
            }
            PruneResult::Blocked { reason } => (item.message_id.as_str(), None, Some(*reason)),
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            (V2_ASSISTANT, Some(2), None),
            (MORE[0], Some(2), None),
            (MORE[1], None, Some(BlockedReason::Conflict)),
            (MORE[2], Some(2), None),
        ]
    );
    assert_eq!(engine.receipts(None).unwrap().len(), 3);
    let events = engine.events_after(0, 10).unwrap();
    let announced: Vec<(u64, &str)> = events
        .iter()
        .map(|e| (e.seq, e.data.message_id.as_str()))
        .collect();
    assert_eq!(
        announced,
        vec![(1, V2_ASSISTANT), (2, MORE[0]), (3, MORE[2])]
    );
    // The stale message is untouched: its reasoning and tool parts are still there.
    assert!(fx.row(MORE[1]).contains("thinking 4"));
    assert!(!fx.row(MORE[0]).contains("thinking 3"));
    assert!(fx.row(MORE[0]).contains("kept 3"));

    // An identical retry: the same answers, nothing new written or journaled.
    let before = fx.file_digest();
    let again = engine.prune_batch(&batch).result();
    assert_eq!(again, first);
    assert_eq!(fx.file_digest(), before);
    assert_eq!(engine.receipts(None).unwrap().len(), 3);
    assert_eq!(engine.events_after(0, 10).unwrap().len(), 3);
}

#[test]
fn a_claimed_session_refuses_every_candidate_and_changes_nothing() {
    let fx = fixture();
    let found = candidates(&store(&fx));
    fx.exec(&format!(
        "UPDATE session_v2 SET time_suspended = 7 WHERE id = '{V2_SESSION}'"
    ));
    let before = fx.file_digest();
    let engine = engine(store(&fx), &fx);
    let batch = PruneBatchRequest::new(V2_SESSION.into(), found.clone()).unwrap();
    let result = engine.prune_batch(&batch).result();
    let expected: Vec<BatchItem> = found
        .iter()
        .map(|c| BatchItem {
            message_id: c.message_id.clone(),
            result: PruneResult::Blocked {
                reason: BlockedReason::MaintenanceRequired,
            },
        })
        .collect();
    assert_eq!(result.results, expected);
    drop(engine);
    assert_eq!(fx.file_digest(), before);
    let intents = Journal::open(&fx.journal).unwrap().intents().unwrap();
    assert_eq!(intents.len(), 4);
    assert!(intents.iter().all(|i| i.state
        == IntentState::Refused {
            reason: "maintenance_required".into()
        }));
}

/// A store whose prune of one message fails with an error (a damaged page, say).
struct FailsOn(OpenCodeStore, &'static str);

impl SessionStore for FailsOn {
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
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError> {
        self.0.read_message(request)
    }
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        self.0.live_mutation(session_id, message_id)
    }
    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError> {
        if command.request.message_id == self.1 {
            return Err(StoreError::Storage("disk I/O error".into()));
        }
        self.0.apply(command)
    }
    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError> {
        self.0.dry_run(request, now_ms)
    }
    fn receipt_by_key(&self, key: &[u8; 32]) -> Result<Option<Receipt>, StoreError> {
        self.0.receipt_by_key(key)
    }
    fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, StoreError> {
        self.0.receipts(session_id)
    }
    fn scan_history(
        &self,
        scan: &HistoryScan<'_>,
        visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
    ) -> Result<Result<ScanEnd, Refusal>, StoreError> {
        self.0.scan_history(scan, visit)
    }
}

#[test]
fn an_error_in_one_candidate_is_unavailable_for_it_alone() {
    let fx = fixture();
    let engine = engine(FailsOn(store(&fx), MORE[0]), &fx);
    let found = candidates(engine.store());
    let batch = PruneBatchRequest::new(V2_SESSION.into(), found[..2].to_vec()).unwrap();
    let outcome = engine.prune_batch(&batch);
    let results = outcome.result().results;
    assert!(matches!(
        results[0].result,
        PruneResult::Pruned {
            removed_count: 2,
            ..
        }
    ));
    assert_eq!(
        results[1].result,
        PruneResult::Blocked {
            reason: BlockedReason::Unavailable
        }
    );
    assert!(matches!(
        &outcome.items[1].1,
        Err(pruning_engine::EngineError::Store(StoreError::Storage(detail))) if detail.to_string() == "disk I/O error"
    ));
    assert!(fx.row(MORE[0]).contains("thinking 3"), "nothing written");
}
