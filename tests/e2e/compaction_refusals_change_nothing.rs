//! Every refusal of a compaction returns its exact status, leaves the database file byte for
//! byte unchanged with no receipt, and journals the intent as refused with that reason: a
//! session OpenCode updated within the quiet period, one with a staged revert or a compaction
//! running (`maintenance_required`), an event log that moved since the revision (`conflict`),
//! nothing superseded (`not_deletable`), a V2 session, a trigger, a database that keeps no event
//! log (`unsupported_storage`).

use crate::common;

use common::*;
use pruning_engine::revision::event_log_revision;
use pruning_engine::{
    BlockedReason, Engine, IntentState, Journal, PruneRequest, PruneResult, SeqRange,
};
use pruning_opencode::{OpenCodeStore, PlannedCopy};

/// The compaction of `session` bound to its event log now.
fn compaction(fx: &Fixture, session: &str) -> PruneRequest {
    match fx.store(0).clean_compaction(session).expect("plan") {
        // The fixture's sessions are small: one range each.
        PlannedCopy::Prune(mut requests) if requests.len() == 1 => requests.remove(0),
        other => panic!("no compaction of {session}: {other:?}"),
    }
}

/// The range of every seq: a compaction request of a whole session's event log.
fn every_seq() -> SeqRange {
    SeqRange::new(i64::MIN, i64::MAX).expect("a range")
}

/// Runs `request` through an engine over `store` and checks it is refused with `reason` and
/// words holding `detail`, and that nothing but the refused intent was written.
fn assert_refused(
    fx: &Fixture,
    store: OpenCodeStore,
    request: &PruneRequest,
    reason: BlockedReason,
    detail: &str,
) {
    let digest = fx.file_digest();
    let engine = Engine::open(store, Journal::open(&fx.journal).expect("journal")).expect("engine");
    let outcome = engine.prune(request).expect("an answer");
    assert_eq!(outcome.result, PruneResult::Blocked { reason });
    let refusal = outcome.refusal.expect("refusal detail");
    assert!(
        refusal.detail.contains(detail),
        "detail {:?} should mention {detail:?}",
        refusal.detail
    );
    assert_eq!((outcome.receipt, outcome.event), (None, None));
    drop(engine);
    assert_eq!(fx.file_digest(), digest, "database file changed");
    assert!(!fx.has_table("session_prune_receipt"));
    let journal = Journal::open(&fx.journal).expect("journal");
    let intents = journal.intents().expect("intents");
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0].message_id, "");
    assert_eq!(
        intents[0].state,
        IntentState::Refused {
            reason: reason.as_str().to_string()
        }
    );
    assert_eq!(
        journal.last_seq().expect("last seq"),
        0,
        "no event journaled"
    );
}

#[test]
fn a_session_updated_within_the_quiet_period_is_maintenance_required() {
    let fx = Fixture::new();
    let request = compaction(&fx, MANY_TURNS);
    let now = now_ms();
    fx.exec(&format!(
        "UPDATE session SET time_updated = {now} WHERE id = '{MANY_TURNS}'"
    ));
    assert_refused(
        &fx,
        fx.store(30_000),
        &request,
        BlockedReason::MaintenanceRequired,
        "quiet period",
    );
}

#[test]
fn a_staged_revert_or_a_running_compaction_is_maintenance_required() {
    for setup in [
        format!(
            "UPDATE session SET revert = '{{\"messageID\":\"{TURN5}\"}}' WHERE id = '{MANY_TURNS}'"
        ),
        format!("UPDATE session SET time_compacting = 1795941000000 WHERE id = '{MANY_TURNS}'"),
    ] {
        let fx = Fixture::new();
        let request = compaction(&fx, MANY_TURNS);
        fx.exec(&setup);
        assert_refused(
            &fx,
            fx.store(0),
            &request,
            BlockedReason::MaintenanceRequired,
            "",
        );
    }
}

