//! A session where OpenCode left a run incomplete (killed mid-tool after completed turns) is
//! refused only while the run may be alive: once nothing of the session was written for the
//! store's `abandoned_after` (24 h by default), its completed messages are pruned, the run's own
//! message never is, and each receipt records the run it was admitted beside
//! (docs/ARCHITECTURE.md, "Fence").

use std::time::Duration;

use crate::common;

use common::cli::{json, run, run_with_stdin};
use common::*;
use pruning_engine::{AbandonedRun, BlockedReason, Engine, PruneRequest, PruneResult};
use pruning_opencode::{OpenCodeStore, StoreOptions};

/// Makes the many-turns session look killed mid-tool in its last turn, as OpenCode leaves it:
/// the newest assistant message loses `time.completed` and one of its tool parts is `running`.
/// The rows keep their times (the fixture's, days old). Returns that message's id.
pub(crate) fn kill_last_turn(fx: &Fixture) -> String {
    let last: String = fx
        .sql()
        .query_row(
            "SELECT id FROM message WHERE session_id = ?1 \
               AND json_extract(data, '$.role') = 'assistant' \
               AND id IN (SELECT message_id FROM part WHERE json_extract(data, '$.type') = 'tool') \
             ORDER BY time_created DESC LIMIT 1",
            [MANY_TURNS],
            |row| row.get(0),
        )
        .unwrap();
    assert_ne!(last, TURN5);
    fx.exec(&format!(
        "UPDATE message SET data = json_remove(data, '$.time.completed', '$.finish') \
           WHERE id = '{last}';
         UPDATE part SET data = json_set(data, '$.state.status', 'running') \
           WHERE id = (SELECT id FROM part WHERE message_id = '{last}' \
                         AND json_extract(data, '$.type') = 'tool' ORDER BY id LIMIT 1);"
    ));
    last
}

/// The newest write of the many-turns session, ms: the rule's own reading, in SQL.
fn newest_write(fx: &Fixture) -> i64 {
    fx.scalar(&format!(
        "SELECT max(
           (SELECT time_updated FROM session WHERE id = '{MANY_TURNS}'),
           (SELECT max(max(time_created, time_updated)) FROM message WHERE session_id = '{MANY_TURNS}'),
           (SELECT max(max(time_created, time_updated)) FROM part WHERE session_id = '{MANY_TURNS}'),
           (SELECT coalesce(max(json_extract(data, '$.time')), 0) FROM event
              WHERE aggregate_id = '{MANY_TURNS}' AND type <> 'message.part.removed.1'))"
    ))
}

/// The stored text of a message and of its parts, in id order.
pub(crate) fn rows_of(fx: &Fixture, message: &str) -> String {
    fx.sql()
        .query_row(
            "SELECT (SELECT data FROM message WHERE id = ?1) || \
                    (SELECT group_concat(id || data, '|') FROM \
                       (SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id))",
            [message],
            |row| row.get(0),
        )
        .unwrap()
}

