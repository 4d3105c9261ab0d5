//! `session-prune audit` on the real fixture after `clean --all --apply`: it holds (exit 0) as
//! the engine left it and when OpenCode changed pruned messages since (reported, not failed),
//! and fails (exit 1) with the right kind and words after each kind of tampering: a receipt
//! edited, deleted (in the middle, the newest, the whole table) or inserted behind the engine's
//! back, a pruned part or snapshot put back, a journal event removed, the journal gone
//! (docs/ARCHITECTURE.md, "Audit").

use crate::common;

use common::audit::{audit, clean_parts, cleaned, details, kinds, receipt_at, CLEANED};
use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::Value;

/// The first part id receipt `id` removed.
fn first_part_of(fx: &Fixture, id: &str) -> String {
    fx.sql()
        .query_row(
            "SELECT json_extract(part_ids, '$[0]') FROM session_prune_receipt WHERE id = ?1",
            [id],
            |row| row.get(0),
        )
        .expect("part id")
}

/// The JSON report of an audit of `fx` that finds a discrepancy (exit 1).
fn failing_audit(fx: &Fixture) -> Value {
    let out = audit(fx, &[]);
    assert_exit(&out, 1);
    json(&out)
}

/// Copies row `id` of `table` from the attached pristine fixture back into the database.
fn put_back(conn: &rusqlite::Connection, table: &str, id: &str) {
    let copied = conn
        .execute(
            &format!("INSERT INTO main.{table} SELECT * FROM pristine.{table} WHERE id = ?1"),
            [id],
        )
        .unwrap_or_else(|e| panic!("put {table} row {id} back: {e}"));
    assert_eq!(copied, 1, "{table} row {id}");
}

/// A pristine copy of the fixture attached as `pristine` on a connection to `fx`.
fn with_pristine(fx: &Fixture) -> (rusqlite::Connection, Fixture) {
    let pristine = Fixture::new();
    let conn = fx.sql();
    conn.execute(
        "ATTACH DATABASE ?1 AS pristine",
        [pristine.db.to_str().expect("path")],
    )
    .expect("attach");
    (conn, pristine)
}

#[test]
fn audit_holds_on_what_the_engine_wrote() {
    let fx = cleaned();
    let (digest, journal) = (fx.file_digest(), fx.journal_digest());
    let out = audit(&fx, &[]);
    assert_exit(&out, 0);
    // Read-only: the database, its WAL and the journal are as they were.
    assert_eq!((fx.file_digest(), fx.journal_digest()), (digest, journal));
    let report = json(&out);
    let head: String = fx
        .sql()
        .query_row(
            "SELECT chain_hash FROM session_prune_receipt ORDER BY chain_seq DESC LIMIT 1",
            [],
            |row| row.get(0),
        )
        .expect("head");
    assert_eq!(
        report,
        serde_json::json!({
            "ok": true, "receipts": CLEANED, "events": CLEANED, "messages": CLEANED,
            "chain": {"length": CLEANED, "head": head},
            "archive": {"checked": 0, "purged": 0},
            "discrepancies": [], "changedSince": [], "awaitingRecovery": [], "missingSpillFiles": [],
            "journalEpoch": {"number": 1, "afterSeq": 0, "earlierReceipts": 0}
        })
    );
    let text = run(&fx.db, &["audit"]);
    assert_exit(&text, 0);
    assert_eq!(
        String::from_utf8_lossy(&text.stdout),
        "audit: 11 receipt(s) of 11 message(s), 11 journal event(s), a receipt chain of 11: everything holds\n"
    );
    // The chain's places are 1..=11 in insertion order, and the meta table records its head.
    assert_eq!(
        fx.scalar(
            "SELECT count(*) FROM session_prune_receipt WHERE chain_seq = rowid AND length(chain_hash) = 64"
        ),
        CLEANED as i64
    );
    let meta: String = fx
        .sql()
        .query_row(
            "SELECT value FROM session_prune_meta WHERE key = 'receipt_chain_head'",
            [],
            |row| row.get(0),
        )
        .expect("head in meta");
    assert_eq!(
        serde_json::from_str::<Value>(&meta).expect("json"),
        serde_json::json!({"seq": CLEANED, "hash": head})
    );
}

