//! A diffs prune of a user message (a database written by OpenCode 1.18.34 doing coding work)
//! empties the `patch` of each entry of its `summary.diffs`, in the message row and in its newest
//! `message.updated.1` snapshot, and changes no other byte of either, nor any other row; it is
//! announced as a prune of that message, an identical retry returns the same receipt, and its
//! refusals (not a user message, diffs that moved, a row not written by `JSON.stringify`, a
//! session in use) change nothing but the refused intent.

use crate::common;

use common::*;
use pruning_engine::{
    BlockedReason, IntentState, Journal, Operation, PruneRequest, PruneResult, PRUNED_EVENT_TYPE,
};
use pruning_opencode::PlannedCopy;
use serde_json::Value;

/// `data` of the message row.
fn message_data(fx: &Fixture, message: &str) -> String {
    fx.sql()
        .query_row("SELECT data FROM message WHERE id = ?1", [message], |row| {
            row.get(0)
        })
        .expect("message row")
}

/// `(id, data)` of the message's newest `message.updated.1` event.
fn newest_snapshot(fx: &Fixture, session: &str, message: &str) -> (String, String) {
    fx.sql()
        .query_row(
            "SELECT id, data FROM event WHERE aggregate_id = ?1 AND type = 'message.updated.1' \
               AND json_extract(data, '$.info.id') = ?2 ORDER BY seq DESC LIMIT 1",
            [session, message],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("a snapshot of the message")
}

/// `value` with every non-empty `patch`, `before` and `after` of the diffs at `pointer` set to
/// `""`, and how many entries had one.
fn emptied(value: &Value, pointer: &str) -> (Value, u32) {
    let mut value = value.clone();
    let mut entries = 0;
    for entry in value
        .pointer_mut(pointer)
        .and_then(Value::as_array_mut)
        .expect("diffs")
    {
        let mut had = false;
        for key in ["patch", "before", "after"] {
            if let Some(Value::String(body)) = entry.get_mut(key) {
                had |= !body.is_empty();
                body.clear();
            }
        }
        entries += u32::from(had);
    }
    (value, entries)
}

/// Every row of `table` but the one with id `except`, as `(id, data)`.
fn rows_but(fx: &Fixture, table: &str, except: &str) -> Vec<(String, String)> {
    let conn = fx.sql();
    let mut stmt = conn
        .prepare(&format!(
            "SELECT id, data FROM {table} WHERE id <> ?1 ORDER BY id"
        ))
        .expect("select");
    let rows = stmt
        .query_map([except], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("query");
    rows.map(Result::unwrap).collect()
}

/// The diffs prune a clean would ask for of the message.
fn diffs_request(fx: &Fixture, session: &str, message: &str) -> PruneRequest {
    match fx
        .store(0)
        .clean_diffs(session, message, false)
        .expect("plan")
    {
        PlannedCopy::Prune(request) => request,
        other => panic!("no diffs prune of {message}: {other:?}"),
    }
}

#[test]
fn the_file_bodies_are_emptied_in_the_row_and_its_newest_snapshot_and_nothing_else_changes() {
    let fx = Fixture::work();
    let (session, message) = user_message_with_diffs(&fx);
    let row_before = message_data(&fx, &message);
    let (snapshot_id, snapshot_before) = newest_snapshot(&fx, &session, &message);
    let messages_before = rows_but(&fx, "message", &message);
    let events_before = rows_but(&fx, "event", &snapshot_id);
    let parts_before = rows_but(&fx, "part", "");

    let engine = fx.engine_with(fx.store(0));
    let request = diffs_request(&fx, &session, &message);
    let outcome = engine.prune(&request).expect("diffs prune");
    let receipt = outcome.receipt.expect("receipt");
    let Some(Operation::Diffs(diffs)) = &receipt.operation else {
        panic!("not a diffs prune's receipt: {receipt:?}");
    };
    assert_eq!(diffs.snapshot_id.as_deref(), Some(snapshot_id.as_str()));
    let event = outcome.event.expect("event");
    assert_eq!(event.event_type, PRUNED_EVENT_TYPE);
    assert_eq!(event.data.message_id, message);
    assert_eq!(event.data.revision, receipt.revision_after);
    drop(engine);

    // The row: exactly the bodies emptied, written as JSON.stringify writes it.
    let row_after = message_data(&fx, &message);
    let before: Value = serde_json::from_str(&row_before).expect("JSON");
    let (expected, entries) = emptied(&before, "/summary/diffs");
    assert_eq!(diffs.entries, entries);
    assert!(entries > 0);
    assert_eq!(
        serde_json::from_str::<Value>(&row_after).expect("JSON"),
        expected
    );
    assert_eq!(
        row_after,
        pruning_engine::revision::stringify(&expected),
        "no other byte of the row changed"
    );
    // The newest snapshot the same way; every other row as it was.
    let (_, snapshot_after) = newest_snapshot(&fx, &session, &message);
    let (expected, _) = emptied(
        &serde_json::from_str(&snapshot_before).expect("JSON"),
        "/info/summary/diffs",
    );
    assert_eq!(
        snapshot_after,
        pruning_engine::revision::stringify(&expected)
    );
    assert_eq!(
        receipt.bytes_removed as usize,
        row_before.len() - row_after.len() + snapshot_before.len() - snapshot_after.len()
    );
    assert_eq!(rows_but(&fx, "message", &message), messages_before);
    assert_eq!(rows_but(&fx, "event", &snapshot_id), events_before);
    assert_eq!(rows_but(&fx, "part", ""), parts_before);
    // What OpenCode shows without the bodies stays: file, additions, deletions, status.
    let after: Value = serde_json::from_str(&row_after).expect("JSON");
    for (old, new) in before["summary"]["diffs"]
        .as_array()
        .expect("diffs")
        .iter()
        .zip(after["summary"]["diffs"].as_array().expect("diffs"))
    {
        for key in ["file", "additions", "deletions", "status"] {
            assert_eq!(old[key], new[key], "{key}");
        }
    }
}

#[test]
fn an_identical_retry_returns_the_same_receipt_and_event() {
    let fx = Fixture::work();
    let (session, message) = user_message_with_diffs(&fx);
    let engine = fx.engine_with(fx.store(0));
    let request = diffs_request(&fx, &session, &message);
    let first = engine.prune(&request).expect("diffs prune");
    let digest = fx.file_digest();
    let again = engine.prune(&request).expect("retry");
    assert!(again.retried);
    assert_eq!(again.receipt, first.receipt);
    assert_eq!(again.event, first.event);
    assert_eq!(fx.file_digest(), digest);
    // Nothing is left to empty: the clean plans no second prune.
    assert_eq!(
        fx.store(0)
            .clean_diffs(&session, &message, false)
            .expect("plan"),
        PlannedCopy::Nothing
    );
}

/// Runs `request` on the work fixture after `setup` and checks the exact refusal and that only
/// the refused intent was written.
fn assert_refused(
    request: impl Fn(&Fixture) -> PruneRequest,
    setup: &str,
    quiet_ms: u64,
    reason: BlockedReason,
    detail: &str,
) {
    let fx = Fixture::work();
    let request = request(&fx);
    if !setup.is_empty() {
        fx.exec(setup);
    }
    let digest = fx.file_digest();
    let engine = fx.engine_with(fx.store(quiet_ms));
    let outcome = engine.prune(&request).expect("an answer");
    assert_eq!(outcome.result, PruneResult::Blocked { reason });
    let words = outcome.refusal.expect("words").detail;
    assert!(
        words.contains(detail),
        "{words:?} should mention {detail:?}"
    );
    drop(engine);
    assert_eq!(fx.file_digest(), digest, "database file changed");
    assert!(!fx.has_table("session_prune_receipt"));
    let journal = Journal::open(&fx.journal).expect("journal");
    let intents = journal.intents().expect("intents");
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0].state,
        IntentState::Refused {
            reason: reason.as_str().to_string()
        }
    );
    assert_eq!(journal.last_seq().expect("seq"), 0);
}

