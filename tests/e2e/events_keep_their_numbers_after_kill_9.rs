//! A `serve` killed with SIGKILL right after announcing prunes, before their commit marks were
//! durable: the next open's recovery completes them from their receipts with the sequence
//! numbers and event ids they were announced with (docs/ARCHITECTURE.md, "Sequence numbers
//! after a crash").

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
    let journaled: Vec<(u64, String)> = engine
        .events_after(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.data.message_id))
        .collect();
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
