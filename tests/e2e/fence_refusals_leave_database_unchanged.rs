//! Every refusal of the V1 fence returns its exact status, leaves the database file
//! byte-for-byte unchanged with no receipt, and journals the intent as refused with that reason.

use crate::common;

use common::*;
use pruning_engine::{BlockedReason, IntentState, Journal, PruneRequest, PruneResult, Scope};
use pruning_opencode::{OpenCodeStore, StoreOptions};

/// Runs one refused prune on a prepared fixture and checks everything that must not change.
fn assert_refused(
    fx: &Fixture,
    store: OpenCodeStore,
    session: &str,
    message: &str,
    revision: &str,
    reason: BlockedReason,
    detail: &str,
) {
    let request = request(session, message, revision, &[1, 2]);
    assert_request_refused(fx, store, &request, reason, detail);
}

/// [`assert_refused`] for a prepared request.
fn assert_request_refused(
    fx: &Fixture,
    store: OpenCodeStore,
    request: &PruneRequest,
    reason: BlockedReason,
    detail: &str,
) {
    let session = request.session_id.as_str();
    let digest = fx.file_digest();
    let engine = fx.engine_with(store);
    let outcome = engine.prune(request).unwrap();
    assert_eq!(outcome.result, PruneResult::Blocked { reason });
    let refusal = outcome.refusal.expect("refusal detail");
    assert!(
        refusal.detail.contains(detail),
        "detail {:?} should mention {detail:?}",
        refusal.detail
    );
    assert_eq!(outcome.receipt, None);
    assert_eq!(outcome.event, None);
    drop(engine);

    assert_eq!(fx.file_digest(), digest, "database file changed");
    assert!(!fx.has_table("session_prune_receipt"));
    assert!(!fx.has_table("session_prune_meta"));
    let journal = Journal::open(&fx.journal).unwrap();
    let intents = journal.intents().unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0].session_id, session);
    assert_eq!(
        intents[0].state,
        IntentState::Refused {
            reason: reason.as_str().to_string()
        }
    );
    assert_eq!(journal.last_seq().unwrap(), 0, "no event journaled");
}

/// The turn-5 revision of the many-turns session (the fence runs before the revision compare).
fn turn5_revision(fx: &Fixture) -> String {
    let store = fx.store(0);
    let request = pruning_engine::PreviewRequest::new(MANY_TURNS.into(), TURN5.into()).unwrap();
    match pruning_engine::preview(&store, &request).unwrap().result {
        pruning_engine::PreviewResult::Preview { revision, .. } => revision,
        other => panic!("{other:?}"),
    }
}

fn refused_after(setup: &str, reason: BlockedReason, detail: &str) {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    fx.exec(setup);
    let store = fx.store(30_000);
    assert_refused(&fx, store, MANY_TURNS, TURN5, &revision, reason, detail);
}

