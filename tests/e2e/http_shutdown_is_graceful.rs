//! SIGTERM stops the server gracefully: event streams end with a proper end of body, a prune
//! in flight finishes (its receipt and its journal commit both land, or it never started), the
//! process exits 0 and the journal is free for the next process; a client that never finishes
//! its request holds the server no longer than the grace period.

use crate::common;

use common::cli::{assert_exit, run};
use common::http::{events_path, parse, prune_candidates, with_messages, Server, Sse, WORKSPACE};
use common::Fixture;
use pruning_engine::Journal;
use serde_json::json;

const SESSION: &str = "ses_http_shutdown";

#[test]
fn sigterm_ends_streams_finishes_prunes_and_releases_the_journal() {
    let (fx, _) = with_messages(SESSION, 16);
    let server = Server::start(&fx.db, &[]);
    let mut sse = Sse::open(&server.address, &events_path(WORKSPACE), None);
    assert_eq!(sse.next().expect("a heartbeat").event, "heartbeat");

    let candidates = prune_candidates(&server, SESSION);
    assert_eq!(candidates.len(), 16);
    let route = server.route("prune-batch");
    let batch = std::thread::spawn(move || {
        let body = json!({ "sessionID": SESSION, "candidates": candidates }).to_string();
        common::http::client()
            .post(route)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .ok()
            .map(|r| (r.status().as_u16(), r.text().unwrap_or_default()))
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (status, printed) = server.stop();
    assert_eq!(status.code(), Some(0), "{printed}");
    assert_eq!(printed.trim(), r#"{"status":"stopped"}"#);
    assert!(sse.ended_cleanly(), "the stream ends with the last chunk");

    let answered = batch.join().unwrap();
    let receipts = common::receipts(&fx).len();
    if let Some((status, body)) = &answered {
        assert_eq!(*status, 200, "{body}");
        let results = parse(body)["results"].as_array().unwrap().clone();
        assert!(
            results.iter().all(|r| r["result"]["status"] == "pruned"),
            "{body}"
        );
        assert_eq!(receipts, 16);
    }
    let journal = Journal::open(&fx.journal).expect("the journal is free");
    assert!(journal.pending_intents().unwrap().is_empty());
    assert_eq!(journal.last_seq().unwrap(), receipts as u64);
    drop(journal);
    let out = run(&fx.db, &["--json", "events"]);
    assert_exit(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        receipts
    );
}

#[test]
fn a_client_that_never_finishes_its_request_does_not_hold_the_server_past_the_grace_period() {
    use std::io::Write;
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    let mut stalled = std::net::TcpStream::connect(&server.address).unwrap();
    let head = format!(
        "POST /api/workspaces/{WORKSPACE}/session-pruning/preview HTTP/1.1\r\nHost: localhost\r\n\
         Content-Length: 100\r\n\r\n{{"
    );
    stalled.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let started = std::time::Instant::now();
    let (status, printed) = server.stop();
    let took = started.elapsed();
    assert_eq!(status.code(), Some(0), "{printed}");
    assert!(
        took >= pruning_server::SHUTDOWN_GRACE && took < pruning_server::SHUTDOWN_GRACE * 3,
        "stopped after {took:?}"
    );
    Journal::open(&fx.journal).expect("the journal is free");
}
