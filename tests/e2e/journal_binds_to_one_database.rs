//! The journal belongs to one database: a journal holding committed prunes refuses a database
//! with another identity or none; a journal without committed prunes adopts a new database.

use crate::common;

use common::*;
use pruning_engine::{EngineError, Journal};

#[test]
fn journal_with_history_refuses_a_database_without_identity() {
    let first = Fixture::new();
    let engine = first.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
        .unwrap();
    drop(engine);

    let other = Fixture::new();
    let digest = other.file_digest();
    let result =
        pruning_engine::Engine::open(other.store(30_000), Journal::open(&first.journal).unwrap());
    assert!(
        matches!(result, Err(EngineError::UnknownDatabase { .. })),
        "{:?}",
        result.err()
    );
    assert_eq!(other.file_digest(), digest);
    assert_eq!(
        Journal::open(&first.journal).unwrap().last_seq().unwrap(),
        1
    );
}

#[test]
fn journal_of_another_database_is_refused() {
    let first = Fixture::new();
    let second = Fixture::new();
    for fx in [&first, &second] {
        let engine = fx.engine();
        let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
        engine
            .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
            .unwrap();
    }
    let result =
        pruning_engine::Engine::open(second.store(30_000), Journal::open(&first.journal).unwrap());
    assert!(
        matches!(result, Err(EngineError::JournalMismatch { .. })),
        "{:?}",
        result.err()
    );
}

#[test]
fn journal_without_committed_prunes_adopts_the_database() {
    let fx = Fixture::new();
    let engine = fx.engine();
    // A refused prune journals an intent but writes no identity into the database.
    let refused = engine
        .prune(&request(
            KILLED_MID_TOOL,
            KILLED_MID_TOOL_MSG,
            &"0".repeat(64),
            &[1],
        ))
        .unwrap();
    assert!(refused.refusal.is_some());
    drop(engine);
    assert!(!fx.has_table("session_prune_meta"));

    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let outcome = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
        .unwrap();
    assert_eq!(pruned(&outcome.result).2, 2);
    let bound = engine.journal().bound_database().unwrap().unwrap();
    drop(engine);
    let stored: String = fx
        .sql()
        .query_row(
            "SELECT value FROM session_prune_meta WHERE key = 'database_id'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, bound);
}

#[test]
fn unresolved_intents_are_not_resolved_against_another_database() {
    let first = Fixture::new();
    // An intent journaled for the first database, whose prune never finished.
    let (intent, _, _) = journal_turn5_intent(&first);

    let other = Fixture::new();
    let result =
        pruning_engine::Engine::open(other.store(30_000), Journal::open(&first.journal).unwrap());
    assert!(
        matches!(
            result,
            Err(EngineError::UnresolvedIntents { pending: 1, .. })
        ),
        "{:?}",
        result.err()
    );
    let journal = Journal::open(&first.journal).unwrap();
    assert_eq!(
        journal.pending_intents().unwrap().len(),
        1,
        "left for its own database"
    );
    drop(journal);
    // With its own database, recovery resolves it.
    let engine = first.engine();
    assert_eq!(engine.recovery().abandoned, vec![intent.intent_id]);
}
