use crate::common;

use common::{commit, next, next_seqs, range, MemorySource};
use pruning_events::{Hub, RecvError};

#[tokio::test]
async fn buffered_and_journaled_events_come_before_closed() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    let mut sub = hub.subscribe(0);
    let clone = hub.clone();
    for _ in 0..3 {
        commit(&source, &hub);
    }
    // Journaled, never announced.
    source.append_n(2);
    drop(hub);
    assert_eq!(clone.receiver_count(), 1);
    drop(clone);

    assert_eq!(next_seqs(&mut sub, 5).await, range(1, 5));
    assert!(matches!(next(&mut sub).await, Err(RecvError::Closed)));
    assert!(matches!(next(&mut sub).await, Err(RecvError::Closed)));
}

#[tokio::test]
async fn subscription_of_a_dropped_hub_still_replays() {
    let source = MemorySource::new();
    let hub = Hub::with_page_size(source.clone(), 4, 2);
    source.append_n(5);
    let mut sub = hub.subscribe(1);
    drop(hub);

    assert_eq!(next_seqs(&mut sub, 4).await, range(2, 5));
    assert!(matches!(next(&mut sub).await, Err(RecvError::Closed)));
}