/// A store whose runs count as abandoned after `after` (`None`: never).
pub(crate) fn store(fx: &Fixture, after: Option<Duration>) -> OpenCodeStore {
    OpenCodeStore::open(
        &fx.db,
        StoreOptions {
            abandoned_after: after,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

/// Prunes every technical part of TURN5 at its current revision.
fn prune_turn5(engine: &Engine<OpenCodeStore>) -> pruning_engine::PruneOutcome {
    let revision = preview(engine, MANY_TURNS, TURN5).0;
    let request = PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap();
    engine.prune(&request).unwrap()
}

/// Minutes as ms.
fn minutes(n: i64) -> i64 {
    n * 60_000
}

#[test]
fn a_run_idle_past_the_threshold_lets_the_sessions_completed_messages_be_pruned() {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    let killed = rows_of(&fx, &last);
    let engine = fx.engine_with(store(&fx, Some(Duration::from_secs(24 * 3600))));
    let outcome = prune_turn5(&engine);
    assert!(
        matches!(outcome.result, PruneResult::Pruned { .. }),
        "{:?} {:?}",
        outcome.result,
        outcome.refusal
    );
    let receipt = outcome.receipt.expect("receipt");
    assert_eq!(
        receipt.abandoned_run,
        Some(AbandonedRun {
            message_id: last.clone(),
            idle_ms: receipt.committed_at_ms - newest_write(&fx),
        })
    );
    assert!(receipt.abandoned_run.as_ref().unwrap().idle_ms > minutes(24 * 60));
    // As stored, and as the receipts listing reads it back.
    assert_eq!(engine.receipts(None).unwrap(), vec![receipt]);
    assert_eq!(rows_of(&fx, &last), killed);
}

#[test]
fn the_runs_own_message_is_never_pruned() {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    let engine = fx.engine_with(store(&fx, Some(Duration::ZERO)));
    let digest = fx.file_digest();
    let request =
        PruneRequest::all_technical(MANY_TURNS.into(), last.clone(), "0".repeat(64)).unwrap();
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
    assert!(
        outcome.refusal.unwrap().detail.contains("not complete"),
        "the planner's words"
    );
    assert_eq!(fx.file_digest(), digest);
}

/// Both sides of the threshold on the same database: a tool part of the killed run written 45
/// minutes ago keeps the session refused under a 1 h threshold and admits it under 30 min.
#[test]
fn a_run_written_within_the_threshold_keeps_its_session_refused() {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    fx.exec(&format!(
        "UPDATE part SET time_updated = CAST(unixepoch('subsec') * 1000 AS INTEGER) - {} \
           WHERE message_id = '{last}'",
        minutes(45)
    ));
    let revision = preview(&fx.engine(), MANY_TURNS, TURN5).0;
    let request =
        PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision.clone()).unwrap();

    let digest = fx.file_digest();
    let engine = fx.engine_with(store(&fx, Some(Duration::from_secs(3600))));
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::MaintenanceRequired
        }
    );
    let detail = outcome.refusal.unwrap().detail;
    assert!(detail.contains("not complete"), "{detail}");
    assert!(detail.contains("--abandoned-after"), "{detail}");
    assert!(
        detail.contains("try again in 14m") || detail.contains("try again in 15m"),
        "{detail}"
    );
    assert_eq!(fx.file_digest(), digest);
    assert!(!fx.has_table("session_prune_receipt"));
    drop(engine);
    std::fs::remove_file(&fx.journal).unwrap();

    let engine = fx.engine_with(store(&fx, Some(Duration::from_secs(30 * 60))));
    let outcome = engine.prune(&request).unwrap();
    assert!(matches!(outcome.result, PruneResult::Pruned { .. }));
    let run = outcome
        .receipt
        .unwrap()
        .abandoned_run
        .expect("abandoned run");
    assert_eq!(run.message_id, last);
    assert!(
        run.idle_ms >= minutes(45) && run.idle_ms < minutes(50),
        "{run:?}"
    );
}

#[test]
fn abandoned_after_never_keeps_a_killed_session_refused() {
    let fx = Fixture::new();
    kill_last_turn(&fx);
    let revision = preview(&fx.engine(), MANY_TURNS, TURN5).0;
    let digest = fx.file_digest();
    let engine = fx.engine_with(store(&fx, None));
    let request = PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap();
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::MaintenanceRequired
        }
    );
    assert!(outcome.refusal.unwrap().detail.contains("never"));
    assert_eq!(fx.file_digest(), digest);
}

/// A time of the session that is not a number (a message row's `time_updated`, an event's
/// `$.time`) never makes the run look older: the session stays refused.
#[test]
fn a_time_that_is_not_a_number_keeps_the_run_alive() {
    let damages = [
        format!("UPDATE message SET time_updated = 'soon' WHERE id = '{TURN1}'"),
        format!(
            "UPDATE event SET data = json_set(data, '$.time', 'soon') WHERE rowid = \
               (SELECT rowid FROM event WHERE aggregate_id = '{MANY_TURNS}' \
                  AND json_type(data, '$.time') = 'integer' LIMIT 1)"
        ),
    ];
    for damage in damages {
        let fx = Fixture::new();
        kill_last_turn(&fx);
        let revision = preview(&fx.engine(), MANY_TURNS, TURN5).0;
        fx.exec(&damage);
        let digest = fx.file_digest();
        let engine = fx.engine_with(store(&fx, Some(Duration::ZERO)));
        let request =
            PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap();
        let outcome = engine.prune(&request).unwrap();
        assert_eq!(
            outcome.result,
            PruneResult::Blocked {
                reason: BlockedReason::MaintenanceRequired
            },
            "{damage}"
        );
        assert!(
            outcome.refusal.unwrap().detail.contains("not a number"),
            "{damage}"
        );
        assert_eq!(fx.file_digest(), digest, "{damage}");
    }
}

