//! `POST .../session-pruning/restore` on a real `serve --archive`: the restore of a prune the
//! server archived answers `restored` and is announced on the event stream as
//! `rpc.codenomad.session-pruning.restored` `{sessionID, messageID, revision}` with the next
//! sequence number, so a UI drops the message from its cache as it does on `pruned`; a retry
//! answers the same and announces the same event again. Another workspace's receipt is answered
//! as an unknown one, with nothing journaled; while the server holds the archive, a purge from
//! the CLI is refused and changes nothing (docs/ARCHITECTURE.md, "Restore").

use crate::common;

use common::cli::{assert_exit, run};
use common::http::{events_path, parse, post, prune_all, Server, Sse, OTHER_WORKSPACE, WORKSPACE};
use common::*;
use pruning_engine::Journal;
use pruning_journal::Selection;
use serde_json::json;
use sha2::{Digest, Sha256};

#[test]
fn a_restore_answers_restored_and_is_announced_on_the_event_stream() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &["--archive"]);
    let mut stream = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let pruned = prune_all(&server, MANY_TURNS, TURN5);
    let event = stream.next_not_heartbeat().expect("the pruned event");
    assert_eq!(event.event, "rpc.codenomad.session-pruning.pruned");
    assert_eq!(event.id, Some(1));
    let receipt = fx
        .sql()
        .query_row(
            "SELECT id, revision_before, archive_hash IS NOT NULL FROM session_prune_receipt",
            [],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, bool>(2)?,
                ))
            },
        )
        .expect("the receipt");
    let (receipt_id, revision_before, archived) = receipt;
    assert!(archived, "the server archives its prunes");
    assert_ne!(pruned["revision"], revision_before);

    let body = json!({ "receiptID": receipt_id }).to_string();
    let (status, answer) = post(&server.route("restore"), &body);
    assert_eq!(status, 200, "{answer}");
    let answer = parse(&answer);
    let restore_receipt = answer["receiptID"].as_str().expect("receiptID").to_string();
    assert_eq!(
        answer,
        json!({
            "status": "restored", "receiptID": restore_receipt, "sessionID": MANY_TURNS,
            "messageID": TURN5, "revision": revision_before, "restoredCount": pruned["removedCount"]
        })
    );
    let event = stream.next_not_heartbeat().expect("the restored event");
    assert_eq!(event.event, "rpc.codenomad.session-pruning.restored");
    assert_eq!(event.id, Some(2));
    assert_eq!(
        event.data,
        json!({ "sessionID": MANY_TURNS, "messageID": TURN5, "revision": revision_before })
    );

    // A retry: the same answer, the same event announced again.
    let (status, again) = post(&server.route("restore"), &body);
    assert_eq!(status, 200, "{again}");
    assert_eq!(parse(&again), answer);
    let event = stream.next_not_heartbeat().expect("the event again");
    assert_eq!(event.event, "rpc.codenomad.session-pruning.restored");
    assert_eq!(event.id, Some(2));
    drop(stream);
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn another_workspaces_receipt_is_unknown_and_a_purge_waits_for_the_server() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &["--archive"]);
    prune_all(&server, MANY_TURNS, TURN5);
    let receipt_id: String = fx
        .sql()
        .query_row("SELECT id FROM session_prune_receipt", [], |row| row.get(0))
        .expect("the receipt");
    let archive = fx.dir.path().join("opencode.db.prune-archive");
    let digest = || hex::encode(Sha256::digest(std::fs::read(&archive).expect("archive")));
    let before = (fx.file_digest(), digest());

    let elsewhere = server.url(&format!(
        "/api/workspaces/{OTHER_WORKSPACE}/session-pruning/restore"
    ));
    let (status, answer) = post(&elsewhere, &json!({ "receiptID": receipt_id }).to_string());
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        parse(&answer),
        json!({ "status": "blocked", "reason": "not_deletable" })
    );
    let (status, answer) = post(
        &server.route("restore"),
        &json!({ "receiptID": "not a uuid" }).to_string(),
    );
    assert_eq!(status, 400, "{answer}");
    assert_eq!(parse(&answer)["field"], "receiptID");

    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 3);
    assert_eq!(
        common::cli::json(&purge),
        json!({ "status": "blocked", "reason": "maintenance_required" })
    );
    let words = String::from_utf8_lossy(&purge.stderr);
    assert!(words.contains("in use by another process"), "{words}");
    assert_eq!((fx.file_digest(), digest()), before);

    let (status, _) = server.stop();
    assert!(status.success());
    let journal = Journal::open_read_only(&fx.journal).expect("journal");
    let restores = journal
        .intents()
        .expect("intents")
        .into_iter()
        .filter(|intent| matches!(intent.selection, Selection::Restore(_)))
        .count();
    assert_eq!(
        restores, 0,
        "nothing was journaled for another workspace's receipt"
    );
}
