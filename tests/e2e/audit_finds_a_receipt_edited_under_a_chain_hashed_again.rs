//! A receipt edited by someone who also hashes the receipt chain again (the algorithm is
//! documented) is still found: a receipt whose ids no longer agree with its counts contradicts
//! itself (`receipt_inconsistent`), and one whose edit keeps it consistent no longer has the
//! digest the journal kept beside its event (`journal_mismatch`), each naming the receipt. A
//! journal that kept no digest (an earlier build's) is not a discrepancy.

use crate::common;

use common::audit::{audit, cleaned, details, hash_chain_again, kinds, Found};
use common::cli::{assert_exit, json};
use common::Fixture;
use serde_json::Value;

/// The first receipt (by chain place) that removed at least two parts: its id and part ids.
fn receipt_of_two_parts(fx: &Fixture) -> (String, Vec<String>) {
    let (id, parts): (String, String) = fx
        .sql()
        .query_row(
            "SELECT id, part_ids FROM session_prune_receipt WHERE removed_count >= 2 \
             ORDER BY chain_seq LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("a receipt of two parts");
    (id, serde_json::from_str(&parts).expect("part ids"))
}

/// The JSON report of a failing audit (exit 1).
fn failing_audit(fx: &Fixture) -> Value {
    let out = audit(fx, &[]);
    assert_exit(&out, 1);
    json(&out)
}

fn one(kind: &str, receipt: &str) -> Vec<Found> {
    vec![(kind.into(), Some(receipt.into()), None, None)]
}

#[test]
fn a_part_id_dropped_and_its_part_put_back_under_a_chain_hashed_again_is_found() {
    let pristine = Fixture::new();
    let fx = cleaned();
    fx.skip_audit();
    let (id, parts) = receipt_of_two_parts(&fx);
    let dropped = parts.last().expect("a part").clone();
    // The part goes back into `part`; the receipt forgets it; the chain is hashed again.
    let conn = fx.sql();
    conn.execute(
        "ATTACH DATABASE ?1 AS pristine",
        [pristine.db.to_str().expect("path")],
    )
    .unwrap();
    let copied = conn
        .execute(
            "INSERT INTO main.part SELECT * FROM pristine.part WHERE id = ?1",
            [&dropped],
        )
        .unwrap();
    assert_eq!(copied, 1);
    conn.execute(
        "UPDATE session_prune_receipt SET part_ids = json_remove(part_ids, '$[#-1]') \
         WHERE id = ?1",
        [&id],
    )
    .unwrap();
    drop(conn);
    hash_chain_again(&fx);

    let report = failing_audit(&fx);
    assert_eq!(kinds(&report), one("receipt_inconsistent", &id));
    let message: String = fx
        .sql()
        .query_row(
            "SELECT message_id FROM session_prune_receipt WHERE id = ?1",
            [&id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(
        details(&report),
        vec![format!(
            "receipt {id} (message {message}) contradicts itself: it names {} part id(s) for {} \
             index(es)",
            parts.len() - 1,
            parts.len()
        )]
    );
}

#[test]
fn a_consistent_edit_under_a_chain_hashed_again_differs_from_the_journals_digest() {
    let fx = cleaned();
    fx.skip_audit();
    let (id, _) = receipt_of_two_parts(&fx);
    // Another part id in place of the first: the receipt still agrees with itself, and with
    // every field the journal's intent and event keep.
    fx.exec(&format!(
        "UPDATE session_prune_receipt SET part_ids = json_set(part_ids, '$[0]', 'prt_forged') \
         WHERE id = '{id}'"
    ));
    hash_chain_again(&fx);
    let report = failing_audit(&fx);
    assert_eq!(kinds(&report), one("journal_mismatch", &id));
    assert!(
        details(&report)[0].contains(&format!(
            "receipt {id} (message {}) is not the receipt the journal recorded when it committed: \
             its digest differs",
            fx.sql()
                .query_row(
                    "SELECT message_id FROM session_prune_receipt WHERE id = ?1",
                    [&id],
                    |row| row.get::<_, String>(0)
                )
                .unwrap()
        )),
        "{report}"
    );
    // The bytes alone, the same.
    let fx = cleaned();
    fx.skip_audit();
    let (id, _) = receipt_of_two_parts(&fx);
    fx.exec(&format!(
        "UPDATE session_prune_receipt SET bytes_removed = bytes_removed + 1 WHERE id = '{id}'"
    ));
    hash_chain_again(&fx);
    assert_eq!(kinds(&failing_audit(&fx)), one("journal_mismatch", &id));
}

#[test]
fn the_chain_hashed_again_over_unchanged_rows_holds() {
    // The helper hashes exactly as the engine does: over untouched rows nothing changes.
    let fx = cleaned();
    let (before, head): (Vec<String>, String) = {
        let conn = fx.sql();
        let mut hashes = conn
            .prepare("SELECT chain_hash FROM session_prune_receipt ORDER BY chain_seq")
            .unwrap();
        let hashes = hashes
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let head = conn
            .query_row(
                "SELECT value FROM session_prune_meta WHERE key = 'receipt_chain_head'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        (hashes, head)
    };
    hash_chain_again(&fx);
    let conn = fx.sql();
    let mut hashes = conn
        .prepare("SELECT chain_hash FROM session_prune_receipt ORDER BY chain_seq")
        .unwrap();
    let after: Vec<String> = hashes
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(after, before);
    let now: String = conn
        .query_row(
            "SELECT value FROM session_prune_meta WHERE key = 'receipt_chain_head'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&now).unwrap(),
        serde_json::from_str::<Value>(&head).unwrap()
    );
}
