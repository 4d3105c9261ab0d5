//! `session-prune audit` reports nothing where everything holds, even where a check by ids or by
//! row order alone would: an item a V2 prune kept that shares its id with one it removed is not
//! "back", and receipt rows stored in another order (their rowids renumbered) keep each
//! message's newest receipt, so no change is reported (docs/ARCHITECTURE.md, "Audit").

use crate::common;

use common::audit::audit;
use common::cli::{assert_exit, json, run};
use common::v2::{V2Fixture, V2_ASSISTANT, V2_SESSION};
use common::*;
use pruning_engine::{Engine, Journal};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use serde_json::Value;

#[test]
fn a_v2_item_sharing_its_id_with_a_pruned_one_is_not_back() {
    let fx = V2Fixture::new();
    // The assistant message holds a second reasoning item under the first one's id, after the
    // tool: content [reasoning-0, tool, reasoning-0, text].
    let mut data: Value = serde_json::from_str(&fx.row(V2_ASSISTANT)).expect("json");
    let content = data["content"].as_array_mut().expect("content");
    let mut second = content[0].clone();
    second["text"] = "A second thought under the same id".into();
    content.insert(2, second);
    fx.sql()
        .execute(
            "UPDATE session_message SET data = ?1 WHERE id = ?2",
            [&data.to_string(), V2_ASSISTANT],
        )
        .expect("update");
    let engine = Engine::open(
        OpenCodeStore::open(&fx.db, StoreOptions::default()).expect("store"),
        Journal::open(&fx.journal).expect("journal"),
    )
    .expect("engine");
    let (revision, indexes) = preview(&engine, V2_SESSION, V2_ASSISTANT);
    assert_eq!(indexes, vec![0, 1, 2]);
    // Only the first reasoning item goes.
    let outcome = engine
        .prune(&request(V2_SESSION, V2_ASSISTANT, &revision, &[0]))
        .expect("prune");
    let receipt = outcome.receipt.expect("a receipt");
    assert_eq!(receipt.part_ids, vec!["reasoning-0".to_string()]);
    drop(engine);
    let out = run(&fx.db, &["--json", "audit"]);
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["discrepancies"], serde_json::json!([]));
    assert_eq!(report["changedSince"], serde_json::json!([]));
    assert_eq!(report["receipts"], 1);
}

#[test]
fn receipt_rows_stored_in_another_order_report_no_change() {
    let fx = Fixture::new();
    let engine = fx.engine();
    // Two prunes of turn 1: its reasoning, then its tool part.
    for _ in 0..2 {
        let (revision, indexes) = preview(&engine, MANY_TURNS, TURN1);
        engine
            .prune(&request(MANY_TURNS, TURN1, &revision, &indexes[..1]))
            .expect("prune");
    }
    drop(engine);
    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 2);
    // The rows change places in the table (as a rebuild of it may leave them).
    fx.exec("UPDATE session_prune_receipt SET rowid = -rowid");
    let out = audit(&fx, &[]);
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["discrepancies"], serde_json::json!([]));
    assert_eq!(report["changedSince"], serde_json::json!([]));
    assert_eq!(
        (report["receipts"].clone(), report["messages"].clone()),
        (2.into(), 1.into())
    );
}

#[test]
fn a_part_whose_spill_file_is_gone_is_reported_apart_from_the_discrepancies() {
    let fx = Fixture::with_spill_files();
    let audit = |fx: &Fixture| {
        let out = common::cli::run(&fx.db, &["--json", "audit"]);
        assert_eq!(out.status.code(), Some(0));
        common::cli::json(&out)
    };
    assert_eq!(audit(&fx)["missingSpillFiles"], serde_json::json!([]));
    let file = "tool_2266d7e0f001s36OzEaaempNRZ";
    std::fs::remove_file(fx.db.parent().unwrap().join("tool-output").join(file)).unwrap();
    let naming: Vec<(String, String)> = {
        let conn = fx.sql();
        let mut stmt = conn
            .prepare("SELECT id, session_id FROM part WHERE instr(data, ?1) > 0 ORDER BY rowid")
            .unwrap();
        let rows = stmt
            .query_map([file], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    assert!(!naming.is_empty());
    let expected: Vec<serde_json::Value> = naming
        .iter()
        .map(|(part, session)| serde_json::json!({ "sessionID": session, "partID": part, "file": file }))
        .collect();
    let report = audit(&fx);
    assert_eq!(report["ok"], true);
    assert_eq!(
        report["missingSpillFiles"],
        serde_json::Value::Array(expected)
    );
    let out = common::cli::run(&fx.db, &["audit"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "{} part(s) name a spill file that is not in tool-output/ (not a discrepancy",
            naming.len()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "part {} of session {}: {file}",
            naming[0].0, naming[0].1
        )),
        "{text}"
    );
}
