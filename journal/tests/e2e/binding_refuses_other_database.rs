//! A journal binds to one OpenCode database id on first use; the same id again is accepted,
//! any other id is refused with both ids, and the binding survives reopen.

use crate::common;

use common::journal_path;
use pruning_journal::{BindError, Journal};

#[test]
fn binds_once_and_refuses_another_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    {
        let journal = Journal::open(&path).unwrap();
        assert_eq!(journal.bound_database().unwrap(), None);
        journal.bind("db-a").unwrap();
        journal.bind("db-a").unwrap();
        assert_eq!(journal.bound_database().unwrap(), Some("db-a".to_owned()));
    }

    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.bound_database().unwrap(), Some("db-a".to_owned()));
    journal.bind("db-a").unwrap();
    match journal.bind("db-b").unwrap_err() {
        BindError::Mismatch { bound, found } => {
            assert_eq!(bound, "db-a");
            assert_eq!(found, "db-b");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(journal.bound_database().unwrap(), Some("db-a".to_owned()));
}

#[test]
fn an_empty_id_is_refused_and_binds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    assert!(matches!(journal.bind(""), Err(BindError::EmptyDatabaseId)));
    assert_eq!(journal.bound_database().unwrap(), None);
}
