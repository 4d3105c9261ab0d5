//! The journal is the receipts' second witness: `session-prune audit` compares each receipt with
//! its intent (request key, session, message, revision before, the indexes it named) and with
//! every event that announces it (session, message, revision after, count, time, and for the
//! intent's own event the intent), and reports any difference as `journal_mismatch`; a retry
//! that announced a receipt again after retention removed its first event holds
//! (docs/ARCHITECTURE.md, "Audit").

use crate::common;

use common::audit::{audit, cleaned, details, edit_event, edit_intent, kinds, receipt_at};
use common::cli::{assert_exit, json};
use common::*;
use pruning_engine::Journal;

/// `(id, intent id, session, message, revision before, revision after, removed count)` of the
/// receipt at `chain_seq`.
fn receipt_fields(
    fx: &Fixture,
    chain_seq: i64,
) -> (String, String, String, String, String, String, i64) {
    fx.sql()
        .query_row(
            "SELECT id, intent_id, session_id, message_id, revision_before, revision_after,
               removed_count FROM session_prune_receipt WHERE chain_seq = ?1",
            [chain_seq],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                ))
            },
        )
        .expect("receipt")
}

#[test]
fn an_intent_edited_in_the_journal_disagrees_with_its_receipt() {
    let fx = cleaned();
    fx.skip_audit();
    let (id, intent, _, message, before, _, _) = receipt_fields(&fx, 4);
    let forged_revision = "0".repeat(64);
    edit_intent(&fx.journal, intent.parse().expect("uuid"), |intent| {
        intent.message_id = "msg_edited".into();
        intent.revision = forged_revision.clone();
    });
    let out = audit(&fx, &[]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(
        kinds(&report),
        vec![("journal_mismatch".into(), Some(id.clone()), None, None)]
    );
    assert_eq!(
        details(&report),
        vec![format!(
            "receipt {id}'s intent {intent} in the journal says otherwise: messageID: journal msg_edited, receipt {message}; revisionBefore: journal {forged_revision}, receipt {before}"
        )]
    );
}

#[test]
fn an_event_edited_in_the_journal_disagrees_with_its_receipt() {
    let fx = cleaned();
    fx.skip_audit();
    let (id, _, session, _, _, after, removed) = receipt_fields(&fx, 6);
    let forged_revision = "f".repeat(64);
    edit_event(&fx.journal, 6, |event| {
        event.revision = forged_revision.clone();
        event.removed_count += 1;
    });
    let expected = vec![format!(
        "journal event 6 of receipt {id} says otherwise: revisionAfter: journal {forged_revision}, receipt {after}; removedCount: journal {}, receipt {removed}",
        removed + 1
    )];
    for scope in [&[][..], &["--session", session.as_str()][..]] {
        let out = audit(&fx, scope);
        assert_exit(&out, 1);
        let report = json(&out);
        assert_eq!(
            kinds(&report),
            vec![("journal_mismatch".into(), Some(id.clone()), Some(6), None)],
            "{scope:?}"
        );
        assert_eq!(details(&report), expected, "{scope:?}");
    }
}

#[test]
fn an_event_moved_to_another_message_disagrees_with_its_receipt() {
    let fx = cleaned();
    fx.skip_audit();
    let (id, _, _, message, _, _, _) = receipt_fields(&fx, 7);
    edit_event(&fx.journal, 7, |event| event.message_id = TURN1.into());
    let out = audit(&fx, &[]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(
        kinds(&report),
        vec![("journal_mismatch".into(), Some(id.clone()), Some(7), None)]
    );
    assert_eq!(
        details(&report),
        vec![format!(
            "journal event 7 of receipt {id} says otherwise: messageID: journal {TURN1}, receipt {message}"
        )]
    );
}

#[test]
fn a_retry_after_retention_removed_the_first_event_holds() {
    let fx = Fixture::new();
    let (request, first) = prune_turn5_once(&fx);
    let receipt = first.receipt.expect("a receipt");
    // Retention removes the event (as it does once it is past both of its windows).
    let policy = pruning_journal::Retention {
        keep_events: 0,
        keep_for_ms: 0,
    };
    let journal = Journal::open(&fx.journal).expect("journal");
    assert_eq!(
        journal
            .apply_retention(&policy, receipt.committed_at_ms + 1)
            .expect("retention"),
        1
    );
    drop(journal);
    // The identical request again: the journal no longer answers it, the database's receipt does,
    // and a new event announces that receipt again.
    let engine = fx.engine();
    let retry = engine.prune(&request).expect("retry");
    assert_eq!(retry.receipt.as_ref(), Some(&receipt));
    assert_eq!(
        retry.event.as_ref().map(|event| (event.id, event.seq)),
        Some((receipt.receipt_id, 2))
    );
    drop(engine);
    let out = audit(&fx, &[]);
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["receipts"], 1);
    assert_eq!(report["events"], 1);
    assert_eq!(report["discrepancies"], serde_json::json!([]));
    assert_eq!(receipt_at(&fx, 1), receipt.receipt_id.to_string());
}
