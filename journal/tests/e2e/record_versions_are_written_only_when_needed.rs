//! Intents and events are written as record version 1 unless they need version 2 (a restore's
//! intent, a restore's event), 3 (an intent selecting diffs or every superseded snapshot, a
//! compaction's event) or 4 (an intent selecting the superseded snapshots of one range of seqs),
//! so that a journal that never restored or compacted anything stays readable by a build that
//! reads version 1 only; every version reads back whole, and an event of version 1 reads as a
//! prune's.

use crate::common;

use std::path::Path;

use common::{commit_for, intent, journal_path};
use pruning_journal::{Commit, EventKind, Journal, Selection, FORMAT_VERSION, RECORD_VERSION};
use redb::{Database, ReadableDatabase, TableDefinition};
use uuid::Uuid;

const INTENTS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("intents");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");

/// The leading version byte of the intent `id` and of the event `seq`, read with redb.
fn versions(path: &Path, id: Uuid, seq: u64) -> (u8, u8) {
    let db = Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    let intents = txn.open_table(INTENTS).unwrap();
    let events = txn.open_table(EVENTS).unwrap();
    let intent = intents.get(id.as_bytes()).unwrap().unwrap().value()[0];
    let event = events.get(seq).unwrap().unwrap().value()[0];
    (intent, event)
}

#[test]
fn a_prune_is_version_1_and_a_restore_version_2_and_both_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let pruned = intent(1);
    let mut restore = intent(2);
    let undone = Uuid::now_v7();
    restore.selection = Selection::Restore(undone);
    let prune_commit = commit_for(&pruned, 2);
    let restore_commit = Commit {
        kind: EventKind::Restored,
        removed_count: 0,
        ..commit_for(&restore, 0)
    };
    {
        let journal = Journal::open(&path).unwrap();
        journal
            .record_intents(&[pruned.clone(), restore.clone()])
            .unwrap();
        let events = journal
            .commit(&[prune_commit.clone(), restore_commit.clone()])
            .unwrap();
        assert_eq!(events[0].kind, EventKind::Pruned);
        assert_eq!(events[1].kind, EventKind::Restored);
    }
    assert_eq!(
        versions(&path, pruned.intent_id, 1),
        (FORMAT_VERSION, FORMAT_VERSION)
    );
    assert_eq!(versions(&path, restore.intent_id, 2), (2, 2));
    assert_eq!((FORMAT_VERSION, RECORD_VERSION), (1, 5));

    let journal = Journal::open_read_only(&path).unwrap();
    let read = journal.intent(restore.intent_id).unwrap().unwrap();
    assert_eq!(read.selection, Selection::Restore(undone));
    let events = journal.events_after(0, 10).unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.seq, e.event_id, e.kind, e.removed_count))
            .collect::<Vec<_>>(),
        vec![
            (1, prune_commit.event_id, EventKind::Pruned, 2),
            (2, restore_commit.event_id, EventKind::Restored, 0),
        ]
    );
    assert_eq!(
        journal
            .committed_event_for(&restore.request_key)
            .unwrap()
            .unwrap()
            .kind,
        EventKind::Restored
    );
}

#[test]
fn diffs_and_compaction_intents_and_a_compaction_event_are_version_3_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let mut diffs = intent(1);
    diffs.selection = Selection::Diffs;
    let mut compaction = intent(2);
    compaction.selection = Selection::SupersededSnapshots;
    compaction.message_id = String::new();
    let diffs_commit = commit_for(&diffs, 3);
    let compaction_commit = Commit {
        kind: EventKind::Compacted {
            bytes_removed: 123_456,
        },
        ..commit_for(&compaction, 40)
    };
    {
        let journal = Journal::open(&path).unwrap();
        journal
            .record_intents(&[diffs.clone(), compaction.clone()])
            .unwrap();
        journal
            .commit(&[diffs_commit.clone(), compaction_commit.clone()])
            .unwrap();
    }
    // A diffs prune is announced as a prune: its event stays version 1.
    assert_eq!(versions(&path, diffs.intent_id, 1), (3, FORMAT_VERSION));
    assert_eq!(versions(&path, compaction.intent_id, 2), (3, 3));

    let journal = Journal::open_read_only(&path).unwrap();
    assert_eq!(
        journal.intent(diffs.intent_id).unwrap().unwrap().selection,
        Selection::Diffs
    );
    let read = journal.intent(compaction.intent_id).unwrap().unwrap();
    assert_eq!(read.selection, Selection::SupersededSnapshots);
    assert_eq!(read.message_id, "");
    let events = journal.events_after(0, 10).unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.seq, e.event_id, e.kind, e.removed_count))
            .collect::<Vec<_>>(),
        vec![
            (1, diffs_commit.event_id, EventKind::Pruned, 3),
            (
                2,
                compaction_commit.event_id,
                EventKind::Compacted {
                    bytes_removed: 123_456
                },
                40
            ),
        ]
    );
}

#[test]
fn a_compaction_of_one_range_is_a_version_4_intent_with_a_version_3_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let mut compaction = intent(1);
    compaction.selection = Selection::SupersededSnapshotsIn {
        first_seq: 7,
        last_seq: 1_204,
    };
    compaction.message_id = String::new();
    let commit = Commit {
        kind: EventKind::Compacted {
            bytes_removed: 4_096,
        },
        ..commit_for(&compaction, 12)
    };
    {
        let journal = Journal::open(&path).unwrap();
        journal
            .record_intents(std::slice::from_ref(&compaction))
            .unwrap();
        journal.commit(std::slice::from_ref(&commit)).unwrap();
    }
    assert_eq!(versions(&path, compaction.intent_id, 1), (4, 3));
    let journal = Journal::open_read_only(&path).unwrap();
    let read = journal.intent(compaction.intent_id).unwrap().unwrap();
    assert_eq!(
        read.selection,
        Selection::SupersededSnapshotsIn {
            first_seq: 7,
            last_seq: 1_204
        }
    );
    let events = journal.events_after(0, 10).unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.seq, e.event_id, e.kind, e.removed_count))
            .collect::<Vec<_>>(),
        vec![(
            1,
            commit.event_id,
            EventKind::Compacted {
                bytes_removed: 4_096
            },
            12
        )]
    );
}

#[test]
fn a_removal_of_migrated_rows_is_a_version_5_intent_with_a_version_1_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let mut removal = intent(1);
    removal.selection = Selection::MigratedV1;
    // Announced as a prune of the message: its event stays version 1.
    let commit = commit_for(&removal, 5);
    {
        let journal = Journal::open(&path).unwrap();
        journal
            .record_intents(std::slice::from_ref(&removal))
            .unwrap();
        journal.commit(std::slice::from_ref(&commit)).unwrap();
    }
    assert_eq!(
        versions(&path, removal.intent_id, 1),
        (RECORD_VERSION, FORMAT_VERSION)
    );
    let journal = Journal::open_read_only(&path).unwrap();
    let read = journal.intent(removal.intent_id).unwrap().unwrap();
    assert_eq!(read.selection, Selection::MigratedV1);
    let events = journal.events_after(0, 10).unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.seq, e.event_id, e.kind, e.removed_count))
            .collect::<Vec<_>>(),
        vec![(1, commit.event_id, EventKind::Pruned, 5)]
    );
}
