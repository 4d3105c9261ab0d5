//! The abandoned-run rule at its edges: times stored as REAL, in the future, as numeric text,
//! as a blob or as JSON `null`; an OpenCode write between two prunes of one engine; a receipt
//! table whose `abandoned_run` column was added and rolled back, or made with another type; a
//! clean of a killed session; the `--abandoned-after` values (docs/ARCHITECTURE.md, "Fence").

use std::time::Duration;

use crate::abandoned_runs_unblock_their_sessions::{kill_last_turn, rows_of, store};
use crate::common;

use common::cli::{assert_exit, json, run};
use common::*;
use pruning_engine::{BlockedReason, PruneRequest, PruneResult};

/// Minutes as ms.
fn minutes(n: i64) -> i64 {
    n * 60_000
}

/// The revision of turn 5, read before any damage.
fn turn5_request(fx: &Fixture) -> PruneRequest {
    let revision = preview(&fx.engine(), MANY_TURNS, TURN5).0;
    PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap()
}

/// `(result, refusal detail)` of a prune of turn 5 after `damage` (`NOW`: now in ms, `LAST`: the
/// killed run's message), under a threshold of `after`; checks that a refusal wrote nothing.
fn turn5_after(damage: &str, after: Duration) -> (PruneResult, String, Option<i64>) {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    let request = turn5_request(&fx);
    fx.exec(
        &damage
            .replace("NOW", &now_ms().to_string())
            .replace("LAST", &last)
            .replace("SESSION", MANY_TURNS),
    );
    let digest = fx.file_digest();
    let engine = fx.engine_with(store(&fx, Some(after)));
    let outcome = engine.prune(&request).unwrap();
    if !matches!(outcome.result, PruneResult::Pruned { .. }) {
        assert_eq!(fx.file_digest(), digest, "{damage}");
    }
    let idle = outcome
        .receipt
        .and_then(|r| r.abandoned_run)
        .map(|run| run.idle_ms);
    let detail = outcome.refusal.map(|r| r.detail).unwrap_or_default();
    (outcome.result, detail, idle)
}

const BUSY: PruneResult = PruneResult::Blocked {
    reason: BlockedReason::MaintenanceRequired,
};

#[test]
fn a_real_time_counts_as_its_whole_ms() {
    let damage = format!(
        "UPDATE part SET time_updated = NOW - {} + 0.5 WHERE message_id = 'LAST'",
        minutes(10)
    );
    let (result, detail, _) = turn5_after(&damage, Duration::from_secs(3600));
    assert_eq!(result, BUSY);
    assert!(
        detail.contains("try again in 49m") || detail.contains("try again in 50m"),
        "{detail}"
    );
    let (result, _, idle) = turn5_after(&damage, Duration::from_secs(5 * 60));
    assert!(matches!(result, PruneResult::Pruned { .. }), "{result:?}");
    let idle = idle.expect("abandoned run");
    assert!(idle >= minutes(10) - 1 && idle < minutes(11), "{idle}");
}

#[test]
fn a_time_in_the_future_keeps_the_run_alive_until_then() {
    let damage = format!(
        "UPDATE part SET time_updated = NOW + {} WHERE message_id = 'LAST'",
        minutes(60)
    );
    let (result, detail, _) = turn5_after(&damage, Duration::from_secs(24 * 3600));
    assert_eq!(result, BUSY);
    assert!(detail.contains("try again in 1d"), "{detail}");
}

#[test]
fn times_that_are_not_numbers_keep_the_run_alive() {
    for damage in [
        // A blob.
        "UPDATE part SET time_updated = x'31' WHERE message_id = 'LAST'",
        // Numeric text in an event's JSON.
        "UPDATE event SET data = json_set(data, '$.time', CAST(NOW - 864000000 AS TEXT)) \
           WHERE rowid = (SELECT rowid FROM event WHERE aggregate_id = 'SESSION' \
                            AND json_type(data, '$.time') = 'integer' LIMIT 1)",
        // JSON null.
        "UPDATE event SET data = json_set(data, '$.time', json('null')) \
           WHERE rowid = (SELECT rowid FROM event WHERE aggregate_id = 'SESSION' \
                            AND json_type(data, '$.time') = 'integer' LIMIT 1)",
        // Text that is not JSON.
        "UPDATE event SET data = 'not json' \
           WHERE rowid = (SELECT rowid FROM event WHERE aggregate_id = 'SESSION' \
                            AND type = 'message.part.updated.1' LIMIT 1)",
    ] {
        let (result, detail, _) = turn5_after(damage, Duration::ZERO);
        assert_eq!(result, BUSY, "{damage}");
        assert!(detail.contains("not a number"), "{damage}: {detail}");
    }
}

