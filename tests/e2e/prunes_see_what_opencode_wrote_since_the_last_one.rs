//! A store keeps what it learnt about a session between two prunes (its fence passed, its
//! snapshots by part) only while no other connection committed: a write of OpenCode, or a prune
//! of another engine, between two prunes of one engine is seen by the second, and a prune that
//! rolled back after deleting leaves nothing learnt behind (docs/ARCHITECTURE.md, "Bulk work").

use crate::common;

use common::*;
use pruning_engine::{BlockedReason, PruneRequest, PruneResult};

/// The message pruned first, to make the store learn the session.
const FIRST: &str = TURN1;

/// Prunes every technical part of `message` (of the many-turns session) at its current revision.
fn prune_all(
    engine: &pruning_engine::Engine<pruning_opencode::OpenCodeStore>,
    message: &str,
) -> PruneResult {
    let revision = preview(engine, MANY_TURNS, message).0;
    let request = PruneRequest::all_technical(MANY_TURNS.into(), message.into(), revision).unwrap();
    engine.prune(&request).unwrap().result
}

/// `message.part.updated.1` events holding one of the tool or reasoning parts of `message`.
fn snapshots_of_technical_parts(fx: &Fixture, message: &str) -> i64 {
    fx.scalar(&format!(
        "SELECT count(*) FROM event WHERE type = 'message.part.updated.1' \
           AND json_extract(data, '$.part.id') IN (SELECT id FROM part WHERE message_id = '{message}' \
             AND json_extract(data, '$.type') IN ('tool', 'reasoning'))"
    ))
}

/// Tool and reasoning parts of `message`.
fn technical_parts(fx: &Fixture, message: &str) -> i64 {
    fx.scalar(&format!(
        "SELECT count(*) FROM part WHERE message_id = '{message}' \
           AND json_extract(data, '$.type') IN ('tool', 'reasoning')"
    ))
}

/// After a first prune passed the session's fence, OpenCode changes the session so that the
/// fence must refuse: the next prune of the same engine is refused and changes nothing.
#[test]
fn a_session_opencode_changed_after_a_prune_is_fenced_again() {
    let changes = [
        "UPDATE session SET time_compacting = 1 WHERE id = 'SESSION'",
        // As OpenCode writes them: the row's time_updated moves too (a run written now is alive).
        "UPDATE message SET data = json_remove(data, '$.time.completed'), \
           time_updated = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE id = 'LAST'",
        "UPDATE part SET data = json_set(data, '$.state.status', 'running'), \
           time_updated = CAST(unixepoch('subsec') * 1000 AS INTEGER) \
           WHERE id = (SELECT id FROM part WHERE message_id = 'LAST' \
                         AND json_extract(data, '$.type') = 'tool' LIMIT 1)",
    ];
    for change in changes {
        let fx = Fixture::new();
        let engine = fx.engine();
        assert!(matches!(
            prune_all(&engine, FIRST),
            PruneResult::Pruned { .. }
        ));
        let revision = preview(&engine, MANY_TURNS, TURN5).0;
        let last: String = fx
            .sql()
            .query_row(
                "SELECT id FROM message WHERE session_id = ?1 ORDER BY time_created DESC LIMIT 1 OFFSET 1",
                [MANY_TURNS],
                |row| row.get(0),
            )
            .unwrap();
        fx.exec(&change.replace("SESSION", MANY_TURNS).replace("LAST", &last));
        let digest = fx.file_digest();
        let request =
            PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), revision).unwrap();
        let outcome = engine.prune(&request).unwrap();
        assert_eq!(
            outcome.result,
            PruneResult::Blocked {
                reason: BlockedReason::MaintenanceRequired
            },
            "after: {change}"
        );
        assert_eq!(fx.file_digest(), digest, "after: {change}");
        assert_eq!(technical_parts(&fx, TURN5), 2, "after: {change}");
    }
}

/// After a first prune read the session's snapshots, OpenCode writes one more snapshot of a part
/// of another message: the prune of that message deletes it too.
#[test]
fn a_snapshot_opencode_wrote_after_a_prune_is_deleted_by_the_next() {
    let fx = Fixture::new();
    let engine = fx.engine();
    assert!(matches!(
        prune_all(&engine, FIRST),
        PruneResult::Pruned { .. }
    ));
    assert_eq!(snapshots_of_technical_parts(&fx, FIRST), 0);
    let before = snapshots_of_technical_parts(&fx, TURN5);
    assert!(before > 0);
    // A new snapshot of one of TURN5's tool parts, with the session's next seq, as OpenCode
    // appends one.
    fx.exec(&format!(
        "INSERT INTO event (id, aggregate_id, seq, type, data)
           SELECT 'evt_zzzzzzzzzzzzzzzzzzzzzzzzzz', aggregate_id,
                  (SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}') + 1, type, data
           FROM event WHERE type = 'message.part.updated.1' AND aggregate_id = '{MANY_TURNS}'
             AND json_extract(data, '$.part.messageID') = '{TURN5}'
             AND json_extract(data, '$.part.type') = 'tool'
           ORDER BY seq DESC LIMIT 1;
         UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{MANY_TURNS}';"
    ));
    assert_eq!(snapshots_of_technical_parts(&fx, TURN5), before + 1);
    assert!(matches!(
        prune_all(&engine, TURN5),
        PruneResult::Pruned { .. }
    ));
    assert_eq!(snapshots_of_technical_parts(&fx, TURN5), 0);
    assert_eq!(
        fx.rows_containing("event", "evt_zzzzzzzzzzzzzzzzzzzzzzzzzz"),
        0
    );
    assert_eq!(
        fx.scalar("SELECT count(*) FROM event WHERE id = 'evt_zzzzzzzzzzzzzzzzzzzzzzzzzz'"),
        0
    );
}

