//! `session-prune audit` reports a tampered receipt row, and only that row, in words that say
//! what is wrong with it: a copy of a receipt claiming its place (the copy, not the receipt it
//! copies), an edited chain hash (its own row, not the next one), a column a receipt cannot hold
//! (by the column's name), a damaged chain head (in words, where it used to stop the audit with
//! a storage error), and a place or head edited to the largest number (reported; the next prune
//! still runs) (docs/ARCHITECTURE.md, "Audit").

use crate::common;

use common::app::App;
use common::audit::{audit, clean_parts, cleaned, details, kinds, receipt_at, CLEANED};
use common::cli::{assert_exit, json};
use common::{Fixture, MANY_TURNS};

/// The id given to a copy of a receipt.
const COPY: &str = "01a22fcd-0000-7000-8000-00000000c0de";

#[test]
fn a_duplicated_receipt_is_reported_and_not_the_one_it_copies() {
    let fx = cleaned();
    fx.skip_audit();
    let original = receipt_at(&fx, 3);
    // The copy goes first in the table (a lower rowid), with the original's chain columns.
    fx.exec(&format!(
        "INSERT INTO session_prune_receipt (rowid, id, request_key, intent_id, session_id, message_id,
           storage, revision_before, revision_after, indexes, part_ids, removed_count, bytes_removed,
           time_committed, engine_version, abandoned_run, chain_seq, chain_hash)
         SELECT -1, '{COPY}', 'copied', intent_id, session_id, message_id, storage, revision_before,
           revision_after, indexes, part_ids, removed_count, bytes_removed, time_committed,
           engine_version, abandoned_run, chain_seq, chain_hash
         FROM session_prune_receipt WHERE chain_seq = 3"
    ));
    let out = audit(&fx, &[]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(
        kinds(&report),
        vec![
            ("receipt_edited".into(), Some(COPY.into()), None, None),
            ("event_missing".into(), Some(COPY.into()), Some(3), None),
        ]
    );
    assert_eq!(
        details(&report),
        vec![
            format!("receipt {COPY} claims place 3 in the receipt chain, which receipt {original} holds: it is a copy, or its row was edited"),
            format!("receipt {COPY}'s event 3 in the journal announces receipt {original} instead"),
        ]
    );
}

#[test]
fn an_edited_chain_hash_is_reported_on_its_own_row_only() {
    let zeros = "0".repeat(64);
    for (place, value) in [
        (2, format!("'{zeros}'")),
        (2, "x'00'".to_string()),
        (CLEANED as i64, format!("'{zeros}'")),
    ] {
        let fx = cleaned();
        fx.skip_audit();
        let edited = receipt_at(&fx, place);
        fx.exec(&format!(
            "UPDATE session_prune_receipt SET chain_hash = {value} WHERE chain_seq = {place}"
        ));
        let out = audit(&fx, &[]);
        assert_exit(&out, 1);
        let report = json(&out);
        assert_eq!(
            kinds(&report),
            vec![("receipt_edited".into(), Some(edited.clone()), None, None)],
            "{place} {value}"
        );
        assert_eq!(
            details(&report),
            vec![format!(
                "receipt {edited} (place {place} in the receipt chain) does not match its chain hash: its row, or the receipt before it, was edited or replaced"
            )],
            "{place} {value}"
        );
    }
}

#[test]
fn an_unreadable_receipt_names_the_column_at_fault() {
    for (edit, words) in [
        (
            "part_ids = 'not json'",
            "column part_ids does not hold what a receipt stores there: expected ident at line 1 column 2",
        ),
        (
            "time_committed = 'yesterday'",
            "column time_committed holds text, not the type a receipt stores there",
        ),
    ] {
        let fx = cleaned();
        fx.skip_audit();
        let damaged = receipt_at(&fx, 5);
        fx.exec(&format!(
            "UPDATE session_prune_receipt SET {edit} WHERE chain_seq = 5"
        ));
        let out = audit(&fx, &[]);
        assert_exit(&out, 1);
        let report = json(&out);
        assert_eq!(
            kinds(&report),
            vec![
                ("receipt_edited".into(), Some(damaged.clone()), None, None),
                ("receipt_unreadable".into(), Some(damaged.clone()), None, None),
                ("event_without_receipt".into(), Some(damaged.clone()), Some(5), None),
            ],
            "{edit}"
        );
        assert_eq!(
            details(&report)[1],
            format!("receipt row {damaged} cannot be read as a receipt: {words}"),
            "{edit}"
        );
    }
}

