//! A subscriber that reads nothing while 10,000 prune events are published (its socket fills,
//! it falls far behind the live buffer) receives every one of them, once and in order, when it
//! reads again; then it is live.

use crate::common;

use common::generate;
use common::http::{parse, post, prune_all, prune_candidates, Server, Sse, WORKSPACE};
use common::Fixture;
use serde_json::json;

const SESSIONS: usize = 100;
const PER_SESSION: usize = 100;

fn session(s: usize) -> String {
    format!("ses_lag_{s:03}")
}

#[test]
fn a_subscriber_that_stops_reading_is_caught_up_from_the_journal() {
    let fx = Fixture::new();
    {
        let conn = fx.sql();
        conn.execute_batch("BEGIN").unwrap();
        for s in 0..SESSIONS {
            generate::add_session(&conn, &session(s));
            for m in 0..PER_SESSION {
                generate::insert_message(
                    &conn,
                    &session(s),
                    &format!("msg_lag_{s:03}_{m:03}"),
                    1,
                    64,
                );
            }
        }
        conn.execute_batch("COMMIT").unwrap();
    }
    let server = Server::start(&fx.db, &[]);
    let path = format!("/api/workspaces/{WORKSPACE}/session-pruning/events");
    let mut idle = Sse::open(&server.address, &path, None);

    let total = SESSIONS * PER_SESSION;
    for s in 0..SESSIONS {
        let candidates = prune_candidates(&server, &session(s));
        assert_eq!(candidates.len(), PER_SESSION);
        for batch in candidates.chunks(16) {
            let body = json!({ "sessionID": session(s), "candidates": batch });
            let (status, answer) = post(&server.route("prune-batch"), &body.to_string());
            assert_eq!(status, 200, "{answer}");
            let results = parse(&answer)["results"].as_array().unwrap().clone();
            assert!(
                results.iter().all(|r| r["result"]["status"] == "pruned"),
                "{answer}"
            );
        }
    }

    let mut seen = Vec::with_capacity(total);
    while seen.len() < total {
        let event = idle.next_not_heartbeat().expect("stream open");
        assert_eq!(event.event, "rpc.codenomad.session-pruning.pruned");
        seen.push(event.id.expect("id"));
    }
    let expected: Vec<u64> = (1..=total as u64).collect();
    assert_eq!(seen, expected, "every event once, in order");

    // Live again: the next prune reaches it directly.
    let conn = fx.sql();
    generate::insert_message(&conn, &session(0), "msg_lag_live", 1, 64);
    drop(conn);
    prune_all(&server, &session(0), "msg_lag_live");
    let event = idle.next_not_heartbeat().expect("stream open");
    assert_eq!(event.id, Some(total as u64 + 1));
    assert_eq!(event.data["messageID"], "msg_lag_live");
}
