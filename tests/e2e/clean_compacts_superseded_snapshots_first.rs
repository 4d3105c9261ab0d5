//! A clean takes the copies OpenCode keeps before any part: each session is compacted first,
//! then (with `--diffs`) the diffs are emptied, then the parts are pruned. With
//! `--until-live-size` the copies count toward the target first, and the dry run stops where the
//! apply does whether the target is reached among the compactions, among the diffs, or among the
//! parts.

use crate::common;

use common::cli::document;
use common::*;
use serde_json::Value;

/// The dry run and the apply of `clean --all --diffs --until-live-size SIZE` on the coding-work
/// fixture, checked to agree but for what the apply measured after it.
fn until(size: &str) -> (Value, Value) {
    let fx = Fixture::work();
    let args = ["clean", "--all", "--diffs", "--until-live-size", size];
    let mut dry = document(&fx.db, &args);
    let mut applied = document(&fx.db, &[&args[..], &["--apply"]].concat());
    for report in [&mut dry, &mut applied] {
        report["status"] = Value::Null;
        report["file"]
            .as_object_mut()
            .expect("file")
            .remove("liveAfter");
        report["untilLiveSize"]
            .as_object_mut()
            .expect("untilLiveSize")
            .remove("liveAfter");
    }
    assert_eq!(dry, applied, "the dry run stops where the apply does");
    (dry, applied)
}

#[test]
fn a_target_reached_among_the_compactions_prunes_no_part() {
    let (_, applied) = until("27MB");
    let compacted = applied["compaction"]["sessions"].as_u64().unwrap();
    assert!((1..8).contains(&compacted), "{applied}");
    assert_eq!(applied["diffs"]["pruned"], 0, "{applied}");
    assert_eq!(applied["pruned"], 0, "{applied}");
    assert_eq!(applied["untilLiveSize"]["reached"], true, "{applied}");
}

#[test]
fn a_target_reached_among_the_diffs_compacts_every_session_first() {
    let (_, applied) = until("16.9MB");
    assert_eq!(applied["compaction"]["sessions"], 8, "{applied}");
    let diffs = applied["diffs"]["pruned"].as_u64().unwrap();
    assert!(diffs > 0 && diffs < 20, "{applied}");
    assert_eq!(applied["pruned"], 0, "{applied}");
}

#[test]
fn a_target_reached_among_the_parts_takes_every_copy_first() {
    let (_, applied) = until("12MB");
    assert_eq!(applied["compaction"]["sessions"], 8, "{applied}");
    assert_eq!(applied["diffs"]["pruned"], 20, "{applied}");
    assert!(applied["pruned"].as_u64().unwrap() > 0, "{applied}");
    assert_eq!(applied["untilLiveSize"]["reached"], true, "{applied}");
    let until = &applied["untilLiveSize"];
    assert_eq!(
        until["estimateAfter"].as_u64().unwrap(),
        until["liveBefore"].as_u64().unwrap()
            - ["parts", "partSnapshots", "supersededSnapshots", "diffs"]
                .iter()
                .map(|kind| applied["bytesByKind"][kind].as_u64().unwrap())
                .sum::<u64>()
    );
}

#[test]
fn the_compactions_come_before_the_prunes_of_parts() {
    let fx = Fixture::work();
    document(&fx.db, &["clean", "--all", "--apply"]);
    // Receipts in the order they committed: every compaction before every prune of parts.
    let kinds: Vec<String> = {
        let conn = fx.sql();
        let mut stmt = conn
            .prepare(
                "SELECT coalesce(json_extract(operation, '$.kind'), 'parts') \
                 FROM session_prune_receipt ORDER BY chain_seq",
            )
            .expect("select");
        let rows = stmt.query_map([], |row| row.get(0)).expect("query");
        rows.map(Result::unwrap).collect()
    };
    let first_parts = kinds.iter().position(|k| k == "parts").expect("parts");
    assert!(kinds[..first_parts].iter().all(|k| k == "compaction"));
    assert_eq!(kinds[..first_parts].len(), 8);
    assert!(kinds[first_parts..].iter().all(|k| k == "parts"));
}
