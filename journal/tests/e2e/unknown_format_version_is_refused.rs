//! A record or a file of an unknown format version is an error, never a guess: a meta
//! `format_version` of 99 refuses the open (and leaves the file as it was), and a record
//! value whose leading version byte is unknown fails every read that decodes it.

use crate::common;

use std::path::Path;

use common::{commit_for, intent, journal_path};
use pruning_journal::{CodecError, Journal, OpenError, ReadError, FORMAT_VERSION, RECORD_VERSION};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const INTENTS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("intents");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");

/// Rewrites the value under `key` in `table` with `edit` applied, straight through redb.
fn patch<K: redb::Key + 'static>(
    path: &Path,
    table: TableDefinition<K, &[u8]>,
    key: K::SelfType<'_>,
    edit: impl FnOnce(&mut Vec<u8>),
) {
    let db = Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(table).unwrap();
        let mut value = table.get(&key).unwrap().unwrap().value().to_vec();
        edit(&mut value);
        table.insert(&key, value.as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

/// A record (intent or event) of an unknown version: the newest this build reads is
/// `RECORD_VERSION`.
fn unknown(found: u8) -> CodecError {
    CodecError::UnknownFormatVersion {
        found,
        supported: RECORD_VERSION,
    }
}

#[test]
fn meta_format_version_99_refuses_open_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    drop(Journal::open(&path).unwrap());
    patch(&path, META, "format_version", |value| *value = vec![99]);

    match Journal::open(&path).unwrap_err() {
        OpenError::UnknownFormatVersion { found, supported } => {
            assert_eq!(found, 99);
            assert_eq!(supported, 1);
        }
        other => panic!("unexpected {other:?}"),
    }

    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let meta = txn.open_table(META).unwrap();
    assert_eq!(meta.get("format_version").unwrap().unwrap().value(), &[99]);
}

#[test]
fn unknown_record_version_byte_fails_reads_with_exact_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let bad = intent(1);
    let good = intent(2);
    {
        let journal = Journal::open(&path).unwrap();
        journal
            .record_intents(&[bad.clone(), good.clone()])
            .unwrap();
        journal.commit(&[commit_for(&good, 1)]).unwrap();
    }
    patch(&path, INTENTS, *bad.intent_id.as_bytes(), |value| {
        assert_eq!(value[0], FORMAT_VERSION);
        value[0] = 7;
    });
    patch(&path, EVENTS, 1, |value| value[0] = 9);

    let journal = Journal::open(&path).unwrap();
    let read = |result: Result<_, ReadError>| match result {
        Err(ReadError::Codec(error)) => error,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(read(journal.intent(bad.intent_id).map(drop)), unknown(7));
    assert_eq!(
        read(journal.intent_by_request_key(&bad.request_key).map(drop)),
        unknown(7)
    );
    assert_eq!(read(journal.intents().map(drop)), unknown(7));
    assert_eq!(read(journal.pending_intents().map(drop)), unknown(7));
    assert_eq!(read(journal.event(1).map(drop)), unknown(9));
    assert_eq!(read(journal.events_after(0, 10).map(drop)), unknown(9));
    assert_eq!(
        read(journal.committed_event_for(&good.request_key).map(drop)),
        unknown(9)
    );
    // Records of the known version still read.
    assert_eq!(
        journal.intent(good.intent_id).unwrap().unwrap().intent_id,
        good.intent_id
    );
    assert_eq!(journal.last_seq().unwrap(), 1);
}

#[test]
fn a_write_touching_an_unknown_record_fails_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let bad = intent(1);
    drop({
        let journal = Journal::open(&path).unwrap();
        journal.record_intent(&bad).unwrap();
        journal
    });
    patch(&path, INTENTS, *bad.intent_id.as_bytes(), |value| {
        value[0] = 7
    });

    let journal = Journal::open(&path).unwrap();
    match journal.commit(&[commit_for(&bad, 1)]).unwrap_err() {
        pruning_journal::WriteError::Codec(error) => assert_eq!(error, unknown(7)),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(journal.last_seq().unwrap(), 0);
    assert!(!journal.is_poisoned());
}
