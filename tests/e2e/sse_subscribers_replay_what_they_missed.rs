//! The event stream over HTTP: every subscriber receives each prune event; a subscriber that
//! reconnects with `Last-Event-ID` (or `?since=`) receives exactly the events it missed, in
//! order, then live ones; another workspace's stream receives none of them, and its
//! heartbeats carry the cursor past them; an identical retry announces the same event again;
//! a session that moves to another workspace has its next events there.

use crate::common;

use common::http::{
    events_path, parse, post, prune_all, with_messages, Server, Sse, SseEvent, OTHER_WORKSPACE,
    WORKSPACE,
};
use serde_json::{json, Value};

const SESSION: &str = "ses_http_events";
const PRUNED: &str = "rpc.codenomad.session-pruning.pruned";

/// The event a prune answer announces, at `seq`.
fn expected(seq: u64, message: &str, pruned: &Value) -> SseEvent {
    SseEvent {
        event: PRUNED.into(),
        id: Some(seq),
        data: json!({ "sessionID": SESSION, "messageID": message, "revision": pruned["revision"] }),
    }
}

/// Reads heartbeats, and nothing else, until one carries the cursor `seq` (those queued before
/// the stream got there come first); returns it.
fn heartbeats_until(sse: &mut Sse, seq: u64) -> SseEvent {
    for _ in 0..1000 {
        let heartbeat = only_heartbeats(sse, 1);
        if heartbeat.id == Some(seq) {
            return heartbeat;
        }
    }
    panic!("no heartbeat reached cursor {seq}");
}

/// Asserts that the next `n` events are heartbeats (nothing else was sent meanwhile), and
/// returns the last one.
fn only_heartbeats(sse: &mut Sse, n: usize) -> SseEvent {
    let mut last = None;
    for _ in 0..n {
        let event = sse.next().expect("stream open");
        assert_eq!(event.event, "heartbeat", "unexpected {event:?}");
        last = Some(event);
    }
    last.expect("n > 0")
}

#[test]
fn a_reconnecting_subscriber_receives_exactly_what_it_missed_then_live_events() {
    let (fx, messages) = with_messages(SESSION, 6);
    let server = Server::start(&fx.db, &[]);
    let mut a = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let mut b = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let mut other = Sse::open(&server.address, &events_path(OTHER_WORKSPACE), None);

    let first = prune_all(&server, SESSION, &messages[0]);
    let one = expected(1, &messages[0], &first);
    assert_eq!(a.next_not_heartbeat(), Some(one.clone()));
    assert_eq!(b.next_not_heartbeat(), Some(one.clone()));
    drop(b);

    let mut missed = Vec::new();
    for (i, message) in messages[1..4].iter().enumerate() {
        let pruned = prune_all(&server, SESSION, message);
        missed.push(expected(2 + i as u64, message, &pruned));
    }
    for event in &missed {
        assert_eq!(a.next_not_heartbeat().as_ref(), Some(event));
    }

    let mut b = Sse::open(&server.address, &events_path(WORKSPACE), Some(1));
    for event in &missed {
        assert_eq!(b.next_not_heartbeat().as_ref(), Some(event));
    }
    let live = prune_all(&server, SESSION, &messages[4]);
    let five = expected(5, &messages[4], &live);
    assert_eq!(b.next_not_heartbeat(), Some(five.clone()));
    assert_eq!(a.next_not_heartbeat(), Some(five.clone()));
    // Nothing twice: only heartbeats follow, and they carry the cursor.
    heartbeats_until(&mut b, 5);
    assert_eq!(only_heartbeats(&mut b, 2).id, Some(5));

    // ?since= resumes the same way.
    let mut c = Sse::open(
        &server.address,
        &format!("{}?since=3", events_path(WORKSPACE)),
        None,
    );
    assert_eq!(c.next_not_heartbeat().as_ref(), Some(&missed[2]));
    assert_eq!(c.next_not_heartbeat(), Some(five));
    // The header wins over the query (what EventSource sends on reconnect).
    let mut d = Sse::open(
        &server.address,
        &format!("{}?since=0", events_path(WORKSPACE)),
        Some(4),
    );
    assert_eq!(d.next_not_heartbeat().map(|e| e.id), Some(Some(5)));

    // Another workspace's stream saw none of it; its heartbeats moved its cursor past them.
    let heartbeat = heartbeats_until(&mut other, 5);
    assert_eq!(heartbeat.data["cursor"], 5);
}

#[test]
fn an_identical_retry_announces_the_same_event_again_without_moving_the_resume_point_back() {
    let (fx, messages) = with_messages(SESSION, 2);
    let server = Server::start(&fx.db, &[]);
    let mut sse = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let first = prune_all(&server, SESSION, &messages[0]);
    let event = expected(1, &messages[0], &first);
    assert_eq!(sse.next_not_heartbeat().as_ref(), Some(&event));
    let second = prune_all(&server, SESSION, &messages[1]);
    assert_eq!(
        sse.next_not_heartbeat(),
        Some(expected(2, &messages[1], &second))
    );

    // The retry names the revision the first prune was made against.
    let receipts = parse(&common::http::get(&server.route("receipts")).1);
    let receipt = &receipts[0];
    let body = json!({
        "sessionID": SESSION, "messageID": messages[0],
        "revision": receipt["revisionBefore"], "indexes": receipt["indexes"],
    })
    .to_string();
    let (status, again) = post(&server.route("prune"), &body);
    assert_eq!(status, 200);
    assert_eq!(parse(&again), first);
    // The same event again; the stream is past it, so it carries no id and the next
    // heartbeat still says 2.
    assert_eq!(
        sse.next_not_heartbeat(),
        Some(SseEvent { id: None, ..event })
    );
    heartbeats_until(&mut sse, 2);
}

#[test]
fn events_follow_a_session_that_moved_to_another_workspace() {
    let (fx, messages) = with_messages(SESSION, 2);
    let server = Server::start(&fx.db, &[]);
    let mut here = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let mut there = Sse::open(&server.address, &events_path(OTHER_WORKSPACE), None);
    prune_all(&server, SESSION, &messages[0]);
    assert_eq!(here.next_not_heartbeat().and_then(|e| e.id), Some(1));

    fx.exec(&format!(
        "UPDATE session SET directory = '/elsewhere/app' WHERE id = '{SESSION}'"
    ));
    // No wait: the requests about the session read where it is now, for the streams too.
    let moved = common::http::post(
        &server.url(&format!(
            "/api/workspaces/{OTHER_WORKSPACE}/session-pruning/preview"
        )),
        &json!({ "sessionID": SESSION, "messageID": messages[1] }).to_string(),
    );
    assert_eq!(moved.0, 200, "{}", moved.1);
    let preview = parse(&moved.1);
    let body = json!({
        "sessionID": SESSION, "messageID": messages[1],
        "revision": preview["revision"], "indexes": [preview["parts"][0]["index"]],
    });
    let (status, pruned) = post(
        &server.url(&format!(
            "/api/workspaces/{OTHER_WORKSPACE}/session-pruning/prune"
        )),
        &body.to_string(),
    );
    assert_eq!(status, 200, "{pruned}");
    assert_eq!(there.next_not_heartbeat().and_then(|e| e.id), Some(2));
    // The old workspace's stream passes over it: only heartbeats, until they carry the cursor
    // past it.
    heartbeats_until(&mut here, 2);
}
