use crate::common;

use std::error::Error as _;

use common::{assert_idle, next, next_seqs, range, MemorySource};
use pruning_events::{Delivery, Hub, RecvError};

#[tokio::test]
async fn failed_replay_read_is_retried_by_the_next_recv() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(3);
    let mut sub = hub.subscribe(0);

    source.fail_next_reads(1);
    let err = next(&mut sub).await.unwrap_err();
    assert!(matches!(err, RecvError::Source(_)));
    assert_eq!(
        err.source().map(ToString::to_string).as_deref(),
        Some("injected read failure")
    );
    assert_eq!(sub.cursor(), 0);

    assert_eq!(next_seqs(&mut sub, 3).await, range(1, 3));
    assert_idle(&mut sub).await;
}

#[tokio::test]
async fn failed_gap_fill_keeps_the_held_event() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    let mut sub = hub.subscribe(0);
    assert_idle(&mut sub).await;

    source.append();
    let second = source.append();
    hub.publish(second);
    source.fail_next_reads(1);

    assert!(matches!(next(&mut sub).await, Err(RecvError::Source(_))));
    assert_eq!(next_seqs(&mut sub, 2).await, range(1, 2));
    assert_idle(&mut sub).await;
}

#[tokio::test]
async fn failed_trim_check_is_retried() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(4);
    source.trim_before(3);
    let mut sub = hub.subscribe(0);

    // The page read succeeds, the first_seq read fails.
    source.fail_next_reads(2);
    assert!(matches!(next(&mut sub).await, Err(RecvError::Source(_))));
    assert!(matches!(next(&mut sub).await, Err(RecvError::Source(_))));
    assert_eq!(
        next(&mut sub).await.unwrap(),
        Delivery::Resync { first_kept: 3 }
    );
    assert_eq!(sub.cursor(), 4);
}
