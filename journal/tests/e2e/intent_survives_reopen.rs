//! A recorded intent is durable: after the handle is dropped and the file reopened it reads
//! back identical, by id, by request key, and as pending recovery input.

use crate::common;

use common::{intent, journal_path, key};
use pruning_journal::{Intent, IntentState, Journal, Selection};

#[test]
fn intents_read_back_identical_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let one = intent(1);
    let all_technical = Intent {
        selection: Selection::AllTechnical,
        ..intent(2)
    };
    {
        let journal = Journal::open(&path).unwrap();
        journal.record_intent(&one).unwrap();
        journal.record_intent(&all_technical).unwrap();
    }

    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.intent(one.intent_id).unwrap(), Some(one.clone()));
    assert_eq!(
        journal.intent_by_request_key(&key(2)).unwrap(),
        Some(all_technical.clone())
    );
    assert_eq!(journal.intent_by_request_key(&key(9)).unwrap(), None);
    assert_eq!(
        journal.pending_intents().unwrap(),
        vec![one.clone(), all_technical.clone()]
    );
    assert_eq!(journal.intents().unwrap(), vec![one, all_technical]);
    assert_eq!(journal.last_seq().unwrap(), 0);
    assert_eq!(journal.first_seq().unwrap(), None);
}

#[test]
fn intents_are_listed_oldest_first_and_pending_ones_in_the_order_made() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let newer = intent(5);
    let older = intent(4);
    journal
        .record_intents(&[newer.clone(), older.clone()])
        .unwrap();
    assert_eq!(
        journal.intents().unwrap(),
        vec![older.clone(), newer.clone()]
    );
    // Recovery's input comes in the order the intents were made (their ids), whatever their
    // recorded times say: `newer`'s id was made first, its time set later.
    assert!(newer.intent_id < older.intent_id);
    assert_eq!(journal.pending_intents().unwrap(), vec![newer, older]);
}

#[test]
fn a_new_intent_must_be_pending() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let refused = Intent {
        state: IntentState::Refused {
            reason: "conflict".into(),
        },
        ..intent(1)
    };
    let error = journal.record_intent(&refused).unwrap_err();
    match error {
        pruning_journal::WriteError::NotPending { intent_id, state } => {
            assert_eq!(intent_id, refused.intent_id);
            assert_eq!(state, refused.state);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(journal.intents().unwrap(), vec![]);
}
