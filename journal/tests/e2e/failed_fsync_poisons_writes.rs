//! A failed durable commit (simulated fsync failure) is returned as `WriteError::Commit`,
//! poisons the handle so every later write is refused, and loses nothing that was durable
//! before: a fresh open shows exactly the state before the failed write.

use crate::common;

use common::disk::SimulatedDisk;
use common::{commit_for, committed, intent, journal_path};
use pruning_journal::{BindError, Journal, WriteError};

#[test]
fn failed_commit_poisons_and_reopen_shows_prior_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let first = intent(1);
    let first_commit = commit_for(&first, 2);
    let second = intent(2);
    {
        let journal = Journal::open(&path).unwrap();
        journal.record_intent(&first).unwrap();
        journal.commit(std::slice::from_ref(&first_commit)).unwrap();
    }

    let (disk, controls) = SimulatedDisk::open(&path);
    let journal = Journal::open_with_backend(disk).unwrap();
    journal.record_intent(&second).unwrap();
    assert!(!journal.is_poisoned());

    controls.fail_syncs(true);
    let failed = journal.commit(&[commit_for(&second, 4)]);
    assert!(
        matches!(failed, Err(WriteError::Commit(_))),
        "got {failed:?}"
    );
    assert!(journal.is_poisoned());
    // The journal does not refuse reads; here redb still answers them (from its cache) with
    // the state before the failed write.
    assert_eq!(
        journal.intent(second.intent_id).unwrap(),
        Some(second.clone())
    );
    assert_eq!(journal.last_seq().unwrap(), 1);

    // The disk works again, but the handle stays fail-stop for every kind of write.
    controls.fail_syncs(false);
    assert!(matches!(
        journal.record_intent(&intent(3)),
        Err(WriteError::Poisoned)
    ));
    assert!(matches!(
        journal.commit(&[commit_for(&second, 4)]),
        Err(WriteError::Poisoned)
    ));
    assert!(matches!(
        journal.mark_abandoned(second.intent_id, "store busy"),
        Err(WriteError::Poisoned)
    ));
    assert!(matches!(
        journal.record_intents(&[]),
        Err(WriteError::Poisoned)
    ));
    assert!(matches!(journal.bind("db-1"), Err(BindError::Poisoned)));
    drop(journal);

    let reopened = Journal::open(&path).unwrap();
    assert_eq!(
        reopened.intents().unwrap(),
        vec![committed(&first, &first_commit, 1), second.clone()]
    );
    assert_eq!(reopened.pending_intents().unwrap(), vec![second.clone()]);
    assert_eq!(reopened.last_seq().unwrap(), 1);
    assert_eq!(reopened.event(2).unwrap(), None);

    // The reopened handle writes normally and the lost seq is assigned again.
    let events = reopened.commit(&[commit_for(&second, 4)]).unwrap();
    assert_eq!(events[0].seq, 2);
}

#[test]
fn failed_intent_batch_is_absent_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let kept = intent(1);
    let lost = [intent(2), intent(3)];

    let (disk, controls) = SimulatedDisk::open(&path);
    let journal = Journal::open_with_backend(disk).unwrap();
    journal.record_intent(&kept).unwrap();
    controls.fail_syncs(true);
    assert!(matches!(
        journal.record_intents(&lost),
        Err(WriteError::Commit(_))
    ));
    assert!(journal.is_poisoned());
    drop(journal);

    let reopened = Journal::open(&path).unwrap();
    assert_eq!(reopened.intents().unwrap(), vec![kept.clone()]);
    assert_eq!(reopened.intent(lost[0].intent_id).unwrap(), None);
    assert_eq!(
        reopened
            .intent_by_request_key(&lost[1].request_key)
            .unwrap(),
        None
    );
}