#[test]
fn a_damaged_chain_head_is_reported_in_words() {
    for (value, words) in [
        ("x'00'", "it is a blob, not text"),
        ("'garbage'", "it is not {\"seq\", \"hash\"} JSON"),
        (
            "'{\"seq\":\"11\",\"hash\":\"ab\"}'",
            "it is not {\"seq\", \"hash\"} JSON",
        ),
    ] {
        let fx = cleaned();
        fx.skip_audit();
        fx.exec(&format!(
            "UPDATE session_prune_meta SET value = {value} WHERE key = 'receipt_chain_head'"
        ));
        let out = audit(&fx, &[]);
        assert_exit(&out, 1);
        let report = json(&out);
        assert_eq!(
            kinds(&report),
            vec![("receipt_edited".into(), None, None, None)],
            "{value}"
        );
        assert_eq!(
            details(&report),
            vec![format!(
                "the receipt chain's head in session_prune_meta (receipt_chain_head key) cannot be read: {words}"
            )],
            "{value}"
        );
        assert_eq!(report["chain"]["length"], CLEANED, "{value}");
    }
}

#[test]
fn a_chain_place_edited_to_the_largest_number_is_reported_not_a_crash() {
    let fx = cleaned();
    fx.skip_audit();
    fx.exec(&format!(
        "UPDATE session_prune_receipt SET chain_seq = {} WHERE chain_seq = {CLEANED}",
        i64::MAX
    ));
    let out = audit(&fx, &[]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(
        kinds(&report),
        vec![
            ("receipt_missing".into(), None, None, None),
            ("receipt_edited".into(), None, None, None),
        ]
    );
    assert_eq!(
        details(&report)[0],
        format!(
            "receipt chain places {CLEANED} to {} are missing: receipts were deleted, or their chain places edited",
            i64::MAX - 1
        )
    );
    assert!(
        details(&report)[1].starts_with(&format!(
            "the receipt chain ends at place {} with hash ",
            i64::MAX
        )),
        "{:?}",
        details(&report)
    );
}

#[test]
fn a_chain_head_edited_to_the_largest_place_does_not_stop_the_next_prune() {
    let fx = Fixture::new();
    fx.skip_audit();
    let first = clean_parts(&fx.db, MANY_TURNS);
    assert_exit(&first, 0);
    fx.exec(&format!(
        "UPDATE session_prune_meta SET value = '{{\"seq\":{},\"hash\":\"ab\"}}' WHERE key = 'receipt_chain_head'",
        i64::MAX
    ));
    let rest = clean_parts(&fx.db, "--all");
    assert_exit(&rest, 0);
    assert_eq!(json(&rest)["failed"], 0);
    // The next receipts could take no place after the head's: each claims the largest one, and
    // the audit reports them.
    let out = audit(&fx, &[]);
    assert_exit(&out, 1);
    let report = json(&out);
    assert_eq!(report["receipts"], CLEANED);
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM session_prune_receipt WHERE chain_seq = {}",
            i64::MAX
        )),
        3
    );
}

#[test]
fn the_http_audit_of_a_workspace_reports_a_damaged_receipt_instead_of_failing() {
    let fx = cleaned();
    fx.skip_audit();
    let damaged = receipt_at(&fx, 5);
    fx.exec("UPDATE session_prune_receipt SET part_ids = 'not json' WHERE chain_seq = 5");
    let app = App::start(&fx);
    let (status, body) = app.get(&app.route("audit"));
    app.stop();
    assert_eq!(status, 200, "{body}");
    let report: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(report["ok"], false);
    // A row that is not a receipt names no session to place it in a workspace: its chain link
    // and its event are what the workspace's audit reports.
    assert_eq!(
        kinds(&report),
        vec![
            ("receipt_edited".into(), Some(damaged.clone()), None, None),
            (
                "event_without_receipt".into(),
                Some(damaged.clone()),
                Some(5),
                None
            ),
        ]
    );
    assert_eq!(report["receipts"], CLEANED - 1);
}
