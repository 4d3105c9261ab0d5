//! A message of 5,000 reasoning parts plus one text part prunes in one transaction: one receipt,
//! 5,000 removal events with consecutive seqs; and a failure at the receipt insert, the last
//! statement of the transaction, rolls back every part delete.

use crate::common;

use common::*;
use pruning_engine::{BlockedReason, PruneRequest, PruneResult};

const BIG: &str = "msg_zz_big_message_000000000000";

/// Adds an assistant message with `n` reasoning parts and one text part to the many-turns session.
fn add_big_message(fx: &Fixture, n: usize) {
    let mut conn = fx.sql();
    let tx = conn.transaction().unwrap();
    let created: i64 = tx
        .query_row(
            &format!("SELECT max(time_created) + 1 FROM message WHERE session_id = '{MANY_TURNS}'"),
            [],
            |r| r.get(0),
        )
        .unwrap();
    let data = format!(
        r#"{{"role":"assistant","time":{{"created":{created},"completed":{}}},"parentID":"x","modelID":"fixture","providerID":"fixture","finish":"stop"}}"#,
        created + 5
    );
    tx.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
        rusqlite::params![BIG, MANY_TURNS, created, data],
    )
    .unwrap();
    for i in 0..=n {
        let (id, data) = if i == n {
            (
                format!("prt_big_{i:06}"),
                r#"{"type":"text","text":"kept answer"}"#.to_string(),
            )
        } else {
            (
                format!("prt_big_{i:06}"),
                format!(
                    r#"{{"type":"reasoning","text":"thought {i} BIG_CANARY","time":{{"start":1,"end":2}}}}"#
                ),
            )
        };
        tx.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            rusqlite::params![id, BIG, MANY_TURNS, created, data],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn five_thousand_reasoning_parts_prune_in_one_transaction() {
    let fx = Fixture::new();
    add_big_message(&fx, 5000);
    let seq_before = fx.scalar(&format!(
        "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
    ));
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, BIG);
    assert_eq!(indexes.len(), 5000);
    let outcome = engine
        .prune(&request(MANY_TURNS, BIG, &revision, &indexes))
        .unwrap();
    assert_eq!(pruned(&outcome.result).2, 5000);
    drop(engine);

    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM part WHERE message_id = '{BIG}'"
        )),
        1
    );
    assert_eq!(fx.rows_containing("part", "BIG_CANARY"), 0);
    assert_eq!(fx.rows_containing("part", "kept answer"), 1);
    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 1);
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM event WHERE aggregate_id = '{MANY_TURNS}' \
             AND type = 'message.part.removed.1' AND seq > {seq_before} AND seq <= {}",
            seq_before + 5000
        )),
        5000
    );
    assert_eq!(
        fx.scalar(&format!(
            "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
        )),
        seq_before + 5000
    );
}

#[test]
fn failed_receipt_insert_rolls_back_every_part_delete() {
    let fx = Fixture::new();
    add_big_message(&fx, 300);
    // A receipt table that accepts no row: the insert fails after all deletes ran.
    fx.receipt_table_accepting("removed_count < 0");
    let digest = fx.file_digest();
    let engine = fx.engine();
    let request = PruneRequest::all_technical(
        MANY_TURNS.into(),
        BIG.into(),
        preview(&engine, MANY_TURNS, BIG).0,
    )
    .unwrap();
    let outcome = engine.prune(&request).unwrap();
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
        .contains("the prune would break the database's rule on"));
    drop(engine);
    assert_eq!(fx.file_digest(), digest);
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM part WHERE message_id = '{BIG}'"
        )),
        301
    );
}
