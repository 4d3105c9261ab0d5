//! On a database written by OpenCode 1.18.34 doing coding work, `clean --all --diffs --apply`
//! compacts every session, prunes the technical parts and empties the file bodies of the diffs
//! before the kept turns, and its dry run predicts every count and byte of it; every text part
//! and every event that is not a snapshot stays byte for byte, no superseded snapshot is left,
//! the audit holds, and `vacuum` leaves a file at most the size the clean estimated.

use crate::common;

use std::collections::BTreeMap;

use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::Value;

/// `(id, data)` of the rows `sql` selects.
fn rows(fx: &Fixture, sql: &str) -> BTreeMap<String, String> {
    let conn = fx.sql();
    let mut stmt = conn.prepare(sql).expect("select");
    let rows = stmt
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("query");
    rows.map(Result::unwrap).collect()
}

const TEXT_PARTS: &str = "SELECT id, data FROM part WHERE json_extract(data, '$.type') = 'text'";
const OTHER_EVENTS: &str = "SELECT id, data FROM event WHERE type NOT IN \
     ('message.part.updated.1', 'message.updated.1', 'session.updated.1')";

#[test]
fn the_dry_run_predicts_the_apply_and_only_copies_and_technical_parts_go() {
    let fx = Fixture::work();
    let texts = rows(&fx, TEXT_PARTS);
    let others = rows(&fx, OTHER_EVENTS);
    assert!(!texts.is_empty() && !others.is_empty());
    let args = ["--json", "--quiet-period", "0", "clean", "--all", "--diffs"];
    let dry = json(&run(&fx.db, &args));
    let out = run(&fx.db, &[&args[..], &["--apply"]].concat());
    assert_exit(&out, 0);
    let applied = json(&out);
    let (mut dry_doc, mut applied_doc) = (dry.clone(), applied.clone());
    dry_doc["status"] = Value::Null;
    applied_doc["status"] = Value::Null;
    let live_after = applied_doc["file"]
        .as_object_mut()
        .expect("file")
        .remove("liveAfter")
        .and_then(|v| v.as_u64())
        .expect("the apply measures the pages in use after it");
    assert_eq!(dry_doc, applied_doc, "the dry run predicts the apply");

    // Every session compacted; the diffs of every user message before the last two turns.
    assert_eq!(applied["compaction"]["sessions"], 8, "{applied}");
    assert_eq!(applied["compaction"]["blocked"], serde_json::json!({}));
    assert!(
        applied["diffs"]["pruned"].as_u64().unwrap() > 0,
        "{applied}"
    );
    let kinds = &applied["bytesByKind"];
    for kind in ["parts", "partSnapshots", "supersededSnapshots", "diffs"] {
        assert!(kinds[kind].as_u64().unwrap() > 0, "{kind}: {applied}");
    }
    let receipts = fx.scalar("SELECT count(*) FROM session_prune_receipt");
    assert_eq!(
        receipts as u64,
        common::archive::prunes(&applied),
        "one receipt per prune"
    );
    assert_eq!(
        fx.scalar("SELECT sum(bytes_removed) FROM session_prune_receipt") as u64,
        kinds["parts"].as_u64().unwrap()
            + kinds["partSnapshots"].as_u64().unwrap()
            + kinds["supersededSnapshots"].as_u64().unwrap()
            + kinds["diffs"].as_u64().unwrap()
    );

    assert_eq!(
        rows(&fx, TEXT_PARTS),
        texts,
        "every text part byte for byte"
    );
    let now = rows(&fx, OTHER_EVENTS);
    for (id, data) in &others {
        assert_eq!(now.get(id), Some(data), "event {id}");
    }
    // The only events added are the parts' removals.
    assert!(now.keys().filter(|id| !others.contains_key(*id)).all(|id| {
        fx.scalar(&format!(
            "SELECT count(*) FROM event WHERE id = '{id}' AND type = 'message.part.removed.1'"
        )) == 1
    }));
    assert_eq!(
        fx.scalar(&format!("SELECT count(*) FROM ({SUPERSEDED_SQL})")),
        0,
        "no superseded snapshot left"
    );
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 0);

    let estimate = applied["file"]["afterVacuum"].as_u64().unwrap();
    let vacuumed = run(&fx.db, &["--json", "vacuum"]);
    assert_exit(&vacuumed, 0);
    let after = json(&vacuumed)["bytesAfter"].as_u64().unwrap();
    // Measured: 7.5 MB after vacuum, 8.4 MB estimated, and about as many pages in use after
    // the clean: vacuum also packs the part-full pages.
    assert!(
        after <= live_after && live_after <= estimate && after * 10 >= estimate * 8,
        "{after} after vacuum, {live_after} in use after the clean, {estimate} estimated"
    );
}
