//! A pending intent is resolved at most once: refused, abandoned or committed, durably, and a
//! terminal state never changes. The latest intent of a request key decides the
//! identical-retry short-circuit.

use crate::common;

use common::{commit_for, intent, journal_path, key};
use pruning_journal::{Intent, IntentState, Journal, WriteError};

#[test]
fn refused_and_abandoned_are_durable_and_final() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let (refused, abandoned, open) = (intent(1), intent(2), intent(3));
    {
        let journal = Journal::open(&path).unwrap();
        journal
            .record_intents(&[refused.clone(), abandoned.clone(), open.clone()])
            .unwrap();
        journal
            .mark_refused(refused.intent_id, "maintenance_required")
            .unwrap();
        journal
            .mark_abandoned(abandoned.intent_id, "no receipt found on recovery")
            .unwrap();
    }

    let journal = Journal::open(&path).unwrap();
    let refused_state = IntentState::Refused {
        reason: "maintenance_required".into(),
    };
    let abandoned_state = IntentState::Abandoned {
        reason: "no receipt found on recovery".into(),
    };
    assert_eq!(
        journal.intent(refused.intent_id).unwrap().unwrap().state,
        refused_state
    );
    assert_eq!(
        journal.intent(abandoned.intent_id).unwrap().unwrap().state,
        abandoned_state
    );
    assert_eq!(journal.pending_intents().unwrap(), vec![open.clone()]);

    match journal
        .mark_abandoned(refused.intent_id, "store busy")
        .unwrap_err()
    {
        WriteError::NotPending { intent_id, state } => {
            assert_eq!(intent_id, refused.intent_id);
            assert_eq!(state, refused_state);
        }
        other => panic!("unexpected {other:?}"),
    }
    match journal.commit(&[commit_for(&abandoned, 1)]).unwrap_err() {
        WriteError::NotPending { state, .. } => assert_eq!(state, abandoned_state),
        other => panic!("unexpected {other:?}"),
    }
    let stranger = intent(4);
    match journal
        .mark_refused(stranger.intent_id, "conflict")
        .unwrap_err()
    {
        WriteError::UnknownIntent { intent_id } => assert_eq!(intent_id, stranger.intent_id),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(journal.last_seq().unwrap(), 0);
}

#[test]
fn identical_retry_short_circuits_to_the_same_event() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let first = intent(1);
    journal.record_intent(&first).unwrap();
    assert_eq!(journal.committed_event_for(&key(1)).unwrap(), None);

    let event = journal.commit(&[commit_for(&first, 2)]).unwrap().remove(0);
    assert_eq!(
        journal.committed_event_for(&key(1)).unwrap(),
        Some(event.clone())
    );
    assert_eq!(journal.committed_event_for(&key(9)).unwrap(), None);

    // A later attempt with the same request key becomes the latest intent of that key.
    let again = Intent {
        created_at_ms: first.created_at_ms + 10,
        ..intent(1)
    };
    journal.record_intent(&again).unwrap();
    assert_eq!(
        journal.intent_by_request_key(&key(1)).unwrap(),
        Some(again.clone())
    );
    assert_eq!(journal.committed_event_for(&key(1)).unwrap(), None);
    journal.mark_refused(again.intent_id, "conflict").unwrap();
    assert_eq!(journal.committed_event_for(&key(1)).unwrap(), None);
}

#[test]
fn a_resolved_intent_keeps_no_index_list_so_refusals_do_not_grow_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = Journal::open(&path).unwrap();
    let mut big = intent(1);
    big.selection = pruning_journal::Selection::Indexes((0..=100_000).collect());
    journal.record_intent(&big).unwrap();
    let grown = std::fs::metadata(&path).unwrap().len();
    journal
        .mark_refused(big.intent_id, "not_deletable")
        .unwrap();
    let stored = journal.intent(big.intent_id).unwrap().unwrap();
    match &stored.selection {
        pruning_journal::Selection::Indexes(kept) => {
            assert!(kept.is_empty(), "kept {}", kept.len())
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        (stored.request_key, stored.session_id, stored.revision),
        (
            big.request_key,
            big.session_id.clone(),
            big.revision.clone()
        )
    );
    // Many more refusals of such requests reuse the space of the index lists they drop.
    for n in 2..=40 {
        let mut again = intent(n);
        again.selection = pruning_journal::Selection::Indexes((0..=100_000).collect());
        journal.record_intent(&again).unwrap();
        journal
            .mark_refused(again.intent_id, "not_deletable")
            .unwrap();
    }
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(
        after < grown * 4,
        "40 refusals of 100,001 indexes grew the journal from {grown} to {after} bytes"
    );
}
