//! A restore puts back exactly what an archived prune removed (docs/ARCHITECTURE.md, "Archive"
//! and "Restore"): after `clean --apply --archive` on every fixture release and `restore` of
//! each receipt, every `part` and `event` row is the row the fixture held, byte for byte, and in
//! a V2 database the message row's `data` is what it was. The restore is journaled and
//! announced as `rpc.codenomad.session-pruning.restored`, an identical retry returns the same
//! receipt and event, and the restored message can be pruned (and restored) again.

use crate::common;

use common::archive::{
    clean_archived, clean_archived_with, fixture_named, prunes, restore, table_rows as rows,
    unrestored, FIXTURES,
};
use common::cli::{assert_exit, json, run};
use common::v2::{V2Fixture, V2_ASSISTANT, V2_SESSION};
use common::*;
use serde_json::{json, Value};

#[test]
fn every_release_gets_back_each_part_and_snapshot_byte_for_byte() {
    for name in FIXTURES {
        let fx = fixture_named(name);
        let parts = rows(&fx.db, "part");
        let events = rows(&fx.db, "event");
        let report = clean_archived(&fx.db, &[]);
        let pruned = unrestored(&fx.db);
        assert!(!pruned.is_empty(), "{name}: the clean pruned nothing");
        assert_eq!(prunes(&report), pruned.len() as u64, "{name}: {report}");
        let archived = report["archiveBytes"].as_u64().expect("archiveBytes");
        assert!(archived > 0, "{name}: {report}");
        assert_ne!(
            rows(&fx.db, "part"),
            parts,
            "{name}: the clean removed no part"
        );
        for receipt in &pruned {
            let answer = restore(&fx.db, receipt, 0);
            assert_eq!(answer["status"], "restored", "{name}: {answer}");
        }
        assert_eq!(rows(&fx.db, "part"), parts, "{name}: parts");
        assert_eq!(rows(&fx.db, "event"), events, "{name}: events");
        // One restore receipt per prune, each naming its prune.
        let restored = fx.scalar(
            "SELECT count(*) FROM session_prune_receipt r JOIN session_prune_receipt p \
             ON r.restores = p.id",
        );
        assert_eq!(restored as usize, pruned.len(), "{name}");
    }
}

#[test]
fn a_v2_message_gets_its_row_back_exactly() {
    let fx = V2Fixture::new();
    let before = fx.row(V2_ASSISTANT);
    let engine_args = ["--json", "--quiet-period", "0"];
    let preview = run(
        &fx.db,
        &[&engine_args[..], &["preview", V2_SESSION, V2_ASSISTANT]].concat(),
    );
    assert_exit(&preview, 0);
    let revision = json(&preview)["revision"]
        .as_str()
        .expect("revision")
        .to_string();
    let out = run(
        &fx.db,
        &[
            &engine_args[..],
            &[
                "prune",
                V2_SESSION,
                V2_ASSISTANT,
                "--revision",
                &revision,
                "--all-technical",
                "--archive",
            ],
        ]
        .concat(),
    );
    assert_exit(&out, 0);
    assert_ne!(fx.row(V2_ASSISTANT), before);
    let receipt: String = fx
        .sql()
        .query_row("SELECT id FROM session_prune_receipt", [], |row| row.get(0))
        .expect("receipt");
    let answer = restore(&fx.db, &receipt, 0);
    let restore_receipt: String = fx
        .sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE restores = ?1",
            [&receipt],
            |row| row.get(0),
        )
        .expect("restore receipt");
    assert_eq!(
        answer,
        json!({
            "status": "restored", "receiptID": restore_receipt, "sessionID": V2_SESSION,
            "messageID": V2_ASSISTANT, "revision": revision, "restoredCount": 2
        })
    );
    assert_eq!(fx.row(V2_ASSISTANT), before);
}

#[test]
fn a_retry_returns_the_same_receipt_and_event_and_the_message_can_be_pruned_again() {
    let fx = Fixture::new();
    let parts = rows(&fx.db, "part");
    clean_archived(&fx.db, &[]);
    let first = unrestored(&fx.db);
    let receipt = first[0].clone();
    let answer = restore(&fx.db, &receipt, 0);
    let again = restore(&fx.db, &receipt, 0);
    assert_eq!(again, answer);
    // One event for the restore, announced again by the retry with the same id and seq.
    let events = run(&fx.db, &["--json", "events", "--since", "0"]);
    assert_exit(&events, 0);
    let restored: Vec<Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("an event line"))
        .filter(|event| event["type"] == "rpc.codenomad.session-pruning.restored")
        .collect();
    assert_eq!(restored.len(), 1, "{restored:?}");
    assert_eq!(restored[0]["id"], answer["receiptID"]);
    assert_eq!(restored[0]["data"]["messageID"], answer["messageID"]);
    assert_eq!(restored[0]["data"]["revision"], answer["revision"]);
    assert_eq!(restored[0]["removedCount"], 0);

    // The same clean leaves the message a person put back; asked to, it prunes it again,
    // with a receipt of its own.
    let report = clean_archived(&fx.db, &[]);
    assert_eq!(report["pruned"], 0, "{report}");
    assert_eq!(report["skipped"]["restored"], 1, "{report}");
    let report = clean_archived_with(&fx.db, &[], &["--include-restored"]);
    assert_eq!(report["pruned"], 1, "{report}");
    assert_eq!(report["alreadyPruned"], 0, "{report}");
    let second = unrestored(&fx.db);
    assert_eq!(second.len(), first.len());
    let new_receipt = second
        .iter()
        .find(|id| !first.contains(id))
        .expect("a new receipt")
        .clone();
    // That prune restores too, back to the fixture's rows for this message.
    restore(&fx.db, &new_receipt, 0);
    for receipt in first.iter().filter(|id| **id != receipt) {
        restore(&fx.db, receipt, 0);
    }
    assert_eq!(rows(&fx.db, "part"), parts);
}

#[test]
fn a_dry_run_says_what_would_come_back_and_writes_nothing() {
    let fx = Fixture::new();
    clean_archived(&fx.db, &[]);
    let receipt = unrestored(&fx.db)[0].clone();
    let (digest, journal) = (fx.file_digest(), fx.journal_digest());
    let out = run(
        &fx.db,
        &[
            "--json",
            "--quiet-period",
            "0",
            "restore",
            &receipt,
            "--dry-run",
        ],
    );
    assert_exit(&out, 0);
    let doc = json(&out);
    let (session, message, revision_before, parts): (String, String, String, String) = fx
        .sql()
        .query_row(
            "SELECT session_id, message_id, revision_before, part_ids FROM session_prune_receipt WHERE id = ?1",
            [&receipt],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .expect("receipt");
    let parts: Vec<String> = serde_json::from_str(&parts).expect("part ids");
    assert_eq!(doc["status"], "dry-run");
    assert_eq!(doc["receiptID"], receipt);
    assert_eq!(doc["sessionID"], session);
    assert_eq!(doc["messageID"], message);
    assert_eq!(doc["revisionAfter"], revision_before);
    assert_eq!(doc["restoredCount"], parts.len());
    assert!(
        doc["rows"].as_u64().expect("rows") > parts.len() as u64,
        "{doc}"
    );
    assert!(doc["bytes"].as_u64().expect("bytes") > 0, "{doc}");
    assert_eq!((fx.file_digest(), fx.journal_digest()), (digest, journal));
}
