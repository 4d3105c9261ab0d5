use crate::common;

use common::{assert_idle, commit, next_seqs, range, MemorySource};
use pruning_events::Hub;

#[tokio::test]
async fn missed_events_come_first_then_live_ones() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(5);

    let mut sub = hub.subscribe(2);
    commit(&source, &hub);
    commit(&source, &hub);

    assert_eq!(next_seqs(&mut sub, 5).await, range(3, 7));
    assert_eq!(sub.cursor(), 7);
    assert_idle(&mut sub).await;

    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![8]);
    assert_idle(&mut sub).await;
}

#[tokio::test]
async fn cursor_zero_replays_from_the_beginning() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(3);

    let mut sub = hub.subscribe(0);
    assert_eq!(sub.cursor(), 0);
    assert_eq!(next_seqs(&mut sub, 3).await, range(1, 3));
    assert_idle(&mut sub).await;
}

#[tokio::test]
async fn events_published_between_subscribe_and_first_read_come_once() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(2);

    // Subscribed, then more commits land before anything is read: they are
    // both in the replay and on the live channel.
    let mut sub = hub.subscribe(0);
    for _ in 0..5 {
        commit(&source, &hub);
    }

    assert_eq!(next_seqs(&mut sub, 7).await, range(1, 7));
    assert_idle(&mut sub).await;
}

#[tokio::test]
async fn replay_is_read_in_pages() {
    let source = MemorySource::new();
    let hub = Hub::with_page_size(source.clone(), 64, 3);
    source.append_n(10);

    let mut sub = hub.subscribe(0);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![1]);
    // One page read so far.
    assert_eq!(source.reads(), 1);
    assert_eq!(next_seqs(&mut sub, 9).await, range(2, 10));
    // Pages 1-3, 4-6, 7-9, 10: the short last page ends the replay.
    assert_eq!(source.reads(), 4);

    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![11]);
    assert_eq!(source.reads(), 4);
}

#[tokio::test]
async fn subscriber_at_the_head_gets_only_live_events() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(4);

    let mut sub = hub.subscribe(4);
    assert_idle(&mut sub).await;
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![5]);
    assert_eq!(sub.cursor(), 5);
}
