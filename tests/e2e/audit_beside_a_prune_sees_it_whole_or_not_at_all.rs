//! An audit that runs beside a prune (as `GET .../audit` does in `serve`, where prunes do not
//! wait for reads) checks the events journaled before it read the database: a prune that commits
//! and journals its event after the audit's read of the database is not reported as an event
//! without its receipt; the next audit sees it whole (docs/ARCHITECTURE.md, "Audit").

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

use crate::common;

use common::*;
use pruning_engine::{
    Applied, AuditScope, DryRun, Engine, Journal, PreviewRequest, PreviewResult, PruneCommand,
    PruneRequest, Receipt, Refusal, SessionStore, StoreAudit, StoreError, StoredMessage,
};
use pruning_opencode::OpenCodeStore;

/// The OpenCode store, whose first audit stops right after reading the database until told to
/// go on.
struct PausingStore {
    inner: OpenCodeStore,
    /// Told when the first audit has read the database.
    read: Mutex<Option<Sender<()>>>,
    /// Waited on by the first audit before it returns.
    resume: Mutex<Option<Receiver<()>>>,
}

impl SessionStore for PausingStore {
    fn location(&self) -> Option<String> {
        self.inner.location()
    }
    fn database_id(&self) -> Result<Option<String>, StoreError> {
        self.inner.database_id()
    }
    fn journal_epoch(&self) -> Result<u64, StoreError> {
        self.inner.journal_epoch()
    }
    fn set_journal_epoch(&self, epoch: u64) -> Result<bool, StoreError> {
        self.inner.set_journal_epoch(epoch)
    }
    fn receipts_high_water(&self) -> Result<pruning_engine::ReceiptsHighWater, StoreError> {
        self.inner.receipts_high_water()
    }
    fn read_message(
        &self,
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError> {
        self.inner.read_message(request)
    }
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        self.inner.live_mutation(session_id, message_id)
    }
    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError> {
        self.inner.apply(command)
    }
    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError> {
        self.inner.dry_run(request, now_ms)
    }
    fn receipt_by_key(&self, key: &[u8; 32]) -> Result<Option<Receipt>, StoreError> {
        self.inner.receipt_by_key(key)
    }
    fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, StoreError> {
        self.inner.receipts(session_id)
    }
    fn audit(&self, scope: AuditScope<'_>) -> Result<StoreAudit, StoreError> {
        let found = self.inner.audit(scope)?;
        if let Some(read) = self.read.lock().expect("lock").take() {
            read.send(()).expect("told");
            let resume = self.resume.lock().expect("lock").take().expect("resume");
            resume.recv().expect("resumed");
        }
        Ok(found)
    }
}

#[test]
fn a_prune_committed_during_an_audit_is_not_half_seen() {
    let fx = Fixture::new();
    let (read_tx, read_rx) = channel();
    let (resume_tx, resume_rx) = channel();
    let store = PausingStore {
        inner: fx.store(0),
        read: Mutex::new(Some(read_tx)),
        resume: Mutex::new(Some(resume_rx)),
    };
    let engine = Engine::open(store, Journal::open(&fx.journal).expect("journal")).expect("engine");
    let PreviewResult::Preview { revision, .. } = engine
        .preview(&PreviewRequest::new(MANY_TURNS.into(), TURN5.into()).expect("request"))
        .expect("preview")
    else {
        panic!("a preview")
    };
    let request =
        PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).expect("request");
    let (during, pruned) = std::thread::scope(|threads| {
        let audit = threads.spawn(|| engine.audit(AuditScope::All));
        // The audit has read the database (no receipt yet); the prune commits and journals its
        // event before the audit reads the journal.
        read_rx.recv().expect("the audit read the database");
        let pruned = engine.prune(&request).expect("prune");
        resume_tx.send(()).expect("resume");
        (audit.join().expect("audit thread").expect("audit"), pruned)
    });
    assert_eq!(pruned.event.as_ref().map(|event| event.seq), Some(1));
    assert!(during.ok, "{:#?}", during.discrepancies);
    assert_eq!((during.receipts, during.events), (0, 0));
    let after = engine.audit(AuditScope::All).expect("audit");
    assert!(after.ok, "{:#?}", after.discrepancies);
    assert_eq!((after.receipts, after.events), (1, 1));
}
