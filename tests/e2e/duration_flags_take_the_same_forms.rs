//! Every duration flag (`--quiet-period`, `clean --older-than`, `serve --heartbeat`) takes the
//! same forms, a whole number of seconds or a humantime duration, and a value of neither form,
//! or outside the flag's bounds, is bad input (exit 2) named with the flag and the forms.

use crate::common;

use std::process::Output;

use common::cli::{assert_exit, json, run};
use common::{now_ms, Fixture, MANY_TURNS, TURN5};
use serde_json::json;

/// The accepted forms, as every duration error lists them.
const FORMS: &str =
    "(accepted forms: a whole number of seconds such as 30, or a duration such as 30s, 500ms, 5m, 7d, 1h30m)";

/// `prune --dry-run` of every technical part of turn 5 with `--quiet-period quiet`.
fn dry_run(fx: &Fixture, revision: &str, quiet: &str) -> Output {
    run(
        &fx.db,
        &[
            "--json",
            "--quiet-period",
            quiet,
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            revision,
            "--all-technical",
            "--dry-run",
        ],
    )
}

/// The `clean` dry run of the many-turns session with `--older-than age`.
fn clean_older_than(fx: &Fixture, age: &str) -> serde_json::Value {
    let out = run(
        &fx.db,
        &[
            "--json",
            "clean",
            MANY_TURNS,
            "--keep-last-turns",
            "0",
            "--older-than",
            age,
        ],
    );
    assert_exit(&out, 0);
    json(&out)
}

/// Checks a bad duration: exit 2, one JSON error document with exactly `message`.
fn assert_bad_duration(out: &Output, message: &str) {
    assert_exit(out, 2);
    assert_eq!(
        json(out),
        json!({"status": "error", "exitCode": 2, "error": message})
    );
}

#[test]
fn quiet_period_takes_seconds_and_durations() {
    let fx = Fixture::new();
    let preview = run(&fx.db, &["--json", "preview", MANY_TURNS, TURN5]);
    assert_exit(&preview, 0);
    let revision = json(&preview)["revision"]
        .as_str()
        .expect("revision")
        .to_string();
    // Updated a minute ago: inside a 2 minute quiet period, outside a 30 second one.
    fx.exec(&format!(
        "UPDATE session SET time_updated = {} WHERE id = '{MANY_TURNS}'",
        now_ms() - 60_000
    ));
    for quiet in ["0s", "0", "30", "30s"] {
        let out = dry_run(&fx, &revision, quiet);
        assert_exit(&out, 0);
        assert_eq!(json(&out)["status"], "dry-run", "{quiet}");
        assert_eq!(json(&out)["removedCount"], 2, "{quiet}");
    }
    for quiet in ["2m", "120", "1h30m"] {
        let out = dry_run(&fx, &revision, quiet);
        assert_exit(&out, 3);
        assert_eq!(
            json(&out),
            json!({"status": "blocked", "reason": "maintenance_required"}),
            "{quiet}"
        );
    }
    assert!(!fx.journal.exists());
}

#[test]
fn older_than_takes_seconds_and_durations() {
    let fx = Fixture::new();
    assert_eq!(clean_older_than(&fx, "7d"), clean_older_than(&fx, "604800"));
    // Every message of the fixture completed more than a second ago and less than 100 years ago.
    for age in ["1", "1s", "0", "0s"] {
        let report = clean_older_than(&fx, age);
        assert_eq!(report["pruned"], 10, "{age}: {report}");
        assert_eq!(report["skipped"], json!({}), "{age}: {report}");
    }
    for age in ["36500d", "3153600000"] {
        let report = clean_older_than(&fx, age);
        assert_eq!(report["pruned"], 0, "{age}: {report}");
        assert_eq!(
            report["skipped"],
            json!({"too_recent": 20}),
            "{age}: {report}"
        );
    }
}

#[test]
fn a_bad_duration_is_bad_input_naming_the_flag_and_the_forms() {
    let fx = Fixture::new();
    let digest = fx.file_digest();
    assert_bad_duration(
        &run(&fx.db, &["--json", "--quiet-period", "5x", "sessions"]),
        &format!(
            "--quiet-period 5x: not a duration: unknown time unit \"x\", supported units: ns, \
             us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations) {FORMS}"
        ),
    );
    assert_bad_duration(
        &run(&fx.db, &["--json", "--quiet-period", "-1", "sessions"]),
        &format!("--quiet-period -1: not a duration: expected number at 0 {FORMS}"),
    );
    assert_bad_duration(
        &run(
            &fx.db,
            &["--json", "clean", "--all", "--older-than", "seven days"],
        ),
        &format!("--older-than seven days: not a duration: expected number at 0 {FORMS}"),
    );
    assert_bad_duration(
        &run(
            &fx.db,
            &[
                "--json",
                "serve",
                "--heartbeat",
                "5ms",
                "--listen",
                "127.0.0.1:0",
            ],
        ),
        &format!("--heartbeat 5ms: must be from 10ms to 1h {FORMS}"),
    );
    assert_bad_duration(
        &run(
            &fx.db,
            &[
                "--json",
                "serve",
                "--heartbeat",
                "3601",
                "--listen",
                "127.0.0.1:0",
            ],
        ),
        &format!("--heartbeat 3601: must be from 10ms to 1h {FORMS}"),
    );
    let plain = run(&fx.db, &["--quiet-period", "5m30", "sessions"]);
    assert_exit(&plain, 2);
    assert_eq!(plain.stdout, b"");
    assert_eq!(
        String::from_utf8_lossy(&plain.stderr),
        format!("error: --quiet-period 5m30: not a duration: time unit needed, for example 30sec or 30ms {FORMS}\n")
    );
    assert_eq!(fx.file_digest(), digest);
    assert!(!fx.journal.exists());
}
