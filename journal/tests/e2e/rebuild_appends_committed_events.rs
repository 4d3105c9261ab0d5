//! `append_rebuilt` recreates the event log from receipts: consecutive seqs in the order
//! given, intents stored as committed, the retry short-circuit restored; a mismatched pair or
//! an intent already resolved refuses the whole batch.

use crate::common;

use common::{commit_for, committed, intent, journal_path, key};
use pruning_journal::{Journal, WriteError};

#[test]
fn rebuild_appends_in_order_on_an_empty_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let (a, b) = (intent(1), intent(2));
    let (ca, cb) = (commit_for(&a, 3), commit_for(&b, 4));
    {
        let journal = Journal::open(&path).unwrap();
        let events = journal
            .append_rebuilt(&[(b.clone(), cb.clone()), (a.clone(), ca.clone())])
            .unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(events[0].event_id, cb.event_id);
        assert_eq!(events[1].intent_id, a.intent_id);
    }
    let journal = Journal::open(&path).unwrap();
    assert_eq!(
        journal.intents().unwrap(),
        vec![committed(&a, &ca, 2), committed(&b, &cb, 1)]
    );
    assert_eq!(
        journal.committed_event_for(&key(2)).unwrap().unwrap().seq,
        1
    );
    assert_eq!(journal.last_seq().unwrap(), 2);
    assert_eq!(journal.append_rebuilt(&[]).unwrap(), vec![]);
}

#[test]
fn rebuild_resolves_a_pending_intent_and_refuses_a_resolved_one() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let (pending, done) = (intent(1), intent(2));
    journal
        .record_intents(&[pending.clone(), done.clone()])
        .unwrap();
    journal.commit(&[commit_for(&done, 1)]).unwrap();

    let fresh = intent(3);
    match journal
        .append_rebuilt(&[
            (fresh.clone(), commit_for(&fresh, 1)),
            (done.clone(), commit_for(&done, 1)),
        ])
        .unwrap_err()
    {
        WriteError::NotPending { intent_id, .. } => assert_eq!(intent_id, done.intent_id),
        other => panic!("unexpected {other:?}"),
    }
    match journal
        .append_rebuilt(&[(fresh.clone(), commit_for(&pending, 1))])
        .unwrap_err()
    {
        WriteError::IntentMismatch {
            intent_id,
            commit_intent_id,
        } => {
            assert_eq!(intent_id, fresh.intent_id);
            assert_eq!(commit_intent_id, pending.intent_id);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(journal.intent(fresh.intent_id).unwrap(), None);
    assert_eq!(journal.last_seq().unwrap(), 1);

    let cp = commit_for(&pending, 5);
    let events = journal
        .append_rebuilt(&[(pending.clone(), cp.clone())])
        .unwrap();
    assert_eq!(events[0].seq, 2);
    assert_eq!(
        journal.intent(pending.intent_id).unwrap(),
        Some(committed(&pending, &cp, 2))
    );
    assert_eq!(journal.pending_intents().unwrap(), vec![]);
}
