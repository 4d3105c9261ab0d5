//! Every way a restore is refused or fails leaves the database, the archive and (for a refusal
//! given before its intent is journaled) the journal as they were, with an exact status and
//! exit code: a malformed receipt id (exit 2), an unknown receipt, a restore's receipt and an
//! unarchived prune's (`not_deletable`, nothing journaled), a message OpenCode wrote to since
//! the prune (`conflict`) and a session in use (`maintenance_required`), both journaled as
//! refused, and an archive that is gone or damaged (exit 1, the intent abandoned); once the
//! archive is back, the same restore goes through (docs/ARCHITECTURE.md, "Restore").

use std::path::Path;

use crate::common;

use common::archive::{
    archive_digest, archive_path, clean_archived_with, prune_receipts, restore_intents, unrestored,
};
use common::cli::{assert_exit, json, run};
use common::*;
use pruning_engine::IntentState;
use serde_json::{json, Value};

/// The fixture after an archiving clean of its parts (`--no-compact`: these refusals are of
/// prunes of parts; a compaction's restore has tests of its own).
fn archived() -> Fixture {
    let fx = Fixture::new();
    clean_archived_with(&fx.db, &[], &["--no-compact"]);
    fx
}

/// The receipt of the prune of TURN1 (the first message of MANY_TURNS).
fn turn1_receipt(fx: &Fixture) -> String {
    fx.sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE message_id = ?1",
            [TURN1],
            |row| row.get(0),
        )
        .expect("the receipt of TURN1")
}

/// `--json [--quiet-period 0] restore RECEIPT`.
fn restore(db: &Path, receipt: &str, quiet: bool) -> std::process::Output {
    let mut args = vec!["--json"];
    if quiet {
        args.extend(["--quiet-period", "0"]);
    }
    args.extend(["restore", receipt]);
    run(db, &args)
}

/// Everything a refusal must leave as it was: the database, its journal, its archive.
fn digests(fx: &Fixture) -> (String, String, String) {
    (fx.file_digest(), fx.journal_digest(), archive_digest(fx))
}

fn blocked(reason: &str) -> Value {
    json!({ "status": "blocked", "reason": reason })
}

#[test]
fn a_malformed_receipt_id_is_bad_input_and_opens_nothing() {
    let fx = archived();
    let before = digests(&fx);
    for bad in [
        "",
        "not-a-uuid",
        "0190a3f0-0000-7000-8000-00000000000",
        "../etc",
    ] {
        let out = run(&fx.db, &["--json", "restore", bad]);
        assert_exit(&out, 2);
        let doc = json(&out);
        assert_eq!(doc["status"], "error", "{bad:?}: {doc}");
        assert!(
            doc["error"]
                .as_str()
                .expect("error")
                .contains("is not a receipt id"),
            "{bad:?}: {doc}"
        );
    }
    assert_eq!(digests(&fx), before);
}

#[test]
fn unknown_restore_and_unarchived_receipts_are_refused_before_anything_is_journaled() {
    let fx = archived();
    let receipt = turn1_receipt(&fx);
    let out = restore(&fx.db, &receipt, true);
    assert_exit(&out, 0);
    let restore_receipt = json(&out)["receiptID"]
        .as_str()
        .expect("receiptID")
        .to_string();
    // A prune made with --no-archive: TURN1 (put back) pruned again, this time unarchived.
    let again = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--abandoned-after",
            "never",
            "clean",
            MANY_TURNS,
            "--apply",
            "--no-archive",
            "--include-restored",
            "--keep-last-turns",
            "0",
        ],
    );
    assert_exit(&again, 0);
    let unarchived: String = fx
        .sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE message_id = ?1 AND archive_hash IS NULL",
            [TURN1],
            |row| row.get(0),
        )
        .expect("an unarchived receipt");
    let before = digests(&fx);
    // A receipt the database does not hold is bad input (exit 2), as an unknown session is.
    let unknown = "0190a3f0-0000-7000-8000-000000000000";
    for dry_run in [true, false] {
        let mut args = vec!["--json", "--quiet-period", "0", "restore", unknown];
        if dry_run {
            args.push("--dry-run");
        }
        let out = run(&fx.db, &args);
        assert_exit(&out, 2);
        assert_eq!(
            json(&out),
            serde_json::json!({
                "status": "error", "exitCode": 2,
                "error": format!("there is no receipt {unknown} in this database: nothing was changed (`receipts` lists them)"),
            })
        );
        assert_eq!(digests(&fx), before);
        assert!(restore_intents(&fx, unknown).is_empty());
    }
    for (receipt, words) in [
        (restore_receipt.as_str(), "is a restore's"),
        (unarchived.as_str(), "was not archived"),
    ] {
        let out = restore(&fx.db, receipt, true);
        assert_exit(&out, 3);
        assert_eq!(json(&out), blocked("not_deletable"), "{receipt}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(words), "{receipt}: {stderr}");
        assert_eq!(digests(&fx), before, "{receipt}");
        assert!(restore_intents(&fx, receipt).is_empty(), "{receipt}");
    }
}

