//! The real OpenCode 2 (2.0.15, 2.1.2), its background service running beside `session-prune
//! serve`, as CodeNomad's own native test drives its plugin:
//!
//! - a prune is refused (`maintenance_required`) while a run holds the session
//!   (`time_suspended`), nothing written, nothing journaled; admitted once the run settles;
//! - a prune that commits before a prompt: that prompt's model request carries none of the
//!   pruned output; a prompt whose run holds the session first: the prune waits for it, and the
//!   turn is whole;
//! - an identical retry returns the same receipt and announces the same event again; two
//!   subscribers both see it; a subscriber that reconnects to a restarted server with its last
//!   id gets exactly what it missed;
//! - a fork of the session keeps its own copy of what its parent's prune removed;
//! - after the prunes, `opencode session export` and a continued turn succeed, and OpenCode
//!   logs no database error.
//!
//! The binaries come from `scripts/install-opencode.sh 2.x` (see `support/binary.rs`).

use crate::common::http::{events_path, parse, post, Server, Sse, WORKSPACE};
use crate::opencode_real;

use std::time::{Duration, Instant};

use opencode_real::{
    assert_no_database_trouble, opencode2_home, run_bounded, RequestKind, Service,
};
use rusqlite::Connection;
use serde_json::{json, Value};

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// The session's completed assistant rows that hold a tool or reasoning item, oldest first.
fn prunable(db: &std::path::Path, session: &str) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare(
            "SELECT id FROM session_message WHERE session_id = ?1 AND type = 'assistant' \
               AND json_type(data, '$.time.completed') IS NOT NULL \
               AND EXISTS (SELECT 1 FROM json_each(data, '$.content') j \
                           WHERE json_extract(j.value, '$.type') IN ('tool', 'reasoning')) \
             ORDER BY seq",
        )
        .expect("select");
    let ids = stmt
        .query_map([session], |row| row.get(0))
        .expect("rows")
        .map(|id| id.expect("id"))
        .collect();
    ids
}

/// Every `session_message` row of the session, as stored.
fn rows(db: &std::path::Path, session: &str) -> Vec<(String, String)> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT id, data FROM session_message WHERE session_id = ?1 ORDER BY seq")
        .expect("select");
    let found = stmt
        .query_map([session], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .map(|row| row.expect("row"))
        .collect();
    found
}

