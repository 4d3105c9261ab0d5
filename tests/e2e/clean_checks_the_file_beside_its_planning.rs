//! `clean` runs the integrity check on a connection and a thread of its own while it surveys and
//! plans: `--timings` says how long the check took and how long the clean waited for it, and no
//! write begins before its `ok` — a clean of a damaged file writes nothing, even one that has
//! nothing left to prune.

use crate::common;

use common::cli::{json, run};
use common::faults::damage_freelist;
use common::*;

/// Every message of every session, applied, with the timings.
const APPLY_WITH_TIMINGS: [&str; 7] = [
    "clean",
    "--all",
    "--keep-last-turns",
    "0",
    "--apply",
    "--timings",
    "--quiet-period=0",
];

#[test]
fn the_timings_say_the_check_ran_beside_the_planning_and_how_long_the_first_write_waited() {
    let fx = Fixture::new();
    let dry = json(&run(
        &fx.db,
        &["--json", "clean", "--all", "--keep-last-turns", "0"],
    ));
    let out = run(&fx.db, &[&["--json"][..], &APPLY_WITH_TIMINGS].concat());
    assert_eq!(out.status.code(), Some(0));
    let report = json(&out);
    assert_eq!(report["pruned"], dry["pruned"], "{report}");
    assert!(report["pruned"].as_u64().unwrap() > 0);
    let check = &report["integrityCheck"];
    assert_eq!(check["overlapped"], true, "{report}");
    let (took, waited) = (
        check["checkMs"].as_f64().unwrap(),
        check["waitedMs"].as_f64().unwrap(),
    );
    assert!(took > 0.0, "{check}");
    // The wait began after the check did: it cannot be longer, beyond a thread's join.
    assert!(waited <= took + 50.0, "{check}");
    assert!(dry.get("integrityCheck").is_none(), "{dry}");
}

#[test]
fn the_text_report_has_a_line_for_the_check_of_the_dry_run_and_of_the_apply() {
    let fx = Fixture::new();
    let line = |args: &[&str]| {
        let out = run(&fx.db, args);
        assert_eq!(out.status.code(), Some(0));
        let stdout = String::from_utf8(out.stdout).unwrap();
        stdout
            .lines()
            .find(|line| line.starts_with("integrity check: "))
            .unwrap_or_else(|| panic!("no integrity check line in:\n{stdout}"))
            .to_string()
    };
    let dry = line(&["clean", "--all", "--keep-last-turns", "0", "--timings"]);
    assert!(
        dry.contains(" ms beside the planning; the dry run waited "),
        "{dry}"
    );
    assert!(dry.ends_with(" ms for it"), "{dry}");
    let applied = line(&APPLY_WITH_TIMINGS);
    assert!(
        applied.contains(" ms beside the planning; the first write waited "),
        "{applied}"
    );
}

#[test]
fn a_clean_with_nothing_left_to_prune_still_refuses_a_damaged_file_and_changes_nothing() {
    let fx = Fixture::new();
    fx.skip_audit();
    let first = run(&fx.db, &[&["--json"][..], &APPLY_WITH_TIMINGS].concat());
    assert_eq!(first.status.code(), Some(0));
    fx.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    let again = json(&run(
        &fx.db,
        &[&["--json"][..], &APPLY_WITH_TIMINGS].concat(),
    ));
    assert_eq!(again["pruned"], 0, "{again}");
    fx.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    damage_freelist(&fx.db, 27);
    let before = (fx.file_digest(), fx.journal_digest());
    for args in [&APPLY_WITH_TIMINGS[..], &APPLY_WITH_TIMINGS[..4]] {
        let out = run(&fx.db, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("is damaged"), "{stderr}");
        assert!(stderr.contains("Freelist"), "{stderr}");
        assert_eq!((fx.file_digest(), fx.journal_digest()), before, "{args:?}");
    }
}