/// Numeric text written to an INTEGER column is stored as the integer (column affinity): it is
/// read as the time it spells.
#[test]
fn numeric_text_in_a_time_column_is_read_as_its_number() {
    let (result, detail, _) = turn5_after(
        "UPDATE message SET time_updated = CAST(NOW AS TEXT) WHERE id = 'LAST'",
        Duration::from_secs(3600),
    );
    assert_eq!(result, BUSY);
    assert!(detail.contains("try again in 59m"), "{detail}");
}

/// An engine admitted a prune beside the abandoned run; OpenCode then writes to the run (another
/// connection): the engine's next prune of the same session is refused, whatever it learnt.
#[test]
fn a_write_by_opencode_after_an_admitted_prune_is_seen_by_the_next() {
    for write in [
        "UPDATE part SET time_updated = NOW WHERE message_id = 'LAST' \
           AND json_extract(data, '$.type') = 'tool'",
        "INSERT INTO event (id, aggregate_id, seq, type, data) \
           SELECT 'evt_zzzzzzzzzzzzzzzzzzzzzzzzzz', aggregate_id, \
                  (SELECT seq FROM event_sequence WHERE aggregate_id = 'SESSION') + 1, type, \
                  json_set(data, '$.time', NOW) \
           FROM event WHERE aggregate_id = 'SESSION' AND type = 'message.part.updated.1' \
           ORDER BY seq DESC LIMIT 1; \
         UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = 'SESSION';",
    ] {
        let fx = Fixture::new();
        let last = kill_last_turn(&fx);
        let engine = fx.engine_with(store(&fx, Some(Duration::from_secs(3600))));
        let revision = preview(&engine, MANY_TURNS, TURN1).0;
        let first = PruneRequest::all_technical(MANY_TURNS.into(), TURN1.into(), revision).unwrap();
        let outcome = engine.prune(&first).unwrap();
        assert_eq!(
            outcome.receipt.unwrap().abandoned_run.unwrap().message_id,
            last
        );
        let revision = preview(&engine, MANY_TURNS, TURN5).0;
        fx.exec(
            &write
                .replace("NOW", &now_ms().to_string())
                .replace("LAST", &last)
                .replace("SESSION", MANY_TURNS),
        );
        let digest = fx.file_digest();
        let second =
            PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap();
        assert_eq!(engine.prune(&second).unwrap().result, BUSY, "{write}");
        assert_eq!(fx.file_digest(), digest, "{write}");
    }
}

/// The receipt insert fails after the column was added: the rollback takes the column away, and
/// the next receipt adds it again.
#[test]
fn a_receipt_refused_after_the_column_was_added_rolls_it_back() {
    let fx = Fixture::new();
    fx.receipt_table_accepting("removed_count < 2");
    let last = kill_last_turn(&fx);
    let column = |fx: &Fixture| {
        fx.scalar(
            "SELECT count(*) FROM pragma_table_info('session_prune_receipt') \
             WHERE name = 'abandoned_run'",
        )
    };
    let engine = fx.engine_with(store(&fx, Some(Duration::ZERO)));
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    assert_eq!(indexes.len(), 2);
    let digest = fx.file_digest();
    let both = request(MANY_TURNS, TURN5, &revision, &indexes);
    assert_eq!(
        engine.prune(&both).unwrap().result,
        PruneResult::Blocked {
            reason: BlockedReason::UnsupportedStorage
        }
    );
    assert_eq!(column(&fx), 0);
    assert_eq!(fx.file_digest(), digest);
    let one = request(MANY_TURNS, TURN5, &revision, &indexes[..1]);
    let receipt = engine.prune(&one).unwrap().receipt.expect("receipt");
    assert_eq!(receipt.abandoned_run.unwrap().message_id, last);
    assert_eq!(column(&fx), 1);
    assert_eq!(receipts(&fx).len(), 1);
}

