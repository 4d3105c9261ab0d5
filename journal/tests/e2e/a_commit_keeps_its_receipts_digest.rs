//! A commit made with a receipt digest keeps it beside its event, read back by event id after a
//! reopen (read-only too); a commit without one, an unknown event and a journal that never kept
//! one (no table yet) answer `None`.

use crate::common;

use common::{commit_for, intent, journal_path};
use pruning_journal::{Commit, Journal};
use uuid::Uuid;

#[test]
fn a_digest_is_kept_by_event_id_and_absent_where_none_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    {
        // A new journal, read before any commit: no digest table exists yet.
        drop(Journal::open(&path).unwrap());
        let fresh = Journal::open_read_only(&path).unwrap();
        assert_eq!(fresh.receipt_digest(Uuid::now_v7()).unwrap(), None);
    }
    let (a, b) = (intent(1), intent(2));
    let with = Commit {
        receipt_digest: Some([7; 32]),
        ..commit_for(&a, 1)
    };
    let without = commit_for(&b, 2);
    {
        let journal = Journal::open(&path).unwrap();
        journal.record_intents(&[a.clone(), b.clone()]).unwrap();
        journal.commit(&[with.clone(), without.clone()]).unwrap();
        assert_eq!(
            journal.receipt_digest(with.event_id).unwrap(),
            Some([7; 32])
        );
    }
    let journal = Journal::open_read_only(&path).unwrap();
    assert_eq!(
        journal.receipt_digest(with.event_id).unwrap(),
        Some([7; 32])
    );
    assert_eq!(journal.receipt_digest(without.event_id).unwrap(), None);
    assert_eq!(journal.receipt_digest(Uuid::now_v7()).unwrap(), None);
}