/// A refused prune of `message` in `session` on an untouched fixture (the fence runs before the
/// revision is compared, so any well-formed revision will do), by a store that never counts a
/// run as abandoned (`--abandoned-after never`).
fn refused_as_is(session: &str, message: &str, reason: BlockedReason, detail: &str) {
    let fx = Fixture::new();
    let store = OpenCodeStore::open(
        &fx.db,
        StoreOptions {
            abandoned_after: None,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    assert_refused(
        &fx,
        store,
        session,
        message,
        &"0".repeat(64),
        reason,
        detail,
    );
}

/// With `--abandoned-after never`, a session OpenCode left with an incomplete message stays
/// refused however long it has been idle (abandoned runs: `abandoned_runs_unblock_their_sessions`).
#[test]
fn incomplete_assistant_message_is_maintenance_required() {
    refused_as_is(
        KILLED_MID_STREAM,
        KILLED_MID_STREAM_MSG,
        BlockedReason::MaintenanceRequired,
        "not complete",
    );
}

#[test]
fn killed_mid_tool_session_is_maintenance_required() {
    refused_as_is(
        KILLED_MID_TOOL,
        KILLED_MID_TOOL_MSG,
        BlockedReason::MaintenanceRequired,
        "not complete",
    );
}

#[test]
fn running_tool_is_maintenance_required() {
    refused_after(
        &format!(
            "UPDATE part SET data = json_set(data, '$.state.status', 'running'), \
               time_updated = CAST(unixepoch('subsec') * 1000 AS INTEGER) \
             WHERE message_id = '{TURN1}' AND json_extract(data, '$.type') = 'tool'"
        ),
        BlockedReason::MaintenanceRequired,
        "pending or running",
    );
}

#[test]
fn compaction_in_progress_is_maintenance_required() {
    refused_after(
        &format!("UPDATE session SET time_compacting = 1 WHERE id = '{MANY_TURNS}'"),
        BlockedReason::MaintenanceRequired,
        "compaction",
    );
}

#[test]
fn staged_revert_is_maintenance_required() {
    refused_after(
        &format!(
            "UPDATE session SET revert = '{{\"messageID\":\"{TURN5}\"}}' WHERE id = '{MANY_TURNS}'"
        ),
        BlockedReason::MaintenanceRequired,
        "staged revert",
    );
}

#[test]
fn session_updated_within_quiet_period_is_maintenance_required() {
    refused_after(
        &format!(
            "UPDATE session SET time_updated = {} WHERE id = '{MANY_TURNS}'",
            now_ms()
        ),
        BlockedReason::MaintenanceRequired,
        "quiet period",
    );
}

#[test]
fn remote_event_owner_is_unsupported_storage() {
    refused_after(
        &format!(
            "UPDATE event_sequence SET owner_id = 'remote-1' WHERE aggregate_id = '{MANY_TURNS}'"
        ),
        BlockedReason::UnsupportedStorage,
        "remote",
    );
}

#[test]
fn trigger_present_is_unsupported_storage() {
    refused_after(
        "CREATE TRIGGER audit_part AFTER DELETE ON part BEGIN SELECT 1; END;",
        BlockedReason::UnsupportedStorage,
        "trigger",
    );
}

#[test]
fn attached_database_is_unsupported_storage() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    let conn = common::connection_with_attached_database(&fx.db, fx.dir.path());
    let store = OpenCodeStore::from_connection(conn, StoreOptions::default()).unwrap();
    assert_refused(
        &fx,
        store,
        MANY_TURNS,
        TURN5,
        &revision,
        BlockedReason::UnsupportedStorage,
        "attached",
    );
}

#[test]
fn missing_session_is_not_deletable() {
    refused_as_is(
        "ses_does_not_exist",
        TURN5,
        BlockedReason::NotDeletable,
        "does not exist",
    );
}

#[test]
fn swapped_ids_are_not_deletable_and_named_as_swapped() {
    refused_as_is(
        TURN5,
        MANY_TURNS,
        BlockedReason::NotDeletable,
        &format!(
            "session {TURN5} does not exist: that looks like a message id (the session id, ses_..., comes first)"
        ),
    );
}

#[test]
fn event_table_without_event_sequence_is_unsupported_storage() {
    refused_after(
        "DROP TABLE event_sequence",
        BlockedReason::UnsupportedStorage,
        "an event table but no event_sequence table",
    );
}

/// The scope the fixture's sessions were created in: their directory and project.
fn fixture_scope(fx: &Fixture) -> Scope {
    let conn = fx.sql();
    let (directory, project): (String, String) = conn
        .query_row(
            "SELECT directory, project_id FROM session WHERE id = ?1",
            [MANY_TURNS],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    Scope {
        directory: Some(directory),
        project_id: Some(project),
        workspace_id: None,
    }
}

/// The fixture with the many-turns session in workspace `wrk_1`, the scope it was authorized
/// in, and the turn-5 revision.
fn fixture_in_workspace() -> (Fixture, Scope, String) {
    let fx = Fixture::new();
    fx.exec(&format!(
        "UPDATE session SET workspace_id = 'wrk_1' WHERE id = '{MANY_TURNS}'"
    ));
    let revision = turn5_revision(&fx);
    let scope = Scope {
        workspace_id: Some("wrk_1".into()),
        ..fixture_scope(&fx)
    };
    (fx, scope, revision)
}

fn refused_in_scope_after(setup: &str, detail: &str) {
    let (fx, scope, revision) = fixture_in_workspace();
    fx.exec(setup);
    let request = request(MANY_TURNS, TURN5, &revision, &[1, 2]).within(scope);
    assert_request_refused(
        &fx,
        fx.store(30_000),
        &request,
        BlockedReason::NotDeletable,
        detail,
    );
}

#[test]
fn moved_session_is_not_deletable() {
    refused_in_scope_after(
        &format!("UPDATE session SET directory = '/elsewhere' WHERE id = '{MANY_TURNS}'"),
        "directory /elsewhere is outside",
    );
}

#[test]
fn changed_project_is_not_deletable() {
    refused_in_scope_after(
        &format!(
            "INSERT INTO project (id, worktree, time_created, time_updated, sandboxes)
               VALUES ('prj_other', '/', 1, 1, '[]');
             UPDATE session SET project_id = 'prj_other' WHERE id = '{MANY_TURNS}'"
        ),
        "project prj_other",
    );
}

#[test]
fn changed_workspace_is_not_deletable() {
    refused_in_scope_after(
        &format!("UPDATE session SET workspace_id = 'wrk_2' WHERE id = '{MANY_TURNS}'"),
        "workspace wrk_2, not wrk_1",
    );
}

#[test]
fn a_session_still_in_its_scope_is_pruned() {
    let (fx, scope, revision) = fixture_in_workspace();
    let engine = fx.engine_with(fx.store(30_000));
    let outcome = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &[1, 2]).within(scope))
        .unwrap();
    assert_eq!(pruned(&outcome.result).2, 2);
}

