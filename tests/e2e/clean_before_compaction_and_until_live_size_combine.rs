//! `clean --before-compaction` picks the newest completed compaction of the session itself, and
//! keeps its promise next to the other policies; `--until-live-size` reads every size notation
//! alike, and its dry run agrees with its apply in batches of one and next to
//! `--before-compaction`.

use crate::common;

use common::cli::{json, run};
use common::Fixture;
use serde_json::{json, Value};

const COMPACTED: &str = "ses_dd9927d77ffeCzugJZ3vDGPMn9";
const COMPACTION_USER: &str = "msg_2266d8e34001Wq9Eewd4zm8pjT";
const SUMMARY: &str = "msg_2266d8e5b001vs4Dxk6tdq3u3W";
/// A user message of another session ("fixture: many turns").
const OTHER_USER: &str = "msg_2266d5120001c5YmHxOVLsq9WI";

/// A second compaction after the session's last turn (user message `user`, which gets a
/// compaction part), summarized by a copy of the first summary with `changes` applied.
fn add_compaction(fx: &Fixture, user: &str, changes: &str) {
    if user == "msg_2266d9200001AAAAAAAAAAAAAA" {
        fx.exec(&format!(
            "INSERT INTO message (id, session_id, time_created, time_updated, data)
               SELECT '{user}', session_id, 1795941045000, 1795941045000,
                      json_set(data, '$.time.created', 1795941045000)
               FROM message WHERE id = '{COMPACTION_USER}';"
        ));
    }
    fx.exec(&format!(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
           SELECT 'prt_2266d9200002AAAAAAAAAAAAAA', '{user}',
                  (SELECT session_id FROM message WHERE id = '{user}'),
                  1795941045000, 1795941045000, data
           FROM part WHERE message_id = '{COMPACTION_USER}';
         INSERT INTO message (id, session_id, time_created, time_updated, data)
           SELECT 'msg_2266d9300001AAAAAAAAAAAAAA', session_id, 1795941045100, 1795941045300,
                  json_set(data, '$.parentID', '{user}',
                           '$.time.created', 1795941045100, '$.time.completed', 1795941045300
                           {changes})
           FROM message WHERE id = '{SUMMARY}';"
    ));
}

/// The dry run and the apply of a clean of parts (`--no-compact`: what these policies select is
/// the subject) with `extra`, checked to agree.
fn clean(fx: &Fixture, extra: &[&str]) -> (Value, Value) {
    let args = [&["--json", "clean", "--all", "--no-compact"][..], extra].concat();
    let dry = json(&run(&fx.db, &args));
    let applied = json(&run(&fx.db, &[&args[..], &["--apply"]].concat()));
    for key in [
        "considered",
        "pruned",
        "parts",
        "bytes",
        "skipped",
        "beforeCompaction",
    ] {
        assert_eq!(dry[key], applied[key], "{key}: {dry} {applied}");
    }
    (dry, applied)
}

const BEFORE: [&str; 3] = ["--keep-last-turns", "0", "--before-compaction"];

#[test]
fn the_newest_completed_compaction_wins() {
    let fx = Fixture::new();
    add_compaction(&fx, "msg_2266d9200001AAAAAAAAAAAAAA", "");
    let (_, applied) = clean(&fx, &BEFORE);
    // Everything before the second compaction: the first one's 6, its summary, the last turn's 2.
    assert_eq!(applied["beforeCompaction"]["qualified"], 9, "{applied}");
    assert_eq!(applied["pruned"], 4, "{applied}");
}

#[test]
fn a_summary_still_running_does_not_move_the_boundary() {
    let fx = Fixture::new();
    add_compaction(
        &fx,
        "msg_2266d9200001AAAAAAAAAAAAAA",
        ", '$.time.completed', json('null'), '$.finish', json('null')",
    );
    let (_, applied) = clean(&fx, &BEFORE);
    assert_eq!(applied["beforeCompaction"]["qualified"], 6, "{applied}");
    assert_eq!(applied["pruned"], 3, "{applied}");
}

#[test]
fn a_summary_of_another_sessions_message_counts_for_neither() {
    let fx = Fixture::new();
    add_compaction(&fx, OTHER_USER, "");
    let (_, applied) = clean(&fx, &BEFORE);
    assert_eq!(applied["beforeCompaction"]["qualified"], 6, "{applied}");
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM session_prune_receipt WHERE session_id <> '{COMPACTED}'"
        )),
        0
    );
}

#[test]
fn the_kept_turns_and_the_age_still_apply() {
    let fx = Fixture::new();
    // The default two kept turns reach back to the compaction itself: the same 6 qualify.
    let (dry, _) = clean(&Fixture::new(), &["--before-compaction"]);
    assert_eq!(dry["beforeCompaction"]["qualified"], 6, "{dry}");
    assert_eq!(dry["pruned"], 3, "{dry}");
    let (_, applied) = clean(&fx, &[&BEFORE[..], &["--older-than", "100000d"]].concat());
    assert_eq!(applied["pruned"], 0, "{applied}");
    assert_eq!(applied["skipped"]["too_recent"], 6, "{applied}");
    let (_, applied) = clean(
        &fx,
        &[&BEFORE[..], &["--tools", "read", "--no-reasoning"]].concat(),
    );
    assert_eq!(applied["pruned"], 0, "{applied}");
    assert!(!fx.has_table("session_prune_receipt"));
}

#[test]
fn every_size_notation_reads_alike() {
    let fx = Fixture::new();
    for (size, bytes) in [
        ("2GB", 2_000_000_000u64),
        ("2 GB", 2_000_000_000),
        ("2gb", 2_000_000_000),
        (" 2 GiB ", 2_147_483_648),
        ("1.5GiB", 1_610_612_736),
        ("0", 0),
    ] {
        let dry = json(&run(
            &fx.db,
            &["--json", "clean", "--all", "--until-live-size", size],
        ));
        assert_eq!(
            dry["untilLiveSize"]["target"],
            json!(bytes),
            "{size}: {dry}"
        );
    }
}

#[test]
fn batches_of_one_and_before_compaction_agree_with_the_dry_run() {
    let fx = Fixture::new();
    let (dry, applied) = clean(
        &fx,
        &[
            "--keep-last-turns",
            "0",
            "--until-live-size",
            "0",
            "--batch-size",
            "1",
            "--before-compaction",
        ],
    );
    assert_eq!(dry["untilLiveSize"], {
        let mut until = applied["untilLiveSize"].clone();
        until.as_object_mut().unwrap().remove("liveAfter");
        until
    });
    assert_eq!(applied["pruned"], 3, "{applied}");
    assert_eq!(applied["untilLiveSize"]["reached"], false, "{applied}");
    let until = &applied["untilLiveSize"];
    assert_eq!(
        until["estimateAfter"].as_u64().unwrap(),
        until["liveBefore"].as_u64().unwrap() - applied["bytes"].as_u64().unwrap()
    );
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM session_prune_receipt WHERE session_id <> '{COMPACTED}'"
        )),
        0
    );
}