/// A prune that deleted a message's snapshots and then rolled back (its receipt was refused)
/// leaves them in the database; a later prune of one of those parts by the same engine
/// deletes that part's snapshots.
#[test]
fn a_prune_rolled_back_after_deleting_snapshots_leaves_nothing_learnt() {
    let fx = Fixture::new();
    // A receipt table that accepts receipts of one part only.
    fx.receipt_table_accepting("removed_count < 2");
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    assert_eq!(indexes.len(), 2);
    let before = snapshots_of_technical_parts(&fx, TURN5);
    let snapshots_of = |part: &str| {
        fx.scalar(&format!(
            "SELECT count(*) FROM event WHERE type = 'message.part.updated.1' \
               AND json_extract(data, '$.part.id') = '{part}'"
        ))
    };
    let both = request(MANY_TURNS, TURN5, &revision, &indexes);
    assert_eq!(
        engine.prune(&both).unwrap().result,
        PruneResult::Blocked {
            reason: BlockedReason::UnsupportedStorage
        }
    );
    assert_eq!(snapshots_of_technical_parts(&fx, TURN5), before);
    let one = request(MANY_TURNS, TURN5, &revision, &indexes[..1]);
    let first_technical: String = fx
        .sql()
        .query_row(
            "SELECT id FROM part WHERE message_id = ?1 \
               AND json_extract(data, '$.type') IN ('tool', 'reasoning') ORDER BY id LIMIT 1",
            [TURN5],
            |row| row.get(0),
        )
        .unwrap();
    let pruned_part_snapshots = snapshots_of(&first_technical);
    assert!(pruned_part_snapshots > 0);
    assert!(matches!(
        engine.prune(&one).unwrap().result,
        PruneResult::Pruned {
            removed_count: 1,
            ..
        }
    ));
    let receipts = receipts(&fx);
    assert_eq!(receipts.len(), 1);
    let part = receipts[0].part_ids.join(",");
    assert_eq!(part, first_technical);
    assert_eq!(snapshots_of(&part), 0);
    assert_eq!(
        snapshots_of_technical_parts(&fx, TURN5),
        before - pruned_part_snapshots
    );
}

/// Another engine (its own store and journal, on the same file) prunes a message of the session
/// between two prunes of this engine: this engine's next prune appends its removal events after
/// the other's and deletes every snapshot of its parts; the other's request sent here is its
/// retry, and another request on the old revision is a conflict.
#[test]
fn a_prune_by_another_engine_between_two_prunes_is_seen_by_the_next() {
    let fx = Fixture::new();
    // The other engine journals its prune in a journal of its own: the audit would say so.
    fx.skip_audit();
    let listing = prune_listing(MANY_TURNS);
    let pruning_engine::HistoryResult::Page(page) =
        pruning_engine::history::history_with(&fx.store(0), &listing, ROWS_ONLY)
            .unwrap()
            .result
    else {
        panic!("a page")
    };
    let third = page
        .candidates
        .iter()
        .map(|c| c.message_id.clone())
        .find(|m| m != FIRST && m != TURN5)
        .expect("a third candidate");

    let engine = fx.engine();
    assert!(matches!(
        prune_all(&engine, FIRST),
        PruneResult::Pruned { .. }
    ));
    let stale_turn5 = preview(&engine, MANY_TURNS, TURN5).0;

    // A copy of this engine's journal, as it was: the same database's, so the other engine may
    // write with it (a journal of no database is refused beside receipts).
    let other_journal = fx.dir.path().join("other.prune-journal");
    std::fs::copy(&fx.journal, &other_journal).unwrap();
    let other = pruning_engine::Engine::open(
        fx.store(30_000),
        pruning_engine::Journal::open(&other_journal).unwrap(),
    )
    .unwrap();
    assert!(matches!(
        prune_all(&other, TURN5),
        PruneResult::Pruned { .. }
    ));
    drop(other);

    // The same request as the other engine's is its retry; another one on the old revision is
    // a conflict.
    let same =
        PruneRequest::all_technical(MANY_TURNS.into(), TURN5.into(), stale_turn5.clone()).unwrap();
    let retried = engine.prune(&same).unwrap();
    assert!(retried.retried);
    assert_eq!(pruned(&retried.result).2, 2);
    let stale = request(MANY_TURNS, TURN5, &stale_turn5, &[1]);
    assert_eq!(
        engine.prune(&stale).unwrap().result,
        PruneResult::Blocked {
            reason: BlockedReason::Conflict
        }
    );
    assert!(matches!(
        prune_all(&engine, &third),
        PruneResult::Pruned { .. }
    ));
    drop(engine);

    for message in [FIRST, TURN5, third.as_str()] {
        assert_eq!(technical_parts(&fx, message), 0, "{message}");
        assert_eq!(snapshots_of_technical_parts(&fx, message), 0, "{message}");
    }
    // The session's events: seqs unique, the sequence row at the newest.
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) - count(DISTINCT seq) FROM event WHERE aggregate_id = '{MANY_TURNS}'"
        )),
        0
    );
    assert_eq!(
        fx.scalar(&format!(
            "SELECT (SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}') \
                  - (SELECT max(seq) FROM event WHERE aggregate_id = '{MANY_TURNS}')"
        )),
        0
    );
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM event WHERE aggregate_id = '{MANY_TURNS}' \
               AND type = 'message.part.removed.1'"
        )),
        6
    );
}
