//! An identical retry returns the identical result and the same receipt, re-announces the same
//! event (same id and seq), and writes nothing: exactly one receipt row, one journaled event.

use crate::common;

use common::*;
use pruning_engine::{start_journal_epoch, Engine, EngineError, Journal, PruneResult};

#[test]
fn identical_retry_returns_same_result_receipt_and_event() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let req = request(MANY_TURNS, TURN5, &revision, &indexes);
    let first = engine.prune(&req).unwrap();
    let digest = {
        // The retry must not write: compare the file with the engine's connection still open.
        fx.file_digest()
    };
    let retry = engine.prune(&req).unwrap();
    assert_eq!(retry.result, first.result);
    assert!(retry.retried);
    assert!(!first.retried);
    assert_eq!(retry.receipt, first.receipt);
    assert_eq!(retry.event, first.event);
    assert_eq!(retry.intent_id, None, "a retry journals no new intent");
    assert_eq!(fx.file_digest(), digest);
    drop(engine);

    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 1);
    let journal = Journal::open(&fx.journal).unwrap();
    assert_eq!(journal.last_seq().unwrap(), 1);
    assert_eq!(journal.intents().unwrap().len(), 1);
}

#[test]
fn retry_after_reopen_returns_same_receipt() {
    let fx = Fixture::new();
    let (req, first) = prune_turn5_once(&fx);

    let engine = fx.engine();
    let retry = engine.prune(&req).unwrap();
    assert_eq!(retry.result, first.result);
    assert_eq!(retry.receipt, first.receipt);
    assert_eq!(
        retry.event.as_ref().map(|e| (e.id, e.seq)),
        Some((first.receipt.unwrap().receipt_id, 1))
    );
}

#[test]
fn retry_with_a_new_epochs_journal_finds_the_receipt_in_the_database() {
    let fx = Fixture::new();
    let (req, first) = prune_turn5_once(&fx);
    std::fs::remove_file(&fx.journal).unwrap();

    // A lost journal is refused, not replaced by one that numbers its events from 1 again.
    let refused = Engine::open(fx.store(0), Journal::open(&fx.journal).unwrap()).err();
    assert!(
        matches!(
            refused,
            Some(EngineError::JournalMissing { receipts: 1, .. })
        ),
        "{refused:?}"
    );
    std::fs::remove_file(&fx.journal).unwrap();

    // A new epoch numbers its events after the receipt's; the database's receipt is the
    // authority: the retry gets it back, re-announced after the epoch's start, nothing pruned
    // again.
    let (journal, started) = start_journal_epoch(&fx.store(0), &fx.journal).unwrap();
    assert_eq!((started.epoch.number, started.epoch.after_seq), (2, 1));
    let engine = Engine::open(fx.store(0), journal).unwrap();
    let retry = engine.prune(&req).unwrap();
    assert_eq!(retry.result, first.result);
    let (a, b) = (first.receipt.unwrap(), retry.receipt.unwrap());
    assert_eq!(a, b);
    let event = retry.event.unwrap();
    assert_eq!((event.id, event.seq), (a.receipt_id, 2));
    drop(engine);
    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 1);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM event WHERE type = 'message.part.removed.1'"),
        2
    );
}

#[test]
fn different_selection_is_not_a_retry() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, _) = preview(&engine, MANY_TURNS, TURN5);
    let first = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &[1]))
        .unwrap();
    let (_, after, removed) = pruned(&first.result);
    assert_eq!(removed, 1);
    // Same revision, other index: a new request against content that changed since that
    // revision (its indexes would now point elsewhere).
    let second = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &[2]))
        .unwrap();
    assert_eq!(
        second.result,
        PruneResult::Blocked {
            reason: pruning_engine::BlockedReason::Conflict
        }
    );
    // With the new revision, the tool part (now index 1) goes.
    let third = engine
        .prune(&request(MANY_TURNS, TURN5, &after, &[1]))
        .unwrap();
    assert_eq!(pruned(&third.result).2, 1);
    assert_eq!(third.event.unwrap().seq, 2);
}

#[test]
fn retry_after_restoring_a_backup_prunes_again() {
    let fx = Fixture::new();
    // The restored backup lacks a receipt whose event the journal holds.
    fx.skip_audit();
    let engine = fx.engine();
    let (rev1, idx1) = preview(&engine, MANY_TURNS, TURN1);
    engine
        .prune(&request(MANY_TURNS, TURN1, &rev1, &idx1))
        .unwrap();
    drop(engine);
    let backup = fx.dir.path().join("backup.db");
    std::fs::copy(&fx.db, &backup).unwrap();

    let engine = fx.engine();
    let (rev5, idx5) = preview(&engine, MANY_TURNS, TURN5);
    let req = request(MANY_TURNS, TURN5, &rev5, &idx5);
    let first = engine.prune(&req).unwrap();
    drop(engine);
    std::fs::copy(&backup, &fx.db).unwrap();
    assert_eq!(
        fx.rows_containing("part", "TOOL_CANARY_T05"),
        1,
        "the backup has the parts"
    );

    // The journal remembers the prune, the restored database does not: it is pruned again.
    let engine = fx.engine();
    let again = engine.prune(&req).unwrap();
    assert!(!again.retried);
    assert_eq!(again.result, first.result);
    assert_ne!(
        again.receipt.as_ref().unwrap().receipt_id,
        first.receipt.unwrap().receipt_id
    );
    assert_eq!(again.event.unwrap().seq, 3);
    drop(engine);
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 2);
}
