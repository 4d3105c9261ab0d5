//! V2 messages (`session_message`, written by OpenCode 1.18.34's `/api/session` routes into the
//! shared `session` table) are previewed read-only (`liveMutation: false`) and a prune of one is
//! refused as `unsupported_storage` with nothing changed.

use crate::common;

use common::*;
use pruning_engine::{
    BlockedReason, IntentState, Journal, PartKind, PreviewRequest, PreviewResult, PruneResult,
};
use serde_json::Value;

/// The V2 session of the fixture and its first assistant message (reasoning, bash tool).
const V2_SESSION: &str = "ses_dd9925f43ffe2Is1MklYsLGbbU";
const V2_MESSAGE: &str = "msg_2266dabb2001y39t0IapYwvrbI";

#[test]
fn v2_assistant_message_previews_its_technical_parts_read_only() {
    let fx = Fixture::new();
    // Expected sizes straight from the stored row: OpenCode wrote it with JSON.stringify, so
    // re-serializing each content item in stored order gives the same text.
    let data: String = fx
        .sql()
        .query_row(
            "SELECT data FROM session_message WHERE id = ?1",
            [V2_MESSAGE],
            |r| r.get(0),
        )
        .unwrap();
    let row: Value = serde_json::from_str(&data).unwrap();
    let content = row["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["reasoning", "tool"]);

    let engine = fx.engine();
    let request = PreviewRequest::new(V2_SESSION.into(), V2_MESSAGE.into()).unwrap();
    match engine.preview(&request).unwrap() {
        PreviewResult::Preview {
            live_mutation,
            parts,
            revision,
        } => {
            assert!(!live_mutation);
            assert_eq!(revision.len(), 64);
            let seen: Vec<(u32, PartKind, u64)> =
                parts.iter().map(|p| (p.index, p.kind, p.bytes)).collect();
            let expected: Vec<(u32, PartKind, u64)> = vec![
                (
                    0,
                    PartKind::Reasoning,
                    serde_json::to_string(&content[0]).unwrap().len() as u64,
                ),
                (
                    1,
                    PartKind::Tool,
                    serde_json::to_string(&content[1]).unwrap().len() as u64,
                ),
            ];
            assert_eq!(seen, expected);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn v2_message_prune_is_unsupported_storage_and_changes_nothing() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, V2_SESSION, V2_MESSAGE);
    drop(engine);
    let digest = fx.file_digest();
    let engine = fx.engine();
    let outcome = engine
        .prune(&request(V2_SESSION, V2_MESSAGE, &revision, &indexes))
        .unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::UnsupportedStorage
        }
    );
    assert!(outcome
        .refusal
        .unwrap()
        .detail
        .contains("OpenCode 2 messages live in the session table OpenCode 1.17 to 1.19 share"));
    drop(engine);
    assert_eq!(fx.file_digest(), digest);
    assert!(!fx.has_table("session_prune_receipt"));
    assert_eq!(fx.rows_containing("session_message", "REASONING_CANARY"), 3);
    let intents = Journal::open(&fx.journal).unwrap().intents().unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0].state,
        IntentState::Refused {
            reason: "unsupported_storage".into()
        }
    );
}

#[test]
fn v2_user_message_is_not_deletable() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let request =
        PreviewRequest::new(V2_SESSION.into(), "msg_2266da8cc001Zv9E1JnOMflhi9".into()).unwrap();
    assert_eq!(
        engine.preview(&request).unwrap(),
        PreviewResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
}

#[test]
fn a_message_held_by_both_generations_is_the_v1_row_where_v2_is_read_only() {
    let fx = Fixture::new();
    // A V2 copy of turn 5 under the same id and session, as an upgrade could leave it.
    fx.exec(&format!(
        "INSERT INTO session_message SELECT '{TURN5}', '{MANY_TURNS}', 'assistant', 999,
           (SELECT time_created FROM message WHERE id = '{TURN5}'), 1, data
         FROM session_message WHERE id = '{V2_MESSAGE}'"
    ));
    let engine = fx.engine();
    let preview = PreviewRequest::new(MANY_TURNS.into(), TURN5.into()).unwrap();
    let PreviewResult::Preview {
        live_mutation,
        revision,
        parts,
    } = engine.preview(&preview).unwrap()
    else {
        panic!()
    };
    assert!(live_mutation, "the V1 row, which can be pruned here");
    let indexes: Vec<i64> = parts.iter().map(|p| i64::from(p.index)).collect();
    assert_eq!(indexes, vec![1, 2]);
    let outcome = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
        .unwrap();
    assert_eq!(pruned(&outcome.result).2, 2);
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
}
