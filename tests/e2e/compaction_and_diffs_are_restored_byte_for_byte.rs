//! With `--archive`, a clean's compactions and diffs prunes keep what they remove, and `restore`
//! puts it back byte for byte (newest first: a compaction's snapshots go back once the newer
//! snapshots that supersede them are there again); a compaction whose snapshots a later prune
//! left unsuperseded is refused until that prune is restored; the audit finds a compacted
//! snapshot or an emptied file body put back behind the engine's back.

use crate::common;

use common::archive::{
    archive_digest, audit_report, clean_archived_with, prunes, restore_intents, restore_out,
    table_rows as rows, unrestored,
};
use common::cli::{assert_exit, json};
use common::*;
use pruning_engine::IntentState;

/// The journal's record of a restore refused as a conflict (its intent, then the refusal).
fn refused_conflict() -> IntentState {
    IntentState::Refused {
        reason: "conflict".into(),
    }
}

/// The receipt of the kind `kind` (`compaction`, `diffs`) of session `session`, if any.
fn receipt_of(fx: &Fixture, kind: &str, session: &str) -> String {
    fx.sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE session_id = ?1 \
               AND json_extract(operation, '$.kind') = ?2 LIMIT 1",
            [session, kind],
            |row| row.get(0),
        )
        .expect("a receipt of that kind")
}

#[test]
fn every_compaction_and_diffs_prune_comes_back_newest_first() {
    let fx = Fixture::work();
    let tables = ["message", "part", "event"].map(|t| rows(&fx.db, t));
    let report = clean_archived_with(&fx.db, &[], &["--diffs"]);
    assert!(report["compaction"]["sessions"].as_u64().unwrap() > 0);
    assert!(report["diffs"]["pruned"].as_u64().unwrap() > 0);
    let pruned = unrestored(&fx.db);
    assert_eq!(pruned.len() as u64, prunes(&report), "{report}");
    assert_ne!(rows(&fx.db, "event"), tables[2]);
    for receipt in &pruned {
        let out = restore_out(&fx.db, receipt);
        assert_exit(&out, 0);
        assert_eq!(json(&out)["status"], "restored");
    }
    for (table, before) in ["message", "part", "event"].iter().zip(&tables) {
        assert_eq!(&rows(&fx.db, table), before, "{table}: byte for byte");
    }
    let (code, audit) = audit_report(&fx.db);
    assert_eq!(code, 0, "{audit}");

    // The same clean compacts again and leaves what a restore put back; asked to, it prunes
    // those again too, each with a receipt of its own.
    let left = clean_archived_with(&fx.db, &[], &["--diffs"]);
    assert_eq!(left["pruned"], 0, "{left}");
    assert_eq!(left["skipped"]["restored"], report["pruned"], "{left}");
    assert_eq!(
        left["diffs"]["skipped"]["restored"], report["diffs"]["pruned"],
        "{left}"
    );
    assert_eq!(
        left["compaction"]["sessions"], report["compaction"]["sessions"],
        "{left}"
    );
    let (code, audit) = audit_report(&fx.db);
    assert_eq!(code, 0, "{audit}");
    for receipt in unrestored(&fx.db) {
        assert_exit(&restore_out(&fx.db, &receipt), 0);
    }
    let again = clean_archived_with(&fx.db, &[], &["--diffs", "--include-restored"]);
    assert_eq!(prunes(&again), prunes(&report), "{again}");
    assert_eq!(again["alreadyPruned"], 0, "{again}");
    let (code, audit) = audit_report(&fx.db);
    assert_eq!(code, 0, "{audit}");
}

#[test]
fn a_compaction_waits_for_the_prunes_after_it_to_be_restored() {
    let fx = Fixture::new();
    clean_archived_with(&fx.db, &[MANY_TURNS], &[]);
    let compaction = receipt_of(&fx, "compaction", MANY_TURNS);
    let parts: Vec<String> = unrestored(&fx.db)
        .into_iter()
        .filter(|id| *id != compaction)
        .collect();
    assert!(!parts.is_empty());
    let (digest, archive) = (fx.file_digest(), archive_digest(&fx));
    let out = restore_out(&fx.db, &compaction);
    assert_exit(&out, 3);
    assert_eq!(
        json(&out),
        serde_json::json!({"status": "blocked", "reason": "conflict"})
    );
    let words = String::from_utf8_lossy(&out.stderr);
    assert!(words.contains("would no longer be superseded"), "{words}");
    // The words name a prune to restore first.
    let first = parts
        .iter()
        .find(|receipt| words.contains(&format!("restore receipt {receipt} first")));
    assert!(first.is_some(), "{words}");
    assert_eq!(
        (fx.file_digest(), archive_digest(&fx)),
        (digest, archive),
        "a refused restore writes nothing"
    );
    assert_eq!(restore_intents(&fx, &compaction), vec![refused_conflict()]);
    for receipt in &parts {
        assert_exit(&restore_out(&fx.db, receipt), 0);
    }
    assert_exit(&restore_out(&fx.db, &compaction), 0);
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM ({SUPERSEDED_SQL}) WHERE aggregate_id = '{MANY_TURNS}'"
        )),
        180,
        "every superseded snapshot is back"
    );
}

