//! A batch is one durable transaction: recording 16 intents or committing 16 costs the same
//! number of fsyncs as one, and a batch that fails anywhere leaves nothing of itself behind.

use crate::common;

use common::disk::SimulatedDisk;
use common::{commit_for, intent, journal_path};
use pruning_journal::{Journal, WriteError};

#[test]
fn a_batch_costs_the_fsyncs_of_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, controls) = SimulatedDisk::open(&journal_path(&dir));
    let journal = Journal::open_with_backend(disk).unwrap();

    let single = intent(0);
    let before = controls.syncs();
    journal.record_intent(&single).unwrap();
    let per_write = controls.syncs() - before;
    assert!(per_write >= 1, "a durable write must fsync");

    let batch: Vec<_> = (1..=16).map(intent).collect();
    let before = controls.syncs();
    journal.record_intents(&batch).unwrap();
    assert_eq!(controls.syncs() - before, per_write);

    let commits: Vec<_> = batch.iter().map(|i| commit_for(i, 1)).collect();
    let before = controls.syncs();
    let events = journal.commit(&commits).unwrap();
    assert_eq!(controls.syncs() - before, per_write);
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=16).collect::<Vec<u64>>()
    );
}

#[test]
fn a_failing_batch_records_none_of_its_intents() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let existing = intent(1);
    journal.record_intent(&existing).unwrap();

    let (a, b) = (intent(2), intent(3));
    match journal
        .record_intents(&[a.clone(), b.clone(), existing.clone()])
        .unwrap_err()
    {
        WriteError::DuplicateIntent { intent_id } => assert_eq!(intent_id, existing.intent_id),
        other => panic!("unexpected {other:?}"),
    }
    match journal
        .record_intents(&[a.clone(), b.clone(), a.clone()])
        .unwrap_err()
    {
        WriteError::DuplicateIntent { intent_id } => assert_eq!(intent_id, a.intent_id),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(journal.intents().unwrap(), vec![existing]);
    assert_eq!(journal.intent_by_request_key(&a.request_key).unwrap(), None);
}

#[test]
fn resolving_a_batch_costs_one_write_and_is_all_or_nothing() {
    use pruning_journal::{IntentState, Resolution};
    let dir = tempfile::tempdir().unwrap();
    let (disk, controls) = SimulatedDisk::open(&journal_path(&dir));
    let journal = Journal::open_with_backend(disk).unwrap();
    let batch: Vec<_> = (1..=8).map(intent).collect();
    journal.record_intents(&batch).unwrap();

    // One unknown intent in the batch: nothing of it is resolved.
    let mut resolutions: Vec<_> = batch
        .iter()
        .map(|i| (i.intent_id, Resolution::Refused("conflict".into())))
        .collect();
    resolutions.push((intent(99).intent_id, Resolution::Abandoned("gone".into())));
    assert!(matches!(
        journal.resolve_all(&resolutions),
        Err(WriteError::UnknownIntent { .. })
    ));
    assert_eq!(journal.pending_intents().unwrap().len(), 8);

    resolutions.pop();
    resolutions[7].1 = Resolution::Abandoned("store error".into());
    let before = controls.syncs();
    journal.resolve_all(&resolutions).unwrap();
    let one_write = controls.syncs() - before;
    let single = intent(50);
    journal.record_intent(&single).unwrap();
    let before = controls.syncs();
    journal.mark_refused(single.intent_id, "conflict").unwrap();
    assert_eq!(one_write, controls.syncs() - before);

    assert!(journal.pending_intents().unwrap().is_empty());
    let states: Vec<IntentState> = batch
        .iter()
        .map(|i| journal.intent(i.intent_id).unwrap().unwrap().state)
        .collect();
    assert_eq!(
        states[0],
        IntentState::Refused {
            reason: "conflict".into()
        }
    );
    assert_eq!(
        states[7],
        IntentState::Abandoned {
            reason: "store error".into()
        }
    );
}