#[test]
fn an_event_log_that_moved_since_its_revision_is_a_conflict() {
    let fx = Fixture::new();
    let request = compaction(&fx, MANY_TURNS);
    fx.exec(&format!(
        "UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{MANY_TURNS}';
         INSERT INTO event (id, aggregate_id, seq, type, data)
           VALUES ('evt_2266ffffffff0000000000000002', '{MANY_TURNS}',
                   (SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'),
                   'message.part.removed.1',
                   '{{\"sessionID\":\"{MANY_TURNS}\",\"messageID\":\"m\",\"partID\":\"p\"}}');"
    ));
    assert_refused(
        &fx,
        fx.store(0),
        &request,
        BlockedReason::Conflict,
        "event log moved",
    );
}

#[test]
fn a_session_with_nothing_superseded_is_not_deletable() {
    let fx = Fixture::new();
    // Only the newest snapshot of each entity left, as after a compaction done by hand.
    fx.exec(&format!(
        "DELETE FROM event WHERE id IN (SELECT id FROM ({SUPERSEDED_SQL}) \
         WHERE aggregate_id = '{MANY_TURNS}')"
    ));
    // A clean plans nothing for it; a request made anyway is refused.
    assert!(matches!(
        fx.store(0).clean_compaction(MANY_TURNS).expect("plan"),
        PlannedCopy::Nothing
    ));
    let seq = fx.scalar(&format!(
        "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
    ));
    let request = PruneRequest::compaction(
        MANY_TURNS.to_string(),
        event_log_revision(MANY_TURNS, Some(seq)),
        every_seq(),
    )
    .expect("a compaction request");
    assert_refused(
        &fx,
        fx.store(0),
        &request,
        BlockedReason::NotDeletable,
        "no superseded snapshot",
    );
}

#[test]
fn a_v2_session_and_a_trigger_are_unsupported_storage() {
    let fx = Fixture::new();
    // The V2 session keeps no snapshot events: a clean has nothing to compact there (it is
    // not counted as skipped); a request made anyway is refused.
    assert!(matches!(
        fx.store(0)
            .clean_compaction(V2_SHARED_SESSION)
            .expect("plan"),
        PlannedCopy::Nothing
    ));
    let seq = fx.scalar(&format!(
        "SELECT seq FROM event_sequence WHERE aggregate_id = '{V2_SHARED_SESSION}'"
    ));
    let request = PruneRequest::compaction(
        V2_SHARED_SESSION.into(),
        event_log_revision(V2_SHARED_SESSION, Some(seq)),
        every_seq(),
    )
    .expect("request");
    assert_refused(
        &fx,
        fx.store(0),
        &request,
        BlockedReason::UnsupportedStorage,
        "a V2 session",
    );

    let fx = Fixture::new();
    let request = compaction(&fx, MANY_TURNS);
    fx.exec("CREATE TRIGGER audit_event AFTER DELETE ON event BEGIN SELECT 1; END;");
    assert_refused(
        &fx,
        fx.store(0),
        &request,
        BlockedReason::UnsupportedStorage,
        "trigger",
    );
}

#[test]
fn a_database_without_an_event_log_is_unsupported_storage() {
    let fx = common::archive::fixture_named("opencode-1.2.27");
    let session: String = fx
        .sql()
        .query_row("SELECT id FROM session LIMIT 1", [], |row| row.get(0))
        .expect("a session");
    // OpenCode 1.2 keeps no event log: the clean plans no compaction.
    assert_eq!(
        fx.store(0).clean_compaction(&session).expect("plan"),
        PlannedCopy::Nothing
    );
    let request = PruneRequest::compaction(
        session.clone(),
        event_log_revision(&session, None),
        every_seq(),
    )
    .expect("request");
    assert_refused(
        &fx,
        fx.store(0),
        &request,
        BlockedReason::UnsupportedStorage,
        "no event log",
    );
}
