//! A `serve` killed with SIGKILL right after announcing prunes, before their commit marks were
//! durable: the next open's recovery completes them from their receipts with the sequence
//! numbers and event ids they were announced with (docs/ARCHITECTURE.md, "Sequence numbers
//! after a crash"), also when several clients pruned, retried and were refused at once.

use crate::common;

use common::http::{events_path, prune_all, Server, Sse, WORKSPACE};
use common::*;

#[test]
fn announced_events_keep_their_numbers_after_kill_9() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    let mut stream = Sse::open(&server.address, &events_path(WORKSPACE), None);
    let mut announced = Vec::new();
    for message in [TURN1, TURN5] {
        prune_all(&server, MANY_TURNS, message);
        let event = stream.next_not_heartbeat().expect("an event");
        assert_eq!(event.event, "rpc.codenomad.session-pruning.pruned");
        announced.push((
            event.id.expect("an id"),
            event.data["messageID"]
                .as_str()
                .expect("messageID")
                .to_string(),
        ));
    }
    assert_eq!(
        announced,
        vec![(1, TURN1.to_string()), (2, TURN5.to_string())]
    );
    // SIGKILL: no close. The first commit mark became durable with the second prune's intent;
    // the second one never did.
    drop(stream);
    drop(server);

    let engine = fx.engine();
    assert_eq!(engine.recovery().completed.len(), 1);
    let journaled = journaled_events(&engine);
    assert_eq!(journaled, announced);
    // Each event is its prune's receipt, as when it was announced.
    let receipts = engine.receipts(None).unwrap();
    for event in engine.events_after(0, 10).unwrap() {
        let receipt = receipts
            .iter()
            .find(|r| r.message_id == event.data.message_id)
            .expect("a receipt");
        assert_eq!(event.id, receipt.receipt_id);
    }
}

/// Several clients at once: single prunes each sent twice (the second a retry), a batch sent
/// twice, and a batch with a refused candidate; every event they announced keeps its sequence
/// number and id after SIGKILL, and the numbers have no gap.
#[test]
fn concurrent_prunes_batches_and_retries_keep_their_numbers_after_kill_9() {
    use common::http::{parse, post, prune_candidates, with_messages};
    use serde_json::json;

    const SESSION: &str = "ses_http_kill_many";
    let (fx, _) = with_messages(SESSION, 12);
    let server = Server::start(&fx.db, &[]);
    let mut stream = Sse::open(&server.address, &events_path(WORKSPACE), None);
    assert_eq!(stream.next().expect("a heartbeat").event, "heartbeat");
    let candidates = prune_candidates(&server, SESSION);
    assert_eq!(candidates.len(), 12);

    let prune_route = server.route("prune");
    let preview_route = server.route("preview");
    let singles: Vec<serde_json::Value> = candidates[..4].to_vec();
    let single_client = std::thread::spawn(move || {
        for candidate in singles {
            let (status, body) = post(
                &preview_route,
                &json!({ "sessionID": SESSION, "messageID": candidate["messageID"] }).to_string(),
            );
            assert_eq!(status, 200, "{body}");
            let preview = parse(&body);
            let indexes: Vec<serde_json::Value> = preview["parts"]
                .as_array()
                .expect("parts")
                .iter()
                .map(|p| p["index"].clone())
                .collect();
            let prune = json!({
                "sessionID": SESSION, "messageID": candidate["messageID"],
                "revision": preview["revision"], "indexes": indexes,
            })
            .to_string();
            let first = post(&prune_route, &prune);
            let again = post(&prune_route, &prune);
            assert_eq!(first.0, 200, "{}", first.1);
            assert_eq!(parse(&first.1)["status"], "pruned", "{}", first.1);
            assert_eq!(again, first);
        }
    });
    let batch_route = server.route("prune-batch");
    let twice: Vec<serde_json::Value> = candidates[4..8].to_vec();
    let batch_client = std::thread::spawn(move || {
        let body = json!({ "sessionID": SESSION, "candidates": twice }).to_string();
        let first = post(&batch_route, &body);
        let again = post(&batch_route, &body);
        assert_eq!(first.0, 200, "{}", first.1);
        assert_eq!(again, first);
        parse(&first.1)["results"].clone()
    });
    let batch_route = server.route("prune-batch");
    let mut with_refusal: Vec<serde_json::Value> = candidates[8..].to_vec();
    let mut stale = candidates[8].clone();
    stale["revision"] = json!("0".repeat(64));
    stale["messageID"] = candidates[0]["messageID"].clone();
    with_refusal.push(stale);
    let refusing_client = std::thread::spawn(move || {
        let body = json!({ "sessionID": SESSION, "candidates": with_refusal }).to_string();
        let (status, answer) = post(&batch_route, &body);
        assert_eq!(status, 200, "{answer}");
        parse(&answer)["results"].clone()
    });
    single_client.join().unwrap();
    let batch = batch_client.join().unwrap();
    let refusing = refusing_client.join().unwrap();
    for result in batch.as_array().unwrap() {
        assert_eq!(result["result"]["status"], "pruned", "{result}");
    }
    let refusing = refusing.as_array().unwrap();
    assert_eq!(refusing.len(), 5);
    for result in &refusing[..4] {
        assert_eq!(result["result"]["status"], "pruned", "{result}");
    }
    assert_eq!(
        refusing[4]["result"]["status"], "blocked",
        "{}",
        refusing[4]
    );

    // Every announcement: one message per seq. A retry's announcement of an event the stream
    // already passed comes without `id:`, for a message announced before.
    let mut announced: std::collections::BTreeMap<u64, String> = Default::default();
    while announced.len() < 12 {
        let event = stream.next_not_heartbeat().expect("an event");
        assert_eq!(event.event, "rpc.codenomad.session-pruning.pruned");
        let message = event.data["messageID"]
            .as_str()
            .expect("messageID")
            .to_string();
        let Some(seq) = event.id else {
            assert!(announced.values().any(|m| *m == message), "{event:?}");
            continue;
        };
        let first = announced.entry(seq).or_insert_with(|| message.clone());
        assert_eq!(*first, message, "seq {seq} announced for two messages");
    }
    assert_eq!(
        announced.keys().copied().collect::<Vec<_>>(),
        (1..=12).collect::<Vec<u64>>()
    );
    // SIGKILL: no close.
    drop(stream);
    drop(server);

    let engine = fx.engine();
    let events = engine.events_after(0, 100).unwrap();
    let journaled: std::collections::BTreeMap<u64, String> = events
        .iter()
        .map(|e| (e.seq, e.data.message_id.clone()))
        .collect();
    assert_eq!(journaled, announced);
    // Each event is its prune's receipt.
    let receipts = engine.receipts(None).unwrap();
    assert_eq!(receipts.len(), 12);
    for event in &events {
        let receipt = receipts
            .iter()
            .find(|r| r.message_id == event.data.message_id)
            .expect("a receipt");
        assert_eq!(event.id, receipt.receipt_id);
    }
}
