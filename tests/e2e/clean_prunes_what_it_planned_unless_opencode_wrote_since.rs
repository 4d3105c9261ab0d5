//! A clean plans each message from one read of it, and the prune of that message deletes the
//! rows the plan chose without reading the message again, as long as no other connection
//! committed in between: OpenCode's writes after the plan are seen by the prune, which reads
//! the message again and refuses what changed (docs/ARCHITECTURE.md, "Bulk work").

use crate::common;

use common::*;
use pruning_engine::{BlockedReason, Engine, PruneRequest, PruneResult};
use pruning_opencode::{CleanPolicy, OpenCodeStore, Planned};

/// Plans the clean of `message` (of the many-turns session), keeping no turn.
fn plan(engine: &Engine<OpenCodeStore>, message: &str) -> PruneRequest {
    let policy = CleanPolicy {
        keep_last_turns: 0,
        ..CleanPolicy::default()
    };
    match engine
        .store()
        .clean_plan(MANY_TURNS, message, &policy, pruning_engine::now_ms())
        .unwrap()
    {
        Planned::Prune { request, .. } => request,
        other => panic!("not planned for a prune: {other:?}"),
    }
}

/// The id of the first tool part of `message`.
fn first_tool_part(fx: &Fixture, message: &str) -> String {
    fx.sql()
        .query_row(
            "SELECT id FROM part WHERE message_id = ?1 AND json_extract(data, '$.type') = 'tool' \
             ORDER BY id LIMIT 1",
            [message],
            |row| row.get(0),
        )
        .unwrap()
}

/// OpenCode rewrites, then deletes, a part the clean planned to remove: the prune is refused
/// (`conflict`, the revision moved) and leaves the database as OpenCode left it.
#[test]
fn a_part_opencode_changed_after_the_plan_makes_the_prune_a_conflict() {
    let changes = [
        "UPDATE part SET data = json_set(data, '$.state.output', 'rewritten') WHERE id = 'PART'",
        "DELETE FROM part WHERE id = 'PART'",
    ];
    for change in changes {
        let fx = Fixture::new();
        let engine = fx.engine();
        let request = plan(&engine, TURN5);
        fx.exec(&change.replace("PART", &first_tool_part(&fx, TURN5)));
        let digest = fx.file_digest();
        let outcome = engine.prune(&request).unwrap();
        assert_eq!(
            outcome.result,
            PruneResult::Blocked {
                reason: BlockedReason::Conflict
            },
            "after: {change}"
        );
        assert_eq!(fx.file_digest(), digest, "after: {change}");
        assert!(engine.receipts(None).unwrap().is_empty(), "after: {change}");
    }
}

/// OpenCode writes a part the clean did not choose (a new text part of the message): the
/// prune reads the message again, finds another revision and is refused.
#[test]
fn a_part_opencode_added_after_the_plan_makes_the_prune_a_conflict() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let request = plan(&engine, TURN5);
    fx.exec(&format!(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
           VALUES ('prt_zzzzzzzzzzzzzzzzzzzzzzzzzz', '{TURN5}', '{MANY_TURNS}', 1, 1,
                   '{{\"type\":\"text\",\"text\":\"late\"}}')"
    ));
    let digest = fx.file_digest();
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::Conflict
        }
    );
    assert_eq!(fx.file_digest(), digest);
}

/// A prune of what a clean planned writes the same receipt (parts, bytes, revisions) and
/// leaves the same rows as a prune that reads the message in its own transaction.
#[test]
fn a_planned_prune_removes_what_an_unplanned_one_removes() {
    let planned_fx = Fixture::new();
    let planned_engine = planned_fx.engine();
    let request = plan(&planned_engine, TURN5);
    let unplanned_fx = Fixture::new();
    let unplanned_engine = unplanned_fx.engine();
    for (engine, fx) in [
        (&planned_engine, &planned_fx),
        (&unplanned_engine, &unplanned_fx),
    ] {
        assert!(
            matches!(
                engine.prune(&request).unwrap().result,
                PruneResult::Pruned { .. }
            ),
            "{}",
            fx.db.display()
        );
    }
    let receipts = |engine: &Engine<OpenCodeStore>| {
        let receipts = engine.receipts(None).unwrap();
        assert_eq!(receipts.len(), 1);
        let r = &receipts[0];
        (
            r.part_ids.clone(),
            r.bytes_removed,
            r.revision_before.clone(),
            r.revision_after.clone(),
            r.indexes.clone(),
        )
    };
    let planned = receipts(&planned_engine);
    assert!(planned.1 > 0);
    assert_eq!(planned, receipts(&unplanned_engine));
    let rows = |fx: &Fixture| -> String {
        fx.sql()
            .query_row(
                "SELECT group_concat(id || ':' || octet_length(data), ',') \
                 FROM (SELECT id, data FROM part ORDER BY id)",
                [],
                |row| row.get(0),
            )
            .unwrap()
    };
    assert_eq!(rows(&planned_fx), rows(&unplanned_fx));
    let snapshots = |fx: &Fixture| {
        fx.scalar("SELECT count(*) FROM event WHERE type = 'message.part.updated.1'")
    };
    assert_eq!(snapshots(&planned_fx), snapshots(&unplanned_fx));
}

/// A clean's plan is used once: a second prune of the same request is an identical retry that
/// returns the first receipt and writes nothing.
#[test]
fn a_plan_serves_one_prune_of_its_message() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let request = plan(&engine, TURN5);
    let first = engine.prune(&request).unwrap();
    assert!(matches!(first.result, PruneResult::Pruned { .. }));
    let receipt = first.receipt.expect("receipt").receipt_id;
    let digest = fx.file_digest();
    let again = engine.prune(&request).unwrap();
    assert!(again.retried);
    assert_eq!(again.receipt.expect("receipt").receipt_id, receipt);
    assert_eq!(fx.file_digest(), digest);
}
