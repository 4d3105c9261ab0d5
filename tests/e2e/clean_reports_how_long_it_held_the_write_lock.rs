//! With `--timings`, a clean reports how long it held SQLite's write lock, which OpenCode waits
//! up to 5 s for: one hold per write transaction (each group transaction of prunes or of
//! compactions, which holds several when they fit in its 50 ms, and in a dry run each check that
//! takes the lock), with its median, 99th percentile and longest, in ms. Without it the report holds no measurement, so the same database gives the same one.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::Fixture;
use serde_json::Value;

fn clean(fx: &Fixture, extra: &[&str]) -> Value {
    let mut args = vec![
        "--quiet-period",
        "0",
        "--json",
        "clean",
        "--all",
        "--keep-last-turns",
        "0",
        "--timings",
    ];
    args.extend_from_slice(extra);
    let out = run(&fx.db, &args);
    assert_exit(&out, 0);
    json(&out)
}

/// The holds of `report`: `transactions` of them, ranked.
fn assert_holds(report: &Value, transactions: std::ops::RangeInclusive<u64>) {
    let lock = &report["writeLock"];
    let held = lock["transactions"].as_u64().unwrap();
    assert!(
        transactions.contains(&held),
        "{held} transactions: {report}"
    );
    let (p50, p99, max) = (
        lock["p50Ms"].as_f64().unwrap(),
        lock["p99Ms"].as_f64().unwrap(),
        lock["maxMs"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{lock}");
}

/// The prunes and the compactions of a clean's report (each more than none).
fn prunes_and_compactions(report: &Value) -> (u64, u64) {
    let pruned = report["pruned"].as_u64().unwrap();
    let compacted = report["compaction"]["sessions"].as_u64().unwrap();
    assert!(pruned > 0 && compacted > 0, "{report}");
    (pruned, compacted)
}

#[test]
fn an_applied_clean_holds_the_lock_once_per_group_transaction() {
    let fx = Fixture::new();
    let report = clean(&fx, &["--apply"]);
    let (pruned, compacted) = prunes_and_compactions(&report);
    // The compactions and the prunes are batches of their own: two transactions at least, one
    // per prune and per compaction at most.
    assert_holds(&report, 2..=pruned + compacted);
}

#[test]
fn a_dry_run_holds_the_lock_once_per_check_and_says_so_in_words() {
    let fx = Fixture::new();
    let digest = fx.file_digest();
    let report = clean(&fx, &[]);
    let (pruned, compacted) = prunes_and_compactions(&report);
    assert_holds(&report, pruned + compacted..=pruned + compacted);
    let transactions = report["writeLock"]["transactions"].as_u64().unwrap();
    assert_eq!(fx.file_digest(), digest, "a dry run wrote to the database");
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--timings",
        ],
    );
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "write lock: held by {transactions} transaction(s), p50 "
            ))
        })
        .unwrap_or_else(|| panic!("no write lock line in {text}"));
    assert!(
        line.ends_with("ms (OpenCode waits up to 5 s for it)"),
        "{line}"
    );
}

#[test]
fn without_timings_the_report_holds_no_measurement() {
    let fx = Fixture::new();
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
        ],
    );
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report.get("writeLock"), None, "{report}");
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
        ],
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("write lock:"));
}
