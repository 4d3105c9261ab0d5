//! `clean`: a dry run writes nothing (database, WAL and journal byte-for-byte unchanged); an
//! applied clean removes every copy of the technical content of every completed message it may
//! touch, keeps every text part byte-identical, gives each message its own receipt and event,
//! skips malformed rows with their reason and finishes; `vacuum` then gives the space back.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::Value;

/// The fixture's V2 session (OpenCode 1.18 shared table: read-only for prunes).
const V2_SESSION: &str = "ses_dd9925f43ffe2Is1MklYsLGbbU";

/// Every text part as `id -> data`, V1 rows and V2 content entries alike.
fn text_parts(fx: &Fixture) -> BTreeMap<String, String> {
    let conn = fx.sql();
    let mut texts = BTreeMap::new();
    let mut stmt = conn
        .prepare("SELECT id, data FROM part WHERE json_extract(data, '$.type') = 'text'")
        .unwrap();
    for row in stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
    {
        let (id, data) = row.unwrap();
        texts.insert(id, data);
    }
    let mut stmt = conn
        .prepare("SELECT id, data FROM session_message")
        .unwrap();
    for row in stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
    {
        let (id, data) = row.unwrap();
        let value: Value = serde_json::from_str(&data).unwrap();
        for (i, item) in value["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if item["type"] == "text" {
                texts.insert(format!("{id}#{i}"), item.to_string());
            }
        }
        if let Some(text) = value["text"].as_str() {
            texts.insert(format!("{id}#text"), text.to_string());
        }
    }
    texts
}

/// `clean --all --keep-last-turns 0 EXTRA --json`: its report, after checking it exited 0.
fn clean_everything(fx: &Fixture, extra: &[&str]) -> Value {
    let mut args = vec!["--json", "clean", "--all", "--keep-last-turns", "0"];
    args.extend_from_slice(extra);
    let out = run(&fx.db, &args);
    assert_exit(&out, 0);
    json(&out)
}

fn journal_digest(fx: &Fixture) -> Option<Vec<u8>> {
    std::fs::read(&fx.journal).ok()
}

#[test]
fn a_dry_run_writes_nothing() {
    let fx = Fixture::with_spill_files();
    // A WAL with content, as a running OpenCode leaves it.
    let keep_open = fx.sql();
    keep_open
        .execute_batch("PRAGMA wal_autocheckpoint = 0; UPDATE session SET title = title || '' ;")
        .unwrap();
    let before = fx.file_digest();
    let spill_before = std::fs::read_dir(fx.dir.path().join("tool-output"))
        .unwrap()
        .count();
    let report = clean_everything(&fx, &["--include-spill-files"]);
    assert_eq!(report["status"], "dry-run");
    assert_eq!(report["pruned"], 21);
    // It counts the spill files the apply removes (see below), and removes none.
    assert_eq!(report["spillFilesRemoved"], 2);
    assert_eq!(fx.file_digest(), before);
    assert_eq!(journal_digest(&fx), None, "no journal is created");
    assert_eq!(
        std::fs::read_dir(fx.dir.path().join("tool-output"))
            .unwrap()
            .count(),
        spill_before
    );
    // `--dry-run` says the same out loud, and cannot be combined with `--apply`.
    let said = clean_everything(&fx, &["--include-spill-files", "--dry-run"]);
    assert_eq!(said, report);
    assert_eq!(fx.file_digest(), before);
    let both = run(&fx.db, &["clean", "--all", "--dry-run", "--apply"]);
    assert_exit(&both, 2);
    assert_eq!(fx.file_digest(), before);
    assert_eq!(journal_digest(&fx), None);
    drop(keep_open);
}

