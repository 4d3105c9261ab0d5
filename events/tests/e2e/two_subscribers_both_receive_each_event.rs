use crate::common;

use common::{assert_idle, commit, next_seqs, range, MemorySource};
use pruning_events::Hub;

#[tokio::test]
async fn every_event_reaches_both_subscribers() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 256);
    let mut first = hub.subscribe(0);
    let mut second = hub.subscribe(0);
    assert_eq!(hub.receiver_count(), 2);

    for _ in 0..100 {
        commit(&source, &hub);
    }

    assert_eq!(next_seqs(&mut first, 100).await, range(1, 100));
    assert_eq!(next_seqs(&mut second, 100).await, range(1, 100));
    assert_idle(&mut first).await;
    assert_idle(&mut second).await;

    drop(second);
    assert_eq!(hub.receiver_count(), 1);
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut first, 1).await, vec![101]);
}

#[tokio::test]
async fn subscribers_of_cloned_handles_share_the_channel() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 16);
    let other = hub.clone();
    let mut first = hub.subscribe(0);
    let mut second = other.subscribe(0);
    assert_eq!(other.receiver_count(), 2);

    commit(&source, &hub);
    commit(&source, &other);

    assert_eq!(next_seqs(&mut first, 2).await, range(1, 2));
    assert_eq!(next_seqs(&mut second, 2).await, range(1, 2));
}

#[test]
fn publish_without_subscribers_is_a_no_op() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 0);
    assert_eq!(hub.receiver_count(), 0);
    commit(&source, &hub);
    hub.republish(source.append());
}
