//! A journal started for a new epoch is bound to its database from the start, holds its epoch,
//! gives its first event the sequence number after `after_seq`, tells a cursor older than that
//! to resync, keeps all of it across a reopen, and is never made over a file that is not empty.

use crate::common;

use common::{commit_for, intent, journal_path};
use pruning_journal::{Epoch, EpochError, Journal};

const DATABASE: &str = "01900000-0000-7000-8000-000000000001";

#[test]
fn an_epoch_journal_starts_after_the_sequence_numbers_of_the_epochs_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let epoch = Epoch {
        number: 2,
        after_seq: 40,
    };
    {
        let journal = Journal::create_epoch(&path, DATABASE, epoch).unwrap();
        assert_eq!(journal.epoch().unwrap(), epoch);
        assert_eq!(journal.bound_database().unwrap().as_deref(), Some(DATABASE));
        assert_eq!(journal.last_seq().unwrap(), 40);
        assert_eq!(journal.first_seq().unwrap(), None);
        assert!(journal.cursor_needs_resync(3).unwrap());
        assert!(journal.cursor_needs_resync(39).unwrap());
        assert!(!journal.cursor_needs_resync(40).unwrap());
        assert!(journal.intents().unwrap().is_empty());
        let a = intent(1);
        journal.record_intents(std::slice::from_ref(&a)).unwrap();
        let events = journal.commit(&[commit_for(&a, 1)]).unwrap();
        assert_eq!(events[0].seq, 41);
    }
    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.epoch().unwrap(), epoch);
    assert_eq!(journal.last_seq().unwrap(), 41);
    assert_eq!(journal.first_seq().unwrap(), Some(41));
    let after: Vec<u64> = journal
        .events_after(0, 10)
        .unwrap()
        .iter()
        .map(|event| event.seq)
        .collect();
    assert_eq!(after, vec![41]);
}

#[test]
fn a_journal_opened_the_usual_way_is_the_first_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    assert_eq!(journal.epoch().unwrap(), Epoch::FIRST);
    assert_eq!(
        Epoch::FIRST,
        Epoch {
            number: 1,
            after_seq: 0
        }
    );
}

#[test]
fn an_epoch_replaces_an_empty_file_and_never_one_that_holds_anything() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let epoch = Epoch {
        number: 3,
        after_seq: 7,
    };
    std::fs::write(&path, b"").unwrap();
    drop(Journal::create_epoch(&path, DATABASE, epoch).unwrap());
    let made = std::fs::read(&path).unwrap();

    // A journal, and a file that is no journal: each stays byte for byte.
    let other = Epoch {
        number: 4,
        after_seq: 9,
    };
    let refused = Journal::create_epoch(&path, DATABASE, other).unwrap_err();
    assert!(matches!(refused, EpochError::Occupied { .. }), "{refused}");
    assert_eq!(std::fs::read(&path).unwrap(), made);
    std::fs::write(&path, b"not a journal").unwrap();
    let refused = Journal::create_epoch(&path, DATABASE, other).unwrap_err();
    assert!(matches!(refused, EpochError::Occupied { .. }), "{refused}");
    assert_eq!(std::fs::read(&path).unwrap(), b"not a journal");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name != path.file_name().unwrap())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let refused = Journal::create_epoch(&dir.path().join("x"), "", epoch).unwrap_err();
    assert!(matches!(refused, EpochError::EmptyDatabaseId), "{refused}");
    assert!(!dir.path().join("x").exists());
}