#[test]
fn audit_of_one_session_counts_its_receipts_and_events() {
    let fx = cleaned();
    let of_session = fx.scalar(&format!(
        "SELECT count(*) FROM session_prune_receipt WHERE session_id = '{MANY_TURNS}'"
    ));
    assert!(
        of_session > 1 && of_session < CLEANED as i64,
        "{of_session}"
    );
    let out = audit(&fx, &["--session", MANY_TURNS]);
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["receipts"], of_session);
    assert_eq!(report["events"], of_session);
    assert_eq!(report["messages"], of_session);
    assert_eq!(report["chain"]["length"], CLEANED);
}

#[test]
fn an_edited_receipt_breaks_its_chain_link() {
    let fx = cleaned();
    fx.skip_audit();
    let edited = receipt_at(&fx, 3);
    fx.exec(
        "UPDATE session_prune_receipt SET bytes_removed = bytes_removed + 1 WHERE chain_seq = 3",
    );
    let report = failing_audit(&fx);
    assert_eq!(report["ok"], false);
    assert_eq!(
        kinds(&report),
        vec![("receipt_edited".into(), Some(edited.clone()), None, None)]
    );
    assert_eq!(
        details(&report),
        vec![format!(
            "receipt {edited} (place 3 in the receipt chain) does not match its chain hash: its row, or the receipt before it, was edited or replaced"
        )]
    );
}

#[test]
fn a_deleted_receipt_leaves_a_hole_and_an_event_without_receipt() {
    let fx = cleaned();
    fx.skip_audit();
    let deleted = receipt_at(&fx, 5);
    fx.exec("DELETE FROM session_prune_receipt WHERE chain_seq = 5");
    let report = failing_audit(&fx);
    assert_eq!(
        kinds(&report),
        vec![
            ("receipt_missing".into(), None, None, None),
            (
                "event_without_receipt".into(),
                Some(deleted.clone()),
                Some(5),
                None
            ),
        ]
    );
    assert_eq!(
        details(&report)[0],
        "receipt chain place 5 is missing: a receipt was deleted, or its chain place edited"
    );
    assert_eq!(report["receipts"], CLEANED - 1);
}

#[test]
fn a_deleted_newest_receipt_is_found_by_the_chain_head() {
    let fx = cleaned();
    fx.skip_audit();
    let deleted = receipt_at(&fx, CLEANED as i64);
    fx.exec(&format!(
        "DELETE FROM session_prune_receipt WHERE chain_seq = {CLEANED}"
    ));
    let report = failing_audit(&fx);
    assert_eq!(
        kinds(&report),
        vec![
            ("receipt_missing".into(), None, None, None),
            (
                "event_without_receipt".into(),
                Some(deleted),
                Some(CLEANED),
                None
            ),
        ]
    );
    assert_eq!(
        details(&report)[0],
        "the receipt chain's head names 11 receipt(s), and the chain ends at 10: the newest receipt(s) were deleted"
    );
}

#[test]
fn a_receipt_inserted_behind_the_engines_back_is_outside_the_chain() {
    let fx = cleaned();
    fx.skip_audit();
    let forged = "01a22fcd-0000-7000-8000-000000000000";
    fx.exec(&format!(
        "INSERT INTO session_prune_receipt (id, request_key, intent_id, session_id, message_id, storage,
           revision_before, revision_after, indexes, part_ids, removed_count, bytes_removed,
           time_committed, engine_version)
         SELECT '{forged}', 'forged', intent_id, session_id, message_id, storage, revision_before,
           revision_after, indexes, part_ids, removed_count, bytes_removed, time_committed,
           engine_version FROM session_prune_receipt WHERE chain_seq = 2"
    ));
    let report = failing_audit(&fx);
    // The forged receipt names a committed intent whose event announces another receipt.
    assert_eq!(
        kinds(&report),
        vec![
            ("receipt_unchained".into(), Some(forged.into()), None, None),
            ("event_missing".into(), Some(forged.into()), Some(2), None),
        ]
    );
    assert_eq!(
        details(&report)[0],
        format!("receipt {forged} has no place in the receipt chain: it was inserted, or its chain columns cleared, behind the engine's back")
    );
}