#[test]
fn an_assistant_message_is_not_deletable() {
    assert_refused(
        |fx| {
            let (session, message) = user_message_with_diffs(fx);
            let request = diffs_request(fx, &session, &message);
            let assistant: String = fx
                .sql()
                .query_row(
                    "SELECT id FROM message WHERE session_id = ?1 \
                     AND json_extract(data, '$.role') = 'assistant' LIMIT 1",
                    [&session],
                    |row| row.get(0),
                )
                .expect("an assistant message");
            PruneRequest::diffs(session, assistant, request.revision).expect("request")
        },
        "",
        0,
        BlockedReason::NotDeletable,
        "not a user message",
    );
}

#[test]
fn diffs_that_moved_since_their_revision_are_a_conflict() {
    assert_refused(
        |fx| {
            let (session, message) = user_message_with_diffs(fx);
            diffs_request(fx, &session, &message)
        },
        // OpenCode rewrote the summary (one more file changed).
        "UPDATE message SET data = json_insert(data, '$.summary.diffs[#]', \
           json('{\"file\":\"new.py\",\"patch\":\"x\",\"additions\":1,\"deletions\":0}')) \
         WHERE id = (SELECT id FROM message WHERE json_extract(data, '$.role') = 'user' \
           AND EXISTS (SELECT 1 FROM json_each(data, '$.summary.diffs') d \
                       WHERE json_extract(d.value, '$.patch') <> '') \
           ORDER BY time_created, id LIMIT 1)",
        0,
        BlockedReason::Conflict,
        "summary diffs changed",
    );
}

#[test]
fn a_row_not_written_by_json_stringify_is_unsupported_storage() {
    assert_refused(
        |fx| {
            let (session, message) = user_message_with_diffs(fx);
            diffs_request(fx, &session, &message)
        },
        // The same value written with spaces (as a hand edit or another tool would): its diffs
        // revision is the same, its bytes are not JSON.stringify's.
        "UPDATE message SET data = replace(data, '\"role\":\"user\"', '\"role\": \"user\"') \
         WHERE id = (SELECT id FROM message WHERE json_extract(data, '$.role') = 'user' \
           AND EXISTS (SELECT 1 FROM json_each(data, '$.summary.diffs') d \
                       WHERE json_extract(d.value, '$.patch') <> '') \
           ORDER BY time_created, id LIMIT 1)",
        0,
        BlockedReason::UnsupportedStorage,
        "JSON.stringify",
    );
}

#[test]
fn a_session_updated_within_the_quiet_period_is_maintenance_required() {
    let now = now_ms();
    assert_refused(
        |fx| {
            let (session, message) = user_message_with_diffs(fx);
            diffs_request(fx, &session, &message)
        },
        &format!("UPDATE session SET time_updated = {now}"),
        30_000,
        BlockedReason::MaintenanceRequired,
        "quiet period",
    );
}
