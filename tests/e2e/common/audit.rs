//! The audit every test database gets when its fixture is dropped: whatever a test pruned, the
//! receipts, the journal and the rows must agree (`session-prune audit` holds). A test that
//! tampers with them on purpose calls `skip_audit` on its fixture. Also what the audit tests
//! share: the cleaned fixture, `session-prune audit --json`, and the parts of its report.

use std::path::Path;
use std::process::Output;

use pruning_engine::{AuditReport, AuditScope, Journal};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use redb::ReadableTable;
use serde_json::Value;

use super::cli::{assert_exit, run};
use super::Fixture;

/// Receipts `clean --all --apply --no-compact --abandoned-after never` writes on the fixture.
pub const CLEANED: u64 = 11;

/// `--json --abandoned-after never clean SCOPE --apply --no-compact`: a clean of parts only (no
/// compaction), whose receipts the audit tests count. `SCOPE` is `--all` or a session id.
pub fn clean_parts(db: &Path, scope: &str) -> Output {
    run(
        db,
        &[
            "--json",
            "--abandoned-after",
            "never",
            "clean",
            scope,
            "--apply",
            "--no-compact",
        ],
    )
}

/// The fixture after a clean of its parts (`clean --all --apply --no-compact`): 11 receipts, 11
/// journal events, one per pruned message.
pub fn cleaned() -> Fixture {
    let fx = Fixture::new();
    let out = clean_parts(&fx.db, "--all");
    assert_exit(&out, 0);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt") as u64,
        CLEANED
    );
    fx
}

/// `session-prune --json audit` on the fixture, with `extra` arguments.
pub fn audit(fx: &Fixture, extra: &[&str]) -> Output {
    let mut args = vec!["--json", "audit"];
    args.extend_from_slice(extra);
    run(&fx.db, &args)
}

/// `(kind, receiptID, seq, partID)` of a discrepancy.
pub type Found = (String, Option<String>, Option<u64>, Option<String>);

