//! V2 prunes at scale and next to other rows: 5,000 reasoning parts go in one prune; a message
//! over 16 MiB is refused untouched; a fork and a compaction message keep their rows byte for
//! byte; and a run's claim (`time_suspended`) racing a prune either lands first, and the prune is
//! refused, or waits for it and then reads the pruned content.

use crate::common;

use common::v2::{V2Fixture, V2_ASSISTANT, V2_SESSION};
use pruning_engine::{
    BlockedReason, Engine, Journal, PreviewRequest, PreviewResult, PruneRequest, PruneResult,
};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use serde_json::{json, Value};

fn open_engine(fx: &V2Fixture) -> Engine<OpenCodeStore> {
    Engine::open(
        OpenCodeStore::open(&fx.db, StoreOptions::default()).unwrap(),
        Journal::open(&fx.journal).unwrap(),
    )
    .unwrap()
}

fn preview(engine: &Engine<OpenCodeStore>, message: &str) -> PreviewResult {
    engine
        .preview(&PreviewRequest::new(V2_SESSION.into(), message.into()).unwrap())
        .unwrap()
}

fn prune_all(engine: &Engine<OpenCodeStore>, message: &str, revision: String) -> PruneResult {
    let request = PruneRequest::all_technical(V2_SESSION.into(), message.into(), revision).unwrap();
    engine.prune(&request).unwrap().result
}

fn assistant(content: Vec<Value>) -> String {
    json!({"time": {"created": 5, "completed": 6}, "agent": "build",
           "model": {"id": "fixture", "providerID": "fixture"}, "content": content, "finish": "stop"})
    .to_string()
}

#[test]
fn five_thousand_reasoning_parts_and_one_text_prune_in_one_go() {
    let fx = V2Fixture::new();
    let mut content: Vec<Value> = (0..5000)
        .map(|i| json!({"type": "reasoning", "id": format!("reasoning-{i}"), "text": format!("thought {i}")}))
        .collect();
    content.push(json!({"type": "text", "id": "text-0", "text": "answer"}));
    fx.insert_message(
        V2_SESSION,
        "msg_v2_big",
        "assistant",
        9,
        &assistant(content),
    );
    let engine = open_engine(&fx);
    let PreviewResult::Preview {
        revision, parts, ..
    } = preview(&engine, "msg_v2_big")
    else {
        panic!("preview")
    };
    assert_eq!(parts.len(), 5000);
    match prune_all(&engine, "msg_v2_big", revision) {
        PruneResult::Pruned { removed_count, .. } => assert_eq!(removed_count, 5000),
        other => panic!("{other:?}"),
    }
    drop(engine);
    let data: Value = serde_json::from_str(&fx.row("msg_v2_big")).unwrap();
    assert_eq!(
        data["content"],
        json!([{"type": "text", "id": "text-0", "text": "answer"}])
    );
}

#[test]
fn message_over_16_mib_is_refused_and_left_alone() {
    let fx = V2Fixture::new();
    let big = "x".repeat(16 * 1024 * 1024);
    let content = vec![
        json!({"type": "reasoning", "id": "reasoning-0", "text": big}),
        json!({"type": "text", "id": "t", "text": "a"}),
    ];
    fx.insert_message(
        V2_SESSION,
        "msg_v2_huge",
        "assistant",
        9,
        &assistant(content),
    );
    let rows = fx.rows();
    let engine = open_engine(&fx);
    assert_eq!(
        preview(&engine, "msg_v2_huge"),
        PreviewResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
    assert_eq!(
        prune_all(&engine, "msg_v2_huge", "0".repeat(64)),
        PruneResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
    drop(engine);
    assert_eq!(fx.rows(), rows);
}

#[test]
fn fork_and_compaction_rows_are_untouched_by_a_prune_of_the_parent() {
    let fx = V2Fixture::new();
    let original = fx.row(V2_ASSISTANT);
    fx.add_session("ses_v2_fork_000000000000000001");
    fx.insert_message(
        "ses_v2_fork_000000000000000001",
        "msg_v2_fork_copy",
        "assistant",
        2,
        &original,
    );
    fx.insert_message(
        V2_SESSION,
        "msg_v2_compaction",
        "compaction",
        3,
        r#"{"time":{"created":7},"reason":"auto","summary":"SUMMARY","recent":[]}"#,
    );
    let before: Vec<(String, String)> = fx
        .rows()
        .into_iter()
        .filter(|(id, _)| id != V2_ASSISTANT)
        .collect();
    let engine = open_engine(&fx);
    let PreviewResult::Preview { revision, .. } = preview(&engine, V2_ASSISTANT) else {
        panic!()
    };
    assert!(matches!(
        prune_all(&engine, V2_ASSISTANT, revision),
        PruneResult::Pruned { .. }
    ));
    drop(engine);
    let after: Vec<(String, String)> = fx
        .rows()
        .into_iter()
        .filter(|(id, _)| id != V2_ASSISTANT)
        .collect();
    assert_eq!(after, before);
    assert!(after
        .iter()
        .any(|(id, data)| id == "msg_v2_fork_copy" && data == &original));
}

/// A run claims the session (as OpenCode's `claim` does) from another connection that waits on
/// the lock, then reads the message it would send to the model.
fn claim_and_read(db: std::path::PathBuf) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn.execute(
        "UPDATE session_v2 SET time_suspended = 1 WHERE id = ?1 AND time_suspended IS NULL",
        [V2_SESSION],
    )
    .unwrap();
    let data: String = conn
        .query_row(
            "SELECT data FROM session_message WHERE id = ?1",
            [V2_ASSISTANT],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute_batch("COMMIT").unwrap();
    data
}

#[test]
fn a_racing_claim_either_blocks_the_prune_or_sees_its_result() {
    for delay_us in [0u64, 200, 1000, 3000] {
        let fx = V2Fixture::new();
        let original = fx.row(V2_ASSISTANT);
        let engine = open_engine(&fx);
        let PreviewResult::Preview { revision, .. } = preview(&engine, V2_ASSISTANT) else {
            panic!()
        };
        let db = fx.db.clone();
        let claimer = std::thread::spawn(move || claim_and_read(db));
        std::thread::sleep(std::time::Duration::from_micros(delay_us));
        let result = prune_all(&engine, V2_ASSISTANT, revision);
        let seen = claimer.join().unwrap();
        match result {
            PruneResult::Pruned { .. } => {
                let seen: Value = serde_json::from_str(&seen).unwrap();
                assert_eq!(
                    seen["content"].as_array().unwrap().len(),
                    1,
                    "the run read pruned content"
                );
            }
            PruneResult::Blocked {
                reason: BlockedReason::MaintenanceRequired,
            } => {
                assert_eq!(
                    seen, original,
                    "the claim came first and the prune changed nothing"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