#[test]
fn a_damaged_message_row_in_the_session_is_unsupported_storage() {
    refused_after(
        &format!("UPDATE message SET data = '{{not json' WHERE id = '{TURN1}'"),
        BlockedReason::UnsupportedStorage,
        "not valid JSON",
    );
}

#[test]
fn event_sequence_behind_the_sessions_events_is_unsupported_storage() {
    refused_after(
        &format!("UPDATE event_sequence SET seq = seq - 5 WHERE aggregate_id = '{MANY_TURNS}'"),
        BlockedReason::UnsupportedStorage,
        "event_sequence.seq is 286, behind its newest event (seq 291)",
    );
}

#[test]
fn missing_event_sequence_row_of_a_session_with_events_is_unsupported_storage() {
    refused_after(
        // Without the foreign key's cascade, which would delete the events too.
        &format!(
            "PRAGMA foreign_keys = OFF; DELETE FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
        ),
        BlockedReason::UnsupportedStorage,
        "it has events up to seq 291 but no event_sequence row",
    );
}

#[test]
fn event_sequence_seq_that_is_not_a_number_is_unsupported_storage() {
    refused_after(
        &format!("UPDATE event_sequence SET seq = 'x' WHERE aggregate_id = '{MANY_TURNS}'"),
        BlockedReason::UnsupportedStorage,
        "its event_sequence.seq is not a number",
    );
}

#[test]
fn event_table_without_the_columns_opencode_writes_is_unsupported_storage() {
    refused_after(
        "ALTER TABLE event_sequence RENAME COLUMN seq TO last",
        BlockedReason::UnsupportedStorage,
        "the event tables lack column(s) event_sequence.seq",
    );
}

#[test]
fn a_session_time_that_is_not_a_number_is_unsupported_storage() {
    refused_after(
        &format!("UPDATE session SET time_updated = 'yesterday' WHERE id = '{MANY_TURNS}'"),
        BlockedReason::UnsupportedStorage,
        "the session's time_updated is not a number",
    );
}