/// [`Found`] of each discrepancy of a JSON report.
pub fn kinds(report: &Value) -> Vec<Found> {
    report["discrepancies"]
        .as_array()
        .expect("discrepancies")
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().expect("kind").to_string(),
                d["receiptID"].as_str().map(str::to_string),
                d["seq"].as_u64(),
                d["partID"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// The `detail` of each discrepancy.
pub fn details(report: &Value) -> Vec<String> {
    report["discrepancies"]
        .as_array()
        .expect("discrepancies")
        .iter()
        .map(|d| d["detail"].as_str().expect("detail").to_string())
        .collect()
}

/// The id of the receipt at `chain_seq` in the receipt chain.
pub fn receipt_at(fx: &Fixture, chain_seq: i64) -> String {
    fx.sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE chain_seq = ?1",
            [chain_seq],
            |row| row.get(0),
        )
        .expect("receipt at chain place")
}

/// The audit of the database at `db` with the journal at `journal` (none when the file is
/// absent), or `None` when there is nothing to audit (no database, or not one the store
/// opens: a test of a damaged file).
pub fn audit_of(db: &Path, journal: &Path) -> Option<AuditReport> {
    if !db.is_file() {
        return None;
    }
    let store = OpenCodeStore::open(db, StoreOptions::default()).ok()?;
    let journal = if journal.exists() {
        // A journal a killed process left unclosed is repaired by a writable open.
        Some(match Journal::open_read_only(journal) {
            Ok(journal) => journal,
            Err(_) => Journal::open(journal).expect("open the journal to audit it"),
        })
    } else {
        None
    };
    Some(pruning_engine::audit(&store, journal.as_ref(), AuditScope::All).expect("audit"))
}

/// Panics with the report when the audit of `db` and `journal` finds a discrepancy. Does
/// nothing while the thread is already panicking (the test failed for its own reason).
pub fn assert_audit_holds(db: &Path, journal: &Path) {
    if std::thread::panicking() {
        return;
    }
    if let Some(report) = audit_of(db, journal) {
        assert!(
            report.ok,
            "the audit of {} found discrepancies: {:#?}",
            db.display(),
            report.discrepancies
        );
    }
}

/// Rewrites the intent `intent_id` in the journal file at `journal` with `edit`, as anyone with
/// the file and redb could (the journal must not be open).
pub fn edit_intent(
    journal: &Path,
    intent_id: uuid::Uuid,
    edit: impl FnOnce(&mut pruning_journal::Intent),
) {
    let db = redb::Database::open(journal).expect("open the journal with redb");
    let txn = db.begin_write().expect("write");
    {
        let mut intents = txn
            .open_table(redb::TableDefinition::<[u8; 16], &[u8]>::new("intents"))
            .expect("intents table");
        let key = *intent_id.as_bytes();
        let mut intent: pruning_journal::Intent = {
            let stored = intents
                .get(&key)
                .expect("read")
                .expect("the intent is there");
            pruning_journal::codec::decode_intent(stored.value()).expect("decode")
        };
        edit(&mut intent);
        let bytes = pruning_journal::codec::encode_intent(&intent).expect("encode");
        intents.insert(&key, bytes.as_slice()).expect("write back");
    }
    txn.commit().expect("commit");
}

/// Rewrites the event `seq` in the journal file at `journal` with `edit`.
pub fn edit_event(
    journal: &Path,
    seq: u64,
    edit: impl FnOnce(&mut pruning_journal::CommittedEvent),
) {
    let db = redb::Database::open(journal).expect("open the journal with redb");
    let txn = db.begin_write().expect("write");
    {
        let mut events = txn
            .open_table(redb::TableDefinition::<u64, &[u8]>::new("events"))
            .expect("events table");
        let mut event: pruning_journal::CommittedEvent = {
            let stored = events.get(seq).expect("read").expect("the event is there");
            pruning_journal::codec::decode_event(stored.value()).expect("decode")
        };
        edit(&mut event);
        let bytes = pruning_journal::codec::encode_event(&event).expect("encode");
        events.insert(seq, bytes.as_slice()).expect("write back");
    }
    txn.commit().expect("commit");
}

/// Hashes the receipt chain again over the rows as they now are, from place 1, and moves the
/// head to its end, by the algorithm docs/ARCHITECTURE.md documents ("Audit": each link the
/// SHA-256 of the previous link's hash and a JSON array of the row's columns): what someone who
/// edits a receipt and covers the edit would do.
pub fn hash_chain_again(fx: &Fixture) {
    use sha2::{Digest, Sha256};
    const COLUMNS: &str = "id, request_key, intent_id, session_id, message_id, storage, \
        revision_before, revision_after, indexes, part_ids, removed_count, bytes_removed, \
        time_committed, engine_version, abandoned_run, archive_hash, restores, operation";
    let conn = fx.sql();
    let mut rows = conn
        .prepare(&format!(
            "SELECT chain_seq, {COLUMNS} FROM session_prune_receipt WHERE chain_seq IS NOT NULL \
             ORDER BY chain_seq"
        ))
        .unwrap();
    let links: Vec<(i64, String, String)> = rows
        .query_map([], |row| {
            let mut values: Vec<Value> = (1..=18)
                .map(|at| match row.get_ref(at).unwrap() {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(n) => Value::from(n),
                    rusqlite::types::ValueRef::Real(x) => Value::from(x),
                    rusqlite::types::ValueRef::Text(text) => {
                        Value::String(String::from_utf8(text.to_vec()).unwrap())
                    }
                    rusqlite::types::ValueRef::Blob(bytes) => Value::String(hex::encode(bytes)),
                })
                .collect();
            while values.len() > 15 && values.last() == Some(&Value::Null) {
                values.pop();
            }
            Ok((row.get(0)?, row.get(1)?, Value::Array(values).to_string()))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    drop(rows);
    let mut previous = String::new();
    let mut head = 0;
    for (seq, id, payload) in links {
        let hash = hex::encode(Sha256::digest(format!("{previous}{payload}")));
        conn.execute(
            "UPDATE session_prune_receipt SET chain_hash = ?1 WHERE id = ?2",
            (&hash, &id),
        )
        .unwrap();
        (previous, head) = (hash, seq);
    }
    conn.execute(
        "UPDATE session_prune_meta SET value = ?1 WHERE key = 'receipt_chain_head'",
        [serde_json::json!({ "seq": head, "hash": previous }).to_string()],
    )
    .unwrap();
}