#[test]
fn an_applied_clean_removes_every_copy_and_keeps_every_text() {
    let fx = Fixture::with_spill_files();
    let texts_before = text_parts(&fx);
    let report = clean_everything(&fx, &["--apply", "--include-spill-files"]);
    assert_eq!(report["status"], "cleaned");
    assert_eq!(report["pruned"], 21);
    assert_eq!(report["parts"], 41);
    assert_eq!(
        report["skipped"],
        serde_json::json!({"incomplete": 2, "read_only": 3})
    );
    assert_eq!(report["blocked"], serde_json::json!({}));
    assert_eq!(report["failed"], 0);
    // Two spill files belonged to pruned parts only; the third is named by a V2 row.
    assert_eq!(report["spillFilesRemoved"], 2);
    let left: Vec<String> = std::fs::read_dir(fx.dir.path().join("tool-output"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["tool_2266dabfc001K1wyrOFb3Qect7"]);

    // Canaries remain only where the clean may not go: the killed runs' incomplete messages
    // and the read-only V2 session.
    let conn = fx.sql();
    let owners = |sql: &str| -> BTreeSet<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let canary = "(data LIKE '%TOOL_CANARY%' OR data LIKE '%REASONING_CANARY%')";
    let allowed: BTreeSet<String> = [KILLED_MID_TOOL, KILLED_MID_STREAM, V2_SESSION]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let in_parts = owners(&format!(
        "SELECT DISTINCT session_id FROM part WHERE {canary}"
    ));
    let in_events = owners(&format!(
        "SELECT DISTINCT aggregate_id FROM event WHERE {canary}"
    ));
    assert!(in_parts.is_subset(&allowed), "{in_parts:?}");
    assert!(in_events.is_subset(&allowed), "{in_events:?}");
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 0);
    drop(conn);

    assert_eq!(
        text_parts(&fx),
        texts_before,
        "every text part byte-identical"
    );
    // A receipt per pruned message, and one per compacted session.
    let receipts = fx.scalar("SELECT count(*) FROM session_prune_receipt");
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE operation IS NULL"),
        21
    );
    assert_eq!(
        receipts - 21,
        report["compaction"]["sessions"].as_i64().unwrap()
    );
    assert_eq!(receipts, 30);
    let events = json(&run(&fx.db, &["--json", "receipts"]));
    assert_eq!(events.as_array().unwrap().len(), 30);
    // No snapshot is superseded any more but where the clean may not go: the killed runs' own
    // messages, and the read-only V2 session.
    let superseded_elsewhere = fx.scalar(&format!(
        "SELECT count(*) FROM ({SUPERSEDED_SQL}) WHERE aggregate_id NOT IN ('{KILLED_MID_TOOL}', \
         '{KILLED_MID_STREAM}', '{V2_SESSION}')"
    ));
    assert_eq!(superseded_elsewhere, 0);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
        1
    );

    // Again: nothing left to do, nothing written.
    let again = clean_everything(&fx, &["--apply"]);
    assert_eq!(again["pruned"], 0);
    assert_eq!(again["compaction"]["sessions"], 0);
    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 30);

    // VACUUM gives the freed pages back.
    let size = std::fs::metadata(&fx.db).unwrap().len();
    let vacuumed = run(&fx.db, &["--json", "vacuum"]);
    assert_exit(&vacuumed, 0);
    let doc = json(&vacuumed);
    assert_eq!(doc["status"], "vacuumed");
    assert!(doc["bytesAfter"].as_u64().unwrap() < size, "{doc}");
    assert_eq!(
        std::fs::metadata(&fx.db).unwrap().len(),
        doc["bytesAfter"].as_u64().unwrap()
    );
    assert_eq!(text_parts(&fx), texts_before);
}

#[test]
fn the_last_turns_and_skill_output_are_kept_by_default() {
    let fx = Fixture::new();
    let report = json(&run(&fx.db, &["--json", "clean", MANY_TURNS, "--apply"]));
    // Ten turns; the last two are kept.
    assert_eq!(report["pruned"], 8);
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
    assert!(fx.rows_containing("part", "TOOL_CANARY_T10") > 0);
    assert!(fx.rows_containing("part", "TOOL_CANARY_T09") > 0);
}