#[test]
fn a_pruned_part_put_back_is_found() {
    let fx = cleaned();
    fx.skip_audit();
    let receipt = receipt_at(&fx, 1);
    let part = first_part_of(&fx, &receipt);
    let (conn, _pristine) = with_pristine(&fx);
    put_back(&conn, "part", &part);
    drop(conn);
    let report = failing_audit(&fx);
    assert_eq!(
        kinds(&report),
        vec![(
            "part_back".into(),
            Some(receipt.clone()),
            None,
            Some(part.clone())
        )]
    );
    assert!(
        details(&report)[0].starts_with(&format!(
            "part {part}, which receipt {receipt} removed, is back in table part (message msg_"
        )),
        "{:?}",
        details(&report)
    );
    // The message's content changed with it: reported as written since, not as a discrepancy.
    let changes = report["changedSince"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["change"], "written");
    assert_eq!(changes[0]["receiptID"], receipt.as_str());
}

#[test]
fn a_pruned_snapshot_put_back_is_found() {
    let fx = cleaned();
    fx.skip_audit();
    let (conn, _pristine) = with_pristine(&fx);
    // The first removed part that had a snapshot event.
    let (receipt, part, event): (String, String, String) = conn
        .query_row(
            "SELECT r.id, p.value, e.id FROM main.session_prune_receipt r, json_each(r.part_ids) p
               JOIN pristine.event e ON e.type = 'message.part.updated.1'
                 AND json_extract(e.data, '$.part.id') = p.value
             ORDER BY r.chain_seq, e.seq LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .expect("a removed snapshot");
    put_back(&conn, "event", &event);
    drop(conn);
    let report = failing_audit(&fx);
    assert_eq!(
        kinds(&report),
        vec![(
            "snapshot_back".into(),
            Some(receipt.clone()),
            None,
            Some(part.clone())
        )]
    );
    assert_eq!(
        details(&report),
        vec![format!(
            "snapshot event {event} of part {part}, which receipt {receipt} removed, is back in table event"
        )]
    );
    assert_eq!(report["changedSince"], serde_json::json!([]));
}

#[test]
fn a_journal_event_removed_is_found() {
    let fx = cleaned();
    fx.skip_audit();
    let receipt = receipt_at(&fx, 4);
    {
        let db = redb::Database::open(&fx.journal).expect("open the journal with redb");
        let txn = db.begin_write().expect("write");
        {
            let mut events = txn
                .open_table(redb::TableDefinition::<u64, &[u8]>::new("events"))
                .expect("events table");
            assert!(events.remove(4).expect("remove").is_some());
        }
        txn.commit().expect("commit");
    }
    let report = failing_audit(&fx);
    assert_eq!(
        kinds(&report),
        vec![("event_missing".into(), Some(receipt.clone()), Some(4), None)]
    );
    assert_eq!(
        details(&report),
        vec![format!(
            "receipt {receipt}'s event 4 is gone from the journal (retention removed only events up to 0)"
        )]
    );
    assert_eq!(report["events"], CLEANED - 1);
}

#[test]
fn without_its_journal_no_receipt_has_its_event() {
    let fx = cleaned();
    fx.skip_audit();
    std::fs::remove_file(&fx.journal).expect("remove the journal");
    let report = failing_audit(&fx);
    assert_eq!(
        kinds(&report),
        vec![("receipt_not_journaled".into(), None, None, None)]
    );
    assert_eq!(
        details(&report),
        vec!["there is no journal, so none of the 11 receipt(s) has its event (pass the journal with --journal PATH)".to_string()]
    );
    assert!(!fx.journal.exists(), "a read command created the journal");
}

#[test]
fn messages_opencode_changed_since_are_reported_and_hold() {
    let fx = cleaned();
    let written = receipt_at(&fx, 1);
    let deleted = receipt_at(&fx, 2);
    let message_of = |id: &str| -> String {
        fx.sql()
            .query_row(
                "SELECT message_id FROM session_prune_receipt WHERE id = ?1",
                [id],
                |row| row.get(0),
            )
            .expect("message")
    };
    let (written_message, deleted_message) = (message_of(&written), message_of(&deleted));
    // OpenCode appends a part to one pruned message and deletes another.
    fx.exec(&format!(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
           SELECT 'prt_zzzz_appended', id, session_id, time_created, time_updated,
             '{{\"type\":\"text\",\"text\":\"later\"}}' FROM message WHERE id = '{written_message}';
         DELETE FROM part WHERE message_id = '{deleted_message}';
         DELETE FROM message WHERE id = '{deleted_message}';"
    ));
    let out = audit(&fx, &[]);
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["ok"], true);
    let changes: Vec<(String, String)> = report["changedSince"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["change"].as_str().expect("change").to_string(),
                c["receiptID"].as_str().expect("receipt").to_string(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            ("written".to_string(), written),
            ("deleted".to_string(), deleted)
        ]
    );
    let text = run(&fx.db, &["audit"]);
    assert_exit(&text, 0);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains(
            "2 pruned message(s) changed since their newest receipt (not a discrepancy):"
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "message {deleted_message} is gone: it was deleted since receipt"
        )),
        "{text}"
    );
}

