//! V2 (opencode2) messages: a prune rewrites only `data.content` of the `session_message` row,
//! with its receipt, in one transaction; every V2 fence refusal returns its exact status and
//! leaves the file byte-for-byte unchanged with no receipt, the intent journaled as refused.

use crate::common;

use common::assert_one_refused_intent;
use common::v2::{V2Fixture, V2_ASSISTANT, V2_SESSION};
use pruning_engine::{
    BlockedReason, Engine, Journal, PreviewRequest, PreviewResult, PruneRequest, PruneResult, Scope,
};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use serde_json::Value;

fn open_engine(fx: &V2Fixture) -> Engine<OpenCodeStore> {
    Engine::open(
        OpenCodeStore::open(&fx.db, StoreOptions::default()).unwrap(),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap()
}

fn revision(engine: &Engine<OpenCodeStore>) -> String {
    let request = PreviewRequest::new(V2_SESSION.into(), V2_ASSISTANT.into()).unwrap();
    match engine.preview(&request).unwrap() {
        PreviewResult::Preview {
            revision,
            live_mutation,
            parts,
        } => {
            assert!(live_mutation);
            assert_eq!(
                parts.iter().map(|p| p.index).collect::<Vec<_>>(),
                vec![0, 1]
            );
            revision
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn prune_rewrites_only_the_content_and_retry_returns_the_same_receipt() {
    let fx = V2Fixture::new();
    let before = fx.assistant_data();
    let engine = open_engine(&fx);
    let rev = revision(&engine);
    let request = PruneRequest::all_technical(V2_SESSION.into(), V2_ASSISTANT.into(), rev).unwrap();
    let first = engine.prune(&request).unwrap();
    let PruneResult::Pruned {
        removed_count,
        revision: after,
        ..
    } = &first.result
    else {
        panic!("{:?}", first.result)
    };
    assert_eq!(*removed_count, 2);
    let retry = engine.prune(&request).unwrap();
    assert_eq!(retry.result, first.result);
    assert_eq!(retry.receipt, first.receipt);
    let receipt = first.receipt.clone().unwrap();
    assert_eq!(
        receipt.part_ids,
        vec![
            "reasoning-0".to_string(),
            before["content"][1]["id"].as_str().unwrap().to_string()
        ]
    );
    drop(engine);

    let now = fx.assistant_data();
    assert_eq!(
        now["content"],
        serde_json::json!([{"type": "text", "id": "text-0", "text": "Retain this conclusion."}])
    );
    let strip = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("content");
        v
    };
    assert_eq!(strip(&now), strip(&before), "nothing but content changed");
    let keys_before: Vec<&String> = before.as_object().unwrap().keys().collect();
    let keys_now: Vec<&String> = now.as_object().unwrap().keys().collect();
    assert_eq!(keys_now, keys_before, "key order kept");
    let conn = fx.sql();
    let seq: i64 = conn
        .query_row(
            "SELECT seq FROM session_message WHERE id = ?1",
            [V2_ASSISTANT],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(seq, 2);
    let receipts: i64 = conn
        .query_row(
            "SELECT count(*) FROM session_prune_receipt WHERE storage = 'v2'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(receipts, 1);
    let content_revision = pruning_engine::revision::revision(now["content"].as_array().unwrap());
    assert_eq!(&content_revision, after);
}

fn assert_refused(fx: &V2Fixture, reason: BlockedReason, detail: &str) {
    assert_refused_in(fx, Scope::default(), reason, detail);
}

fn assert_refused_in(fx: &V2Fixture, scope: Scope, reason: BlockedReason, detail: &str) {
    let rev = {
        let engine = open_engine(fx);
        // Preview reads only; it needs no fence.
        let request = PreviewRequest::new(V2_SESSION.into(), V2_ASSISTANT.into()).unwrap();
        match engine.preview(&request).unwrap() {
            PreviewResult::Preview { revision, .. } => revision,
            other => panic!("{other:?}"),
        }
    };
    std::fs::remove_file(&fx.journal).unwrap();
    let before = fx.file_digest();
    let engine = open_engine(fx);
    let request = PruneRequest::all_technical(V2_SESSION.into(), V2_ASSISTANT.into(), rev)
        .unwrap()
        .within(scope);
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(outcome.result, PruneResult::Blocked { reason });
    let refusal = outcome.refusal.unwrap();
    assert!(
        refusal.detail.contains(detail),
        "{:?} should mention {detail:?}",
        refusal.detail
    );
    drop(engine);
    assert_eq!(fx.file_digest(), before, "database file changed");
    let tables: i64 = fx
        .sql()
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'session_prune_receipt'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0);
    assert_one_refused_intent(&fx.journal, reason);
}

fn refused_after(setup: &str, reason: BlockedReason, detail: &str) {
    let fx = V2Fixture::new();
    fx.exec(setup);
    assert_refused(&fx, reason, detail);
}

#[test]
fn active_run_is_maintenance_required() {
    refused_after(
        &format!("UPDATE session_v2 SET time_suspended = 5 WHERE id = '{V2_SESSION}'"),
        BlockedReason::MaintenanceRequired,
        "run holds",
    );
}

#[test]
fn compaction_is_maintenance_required() {
    refused_after(
        &format!("UPDATE session_v2 SET time_compacting = 5 WHERE id = '{V2_SESSION}'"),
        BlockedReason::MaintenanceRequired,
        "compaction",
    );
}

#[test]
fn staged_revert_is_maintenance_required() {
    refused_after(
        &format!("UPDATE session_v2 SET revert = '{{}}' WHERE id = '{V2_SESSION}'"),
        BlockedReason::MaintenanceRequired,
        "revert",
    );
}

/// The scope the request was authorized for: the session's ownership when it was previewed.
fn workspace_scope() -> Scope {
    Scope {
        directory: Some("/work".into()),
        project_id: Some("prj".into()),
        workspace_id: Some("wrk_1".into()),
    }
}

fn refused_in_scope_after(setup: &str, detail: &str) {
    let fx = V2Fixture::new();
    fx.exec(&format!(
        "UPDATE session_v2 SET workspace_id = 'wrk_1' WHERE id = '{V2_SESSION}'"
    ));
    fx.exec(setup);
    assert_refused_in(&fx, workspace_scope(), BlockedReason::NotDeletable, detail);
}

#[test]
fn moved_session_is_not_deletable() {
    refused_in_scope_after(
        &format!("UPDATE session_v2 SET directory = '/work-other' WHERE id = '{V2_SESSION}'"),
        "directory /work-other is outside /work",
    );
}

#[test]
fn changed_project_is_not_deletable() {
    refused_in_scope_after(
        &format!(
            "INSERT INTO project VALUES ('prj2', '/work', 1, 1, '[]');
             UPDATE session_v2 SET project_id = 'prj2' WHERE id = '{V2_SESSION}'"
        ),
        "project prj2, not prj",
    );
}

#[test]
fn changed_workspace_is_not_deletable() {
    refused_in_scope_after(
        &format!("UPDATE session_v2 SET workspace_id = 'wrk_2' WHERE id = '{V2_SESSION}'"),
        "workspace wrk_2, not wrk_1",
    );
}

#[test]
fn missing_session_is_not_deletable() {
    // The message row stays (no cascade with foreign keys off); its session is gone.
    refused_after(
        &format!("PRAGMA foreign_keys = OFF; DELETE FROM session_v2 WHERE id = '{V2_SESSION}'"),
        BlockedReason::NotDeletable,
        "does not exist",
    );
}

#[test]
fn a_session_inside_the_scope_is_pruned() {
    let fx = V2Fixture::new();
    fx.exec(&format!(
        "UPDATE session_v2 SET workspace_id = 'wrk_1', directory = '/work/sub' WHERE id = '{V2_SESSION}'"
    ));
    let engine = open_engine(&fx);
    let rev = revision(&engine);
    let request = PruneRequest::all_technical(V2_SESSION.into(), V2_ASSISTANT.into(), rev)
        .unwrap()
        .within(workspace_scope());
    let outcome = engine.prune(&request).unwrap();
    assert!(
        matches!(
            outcome.result,
            PruneResult::Pruned {
                removed_count: 2,
                ..
            }
        ),
        "{:?}",
        outcome
    );
}

#[test]
fn missing_event_sequence_row_is_unsupported_storage() {
    refused_after(
        "DELETE FROM event_sequence",
        BlockedReason::UnsupportedStorage,
        "no event_sequence row",
    );
}

#[test]
fn remote_owner_is_unsupported_storage() {
    refused_after(
        "UPDATE event_sequence SET owner_id = 'remote-1'",
        BlockedReason::UnsupportedStorage,
        "remote",
    );
}

#[test]
fn retained_events_are_unsupported_storage() {
    refused_after(
        &format!("INSERT INTO event VALUES ('evt_x', '{V2_SESSION}', 1, 'session.next.prompted.1', '{{}}', 0)"),
        BlockedReason::UnsupportedStorage,
        "retains 1 event",
    );
}

#[test]
fn trigger_is_unsupported_storage() {
    refused_after(
        "CREATE TRIGGER t AFTER UPDATE ON session_message BEGIN SELECT 1; END;",
        BlockedReason::UnsupportedStorage,
        "trigger",
    );
}

#[test]
fn renamed_time_suspended_column_is_unsupported_storage() {
    let fx = V2Fixture::without_claim_column();
    assert_refused(
        &fx,
        BlockedReason::UnsupportedStorage,
        "no time_suspended column",
    );
}

#[test]
fn stale_revision_is_conflict() {
    let fx = V2Fixture::new();
    let engine = open_engine(&fx);
    let rev = revision(&engine);
    drop(engine);
    fx.exec(&format!(
        "UPDATE session_message SET data = json_set(data, '$.content[0].text', 'edited') WHERE id = '{V2_ASSISTANT}'"
    ));
    let before = fx.file_digest();
    let engine = open_engine(&fx);
    let request = PruneRequest::all_technical(V2_SESSION.into(), V2_ASSISTANT.into(), rev).unwrap();
    assert_eq!(
        engine.prune(&request).unwrap().result,
        PruneResult::Blocked {
            reason: BlockedReason::Conflict
        }
    );
    drop(engine);
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn a_message_in_no_table_is_not_deletable_and_named() {
    let fx = V2Fixture::new();
    let before = fx.file_digest();
    let engine = open_engine(&fx);
    let request =
        PruneRequest::all_technical(V2_SESSION.into(), "msg_nowhere".into(), "a".repeat(64))
            .unwrap();
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
    assert_eq!(
        outcome.refusal.unwrap().detail,
        format!("session {V2_SESSION} has no V2 message msg_nowhere")
    );
    drop(engine);
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn attached_database_is_unsupported_storage() {
    let fx = V2Fixture::new();
    let rev = revision(&open_engine(&fx));
    std::fs::remove_file(&fx.journal).unwrap();
    let conn = common::connection_with_attached_database(&fx.db, fx.dir.path());
    let before = fx.file_digest();
    let engine = Engine::open(
        OpenCodeStore::from_connection(conn, StoreOptions::default()).unwrap(),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap();
    let request = PruneRequest::all_technical(V2_SESSION.into(), V2_ASSISTANT.into(), rev).unwrap();
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::UnsupportedStorage
        }
    );
    assert!(outcome.refusal.unwrap().detail.contains("attached"));
    drop(engine);
    assert_eq!(fx.file_digest(), before);
    assert_one_refused_intent(&fx.journal, BlockedReason::UnsupportedStorage);
}