/// A receipt table made before receipts recorded abandoned runs gains the column with the first
/// receipt that needs it; the receipts listing reads tables of both layouts.
#[test]
fn a_receipt_table_without_the_abandoned_run_column_gains_it() {
    let fx = Fixture::new();
    fx.receipt_table_accepting("removed_count >= 0");
    let column = |fx: &Fixture| {
        fx.scalar(
            "SELECT count(*) FROM pragma_table_info('session_prune_receipt') \
             WHERE name = 'abandoned_run'",
        )
    };
    assert_eq!(column(&fx), 0);
    let engine = fx.engine_with(store(&fx, Some(Duration::ZERO)));
    let revision = preview(&engine, MANY_TURNS, TURN1).0;
    let request = PruneRequest::all_technical(MANY_TURNS.into(), TURN1.into(), revision).unwrap();
    let settled = engine.prune(&request).unwrap().receipt.expect("receipt");
    assert_eq!(settled.abandoned_run, None);
    assert_eq!(column(&fx), 0, "a receipt without a run leaves the layout");
    assert_eq!(engine.receipts(None).unwrap(), vec![settled.clone()]);
    drop(engine);

    let last = kill_last_turn(&fx);
    let engine = fx.engine_with(store(&fx, Some(Duration::ZERO)));
    let admitted = prune_turn5(&engine).receipt.expect("receipt");
    assert_eq!(
        admitted
            .abandoned_run
            .as_ref()
            .map(|r| r.message_id.as_str()),
        Some(last.as_str())
    );
    assert_eq!(column(&fx), 1);
    assert_eq!(engine.receipts(None).unwrap(), vec![settled, admitted]);
}

/// `clean` prunes a killed session's completed messages, leaves the run's message as it is,
/// counts the run once in `abandonedRuns`, and its dry run says the same; with
/// `--abandoned-after never` the session's prunes are refused and no run is counted.
#[test]
fn clean_counts_the_abandoned_runs_it_prunes_beside_and_its_dry_run_agrees() {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    let killed = rows_of(&fx, &last);
    let clean = ["--json", "clean", "--all", "--keep-last-turns", "0"];
    let never: Vec<&str> = ["--abandoned-after", "never"]
        .into_iter()
        .chain(clean)
        .collect();
    let refused = json(&run(&fx.db, &never));
    assert_eq!(refused["abandonedRuns"], 0);
    let blocked = refused["blocked"]["maintenance_required"].as_u64().unwrap();
    assert!(blocked > 0, "{refused}");

    let dry = json(&run(&fx.db, &clean));
    let applied = json(&run(&fx.db, &[&clean[..], &["--apply"]].concat()));
    assert_eq!(dry["abandonedRuns"], 1, "{dry}");
    assert_eq!(applied["abandonedRuns"], 1, "{applied}");
    for key in ["pruned", "parts", "bytes", "blocked", "skipped"] {
        assert_eq!(dry[key], applied[key], "{key}");
    }
    assert_eq!(applied["blocked"].get("maintenance_required"), None);
    assert_eq!(
        applied["pruned"].as_u64().unwrap(),
        refused["pruned"].as_u64().unwrap() + blocked
    );
    assert_eq!(rows_of(&fx, &last), killed);
}

/// The fixture's sessions OpenCode was killed in (mid-tool, mid-stream), idle for days: under
/// the default threshold, a prune of the killed message is refused by the planner
/// (`not_deletable`), `history --purpose prune` offers nothing of them to `prune-batch`, and a
/// clean prunes nothing of them; their rows stay byte-identical.
#[test]
fn the_fixtures_killed_runs_stay_byte_identical_under_every_command() {
    let fx = Fixture::new();
    let killed = [
        (KILLED_MID_TOOL, KILLED_MID_TOOL_MSG),
        (KILLED_MID_STREAM, KILLED_MID_STREAM_MSG),
    ];
    let before: Vec<String> = killed.iter().map(|(_, m)| rows_of(&fx, m)).collect();
    for (session, message) in killed {
        let rev = "0".repeat(64);
        let out = run(
            &fx.db,
            &[
                "--json",
                "prune",
                session,
                message,
                "--revision",
                &rev,
                "--all-technical",
            ],
        );
        assert_eq!(out.status.code(), Some(3), "{session}");
        assert_eq!(json(&out)["reason"], "not_deletable", "{session}");
        // What `history --purpose prune` offers, fed to `prune-batch`.
        let page = run(
            &fx.db,
            &["--json", "history", session, "--purpose", "prune"],
        );
        assert_eq!(page.status.code(), Some(0), "{session}");
        let batch = run_with_stdin(
            &fx.db,
            &["--json", "prune-batch", session, "--candidates", "-"],
            &page.stdout,
        );
        assert_eq!(batch.status.code(), Some(0), "{session}");
        assert_eq!(json(&batch)["results"], serde_json::json!([]), "{session}");
    }
    let report = json(&run(
        &fx.db,
        &[
            "--json",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    ));
    assert_eq!(report["status"], "cleaned", "{report}");
    assert_eq!(
        report["abandonedRuns"], 0,
        "nothing of theirs was pruned: {report}"
    );
    assert_eq!(report["skipped"]["incomplete"], 2, "{report}");
    let after: Vec<String> = killed.iter().map(|(_, m)| rows_of(&fx, m)).collect();
    assert_eq!(after, before);
}
