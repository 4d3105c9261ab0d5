//! The schedule of `serve --auto-clean` pauses and resumes through `POST
//! /api/session-pruning/upkeep {paused}`; a body that is not that, or a server without a
//! schedule, is refused with nothing changed; bad `--auto-clean` flags are exit 2 before
//! anything is opened.

use std::time::{Duration, Instant};

use crate::common;

use common::cli::{assert_exit, run};
use common::http::{get, parse, post, Server};
use common::*;
use serde_json::{json, Value};

const UPKEEP: &str = "/api/session-pruning/upkeep";

fn upkeep(server: &Server) -> Value {
    let (status, body) = get(&server.url(UPKEEP));
    assert_eq!(status, 200, "{body}");
    parse(&body)
}

#[test]
fn a_paused_schedule_runs_nothing_until_it_is_resumed() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &["--auto-clean", "1s"]);
    let (status, body) = post(&server.url(UPKEEP), r#"{"paused":true}"#);
    assert_eq!(status, 200, "{body}");
    let paused = parse(&body);
    assert_eq!(paused["paused"], true, "{paused}");
    assert_eq!(paused["nextRunAt"], Value::Null, "{paused}");
    // Three intervals: a schedule that was not paused would have run.
    std::thread::sleep(Duration::from_secs(3));
    let state = upkeep(&server);
    assert_eq!(
        (&state["runs"], &state["lastRun"], &state["runningSince"]),
        (&json!(0), &Value::Null, &Value::Null),
        "{state}"
    );
    assert!(receipts(&fx).is_empty(), "a paused schedule pruned");

    let before = now_ms();
    let (status, body) = post(&server.url(UPKEEP), r#"{"paused":false}"#);
    assert_eq!(status, 200, "{body}");
    let resumed = parse(&body);
    assert_eq!(resumed["paused"], false, "{resumed}");
    let next = resumed["nextRunAt"].as_i64().expect("a next run");
    assert!(
        (before + 1000..=now_ms() + 1000).contains(&next),
        "one interval from the resume: {next}"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let state = loop {
        let state = upkeep(&server);
        if state["runs"] == 1 {
            break state;
        }
        assert!(
            Instant::now() < deadline,
            "no run after the resume: {state}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(state["lastRun"]["status"], "cleaned", "{state}");
    assert!(
        !receipts(&fx).is_empty(),
        "the resumed schedule pruned nothing"
    );
    server.stop();
}

#[test]
fn a_change_that_is_not_paused_true_or_false_is_refused_and_changes_nothing() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &["--auto-clean", "1h"]);
    let (db, journal) = (fx.file_digest(), fx.journal_digest());
    let before = upkeep(&server);
    for body in [
        "",
        "paused",
        "{}",
        "[true]",
        r#"{"paused":1}"#,
        r#"{"paused":"true"}"#,
        r#"{"paused":null}"#,
        r#"{"paused":true,"every":1}"#,
    ] {
        let (status, answer) = post(&server.url(UPKEEP), body);
        assert_eq!(status, 400, "{body}: {answer}");
        let error = parse(&answer);
        assert!(
            error["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("the body must be {\"paused\": true}")),
            "{body}: {error}"
        );
        assert_eq!(upkeep(&server), before, "{body}");
    }
    // A body a page of another site could send without asking first.
    for content_type in [Some("text/plain"), None] {
        let mut request = common::http::client()
            .post(server.url(UPKEEP))
            .body(r#"{"paused":true}"#);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let answer = request.send().expect("POST");
        assert_eq!(answer.status().as_u16(), 415, "{content_type:?}");
        let error = parse(&answer.text().expect("body"));
        assert_eq!(
            error["error"], "send the body as JSON, with `Content-Type: application/json`",
            "{content_type:?}"
        );
        assert_eq!(upkeep(&server), before, "{content_type:?}");
    }
    assert_eq!((fx.file_digest(), fx.journal_digest()), (db, journal));
    server.stop();
}

#[test]
fn a_server_without_a_schedule_refuses_a_pause_and_changes_nothing() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    let (db, journal) = (fx.file_digest(), fx.journal_digest());
    let state = upkeep(&server);
    assert_eq!(
        state,
        json!({
            "enabled": false, "everyMs": null, "paused": false, "runningSince": null,
            "nextRunAt": null, "lastRun": null, "runs": 0
        })
    );
    let (status, answer) = post(&server.url(UPKEEP), r#"{"paused":true}"#);
    assert_eq!(status, 404, "{answer}");
    assert!(answer.contains("--auto-clean"), "{answer}");
    assert_eq!(upkeep(&server), state);
    assert_eq!((fx.file_digest(), fx.journal_digest()), (db, journal));
    server.stop();
}

#[test]
fn bad_auto_clean_flags_are_exit_2_before_anything_is_opened() {
    let fx = Fixture::new();
    let db = fx.file_digest();
    for (flags, words) in [
        (&["--auto-clean", "0"][..], "--auto-clean"),
        (&["--auto-clean", "500ms"][..], "--auto-clean"),
        (&["--auto-clean", "soon"][..], "--auto-clean"),
        (
            &["--auto-clean", "1h", "--older-than", "soon"][..],
            "--older-than",
        ),
        (
            &["--auto-clean", "1h", "--until-live-size", "big"][..],
            "--until-live-size",
        ),
        (&["--keep-last-turns", "1"][..], "--auto-clean"),
        (&["--diffs"][..], "--auto-clean"),
        (
            &["--auto-clean", "1h", "--archive-keep", "30d"][..],
            "--archive",
        ),
        (
            &["--auto-clean", "1h", "--archive", "--archive-keep", "later"][..],
            "--archive-keep",
        ),
    ] {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend(flags);
        let out = run(&fx.db, &args);
        assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(words), "{flags:?}: {stderr}");
        assert!(!fx.journal.exists(), "{flags:?} made a journal");
        assert_eq!(fx.file_digest(), db, "{flags:?}");
    }
}
