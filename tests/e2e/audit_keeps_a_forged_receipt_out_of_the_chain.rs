//! A receipt row inserted behind the engine's back stays outside the receipt chain, whatever was
//! done to the chain's head meanwhile: the engine's next prune chains its own receipt only
//! (after the newest chained one where the head is gone or unreadable), so the audit still
//! reports the forged row after it (docs/ARCHITECTURE.md, "Audit").

use crate::common;

use common::audit::{audit, clean_parts, details, kinds, receipt_at, CLEANED};
use common::cli::{assert_exit, json};
use common::*;

/// The id of the forged receipt.
const FORGED: &str = "01a22fcd-0000-7000-8000-000000000000";

/// Receipts `clean MANY_TURNS --apply --no-compact` writes on the fixture.
const MANY_TURNS_RECEIPTS: i64 = 8;

/// The fixture with the "many turns" session cleaned: a chain of 8 receipts.
fn many_turns_cleaned() -> Fixture {
    let fx = Fixture::new();
    let out = clean_parts(&fx.db, MANY_TURNS);
    assert_exit(&out, 0);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE chain_seq IS NOT NULL"),
        MANY_TURNS_RECEIPTS
    );
    fx
}

/// Cleans every other session: the engine's next receipts.
fn clean_the_rest(fx: &Fixture) {
    let out = clean_parts(&fx.db, "--all");
    assert_exit(&out, 0);
    assert_eq!(json(&out)["pruned"], CLEANED - MANY_TURNS_RECEIPTS as u64);
}

#[test]
fn a_receipt_inserted_while_the_chain_head_is_gone_stays_outside_the_chain() {
    let head_edits = [
        "DELETE FROM session_prune_meta WHERE key = 'receipt_chain_head'",
        "UPDATE session_prune_meta SET value = 'garbage' WHERE key = 'receipt_chain_head'",
        "UPDATE session_prune_meta SET value = x'00' WHERE key = 'receipt_chain_head'",
    ];
    for head_edit in head_edits {
        let fx = many_turns_cleaned();
        fx.skip_audit();
        let copied = receipt_at(&fx, 2);
        fx.exec(&format!(
            "INSERT INTO session_prune_receipt (id, request_key, intent_id, session_id, message_id, storage,
               revision_before, revision_after, indexes, part_ids, removed_count, bytes_removed,
               time_committed, engine_version)
             SELECT '{FORGED}', 'forged', intent_id, session_id, message_id, storage, revision_before,
               revision_after, indexes, part_ids, removed_count, bytes_removed, time_committed,
               engine_version FROM session_prune_receipt WHERE chain_seq = 2;
             {head_edit};"
        ));
        clean_the_rest(&fx);
        let out = audit(&fx, &[]);
        assert_exit(&out, 1);
        let report = json(&out);
        // The forged receipt names a committed intent whose event announces another receipt.
        assert_eq!(
            kinds(&report),
            vec![
                ("receipt_unchained".into(), Some(FORGED.into()), None, None),
                ("event_missing".into(), Some(FORGED.into()), Some(2), None),
            ],
            "{head_edit}"
        );
        assert_eq!(
            details(&report),
            vec![
                format!("receipt {FORGED} has no place in the receipt chain: it was inserted, or its chain columns cleared, behind the engine's back"),
                format!("receipt {FORGED}'s event 2 in the journal announces receipt {copied} instead"),
            ],
            "{head_edit}"
        );
        // The engine's receipts, and only they, hold the places 1 to 11.
        assert_eq!(report["chain"]["length"], CLEANED, "{head_edit}");
        assert_eq!(report["receipts"], CLEANED + 1, "{head_edit}");
        assert_eq!(
            fx.scalar(&format!(
                "SELECT count(*) FROM session_prune_receipt WHERE id = '{FORGED}' AND chain_seq IS NULL"
            )),
            1,
            "{head_edit}"
        );
    }
}

#[test]
fn a_chain_whose_head_was_deleted_continues_after_its_newest_receipt() {
    let fx = many_turns_cleaned();
    fx.exec("DELETE FROM session_prune_meta WHERE key = 'receipt_chain_head'");
    let out = audit(&fx, &[]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(
        kinds(&report),
        vec![("receipt_missing".into(), None, None, None)]
    );
    assert_eq!(
        details(&report),
        vec![format!("the receipt chain's head is gone from session_prune_meta (receipt_chain_head key), though {MANY_TURNS_RECEIPTS} receipt(s) are chained")]
    );
    // Nothing was deleted but the head: the next receipts take the next places, and a new head.
    clean_the_rest(&fx);
    let out = audit(&fx, &[]);
    assert_exit(&out, 0);
    assert_eq!(json(&out)["chain"]["length"], CLEANED);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE chain_seq = rowid"),
        CLEANED as i64
    );
}
