//! `serve --auto-clean EVERY` with a clean's policy flags commits the receipts `clean --all
//! --apply` with the same flags commits (the same request keys), gives the freed pages of a
//! switched file back, announces each run on the event stream and in `GET
//! /api/session-pruning/upkeep`, and with `--archive-keep` purges the archive entries past it.

use std::time::{Duration, Instant};

use crate::common;

use common::archive::{archive_of, prune_archived};
use common::cli::{assert_exit, json, run};
use common::http::{events_path, get, parse, Server, Sse, WORKSPACE};
use common::*;
use serde_json::{json, Value};

const UPKEEP: &str = "/api/session-pruning/upkeep";

/// Where the schedule stands, once at least `runs` runs have finished (at most 120 s).
fn after_runs(server: &Server, runs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (status, body) = get(&server.url(UPKEEP));
        assert_eq!(status, 200, "{body}");
        let state = parse(&body);
        if state["runs"].as_u64().expect("runs") >= runs {
            return state;
        }
        assert!(Instant::now() < deadline, "no run within 120 s: {state}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The data of the next upkeep event on `stream` (the prunes' events before it are passed
/// over).
fn next_run(stream: &mut Sse) -> Value {
    loop {
        let event = stream.next_not_heartbeat().expect("the run's event");
        if event.event == "rpc.codenomad.session-pruning.upkeep" {
            assert_eq!(event.id, None, "a run is no journal event");
            return event.data;
        }
    }
}

/// `serve --auto-clean 1s --keep-last-turns 0` with one message a batch and 100 ms after each
/// outside the write turn: a run of the 30 messages of `with_messages` takes about 5 s.
fn serve_slowly(fx: &Fixture) -> Server {
    Server::start(
        &fx.db,
        &[
            "--auto-clean",
            "1s",
            "--keep-last-turns",
            "0",
            "--auto-clean-batch-size",
            "1",
            "--auto-clean-pause-ms",
            "100",
        ],
    )
}

/// `clean --all --apply --keep-last-turns 0` (what [`serve_slowly`] runs), exit 0; its report.
fn clean_every_turn(fx: &Fixture) -> Value {
    let out = run(
        &fx.db,
        &[
            "--json",
            "clean",
            "--all",
            "--apply",
            "--keep-last-turns",
            "0",
        ],
    );
    assert_exit(&out, 0);
    json(&out)
}

/// The request keys of every receipt, sorted.
fn request_keys(fx: &Fixture) -> Vec<String> {
    let mut keys: Vec<String> = receipts(fx).into_iter().map(|r| r.request_key).collect();
    keys.sort();
    keys
}

#[test]
fn an_auto_clean_commits_the_receipts_clean_apply_commits() {
    let by_hand = Fixture::work();
    let scheduled = Fixture::work();
    for fx in [&by_hand, &scheduled] {
        assert_exit(&run(&fx.db, &["vacuum", "--online-shrink"]), 0);
    }
    let policy = ["--keep-last-turns", "1", "--diffs"];
    let mut clean = vec!["--json", "clean", "--all", "--apply"];
    clean.extend(policy);
    let out = run(&by_hand.db, &clean);
    assert_exit(&out, 0);
    let cleaned = json(&out);
    let file_before = std::fs::metadata(&scheduled.db).expect("db").len();

    let mut serve = vec!["--auto-clean", "1s"];
    serve.extend(policy);
    let server = Server::start(&scheduled.db, &serve);
    // Opened before the first run (one interval after the start): the run is announced on it.
    let mut stream = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let announced = next_run(&mut stream);
    assert_eq!(announced["run"], 1, "{announced}");
    assert_eq!(announced["status"], "cleaned", "{announced}");
    let counts = &announced["counts"];
    assert_eq!(counts["pruned"], cleaned["pruned"], "{counts}");
    assert_eq!(counts["sessions"], cleaned["sessions"], "{counts}");
    assert_eq!(counts["failed"], 0, "{counts}");
    assert_eq!(counts["blocked"], 0, "{counts}");
    assert_eq!(
        counts["bytesGivenBack"], cleaned["givenBack"]["bytes"],
        "{counts}"
    );
    assert!(counts["bytesGivenBack"].as_u64() > Some(0), "{counts}");
    let state = after_runs(&server, 1);
    assert_eq!(state["enabled"], true);
    assert_eq!(state["everyMs"], 1000);
    let (status, _) = server.stop();
    assert!(status.success());

    assert_eq!(request_keys(&scheduled), request_keys(&by_hand));
    assert!(!request_keys(&scheduled).is_empty());
    let file_after = std::fs::metadata(&scheduled.db).expect("db").len();
    assert!(
        file_after < file_before,
        "the file gave its pages back: {file_before} -> {file_after}"
    );
    // The runs after the first found nothing left to prune, nor a compaction to make again
    // (an identical one would be answered from its receipt and announced on every run).
    let out = run(&scheduled.db, &clean);
    assert_exit(&out, 0);
    let again = json(&out);
    assert_eq!(again["pruned"], 0, "{again}");
    assert_eq!(
        (
            &again["compaction"]["sessions"],
            &again["compaction"]["alreadyCompacted"]
        ),
        (&json!(0), &json!(0)),
        "{again}"
    );
}

#[test]
fn an_auto_clean_purges_the_archive_entries_past_its_keep() {
    let fx = Fixture::new();
    // Two prunes of one message: the older one's entry is no longer the message's present
    // state, so a purge may remove it.
    prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    let server = Server::start(
        &fx.db,
        &["--archive", "--auto-clean", "1s", "--archive-keep", "0s"],
    );
    let mut stream = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let announced = next_run(&mut stream);
    let counts = &announced["counts"];
    assert_eq!(announced["run"], 1, "{announced}");
    assert_eq!(counts["archivePurged"], 1, "{announced}");
    assert_eq!(counts["failed"], 0, "{announced}");
    server.stop();
    let out = run(&fx.db, &["--json", "archive", "stats"]);
    assert_exit(&out, 0);
    let stats = json(&out);
    assert_eq!(stats["purged"], 1, "{stats}");
    assert!(archive_of(&fx.db).exists());
}

#[test]
fn a_prune_asked_for_during_a_run_is_answered_between_its_batches() {
    const SESSION: &str = "ses_auto_clean_turns";
    let (fx, messages) = common::http::with_messages(SESSION, 30);
    let server = serve_slowly(&fx);
    let deadline = Instant::now() + Duration::from_secs(120);
    while parse(&get(&server.url(UPKEEP)).1)["runningSince"].is_null() {
        assert!(Instant::now() < deadline, "no run started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let last = messages.last().expect("a message");
    let answer = common::http::prune_all(&server, SESSION, last);
    assert_eq!(answer["status"], "pruned", "{answer}");
    let state = parse(&get(&server.url(UPKEEP)).1);
    assert!(
        !state["runningSince"].is_null() && state["runs"] == 0,
        "the request was answered after the run: {state}"
    );
    let state = after_runs(&server, 1);
    let counts = &state["lastRun"]["counts"];
    assert_eq!(state["lastRun"]["run"], 1, "{state}");
    // The same clean of the same database, with no request beside it.
    let (reference, _) = common::http::with_messages(SESSION, 30);
    let alone = clean_every_turn(&reference);
    assert_eq!(
        counts["pruned"].as_u64(),
        Some(alone["pruned"].as_u64().expect("pruned") - 1),
        "the run pruned what the clean prunes but the message the request pruned: {state}"
    );
    assert_eq!(
        (&counts["failed"], &counts["blocked"]),
        (&json!(0), &json!(0))
    );
    server.stop();
    assert_eq!(receipts(&fx).len(), receipts(&reference).len());
}

#[test]
fn a_server_stopped_during_a_run_stops_it_after_its_batch_and_exits_cleanly() {
    const SESSION: &str = "ses_auto_clean_stop";
    let (fx, _) = common::http::with_messages(SESSION, 30);
    let server = serve_slowly(&fx);
    let deadline = Instant::now() + Duration::from_secs(120);
    while receipts(&fx).len() < 3 {
        assert!(Instant::now() < deadline, "the run pruned nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, printed) = server.stop();
    assert!(status.success(), "{status:?}: {printed}");
    assert_eq!(printed.trim(), r#"{"status":"stopped"}"#);
    let left_by_the_run = receipts(&fx).len();
    // The run stopped early: a clean finds the rest, and every receipt holds (the audit at
    // the fixture's drop).
    let rest = clean_every_turn(&fx);
    assert!(rest["pruned"].as_u64() > Some(0), "{rest}");
    assert!(receipts(&fx).len() > left_by_the_run);
}
