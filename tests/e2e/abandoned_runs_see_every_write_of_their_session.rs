//! A run OpenCode left incomplete counts as abandoned only when nothing of its session was
//! written for `abandoned_after`: a write to the session that OpenCode makes outside the V1
//! `message` and `part` columns (a V2 `session_message` row, an event stamped `$.timestamp`, a
//! queued prompt, a todo) keeps the run alive; a threshold and a newest write at the ends of the
//! range refuse without failing; a write stamped in seconds never makes the run look older
//! (docs/ARCHITECTURE.md, "Fence").

use std::time::Duration;

use crate::abandoned_runs_unblock_their_sessions::{kill_last_turn, rows_of, store};
use crate::common;

use common::*;
use pruning_engine::{BlockedReason, PruneRequest, PruneResult};

/// Runs `write` (with `NOW` replaced by now in ms and `LAST` by the killed run's message) on a
/// fixture whose many-turns session was killed mid-tool days ago, then prunes turn 5 with a 24 h
/// threshold: the prune must be refused as `maintenance_required` and write nothing.
fn refused_after(write: &str) {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    let revision = preview(&fx.engine(), MANY_TURNS, TURN5).0;
    fx.exec(
        &write
            .replace("NOW", &now_ms().to_string())
            .replace("LAST", &last)
            .replace("SESSION", MANY_TURNS),
    );
    let killed = rows_of(&fx, &last);
    let digest = fx.file_digest();
    let engine = fx.engine_with(store(&fx, Some(Duration::from_secs(24 * 3600))));
    let request = PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap();
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::MaintenanceRequired
        },
        "after: {write} ({:?})",
        outcome.receipt
    );
    assert_eq!(fx.file_digest(), digest, "after: {write}");
    assert_eq!(rows_of(&fx, &last), killed, "after: {write}");
}

/// OpenCode 1.18.34's V2 runner writes `session_message` rows and leaves the shared session
/// row's `time_updated` as it was (the fixture's V2 session: updated at ...048605, its newest
/// row at ...055359).
#[test]
fn a_v2_message_row_written_now_keeps_the_run_alive() {
    refused_after(
        "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
           VALUES ('msg_zzzzzzzzzzzzzzzzzzzzzzzzzz', 'SESSION', 'assistant', 1, NOW, NOW, \
                   '{\"time\":{\"created\":' || NOW || '}}')",
    );
}

/// The `session.next.*` events OpenCode 1.18.34 writes carry their time as `$.timestamp`, not
/// `$.time` (the fixture's V2 session).
#[test]
fn an_event_stamped_now_in_timestamp_keeps_the_run_alive() {
    refused_after(
        "INSERT INTO event (id, aggregate_id, seq, type, data) \
           VALUES ('evt_zzzzzzzzzzzzzzzzzzzzzzzzzz', 'SESSION', \
                   (SELECT seq FROM event_sequence WHERE aggregate_id = 'SESSION') + 1, \
                   'session.next.step.started.1', \
                   '{\"timestamp\":' || NOW || ',\"sessionID\":\"SESSION\",\"assistantMessageID\":\"LAST\"}'); \
         UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = 'SESSION';",
    );
}

/// A prompt queued for the session (`session_input`) and a todo list written by the run
/// (`todo`) are writes of the session too.
#[test]
fn a_queued_prompt_or_a_todo_written_now_keeps_the_run_alive() {
    refused_after(
        "INSERT INTO session_input (id, session_id, prompt, delivery, admitted_seq, promoted_seq, time_created) \
           VALUES ('msg_zzzzzzzzzzzzzzzzzzzzzzzzzz', 'SESSION', '{\"text\":\"go on\"}', 'steer', 1, NULL, NOW)",
    );
    refused_after(
        "INSERT INTO todo (session_id, content, status, priority, position, time_created, time_updated) \
           VALUES ('SESSION', 'finish the run', 'in_progress', 'high', 0, NOW, NOW)",
    );
}

/// A threshold of a century and a run's part whose `time_updated` is the largest integer: the
/// run is not abandoned, and saying when it would be is no arithmetic overflow.
#[test]
fn a_huge_time_under_a_long_threshold_is_refused_without_overflow() {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    let revision = preview(&fx.engine(), MANY_TURNS, TURN5).0;
    fx.exec(&format!(
        "UPDATE part SET time_updated = 9223372036854775807 WHERE message_id = '{last}'"
    ));
    let digest = fx.file_digest();
    let engine = fx.engine_with(store(&fx, Some(Duration::from_secs(100 * 365 * 86_400))));
    let request = PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap();
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::MaintenanceRequired
        }
    );
    assert_eq!(fx.file_digest(), digest);
}

/// A run's tool part updated now but stamped in seconds (a time no OpenCode release writes,
/// below every ms time of the session) is not a time the rule can read: it keeps the run
/// alive, as a time that is not a number does, instead of being passed over as old.
#[test]
fn a_write_stamped_in_seconds_keeps_the_run_alive() {
    refused_after(
        "UPDATE part SET time_updated = NOW / 1000 \
           WHERE message_id = 'LAST' AND json_extract(data, '$.type') = 'tool'",
    );
}
