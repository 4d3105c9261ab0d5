//! The planner's refusals: a stale revision is `conflict`; a text part, a kept part or an index
//! out of range is `not_deletable`; each leaves the database unchanged and journals the intent
//! as refused.

use crate::common;

use common::*;
use pruning_engine::{BlockedReason, PruneResult};

fn assert_planner_refusal(indexes: &[i64], stale: bool, reason: BlockedReason) {
    let fx = Fixture::new();
    let revision = {
        let engine = fx.engine();
        let (revision, _) = preview(&engine, MANY_TURNS, TURN5);
        revision
    };
    std::fs::remove_file(&fx.journal).unwrap();
    if stale {
        // Someone else changes the reasoning text after the preview.
        fx.exec(&format!(
            "UPDATE part SET data = json_set(data, '$.text', 'edited') \
             WHERE message_id = '{TURN5}' AND json_extract(data, '$.type') = 'reasoning'"
        ));
    }
    let digest = fx.file_digest();
    let engine = fx.engine();
    let outcome = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, indexes))
        .unwrap();
    assert_eq!(outcome.result, PruneResult::Blocked { reason });
    drop(engine);
    assert_eq!(fx.file_digest(), digest);
    assert!(!fx.has_table("session_prune_receipt"));
    assert_one_refused_intent(&fx.journal, reason);
}

#[test]
fn stale_revision_is_conflict() {
    assert_planner_refusal(&[1, 2], true, BlockedReason::Conflict);
}

#[test]
fn step_start_index_is_not_deletable() {
    assert_planner_refusal(&[0], false, BlockedReason::NotDeletable);
}

#[test]
fn index_out_of_range_is_not_deletable() {
    assert_planner_refusal(&[1, 99], false, BlockedReason::NotDeletable);
}

#[test]
fn text_part_index_is_not_deletable() {
    let fx = Fixture::new();
    // The reply message after turn 5: step-start, text, step-finish.
    let reply = "msg_2266d6f5e001sxrYdJWexqn4yd";
    let engine = fx.engine();
    let request_preview =
        pruning_engine::PreviewRequest::new(MANY_TURNS.into(), reply.into()).unwrap();
    let revision = match engine.preview(&request_preview).unwrap() {
        pruning_engine::PreviewResult::Preview {
            revision, parts, ..
        } => {
            assert!(parts.is_empty(), "a text-only reply has no technical parts");
            revision
        }
        other => panic!("{other:?}"),
    };
    let digest = fx.file_digest();
    for indexes in [&[1][..], &[0, 1, 2][..]] {
        let outcome = engine
            .prune(&request(MANY_TURNS, reply, &revision, indexes))
            .unwrap();
        assert_eq!(
            outcome.result,
            PruneResult::Blocked {
                reason: BlockedReason::NotDeletable
            }
        );
    }
    let all =
        pruning_engine::PruneRequest::all_technical(MANY_TURNS.into(), reply.into(), revision)
            .unwrap();
    assert_eq!(
        engine.prune(&all).unwrap().result,
        PruneResult::Blocked {
            reason: BlockedReason::NotDeletable
        },
        "nothing technical to remove"
    );
    drop(engine);
    assert_eq!(fx.file_digest(), digest);
}

#[test]
fn user_message_is_not_deletable() {
    let fx = Fixture::new();
    let user = "msg_2266d5120001c5YmHxOVLsq9WI";
    let engine = fx.engine();
    let request_preview =
        pruning_engine::PreviewRequest::new(MANY_TURNS.into(), user.into()).unwrap();
    assert_eq!(
        engine.preview(&request_preview).unwrap(),
        pruning_engine::PreviewResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
}

#[test]
fn unknown_part_type_makes_the_message_not_deletable() {
    let fx = Fixture::new();
    fx.exec(&format!(
        "UPDATE part SET data = json_set(data, '$.type', 'future') \
         WHERE message_id = '{TURN5}' AND json_extract(data, '$.type') = 'step-start'"
    ));
    let engine = fx.engine();
    let request_preview =
        pruning_engine::PreviewRequest::new(MANY_TURNS.into(), TURN5.into()).unwrap();
    assert_eq!(
        engine.preview(&request_preview).unwrap(),
        pruning_engine::PreviewResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
}