#[test]
fn a_message_opencode_wrote_to_since_the_prune_is_a_conflict_and_stays_as_it_is() {
    let fx = archived();
    let receipt = turn1_receipt(&fx);
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM part WHERE message_id = '{TURN1}' \
             AND json_extract(data, '$.type') = 'step-finish'"
        )),
        1
    );
    fx.exec(&format!(
        "UPDATE part SET data = json_set(data, '$.reason', 'written since the prune') \
         WHERE message_id = '{TURN1}' AND json_extract(data, '$.type') = 'step-finish'"
    ));
    let (db, archive) = (fx.file_digest(), archive_digest(&fx));
    let out = restore(&fx.db, &receipt, true);
    assert_exit(&out, 3);
    assert_eq!(json(&out), blocked("conflict"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed since the prune"));
    assert_eq!((fx.file_digest(), archive_digest(&fx)), (db, archive));
    assert_eq!(
        restore_intents(&fx, &receipt),
        vec![IntentState::Refused {
            reason: "conflict".into()
        }]
    );
}

#[test]
fn a_session_in_use_is_maintenance_required_and_stays_as_it_is() {
    let fx = archived();
    let receipt = turn1_receipt(&fx);
    fx.exec(&format!(
        "UPDATE session SET time_updated = {} WHERE id = '{MANY_TURNS}'",
        now_ms()
    ));
    let (db, archive) = (fx.file_digest(), archive_digest(&fx));
    // The default quiet period: the session was updated just now.
    let out = restore(&fx.db, &receipt, false);
    assert_exit(&out, 3);
    assert_eq!(json(&out), blocked("maintenance_required"));
    assert_eq!((fx.file_digest(), archive_digest(&fx)), (db, archive));
    assert_eq!(
        restore_intents(&fx, &receipt),
        vec![IntentState::Refused {
            reason: "maintenance_required".into()
        }]
    );
}

#[test]
fn a_missing_or_damaged_archive_fails_and_the_restore_goes_through_once_it_is_back() {
    let fx = archived();
    let receipt = turn1_receipt(&fx);
    let path = archive_path(&fx);
    let original = std::fs::read(&path).expect("archive");
    let db = fx.file_digest();

    std::fs::rename(&path, fx.dir.path().join("moved")).expect("move the archive away");
    let out = restore(&fx.db, &receipt, true);
    assert_exit(&out, 1);
    let doc = json(&out);
    assert_eq!(doc["status"], "error", "{doc}");
    assert!(
        doc["error"].as_str().expect("error").contains("is missing"),
        "{doc}"
    );
    assert_eq!(fx.file_digest(), db);
    assert!(!path.exists(), "a restore never creates the archive");

    // Every byte of the entries' payloads flipped: the entry of TURN1 does not read back.
    let mut damaged = original.clone();
    let tail = damaged.len() - 16;
    for byte in &mut damaged[tail..] {
        *byte ^= 0xff;
    }
    std::fs::write(&path, &damaged).expect("write the damaged archive");
    std::fs::remove_file(fx.dir.path().join("moved")).expect("remove");
    let mut failures = 0;
    for receipt in prune_receipts(&fx.db) {
        let out = restore(&fx.db, &receipt, true);
        if out.status.code() == Some(1) {
            let doc = json(&out);
            assert!(
                doc["error"].as_str().expect("error").contains("is damaged"),
                "{doc}"
            );
            failures += 1;
        } else {
            assert_exit(&out, 0);
        }
    }
    assert_eq!(failures, 1, "the last entry's payload is damaged");
    assert_eq!(
        std::fs::read(&path).expect("archive"),
        damaged,
        "a restore never writes the archive"
    );

    // TURN1's entry was whole: its first restore was abandoned, its second committed.
    let states = restore_intents(&fx, &receipt);
    assert!(
        matches!(
            states.as_slice(),
            [IntentState::Abandoned { reason }, IntentState::Committed { .. }]
                if reason.contains("is missing: the prune's rows cannot be put back")
        ),
        "{states:?}"
    );
    // The archive back whole: every restore left goes through.
    std::fs::write(&path, &original).expect("put the archive back");
    for receipt in unrestored(&fx.db) {
        let out = restore(&fx.db, &receipt, true);
        assert_exit(&out, 0);
    }
    assert!(unrestored(&fx.db).is_empty());
}

#[test]
fn a_removed_row_written_back_behind_its_back_is_a_conflict_and_stays_as_it_is() {
    let fx = archived();
    let receipt = turn1_receipt(&fx);
    // One snapshot event the prune removed, written back from the pristine fixture (a sync, a
    // restored backup): the message's content is as the prune left it, the event table is not.
    let pristine = Fixture::new();
    let conn = fx.sql();
    conn.execute(
        "ATTACH DATABASE ?1 AS pristine",
        [pristine.db.to_str().expect("path")],
    )
    .expect("attach");
    let copied = conn
        .execute(
            "INSERT INTO main.event SELECT * FROM pristine.event WHERE id = (
               SELECT e.id FROM pristine.event e JOIN pristine.part p
                 ON json_extract(e.data, '$.part.id') = p.id
               WHERE p.message_id = ?1 AND e.type = 'message.part.updated.1'
                 AND NOT EXISTS (SELECT 1 FROM main.event m WHERE m.id = e.id)
               ORDER BY e.id LIMIT 1)",
            [TURN1],
        )
        .expect("write a snapshot back");
    assert_eq!(copied, 1);
    drop(conn);
    fx.skip_audit();
    let (db, archive) = (fx.file_digest(), archive_digest(&fx));
    let out = restore(&fx.db, &receipt, true);
    assert_exit(&out, 3);
    assert_eq!(json(&out), blocked("conflict"));
    let words = String::from_utf8_lossy(&out.stderr);
    assert!(words.contains("from table event is there again"), "{words}");
    assert!(
        !words.contains("UNIQUE constraint"),
        "no raw SQLite words: {words}"
    );
    assert_eq!((fx.file_digest(), archive_digest(&fx)), (db, archive));
    assert_eq!(
        restore_intents(&fx, &receipt),
        vec![IntentState::Refused {
            reason: "conflict".into()
        }]
    );
}
