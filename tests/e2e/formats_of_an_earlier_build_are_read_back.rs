//! The journal, the archive and the receipts written by earlier builds
//! (tests/fixtures/formats-0.1.0 and formats-record-4, made by scripts/format-fixtures.sh: the
//! same clean, by a build before compactions were requested by range and one after) are read by
//! this one:
//! the same receipts and events, an audit where everything holds, every archive entry named,
//! and a restore of every receipt that gives back the original rows byte for byte. A change of
//! any of those formats that this build cannot read fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pruning_journal::Selection;
use serde_json::Value;

use crate::common::cli::{assert_exit, json, run};

/// The sessions the fixture's clean took.
const SESSIONS: [&str; 2] = [
    "ses_dd992af4dffe56B7kwrH3SftqX",
    "ses_dd9927d77ffeCzugJZ3vDGPMn9",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The folders of formats written by earlier builds.
const FORMATS: [&str; 2] = ["formats-0.1.0", "formats-record-4"];

/// The three files of the formats folder `formats`, copied into `dir`: the database's path
/// there.
fn copy_formats(formats: &str, dir: &Path) -> PathBuf {
    for file in [
        "opencode.db",
        "opencode.db.prune-journal",
        "opencode.db.prune-archive",
    ] {
        std::fs::copy(fixture(formats).join(file), dir.join(file)).unwrap();
    }
    dir.join("opencode.db")
}

/// `--quiet-period 0 --json ARGS` on `db`, expected to exit 0.
fn document(db: &Path, args: &[&str]) -> Value {
    let out = run(db, &[&["--quiet-period", "0", "--json"][..], args].concat());
    assert_exit(&out, 0);
    json(&out)
}

/// Every row of the tables a prune and a compaction change, as text.
fn rows(db: &Path) -> BTreeSet<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut rows = BTreeSet::new();
    for sql in [
        "SELECT 'part', id, message_id, session_id, data FROM part",
        "SELECT 'event', id, aggregate_id, seq, type || ' ' || data FROM event",
        "SELECT 'message', id, session_id, time_created, data FROM message",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let found = stmt
            .query_map([], |row| {
                Ok(format!(
                    "{:?} {:?} {:?} {:?} {:?}",
                    row.get::<_, String>(0)?,
                    row.get_ref(1)?,
                    row.get_ref(2)?,
                    row.get_ref(3)?,
                    row.get_ref(4)?
                ))
            })
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        rows.extend(found);
    }
    rows
}

#[test]
fn receipts_events_and_archive_of_earlier_builds_are_read_and_audited() {
    for formats in FORMATS {
        receipts_events_and_archive_are_read_and_audited(formats);
    }
}

fn receipts_events_and_archive_are_read_and_audited(formats: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = copy_formats(formats, dir.path());
    let receipts = document(&db, &["receipts"]);
    let receipts = receipts.as_array().unwrap();
    assert_eq!(receipts.len(), 13);
    let ids: Vec<&str> = receipts
        .iter()
        .map(|r| r["receiptID"].as_str().unwrap())
        .collect();
    let compactions = receipts
        .iter()
        .filter(|r| r["messageID"].as_str() == Some(""))
        .count();
    assert_eq!(compactions, 2);
    // What each build journaled for its compactions: every superseded snapshot of the session
    // (record version 3), or those of one range (record version 4).
    let journal =
        pruning_journal::Journal::open_read_only(&dir.path().join("opencode.db.prune-journal"))
            .unwrap();
    for receipt in receipts.iter().filter(|r| r["messageID"] == "") {
        let id: uuid::Uuid = receipt["intentID"].as_str().unwrap().parse().unwrap();
        let selection = journal.intent(id).unwrap().unwrap().selection;
        match formats {
            "formats-0.1.0" => assert_eq!(selection, Selection::SupersededSnapshots),
            _ => assert!(
                matches!(selection, Selection::SupersededSnapshotsIn { first_seq, last_seq } if first_seq <= last_seq),
                "{selection:?}"
            ),
        }
    }
    drop(journal);
    assert!(receipts
        .iter()
        .all(|r| SESSIONS.contains(&r["sessionID"].as_str().unwrap())));

    // The journal's events, replayed from the start: one per receipt, seq 1 to 13, in order.
    let out = run(&db, &["--json", "events"]);
    assert_exit(&out, 0);
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        events
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (1..=13).collect::<Vec<u64>>()
    );
    let event_ids: BTreeSet<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(event_ids, ids.iter().copied().collect::<BTreeSet<_>>());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types
            .iter()
            .filter(|t| **t == "rpc.codenomad.session-pruning.pruned")
            .count(),
        11
    );
    assert_eq!(
        types
            .iter()
            .filter(|t| **t == "rpc.codenomad.session-pruning.compacted")
            .count(),
        2
    );

    let audit = document(&db, &["audit"]);
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(audit["receipts"], 13);
    assert_eq!(audit["events"], 13);
    assert_eq!(audit["archive"]["checked"], 13);
    assert_eq!(audit["discrepancies"], serde_json::json!([]));

    let archive = document(&db, &["archive", "stats"]);
    assert_eq!(archive["entries"], 13, "{archive}");
    assert_eq!(archive["named"], 13, "{archive}");
    assert_eq!(archive["orphans"], 0, "{archive}");
    assert_eq!(archive["unreadableAt"], Value::Null, "{archive}");
}

#[test]
fn every_receipt_of_earlier_builds_is_restored_to_the_original_rows() {
    for formats in FORMATS {
        every_receipt_is_restored_to_the_original_rows(formats);
    }
}

fn every_receipt_is_restored_to_the_original_rows(formats: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = copy_formats(formats, dir.path());
    let original = rows(&fixture("opencode-1.18.34").join("opencode.db"));
    assert_ne!(rows(&db), original, "the fixture holds no prune");
    let receipts = document(&db, &["receipts"]);
    // Newest first: each restore finds its message as the prune after it left it.
    for receipt in receipts.as_array().unwrap().iter().rev() {
        let id = receipt["receiptID"].as_str().unwrap();
        let restored = document(&db, &["restore", id]);
        assert_eq!(restored["status"], "restored", "{restored}");
    }
    assert_eq!(rows(&db), original);
    // The restores are journaled after the fixture's events, and the audit still holds.
    let audit = document(&db, &["audit"]);
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(audit["events"], 26, "{audit}");
}