#[test]
fn the_audit_finds_a_compacted_snapshot_or_an_emptied_body_put_back() {
    let fx = Fixture::work();
    let pristine = Fixture::work();
    clean_archived_with(&fx.db, &[], &["--diffs"]);
    let (code, audit) = audit_report(&fx.db);
    assert_eq!(code, 0, "{audit}");
    fx.skip_audit();

    // A compacted snapshot of a session written back from the pristine copy (a sync, a
    // restored backup).
    let (snapshot, session): (String, String) = pristine
        .sql()
        .query_row(
            &format!(
                "SELECT s.id, s.aggregate_id FROM ({SUPERSEDED_SQL}) s JOIN event e ON e.id = s.id \
                 WHERE e.type = 'session.updated.1' LIMIT 1"
            ),
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("a superseded snapshot");
    // A user message's row written back with its file bodies.
    let message: String = pristine
        .sql()
        .query_row(
            "SELECT id FROM message WHERE json_extract(data, '$.role') = 'user' AND EXISTS ( \
               SELECT 1 FROM json_each(data, '$.summary.diffs') d \
               WHERE json_extract(d.value, '$.patch') <> '') ORDER BY time_created LIMIT 1",
            [],
            |row| row.get(0),
        )
        .expect("a message with diffs");
    let conn = fx.sql();
    conn.execute(
        "ATTACH DATABASE ?1 AS pristine",
        [pristine.db.to_str().expect("path")],
    )
    .expect("attach");
    conn.execute(
        "INSERT INTO main.event SELECT * FROM pristine.event WHERE id = ?1",
        [&snapshot],
    )
    .expect("write the snapshot back");
    conn.execute(
        "UPDATE main.message SET data = (SELECT data FROM pristine.message WHERE id = ?1) \
         WHERE id = ?1",
        [&message],
    )
    .expect("write the bodies back");
    drop(conn);

    let (code, audit) = audit_report(&fx.db);
    assert_eq!(code, 1, "{audit}");
    let found = common::audit::kinds(&audit);
    let compaction = receipt_of(&fx, "compaction", &session);
    let diffs: String = fx
        .sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE message_id = ?1",
            [&message],
            |row| row.get(0),
        )
        .expect("the diffs receipt");
    assert!(
        found.contains(&("snapshot_back".into(), Some(compaction), None, None)),
        "{audit}"
    );
    assert!(
        found.contains(&("content_back".into(), Some(diffs), None, None)),
        "{audit}"
    );
    assert_eq!(found.len(), 2, "{audit}");
}

#[test]
fn a_compaction_waits_for_the_diffs_prunes_after_it_and_names_the_one_to_restore() {
    let fx = Fixture::work();
    let session = "ses_dccbb2954ffe0n64RVdJBmXc6p";
    clean_archived_with(
        &fx.db,
        &[session],
        &["--diffs", "--tools", "no-such-tool", "--no-reasoning"],
    );
    let compaction = receipt_of(&fx, "compaction", session);
    let (digest, archive) = (fx.file_digest(), archive_digest(&fx));
    let out = restore_out(&fx.db, &compaction);
    assert_exit(&out, 3);
    let words = String::from_utf8_lossy(&out.stderr).to_string();
    let diffs: Vec<String> = unrestored(&fx.db)
        .into_iter()
        .filter(|id| *id != compaction)
        .collect();
    assert!(
        diffs
            .iter()
            .any(|receipt| words.contains(&format!("restore receipt {receipt} first"))),
        "{words}"
    );
    assert_eq!(
        (fx.file_digest(), archive_digest(&fx)),
        (digest, archive),
        "a refused restore writes nothing"
    );
    assert_eq!(restore_intents(&fx, &compaction), vec![refused_conflict()]);
    for receipt in &diffs {
        assert_exit(&restore_out(&fx.db, receipt), 0);
    }
    assert_exit(&restore_out(&fx.db, &compaction), 0);
    let (code, audit) = audit_report(&fx.db);
    assert_eq!(code, 0, "{audit}");
}

#[test]
fn a_diffs_prune_is_not_restored_over_a_newer_snapshot_of_its_message() {
    let fx = Fixture::work();
    let session = "ses_dccbb2954ffe0n64RVdJBmXc6p";
    clean_archived_with(
        &fx.db,
        &[session],
        &[
            "--diffs",
            "--no-compact",
            "--tools",
            "no-such-tool",
            "--no-reasoning",
        ],
    );
    let receipt = receipt_of(&fx, "diffs", session);
    let message: String = fx
        .sql()
        .query_row(
            "SELECT message_id FROM session_prune_receipt WHERE id = ?1",
            [&receipt],
            |row| row.get(0),
        )
        .expect("the message");
    // A newer snapshot of the message, the row left as it is.
    fx.exec(&format!(
        "UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{session}';
         INSERT INTO event (id, aggregate_id, seq, type, data)
           SELECT 'evt_2266ffffffff0000000000000003', aggregate_id,
                  (SELECT seq FROM event_sequence WHERE aggregate_id = '{session}'), type, data
           FROM event WHERE aggregate_id = '{session}' AND type = 'message.updated.1'
             AND json_extract(data, '$.info.id') = '{message}'
           ORDER BY seq DESC LIMIT 1;"
    ));
    let (digest, archive) = (fx.file_digest(), archive_digest(&fx));
    let out = restore_out(&fx.db, &receipt);
    assert_exit(&out, 3);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has a newer snapshot"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        (fx.file_digest(), archive_digest(&fx)),
        (digest, archive),
        "a refused restore writes nothing"
    );
    assert_eq!(restore_intents(&fx, &receipt), vec![refused_conflict()]);
}
