//! `clean --before-compaction` takes only what OpenCode 1.18.34 no longer sends the model. Its
//! history filter (`MessageV2.filterCompacted`) stops at the user message holding the
//! `compaction` part of the newest summary that is `summary && finish && !error`, and when that
//! part names a `tail_start_id` it sends the kept tail too: every message from that id on, even
//! those older than the compaction. A summary that failed, or never finished, moves nothing.

use crate::clean_before_compaction_leaves_the_next_request_unchanged::requests_around_clean;
use crate::common::cli::{json, run};
use crate::common::Fixture;

use serde_json::Value;

/// The user message of the fixture's compacted session (see
/// `clean_before_compaction_leaves_the_next_request_unchanged`) holding the compaction part.
const COMPACTION_USER: &str = "msg_2266d8e34001Wq9Eewd4zm8pjT";
/// Its completed summary.
const SUMMARY: &str = "msg_2266d8e5b001vs4Dxk6tdq3u3W";
/// The user message of the last turn before the compaction (turn 83: TOOL_CANARY_T83).
const LAST_TURN_BEFORE: &str = "msg_2266d89b80014SUm6Uf79iX23x";

fn clean(fx: &Fixture, apply: bool) -> Value {
    let mut args = vec![
        "--json",
        "clean",
        "--all",
        "--keep-last-turns",
        "0",
        "--before-compaction",
    ];
    if apply {
        args.push("--apply");
    }
    json(&run(&fx.db, &args))
}

/// A second compaction after the session's last turn: a user message with a compaction part and
/// a summary of it, whose data is the first summary's with `changes` applied (SQL `json_set`
/// arguments on `data`).
fn add_second_compaction(fx: &Fixture, changes: &str) {
    fx.exec(&format!(
        "INSERT INTO message (id, session_id, time_created, time_updated, data)
           SELECT 'msg_2266d9200001AAAAAAAAAAAAAA', session_id, 1795941045000, 1795941045000,
                  json_set(data, '$.time.created', 1795941045000)
           FROM message WHERE id = '{COMPACTION_USER}';
         INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
           SELECT 'prt_2266d9200002AAAAAAAAAAAAAA', 'msg_2266d9200001AAAAAAAAAAAAAA', session_id,
                  1795941045000, 1795941045000, json_set(data, '$.auto', json('true'))
           FROM part WHERE message_id = '{COMPACTION_USER}';
         INSERT INTO message (id, session_id, time_created, time_updated, data)
           SELECT 'msg_2266d9300001AAAAAAAAAAAAAA', session_id, 1795941045100, 1795941045300,
                  json_set(data, '$.parentID', 'msg_2266d9200001AAAAAAAAAAAAAA',
                           '$.time.created', 1795941045100, '$.time.completed', 1795941045300
                           {changes})
           FROM message WHERE id = '{SUMMARY}';"
    ));
}

/// Dry run and apply agree, and only the fixture's three messages before its (only valid)
/// compaction are pruned.
fn assert_only_the_first_compaction_counts(fx: &Fixture) {
    let dry = clean(fx, false);
    let applied = clean(fx, true);
    for key in ["pruned", "parts", "bytes", "beforeCompaction", "considered"] {
        assert_eq!(dry[key], applied[key], "{key}");
    }
    assert_eq!(applied["beforeCompaction"]["qualified"], 6, "{applied}");
    assert_eq!(applied["pruned"], 3, "{applied}");
}

#[test]
fn a_summary_that_failed_does_not_move_the_boundary() {
    let fx = Fixture::new();
    // OpenCode's failed compaction: `finish: "error"` and an error, yet a completion time.
    add_second_compaction(
        &fx,
        ", '$.finish', 'error', '$.error', json('{\"name\":\"UnknownError\",\"data\":{\"message\":\"overflow\"}}')",
    );
    assert_only_the_first_compaction_counts(&fx);
}

#[test]
fn a_summary_that_never_finished_does_not_move_the_boundary() {
    let fx = Fixture::new();
    // Completed (the stream ended) without a finish reason: OpenCode does not count it.
    add_second_compaction(&fx, ", '$.finish', json('null')");
    assert_only_the_first_compaction_counts(&fx);
}

/// `tail_start_id` on the fixture's compaction part: the last turn before it is kept, as
/// OpenCode's `SessionCompaction.select` keeps recent turns (`compaction.tail_turns`).
fn keep_a_tail(db: &std::path::Path) {
    let conn = rusqlite::Connection::open(db).expect("open");
    let changed = conn
        .execute(
            "UPDATE part SET data = json_set(data, '$.tail_start_id', ?1) WHERE message_id = ?2",
            [LAST_TURN_BEFORE, COMPACTION_USER],
        )
        .expect("set tail_start_id");
    assert_eq!(changed, 1);
}

#[test]
fn the_tail_a_compaction_keeps_is_left_alone() {
    let fx = Fixture::new();
    keep_a_tail(&fx.db);
    let dry = clean(&fx, false);
    let applied = clean(&fx, true);
    for key in ["pruned", "parts", "bytes", "beforeCompaction", "considered"] {
        assert_eq!(dry[key], applied[key], "{key}");
    }
    // Turns 1 and 2 only (two assistant messages each, one with a tool or reasoning part).
    assert_eq!(applied["beforeCompaction"]["qualified"], 4, "{applied}");
    assert_eq!(applied["pruned"], 2, "{applied}");
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T83"), 1);
}

#[test]
fn opencode_sends_the_same_request_after_clean_before_a_compaction_with_a_tail() {
    let Some((without_clean, with_clean, report)) = requests_around_clean(keep_a_tail) else {
        return;
    };
    assert!(
        without_clean.contains("SUMMARY_CANARY"),
        "the summary is sent"
    );
    assert!(
        without_clean.contains("TOOL_CANARY_T83"),
        "the tail is sent"
    );
    assert_eq!(report["pruned"], 2, "{report}");
    assert!(
        with_clean.contains("TOOL_CANARY_T83"),
        "the tail is still sent whole"
    );
    assert_eq!(with_clean, without_clean);
}
