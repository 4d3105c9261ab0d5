use crate::common;

use common::{assert_idle, commit, next_seqs, range, MemorySource, TestEvent};
use pruning_events::Hub;

#[tokio::test]
async fn republished_event_is_delivered_again_to_every_subscriber() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    let mut first = hub.subscribe(0);
    let mut second = hub.subscribe(0);
    let events: Vec<TestEvent> = (0..3).map(|_| commit(&source, &hub)).collect();

    assert_eq!(next_seqs(&mut first, 3).await, range(1, 3));
    assert_eq!(next_seqs(&mut second, 3).await, range(1, 3));

    // An identical retry announces the same event, same id and seq.
    hub.republish(events[1].clone());
    commit(&source, &hub);

    assert_eq!(next_seqs(&mut first, 2).await, vec![2, 4]);
    assert_eq!(next_seqs(&mut second, 2).await, vec![2, 4]);
    assert_eq!(first.cursor(), 4);
    assert_idle(&mut first).await;
}

#[tokio::test]
async fn plain_publish_of_a_seen_seq_is_deduped() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    let mut sub = hub.subscribe(0);
    let events: Vec<TestEvent> = (0..3).map(|_| commit(&source, &hub)).collect();
    assert_eq!(next_seqs(&mut sub, 3).await, range(1, 3));

    hub.publish(events[1].clone());
    assert_idle(&mut sub).await;
    assert_eq!(sub.cursor(), 3);
}

#[tokio::test]
async fn republish_does_not_move_the_cursor_back() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    let mut sub = hub.subscribe(0);
    let first = commit(&source, &hub);
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 2).await, range(1, 2));

    hub.republish(first);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![1]);
    assert_eq!(sub.cursor(), 2);
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![3]);
}
