//! `stats` estimates the technical content, the copies and the largest sessions' prunable bytes
//! from a sample of rows, and says so; `stats --exact` reads every row. A table within the read
//! floor (8 MiB) is read whole, so a small database's estimate is its exact figures; on the
//! database of coding work (an `event` table of 18.7 MB) the event figures are sampled, and each
//! stays within the margin the estimate states. Everything else is exact either way.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::Fixture;
use serde_json::Value;

fn stats(fx: &Fixture, extra: &[&str]) -> Value {
    let mut args = vec!["--json", "stats"];
    args.extend_from_slice(extra);
    let out = run(&fx.db, &args);
    assert_exit(&out, 0);
    json(&out)
}

/// The byte figures of `technical` and `copies`, by name.
fn figures(doc: &Value) -> Vec<(String, u64)> {
    let bytes = |v: &Value| v["bytes"].as_u64().expect("bytes");
    let mut found = Vec::new();
    for key in ["toolParts", "reasoningParts", "snapshotEvents", "v2Entries"] {
        found.push((key.to_string(), bytes(&doc["technical"][key])));
    }
    for key in ["diffsInMessages", "diffsInSnapshots"] {
        found.push((key.to_string(), bytes(&doc["copies"][key])));
    }
    for superseded in doc["copies"]["supersededSnapshots"]
        .as_array()
        .expect("list")
    {
        found.push((
            superseded["type"].as_str().expect("type").to_string(),
            bytes(superseded),
        ));
    }
    found
}

/// The largest sessions without their prunable bytes and whether those are estimated.
fn sessions_but_prunable(doc: &Value) -> Vec<Value> {
    let mut list = doc["sessions"].as_array().expect("sessions").clone();
    for session in &mut list {
        let object = session.as_object_mut().expect("a session");
        object.remove("prunableBytes");
        object.remove("prunableEstimated");
    }
    list
}

#[test]
fn a_database_read_whole_has_the_exact_figures_and_says_nothing_is_estimated() {
    let fx = Fixture::new();
    let estimated = stats(&fx, &[]);
    let exact = stats(&fx, &["--exact"]);
    assert_eq!(estimated, exact);
    assert_eq!(estimated["estimate"], Value::Null);
    assert!(estimated["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .all(|s| s["prunableEstimated"] == false));
    let text = run(&fx.db, &["stats"]);
    assert_exit(&text, 0);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(!text.contains('~'), "{text}");
    assert!(!text.contains("stats --exact"), "{text}");
}

#[test]
fn a_sampled_database_is_estimated_within_the_stated_margin_and_the_rest_is_exact() {
    let fx = Fixture::work();
    let digest = fx.file_digest();
    let estimated = stats(&fx, &[]);
    let exact = stats(&fx, &["--exact"]);
    assert_eq!(exact["estimate"], Value::Null);
    let estimate = &estimated["estimate"];
    let margin = estimate["marginBytes"].as_u64().expect("marginBytes");
    assert!(margin > 0, "{estimate}");
    let event_rows = exact["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["table"] == "event")
        .expect("an event table")["count"]
        .as_u64()
        .expect("count");
    let sampled = estimate["sampledRows"].as_u64().expect("sampledRows");
    assert!(sampled > 0 && sampled < event_rows, "{estimate}");
    // Only the event table is over the read floor; the others were read whole.
    assert_eq!(estimate["estimatedTables"], serde_json::json!(["event"]));

    for key in [
        "databaseBytes",
        "walBytes",
        "freeBytes",
        "tables",
        "events",
        "spill",
    ] {
        assert_eq!(estimated[key], exact[key], "{key}");
    }
    assert_eq!(
        sessions_but_prunable(&estimated),
        sessions_but_prunable(&exact)
    );
    // The part and message tables (6 and 1.7 MB) are read whole: their figures are exact.
    for (key, table) in [
        ("toolParts", "technical"),
        ("reasoningParts", "technical"),
        ("diffsInMessages", "copies"),
    ] {
        assert_eq!(estimated[table][key], exact[table][key], "{key}");
    }
    let exact_figures = figures(&exact);
    let estimated_figures = figures(&estimated);
    assert_eq!(
        exact_figures.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        estimated_figures.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        "the same superseded types, in the same order"
    );
    let mut sampled_differs = false;
    for ((name, exact_bytes), (_, guess)) in exact_figures.iter().zip(&estimated_figures) {
        assert!(
            guess.abs_diff(*exact_bytes) <= margin,
            "{name}: {guess} against {exact_bytes} (margin {margin})"
        );
        sampled_differs |= guess != exact_bytes;
    }
    assert!(sampled_differs, "the sampled event figures are estimates");
    // The same file gives the same sample and the same figures.
    assert_eq!(stats(&fx, &[]), estimated);
    // Read-only.
    assert_eq!(fx.file_digest(), digest);

    let text = run(&fx.db, &["stats"]);
    assert_exit(&text, 0);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("~ estimated from {sampled} rows read whole")),
        "{text}"
    );
    assert!(text.contains("stats --exact` reads every row"), "{text}");
}

#[test]
fn the_largest_sessions_are_the_first_that_sessions_lists() {
    for fx in [Fixture::new(), Fixture::work()] {
        let listed = run(&fx.db, &["--json", "sessions"]);
        assert_exit(&listed, 0);
        let listed = json(&listed);
        let ids = |list: &Value, n: usize| -> Vec<Value> {
            list.as_array().expect("a list")[..n]
                .iter()
                .map(|s| s["sessionID"].clone())
                .collect()
        };
        for top in [1, 3] {
            let overview = stats(&fx, &["--top", &top.to_string()]);
            assert_eq!(ids(&overview["sessions"], top), ids(&listed, top));
            // Read exactly, they are the same documents `sessions` prints.
            let exact = stats(&fx, &["--exact", "--top", &top.to_string()]);
            assert_eq!(
                exact["sessions"],
                Value::Array(listed.as_array().expect("a list")[..top].to_vec())
            );
        }
    }
}