/// Previews `message` through the server; the prune request of all its technical parts.
fn prune_request(server: &Server, session: &str, message: &str) -> String {
    let (status, body) = post(
        &server.route("preview"),
        &json!({ "sessionID": session, "messageID": message }).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let preview = parse(&body);
    assert_eq!(preview["status"], "preview", "{preview}");
    let indexes: Vec<Value> = preview["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .map(|part| part["index"].clone())
        .collect();
    json!({
        "sessionID": session, "messageID": message,
        "revision": preview["revision"], "indexes": indexes,
    })
    .to_string()
}

fn serve(db: &std::path::Path, work: &std::path::Path) -> Server {
    Server::start_exactly(
        db,
        &[
            "--workspace".into(),
            format!("{WORKSPACE}={}", work.display()),
            "--quiet-period".into(),
            "0".into(),
            "--heartbeat".into(),
            "100ms".into(),
        ],
        &[],
    )
}

fn prunes_beside_the_service(version: &str) {
    let Some((mock, home)) = opencode2_home(version) else {
        return;
    };
    let mut service = Service::start(&home);
    let session = service.session_with_turns("pruned beside the service", 3, TURN_TIMEOUT);
    let db = home.database();
    let server = serve(&db, home.work_dir());
    let mut first_subscriber = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let mut second_subscriber = Sse::open(&server.address, &events_path(WORKSPACE), None);

    // 1. Refused while a run holds the session; admitted once it settles.
    let targets = prunable(&db, &session);
    assert!(targets.len() >= 3, "{version}: {targets:?}");
    let request = prune_request(&server, &session, &targets[0]);
    let before = service.send_prompt(&session, "Hold the session. [[slow:6]]");
    let held = Instant::now() + Duration::from_secs(20);
    let suspended = loop {
        let conn = Connection::open(&db).expect("open");
        let claim: Option<i64> = conn
            .query_row(
                "SELECT time_suspended FROM session_v2 WHERE id = ?1",
                [&session],
                |row| row.get(0),
            )
            .expect("claim");
        if claim.is_some() || Instant::now() > held {
            break claim;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        suspended.is_some(),
        "{version}: the run set no time_suspended"
    );
    let rows_while_held = rows(&db, &session);
    let (status, body) = post(&server.route("prune"), &request);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        parse(&body),
        json!({"status": "blocked", "reason": "maintenance_required"}),
        "{version}"
    );
    // Nothing of the pruned message changed, and nothing was announced.
    let target_row = |rows: &[(String, String)]| {
        rows.iter()
            .find(|(id, _)| *id == targets[0])
            .cloned()
            .expect("the target row")
    };
    assert_eq!(
        target_row(&rows(&db, &session)),
        target_row(&rows_while_held)
    );
    let (status, health) = crate::common::http::get(&server.url("/health"));
    assert_eq!(status, 200);
    assert_eq!(parse(&health)["lastSeq"], 0, "{health}");
    let outcome = service.wait_idle(&session, before.as_deref(), TURN_TIMEOUT);
    assert_eq!(outcome, "succeeded", "{version}: the held turn");
    let (status, body) = post(&server.route("prune"), &request);
    assert_eq!(status, 200, "{body}");
    let pruned = parse(&body);
    assert_eq!(pruned["status"], "pruned", "{version}: {pruned}");

    // 2. An identical retry: the same receipt, announced again with the same id; both
    // subscribers see it.
    let (status, again) = post(&server.route("prune"), &request);
    assert_eq!(status, 200, "{again}");
    assert_eq!(parse(&again), pruned, "{version}");
    for subscriber in [&mut first_subscriber, &mut second_subscriber] {
        let first = subscriber.next_not_heartbeat().expect("the event");
        let retry = subscriber
            .next_not_heartbeat()
            .expect("its announcement again");
        assert_eq!(first.event, "rpc.codenomad.session-pruning.pruned");
        assert_eq!(
            first.data,
            json!({"sessionID": session, "messageID": targets[0], "revision": pruned["revision"]})
        );
        assert_eq!((first.id, retry.id), (Some(1), Some(1)));
        assert_eq!(retry.data, first.data);
    }

    // 3. A fork keeps its own copy of what its parent's prune removes.
    let fork = service.call(
        "POST",
        &format!("/api/session/{session}/fork"),
        Some(&json!({})),
    );
    let fork_id = fork["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{version}: no fork id in {fork}"))
        .to_string();
    let fork_rows = rows(&db, &fork_id);
    assert!(
        fork_rows
            .iter()
            .any(|(_, data)| data.contains("TOOL_CANARY_2")),
        "{version}: the fork holds no copy of turn 2's output"
    );
    let pruned_second = {
        let request = prune_request(&server, &session, &targets[1]);
        let (status, body) = post(&server.route("prune"), &request);
        assert_eq!(status, 200, "{body}");
        parse(&body)
    };
    assert_eq!(pruned_second["status"], "pruned", "{version}");
    assert_eq!(
        rows(&db, &fork_id),
        fork_rows,
        "{version}: the fork changed"
    );

    // 4. A subscriber that lost the server resumes from its last id after a restart.
    let last = first_subscriber
        .next_not_heartbeat()
        .expect("event 2")
        .id
        .expect("id");
    assert_eq!(last, 2);
    let (status, _) = server.stop();
    assert_eq!(status.code(), Some(0));
    let server = serve(&db, home.work_dir());
    let third = {
        let request = prune_request(&server, &session, &targets[2]);
        let (status, body) = post(&server.route("prune"), &request);
        assert_eq!(status, 200, "{body}");
        parse(&body)
    };
    let mut resumed = Sse::open(&server.address, &events_path(WORKSPACE), Some(last));
    let got = resumed.next_not_heartbeat().expect("event 3");
    assert_eq!(got.id, Some(3));
    assert_eq!(got.data["messageID"], targets[2].as_str());
    assert_eq!(got.data["revision"], third["revision"]);

    // 5. The next model request carries none of the pruned output, every text still there; a
    // run that holds the session while a prune is asked for keeps its turn whole.
    let sent_before = mock.requests().len();
    service.turn(
        &session,
        "Turn 5: go on. [[say:text_canary_5]]",
        TURN_TIMEOUT,
    );
    let next = mock.requests()[sent_before..]
        .iter()
        .find(|r| r.kind == RequestKind::Chat && r.session_id() == Some(session.as_str()))
        .cloned()
        .expect("the next request");
    for n in 1..=3 {
        assert!(
            !next.body.contains(&format!("TOOL_CANARY_{n}")),
            "{version}: turn {n}'s pruned output was sent"
        );
        assert!(
            !next.body.contains(&format!("REASONING_CANARY_{n}")),
            "{version}: turn {n}'s pruned reasoning was sent"
        );
        assert!(
            next.body.contains(&format!("TEXT_CANARY_{n}")),
            "{version}: turn {n}'s text was not sent"
        );
    }
    let mut export = home.command();
    export.args(["session", "export", &session]);
    let exported = run_bounded(&mut export, TURN_TIMEOUT).expect("export");
    assert!(exported.status.success(), "{version}: {exported:?}");
    assert!(exported.stdout.contains("TEXT_CANARY_5"), "{version}");
    server.stop();
    service.stop();
    assert_no_database_trouble(&home.log_files());
}

#[test]
fn opencode_2_1_2_service_and_prunes_lose_nothing() {
    prunes_beside_the_service("2.1.2");
}

#[test]
fn opencode_2_0_15_service_and_prunes_lose_nothing() {
    prunes_beside_the_service("2.0.15");
}