#[test]
fn receipts_written_before_the_chain_are_chained_by_the_next_prune() {
    let fx = Fixture::new();
    let first = clean_parts(&fx.db, MANY_TURNS);
    assert_exit(&first, 0);
    let before = fx.scalar("SELECT count(*) FROM session_prune_receipt");
    assert!(before > 1, "{before}");
    // As an engine without the chain left them.
    fx.exec(
        "ALTER TABLE session_prune_receipt DROP COLUMN chain_seq;
         ALTER TABLE session_prune_receipt DROP COLUMN chain_hash;
         DELETE FROM session_prune_meta WHERE key = 'receipt_chain_head';",
    );
    let legacy = audit(&fx, &[]);
    assert_exit(&legacy, 0);
    assert_eq!(json(&legacy)["chain"]["length"], 0);
    let rest = clean_parts(&fx.db, "--all");
    assert_exit(&rest, 0);
    let out = audit(&fx, &[]);
    assert_exit(&out, 0);
    assert_eq!(json(&out)["chain"]["length"], CLEANED);
    // The older receipts took the first places, oldest row first.
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE chain_seq = rowid"),
        CLEANED as i64
    );
}

#[test]
fn a_prune_stopped_before_its_commit_mark_awaits_recovery_and_holds() {
    let fx = Fixture::new();
    let (intent, receipt) = prune_stopped_before_journal_commit(&fx);
    let out = audit(&fx, &[]);
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["ok"], true);
    assert_eq!(report["events"], 0);
    assert_eq!(
        report["awaitingRecovery"],
        serde_json::json!([{
            "receiptID": receipt.receipt_id,
            "intentID": intent.intent_id,
            "detail": format!(
                "receipt {} committed while its intent {} is still pending in the journal: the next command that prunes journals its event",
                receipt.receipt_id, intent.intent_id
            ),
        }])
    );
    // A writable open recovers it: the event is journaled and nothing awaits any more.
    drop(fx.engine());
    let report = json(&audit(&fx, &[]));
    assert_eq!(report["awaitingRecovery"], serde_json::json!([]));
    assert_eq!(report["events"], 1);
    assert_eq!(report["ok"], true);
}

#[test]
fn an_empty_session_is_bad_input_and_changes_nothing() {
    let fx = cleaned();
    let (digest, journal) = (fx.file_digest(), fx.journal_digest());
    let out = audit(&fx, &["--session", " "]);
    assert_exit(&out, 2);
    assert_eq!(json(&out)["status"], "error");
    assert_eq!((fx.file_digest(), fx.journal_digest()), (digest, journal));
}

