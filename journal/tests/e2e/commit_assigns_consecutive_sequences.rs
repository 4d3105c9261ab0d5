//! `commit` assigns seqs 1, 2, 3, ... in the order given, marks each intent committed with its
//! seq, never reuses a seq (also across reopen), and refuses intents that are not pending.

use crate::common;

use common::{commit_for, committed, intent, journal_path};
use pruning_journal::{CommittedEvent, EventKind, IntentState, Journal, WriteError};

#[test]
fn seqs_follow_the_order_given_and_continue_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let (a, b, c) = (intent(1), intent(2), intent(3));
    let (ca, cb, cc) = (commit_for(&a, 1), commit_for(&b, 2), commit_for(&c, 3));
    {
        let journal = Journal::open(&path).unwrap();
        journal
            .record_intents(&[a.clone(), b.clone(), c.clone()])
            .unwrap();
        // b before a: b gets 1, a gets 2.
        let events = journal.commit(&[cb.clone(), ca.clone()]).unwrap();
        assert_eq!(
            events,
            vec![
                CommittedEvent {
                    seq: 1,
                    event_id: cb.event_id,
                    intent_id: b.intent_id,
                    session_id: "ses_2".into(),
                    message_id: "msg_2".into(),
                    revision: cb.revision_after.clone(),
                    removed_count: 2,
                    committed_at_ms: cb.committed_at_ms,
                    kind: EventKind::Pruned,
                },
                CommittedEvent {
                    seq: 2,
                    event_id: ca.event_id,
                    intent_id: a.intent_id,
                    session_id: "ses_1".into(),
                    message_id: "msg_1".into(),
                    revision: ca.revision_after.clone(),
                    removed_count: 1,
                    committed_at_ms: ca.committed_at_ms,
                    kind: EventKind::Pruned,
                },
            ]
        );
        assert_eq!(journal.event(1).unwrap(), Some(events[0].clone()));
        assert_eq!(journal.event(2).unwrap(), Some(events[1].clone()));
        assert_eq!(journal.last_seq().unwrap(), 2);
        assert_eq!(journal.pending_intents().unwrap(), vec![c.clone()]);
    }

    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.last_seq().unwrap(), 2);
    let events = journal.commit(std::slice::from_ref(&cc)).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].seq, 3);
    assert_eq!(journal.first_seq().unwrap(), Some(1));
    assert_eq!(journal.last_seq().unwrap(), 3);
    assert_eq!(
        journal.intents().unwrap(),
        vec![
            committed(&a, &ca, 2),
            committed(&b, &cb, 1),
            committed(&c, &cc, 3)
        ]
    );
    assert_eq!(journal.pending_intents().unwrap(), vec![]);
}

#[test]
fn committing_twice_or_unknown_is_refused_and_consumes_no_seq() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let a = intent(1);
    let ca = commit_for(&a, 1);
    journal.record_intent(&a).unwrap();
    journal.commit(std::slice::from_ref(&ca)).unwrap();

    match journal.commit(std::slice::from_ref(&ca)).unwrap_err() {
        WriteError::NotPending { intent_id, state } => {
            assert_eq!(intent_id, a.intent_id);
            assert_eq!(
                state,
                IntentState::Committed {
                    seq: 1,
                    committed_at_ms: ca.committed_at_ms
                }
            );
        }
        other => panic!("unexpected {other:?}"),
    }

    let stranger = intent(2);
    match journal.commit(&[commit_for(&stranger, 1)]).unwrap_err() {
        WriteError::UnknownIntent { intent_id } => assert_eq!(intent_id, stranger.intent_id),
        other => panic!("unexpected {other:?}"),
    }

    // The same intent twice in one batch: the second sees the first's commit; nothing kept.
    let b = intent(3);
    journal.record_intent(&b).unwrap();
    let cb = commit_for(&b, 1);
    assert!(matches!(
        journal.commit(&[cb.clone(), cb.clone()]),
        Err(WriteError::NotPending { .. })
    ));
    assert_eq!(journal.last_seq().unwrap(), 1);
    assert_eq!(journal.intent(b.intent_id).unwrap(), Some(b.clone()));

    assert_eq!(journal.commit(&[]).unwrap(), vec![]);
    assert_eq!(journal.commit(&[cb]).unwrap()[0].seq, 2);
}
