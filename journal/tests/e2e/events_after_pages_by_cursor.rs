//! `events_after(since, limit)` is the replay cursor: events with seq > since, ascending, at
//! most `limit` per page, empty at the end.

use crate::common;

use common::{commit_for, intent, journal_path};
use pruning_journal::Journal;

fn seqs(events: Vec<pruning_journal::CommittedEvent>) -> Vec<u64> {
    events.into_iter().map(|event| event.seq).collect()
}

#[test]
fn pages_through_the_log_from_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    assert_eq!(journal.events_after(0, 10).unwrap(), vec![]);

    let intents: Vec<_> = (1..=5).map(intent).collect();
    journal.record_intents(&intents).unwrap();
    let commits: Vec<_> = intents.iter().map(|i| commit_for(i, 1)).collect();
    let committed = journal.commit(&commits).unwrap();

    assert_eq!(seqs(journal.events_after(0, 2).unwrap()), vec![1, 2]);
    assert_eq!(seqs(journal.events_after(2, 2).unwrap()), vec![3, 4]);
    assert_eq!(seqs(journal.events_after(4, 2).unwrap()), vec![5]);
    assert_eq!(seqs(journal.events_after(5, 2).unwrap()), Vec::<u64>::new());
    assert_eq!(seqs(journal.events_after(3, 0).unwrap()), Vec::<u64>::new());
    assert_eq!(
        seqs(journal.events_after(u64::MAX, 5).unwrap()),
        Vec::<u64>::new()
    );
    assert_eq!(journal.events_after(0, usize::MAX).unwrap(), committed);
}

#[test]
fn a_cursor_sees_later_commits() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let (a, b) = (intent(1), intent(2));
    journal.record_intents(&[a.clone(), b.clone()]).unwrap();
    journal.commit(&[commit_for(&a, 1)]).unwrap();
    let cursor = journal.last_seq().unwrap();
    assert_eq!(journal.events_after(cursor, 10).unwrap(), vec![]);
    let later = journal.commit(&[commit_for(&b, 1)]).unwrap();
    assert_eq!(journal.events_after(cursor, 10).unwrap(), later);
}
