//! The event cursor survives the server: a client that saw event 1, lost the server (stopped,
//! restarted) and missed the prunes made after the restart resumes with its last id and gets
//! exactly those, in order. A cursor outside the journal gets one `resync`, then live events.

use crate::common;

use common::http::{events_path, prune_all, with_messages, Server, Sse, WORKSPACE};
use pruning_engine::Journal;
use pruning_journal::Retention;

const SESSION: &str = "ses_http_restart";

#[test]
fn a_client_resuming_after_a_restart_gets_exactly_what_it_missed() {
    let (fx, messages) = with_messages(SESSION, 4);
    let server = Server::start(&fx.db, &[]);
    let mut sse = Sse::open(&server.address, &events_path(WORKSPACE), None);
    prune_all(&server, SESSION, &messages[0]);
    let last = sse.next_not_heartbeat().expect("event 1").id.expect("id");
    assert_eq!(last, 1);
    let (status, _) = server.stop();
    assert_eq!(status.code(), Some(0));

    let server = Server::start(&fx.db, &[]);
    let second = prune_all(&server, SESSION, &messages[1]);
    let third = prune_all(&server, SESSION, &messages[2]);
    let mut sse = Sse::open(&server.address, &events_path(WORKSPACE), Some(last));
    let got = sse.next_not_heartbeat().expect("event 2");
    assert_eq!(
        (got.id, &got.data["messageID"], &got.data["revision"]),
        (Some(2), &messages[1].clone().into(), &second["revision"])
    );
    let got = sse.next_not_heartbeat().expect("event 3");
    assert_eq!(
        (got.id, &got.data["messageID"], &got.data["revision"]),
        (Some(3), &messages[2].clone().into(), &third["revision"])
    );
    prune_all(&server, SESSION, &messages[3]);
    assert_eq!(sse.next_not_heartbeat().expect("event 4").id, Some(4));
}

#[test]
fn a_cursor_older_than_the_journal_keeps_gets_one_resync_then_live_events() {
    let (fx, messages) = with_messages(SESSION, 4);
    let server = Server::start(&fx.db, &[]);
    for message in &messages[..3] {
        prune_all(&server, SESSION, message);
    }
    server.stop();
    // Keep only the newest event, whatever its age.
    let journal = Journal::open(&fx.journal).unwrap();
    let policy = Retention {
        keep_events: 1,
        keep_for_ms: 0,
    };
    assert_eq!(
        journal
            .apply_retention(&policy, common::now_ms() + 1)
            .unwrap(),
        2
    );
    drop(journal);

    let server = Server::start(&fx.db, &[]);
    let mut sse = Sse::open(&server.address, &events_path(WORKSPACE), Some(1));
    let resync = sse.next_not_heartbeat().expect("resync");
    assert_eq!(resync.event, "resync");
    assert_eq!(resync.id, Some(3));
    assert_eq!(
        resync.data,
        serde_json::json!({ "firstKept": 3, "resumeAfter": 3 })
    );
    prune_all(&server, SESSION, &messages[3]);
    assert_eq!(sse.next_not_heartbeat().expect("live").id, Some(4));
    // A cursor the journal can still serve is not resynced.
    let mut kept = Sse::open(&server.address, &events_path(WORKSPACE), Some(2));
    assert_eq!(kept.next_not_heartbeat().expect("event 3").id, Some(3));
}

#[test]
fn a_cursor_past_the_journals_last_event_gets_one_resync_then_live_events() {
    let (fx, messages) = with_messages(SESSION, 2);
    let server = Server::start(&fx.db, &[]);
    prune_all(&server, SESSION, &messages[0]);
    let mut sse = Sse::open(&server.address, &events_path(WORKSPACE), Some(9));
    let resync = sse.next_not_heartbeat().expect("resync");
    assert_eq!(
        (resync.event.as_str(), resync.id, resync.data),
        (
            "resync",
            Some(1),
            serde_json::json!({ "firstKept": 1, "resumeAfter": 1 })
        )
    );
    prune_all(&server, SESSION, &messages[1]);
    assert_eq!(sse.next_not_heartbeat().expect("live").id, Some(2));
}
