//! A clean whose prunes were refused by a condition that passes (OpenCode's write lock, the
//! quiet period) exits 3 with the count per reason and "run it again later", so that a script
//! (`clean --apply && vacuum`) can tell; refusals that stay until someone acts keep exit 0.

use crate::common;

use common::cli::{json, run};
use common::*;
use serde_json::Value;

/// `--json GLOBAL clean --keep-last-turns 0 EXTRA` (`--all` unless EXTRA names a session):
/// exit code, report and stderr.
fn clean(fx: &Fixture, global: &[&str], extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["--json"];
    args.extend_from_slice(global);
    args.extend(["clean", "--keep-last-turns", "0"]);
    if !extra.iter().any(|arg| arg.starts_with("ses_")) {
        args.push("--all");
    }
    args.extend_from_slice(extra);
    let out = run(&fx.db, &args);
    (
        out.status.code().unwrap_or(-1),
        json(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_clean_beside_opencodes_write_lock_exits_3_and_the_next_run_finishes() {
    let fx = Fixture::new();
    let quiet = ["--quiet-period", "0"];
    let (_, planned, _) = clean(&fx, &quiet, &[]);
    let messages = planned["pruned"].as_u64().unwrap();
    let sessions = planned["compaction"]["sessions"].as_u64().unwrap();
    assert!(messages > 0 && sessions > 0, "{planned}");
    // OpenCode in the middle of a write: it holds the write lock.
    let opencode = fx.sql();
    opencode.execute_batch("BEGIN IMMEDIATE").unwrap();
    let before = fx.file_digest();
    let (code, report, _) = clean(&fx, &quiet, &["--apply"]);
    assert_eq!(code, 3, "{report}");
    assert_eq!(report["status"], "cleaned");
    assert_eq!(report["pruned"], 0);
    assert_eq!(
        report["blocked"]["maintenance_required"], messages,
        "{report}"
    );
    assert_eq!(
        report["compaction"]["blocked"]["maintenance_required"], sessions,
        "{report}"
    );
    assert_eq!(
        report["retryLater"]["maintenance_required"],
        messages + sessions,
        "{report}"
    );
    let why = report["blockedBecause"]["maintenance_required"]
        .as_str()
        .unwrap();
    assert!(why.contains("locked by another writer"), "{why}");
    assert_eq!(fx.file_digest(), before);
    // The text report says the same, with what to do.
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "blocked by conditions that pass (maintenance_required {}): run it again later (exit 3); what committed stays committed",
            messages + sessions
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "blocked (maintenance_required): {messages} message(s); the first: the database is locked by another writer"
        )),
        "{text}"
    );
    // The dry run reports the same and stays exit 0: nothing was to be done by it.
    let (code, dry, _) = clean(&fx, &quiet, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        dry["retryLater"]["maintenance_required"],
        messages + sessions
    );
    opencode.execute_batch("ROLLBACK").unwrap();
    drop(opencode);
    let (code, done, _) = clean(&fx, &quiet, &["--apply"]);
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["pruned"], messages);
    assert!(done.get("retryLater").is_none(), "{done}");
}

#[test]
fn a_clean_within_the_quiet_period_exits_3() {
    let fx = Fixture::new();
    let (_, planned, _) = clean(&fx, &["--quiet-period", "0"], &[MANY_TURNS]);
    let messages = planned["pruned"].as_u64().unwrap();
    assert!(messages > 0);
    // OpenCode wrote the session a moment ago.
    fx.exec(&format!(
        "UPDATE session SET time_updated = {} WHERE id = '{MANY_TURNS}'",
        now_ms()
    ));
    let (code, report, _) = clean(&fx, &[], &[MANY_TURNS, "--apply", "--no-compact"]);
    assert_eq!(code, 3, "{report}");
    assert_eq!(
        report["retryLater"]["maintenance_required"], messages,
        "{report}"
    );
    assert_eq!(report["blocked"]["maintenance_required"], messages);
}

#[test]
fn refusals_that_stay_until_someone_acts_keep_exit_0() {
    let fx = Fixture::new();
    // Sessions OpenCode left with a run incomplete are refused for good with `never`.
    let (code, report, _) = clean(
        &fx,
        &["--quiet-period", "0", "--abandoned-after", "never"],
        &["--apply"],
    );
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report["compaction"]["blocked"]["maintenance_required"], 2,
        "{report}"
    );
    assert!(report.get("retryLater").is_none(), "{report}");
}