/// A receipt table whose `abandoned_run` column has another declared type (INTEGER): the JSON
/// is stored as text and read back as written.
#[test]
fn an_abandoned_run_column_of_another_type_keeps_the_receipt() {
    let fx = Fixture::new();
    fx.receipt_table_accepting("removed_count >= 0");
    fx.exec("ALTER TABLE session_prune_receipt ADD COLUMN abandoned_run INTEGER");
    let last = kill_last_turn(&fx);
    let request = turn5_request(&fx);
    let engine = fx.engine_with(store(&fx, Some(Duration::ZERO)));
    let receipt = engine.prune(&request).unwrap().receipt.expect("receipt");
    assert_eq!(receipt.abandoned_run.as_ref().unwrap().message_id, last);
    assert_eq!(engine.receipts(None).unwrap(), vec![receipt]);
}

/// `clean --apply --keep-last-turns 0` on a session killed days ago: every completed message is
/// pruned, each receipt names the run, and the run's message, its parts and their snapshots are
/// left as they were.
#[test]
fn a_clean_of_a_killed_session_leaves_the_run_whole() {
    let fx = Fixture::new();
    let last = kill_last_turn(&fx);
    let killed = rows_of(&fx, &last);
    let snapshots_of_run = |fx: &Fixture| {
        fx.sql()
            .query_row(
                "SELECT group_concat(id || data, '|') FROM (SELECT id, data FROM event \
                   WHERE json_extract(data, '$.part.messageID') = ?1 ORDER BY id)",
                [&last],
                |row| row.get::<_, String>(0),
            )
            .unwrap()
    };
    let snapshots = snapshots_of_run(&fx);
    let dry = run(
        &fx.db,
        &[
            "--json",
            "clean",
            MANY_TURNS,
            "--keep-last-turns",
            "0",
            "--dry-run",
        ],
    );
    assert_exit(&dry, 0);
    let out = run(
        &fx.db,
        &[
            "--json",
            "clean",
            MANY_TURNS,
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    );
    assert_exit(&out, 0);
    let report = json(&out);
    let receipts = receipts(&fx);
    assert!(receipts.len() > 1, "{report}");
    for receipt in &receipts {
        assert_eq!(
            receipt
                .abandoned_run
                .as_ref()
                .map(|r| r.message_id.as_str()),
            Some(last.as_str())
        );
        assert_ne!(receipt.message_id, last);
    }
    assert_eq!(rows_of(&fx, &last), killed);
    assert_eq!(snapshots_of_run(&fx), snapshots);
}

/// `--abandoned-after`: `never` (spaces around it too) keeps a killed session refused (exit 3);
/// a value that is neither `never` nor a duration is bad input (exit 2) naming the flag.
#[test]
fn abandoned_after_values_are_read_or_refused_plainly() {
    let fx = Fixture::new();
    let rev = "0".repeat(64);
    let prune = |value: &str| {
        run(
            &fx.db,
            &[
                "--json",
                "--abandoned-after",
                value,
                "prune",
                KILLED_MID_TOOL,
                KILLED_MID_TOOL_MSG,
                "--revision",
                &rev,
                "--all-technical",
            ],
        )
    };
    for value in ["never", " never "] {
        let out = prune(value);
        assert_exit(&out, 3);
        assert_eq!(json(&out)["reason"], "maintenance_required", "{value}");
    }
    // The run's own message is refused by the planner however the threshold is set.
    for value in ["60", "1m", "1.5h"] {
        let out = prune(value);
        assert_exit(&out, 3);
        assert_eq!(json(&out)["reason"], "not_deletable", "{value}");
    }
    // Under a minute a run still streaming into its parts could look idle.
    for value in [
        "NEVER",
        "Never",
        "-1h",
        "",
        "soon",
        "never never",
        "0",
        "59s",
    ] {
        let out = prune(value);
        assert_exit(&out, 2);
        let doc = json(&out);
        let error = doc["error"].as_str().unwrap();
        assert!(error.contains("--abandoned-after"), "{value}: {error}");
        assert!(error.contains("never"), "{value}: {error}");
    }
    assert!(!fx.has_table("session_prune_receipt"));
}
