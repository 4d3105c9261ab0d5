//! Event delivery from the engine: a subscriber that connects with a cursor gets exactly the
//! events it missed, then live ones; two subscribers both get each event; an identical retry
//! re-announces the same event (same id and seq).

use crate::common;

use std::time::Duration;

use common::*;
use pruning_engine::JournalReplay;
use pruning_engine::{Delivery, Engine, PruneRequest, PrunedEvent, Subscription};
use pruning_opencode::OpenCodeStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The prunable messages of the many-turns session, oldest first.
fn targets(engine: &Engine<OpenCodeStore>) -> Vec<String> {
    engine
        .store()
        .prunable_messages(MANY_TURNS)
        .unwrap()
        .into_iter()
        .map(|c| c.message_id)
        .collect()
}

fn prune_all_technical(
    engine: &Engine<OpenCodeStore>,
    message: &str,
) -> (PruneRequest, PrunedEvent) {
    let (revision, _) = preview(engine, MANY_TURNS, message);
    let request = PruneRequest::all_technical(MANY_TURNS.into(), message.into(), revision).unwrap();
    let outcome = engine.prune(&request).unwrap();
    (request, outcome.event.expect("pruned"))
}

fn next(rt: &tokio::runtime::Runtime, sub: &mut Subscription<JournalReplay>) -> PrunedEvent {
    match rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), sub.recv()).await }) {
        Ok(Ok(Delivery::Event(event))) => event,
        other => panic!("expected an event, got {other:?}"),
    }
}

fn assert_quiet(rt: &tokio::runtime::Runtime, sub: &mut Subscription<JournalReplay>) {
    let waited =
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(150), sub.recv()).await });
    assert!(waited.is_err(), "unexpected delivery: {waited:?}");
}

#[test]
fn subscriber_with_cursor_gets_exactly_the_missed_events_then_live_ones() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let rt = runtime();
    let messages = targets(&engine);
    assert!(messages.len() >= 5, "{messages:?}");
    let (_, first) = prune_all_technical(&engine, &messages[0]);
    let (_, second) = prune_all_technical(&engine, &messages[1]);
    let (_, third) = prune_all_technical(&engine, &messages[2]);
    assert_eq!((first.seq, second.seq, third.seq), (1, 2, 3));

    // A client that saw event 1 reconnects.
    let mut sub = engine.subscribe(1);
    assert_eq!(next(&rt, &mut sub), second);
    assert_eq!(next(&rt, &mut sub), third);
    assert_quiet(&rt, &mut sub);
    let (_, fourth) = prune_all_technical(&engine, &messages[3]);
    assert_eq!(next(&rt, &mut sub), fourth);
    assert_eq!(sub.cursor(), 4);
    assert_quiet(&rt, &mut sub);
}

#[test]
fn two_subscribers_both_receive_each_event() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let rt = runtime();
    let messages = targets(&engine);
    let mut a = engine.subscribe(0);
    let mut b = engine.subscribe(0);
    let (_, first) = prune_all_technical(&engine, &messages[0]);
    let (_, second) = prune_all_technical(&engine, &messages[1]);
    for sub in [&mut a, &mut b] {
        assert_eq!(next(&rt, sub), first);
        assert_eq!(next(&rt, sub), second);
        assert_quiet(&rt, sub);
    }
    assert_eq!(first.event_type, "rpc.codenomad.session-pruning.pruned");
}

#[test]
fn identical_retry_republishes_the_same_event() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let rt = runtime();
    let messages = targets(&engine);
    let (request, event) = prune_all_technical(&engine, &messages[0]);
    let mut sub = engine.subscribe(event.seq);
    assert_quiet(&rt, &mut sub);
    let retry = engine.prune(&request).unwrap();
    assert!(retry.retried);
    let again = next(&rt, &mut sub);
    assert_eq!(again, event);
    assert_eq!((again.id, again.seq), (event.id, 1));
    assert_eq!(
        engine.journal().last_seq().unwrap(),
        1,
        "no new event journaled"
    );
}