#[test]
fn an_item_put_back_into_a_v2_message_is_found() {
    use common::v2::{V2Fixture, V2_ASSISTANT, V2_SESSION};
    use pruning_engine::{Engine, Journal, PreviewRequest, PreviewResult, PruneRequest};
    use pruning_opencode::{OpenCodeStore, StoreOptions};

    let fx = V2Fixture::new();
    fx.skip_audit();
    let original = fx.row(V2_ASSISTANT);
    let engine = Engine::open(
        OpenCodeStore::open(&fx.db, StoreOptions::default()).unwrap(),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap();
    let preview = PreviewRequest::new(V2_SESSION.into(), V2_ASSISTANT.into()).unwrap();
    let PreviewResult::Preview { revision, .. } = engine.preview(&preview).unwrap() else {
        panic!("a preview")
    };
    let request =
        PruneRequest::all_technical(V2_SESSION.into(), V2_ASSISTANT.into(), revision).unwrap();
    let receipt = engine.prune(&request).unwrap().receipt.expect("a receipt");
    drop(engine);
    let clean = run(&fx.db, &["--json", "audit"]);
    assert_exit(&clean, 0);
    // The row as it was before the prune, written back behind the engine's back.
    fx.sql()
        .execute(
            "UPDATE session_message SET data = ?1 WHERE id = ?2",
            [&original, V2_ASSISTANT],
        )
        .unwrap();
    let out = run(&fx.db, &["--json", "audit"]);
    assert_exit(&out, 1);
    let report = json(&out);
    let id = receipt.receipt_id.to_string();
    assert_eq!(
        kinds(&report),
        vec![
            (
                "content_back".into(),
                Some(id.clone()),
                None,
                Some("reasoning-0".into())
            ),
            (
                "content_back".into(),
                Some(id.clone()),
                None,
                Some(receipt.part_ids[1].clone())
            ),
        ]
    );
    assert_eq!(
        details(&report)[0],
        format!("item reasoning-0, which a receipt removed from message {V2_ASSISTANT}, is back in its content")
    );
    let changes = report["changedSince"].as_array().expect("changes");
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0]["change"], "written");
}

#[test]
fn a_dropped_receipt_table_is_found_by_the_chain_head() {
    let fx = cleaned();
    fx.skip_audit();
    fx.exec("DROP TABLE session_prune_receipt");
    std::fs::remove_file(&fx.journal).expect("remove the journal");
    let report = failing_audit(&fx);
    assert_eq!(
        kinds(&report),
        vec![("receipt_missing".into(), None, None, None)]
    );
    assert_eq!(
        details(&report),
        vec![format!("the receipt chain's head names {CLEANED} receipt(s), and no receipt is chained: receipts were deleted")]
    );
    assert_eq!(report["receipts"], 0);
}

#[test]
fn the_text_report_says_what_to_do_once_per_kind_of_discrepancy() {
    let fx = cleaned();
    fx.skip_audit();
    fx.exec(
        "UPDATE session_prune_receipt SET bytes_removed = bytes_removed + 1 WHERE chain_seq IN (3, 4)",
    );
    let out = run(&fx.db, &["audit"]);
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let advice: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("  what to do: "))
        .collect();
    assert_eq!(
        advice,
        vec!["  what to do: the receipt table was changed outside session-prune: restore session_prune_receipt and session_prune_meta from a copy of the database taken after its last prune (the journal still lists every committed prune: `session-prune events`)"],
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("  discrepancy: "))
            .count(),
        2,
        "{text}"
    );
}

#[test]
fn a_scoped_audit_reports_a_broken_chain_without_naming_receipts_outside_its_scope() {
    let fx = cleaned();
    fx.skip_audit();
    // A receipt of another session than MANY_TURNS, edited.
    let outside: String = fx
        .sql()
        .query_row(
            &format!(
                "SELECT id FROM session_prune_receipt WHERE session_id <> '{MANY_TURNS}' \
                 ORDER BY chain_seq LIMIT 1"
            ),
            [],
            |row| row.get(0),
        )
        .expect("a receipt of another session");
    fx.exec(&format!(
        "UPDATE session_prune_receipt SET bytes_removed = bytes_removed + 1 WHERE id = '{outside}'"
    ));
    let out = audit(&fx, &["--session", MANY_TURNS]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(
        kinds(&report),
        vec![("receipt_edited".into(), None, None, None)]
    );
    assert_eq!(
        details(&report),
        vec!["a receipt of a session outside this audit's scope does not fit the receipt chain (edited); audit the whole database to see which".to_string()]
    );
    assert!(!out
        .stdout
        .windows(outside.len())
        .any(|w| w == outside.as_bytes()));
    // The whole database's audit names it.
    let whole = failing_audit(&fx);
    assert_eq!(
        kinds(&whole),
        vec![("receipt_edited".into(), Some(outside), None, None)]
    );
}