#[test]
fn malformed_rows_are_skipped_with_their_reason_and_the_clean_finishes() {
    let fx = Fixture::new();
    let conn = fx.sql();
    let message = |n: i64| -> String {
        conn.query_row(
            "SELECT id FROM message WHERE session_id = ?1 AND json_extract(data, '$.role') = 'assistant' \
             ORDER BY time_created, id LIMIT 1 OFFSET ?2",
            rusqlite::params![MANY_TURNS, n],
            |r| r.get(0),
        )
        .unwrap()
    };
    let (bad_json, no_time, unknown, bad_part) = (message(0), message(2), message(4), message(6));
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = OFF;
         UPDATE message SET data = '{{not json' WHERE id = '{bad_json}';
         UPDATE message SET data = json_remove(data, '$.time.completed') WHERE id = '{no_time}';
         UPDATE part SET data = json_set(data, '$.type', 'hologram')
           WHERE id = (SELECT id FROM part WHERE message_id = '{unknown}' ORDER BY id LIMIT 1);
         UPDATE part SET data = '[1,' WHERE id = (SELECT id FROM part WHERE message_id = '{bad_part}'
           AND json_extract(data, '$.type') = 'tool' LIMIT 1);
         INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
           VALUES ('prt_orphan_1', 'msg_gone', '{MANY_TURNS}', 1, 1, '{{\"type\":\"tool\"}}');"
    ))
    .unwrap();
    drop(conn);
    let report = clean_everything(&fx, &["--apply"]);
    // The killed runs' two messages and the four damaged ones; the V2 rows are read-only.
    assert_eq!(
        report["skipped"],
        serde_json::json!({"incomplete": 3, "malformed": 2, "unknown_part": 1, "read_only": 3})
    );
    assert_eq!(report["orphanParts"], 1);
    // The fence refuses the rest of the damaged session: a message row that is not JSON might
    // be a run's.
    assert_eq!(
        report["blocked"],
        serde_json::json!({"unsupported_storage": 6})
    );
    // Every other session is cleaned.
    assert_eq!(report["pruned"], 11);
    // Nothing was rewritten: the damaged rows are as they were.
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM message WHERE id = '{bad_json}' AND data = '{{not json'"
        )),
        1
    );
}

#[test]
fn a_dry_run_reports_what_the_apply_then_does() {
    let fx = Fixture::new();
    let args = ["--json", "clean", "--all"];
    let dry = json(&run(&fx.db, &args));
    let mut apply_args = args.to_vec();
    apply_args.push("--apply");
    let mut applied = json(&run(&fx.db, &apply_args));
    // What the apply measured after it, beside the estimate both give.
    assert!(applied["file"]["liveAfter"].is_u64(), "{applied}");
    applied["file"]
        .as_object_mut()
        .expect("file")
        .remove("liveAfter");
    for key in [
        "pruned",
        "parts",
        "bytes",
        "keptRecent",
        "considered",
        "skipped",
        "blocked",
        "compaction",
        "bytesByKind",
        "file",
    ] {
        assert_eq!(dry[key], applied[key], "{key}: {dry} vs {applied}");
    }
    assert_eq!(dry["status"], "dry-run");
    assert_eq!(applied["status"], "cleaned");
    // Every receipt's bytes are counted once, under their kind.
    let kinds = &applied["bytesByKind"];
    let by_kind: i64 = ["parts", "partSnapshots", "supersededSnapshots", "diffs"]
        .iter()
        .map(|kind| kinds[kind].as_i64().unwrap())
        .sum();
    let receipts = fx.scalar("SELECT sum(bytes_removed) FROM session_prune_receipt");
    assert_eq!(by_kind, receipts);
    let parts =
        fx.scalar("SELECT sum(bytes_removed) FROM session_prune_receipt WHERE operation IS NULL");
    assert_eq!(applied["bytes"].as_i64().unwrap(), parts);
    assert_eq!(
        applied["compaction"]["bytes"].as_i64().unwrap(),
        receipts - parts
    );
    assert!(applied["compaction"]["sessions"].as_u64().unwrap() > 0);
    assert!(applied["keptRecent"].as_u64().unwrap() > 0);
}

/// A clean of more messages than it keeps listings for reads each session's listing again as
/// it walks it: the same report, the same rows pruned, as when it keeps them all.
#[test]
fn a_clean_that_reads_its_listings_again_prunes_the_same() {
    let kept = Fixture::new();
    let read_again = Fixture::new();
    let mut reports = Vec::new();
    for (fx, extra) in [
        (&kept, &[][..]),
        (&read_again, &["--listing-budget", "1"][..]),
    ] {
        let mut args = vec![
            "--abandoned-after",
            "never",
            "--json",
            "clean",
            "--all",
            "--apply",
        ];
        args.extend_from_slice(extra);
        let out = run(&fx.db, &args);
        assert_exit(&out, 0);
        reports.push(json(&out));
    }
    assert_eq!(reports[0], reports[1]);
    assert_eq!(reports[0]["pruned"], 11, "{}", reports[0]);
    let rows = |fx: &Fixture| -> Vec<(String, String)> {
        let conn = fx.sql();
        let mut stmt = conn
            .prepare("SELECT id, data FROM part ORDER BY id")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    };
    assert_eq!(rows(&kept), rows(&read_again));
    assert_eq!(
        kept.scalar("SELECT count(*) FROM event"),
        read_again.scalar("SELECT count(*) FROM event")
    );
}
