use crate::common;

use common::{assert_idle, commit, next, next_seqs, range, MemorySource};
use pruning_events::{Delivery, Hub};

#[tokio::test]
async fn trimmed_cursor_gets_resync_then_live_events() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(10);
    source.trim_before(6);

    let mut sub = hub.subscribe(2);
    assert_eq!(
        next(&mut sub).await.unwrap(),
        Delivery::Resync { first_kept: 6 }
    );
    // Resumes after the newest kept event: the reload covers 6..=10.
    assert_eq!(sub.cursor(), 10);
    assert_idle(&mut sub).await;

    commit(&source, &hub);
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 2).await, range(11, 12));
}

#[tokio::test]
async fn cursor_zero_on_a_trimmed_journal_gets_resync() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(3);
    source.trim_before(2);

    let mut sub = hub.subscribe(0);
    assert_eq!(
        next(&mut sub).await.unwrap(),
        Delivery::Resync { first_kept: 2 }
    );
    assert_eq!(sub.cursor(), 3);
}

#[tokio::test]
async fn cursor_just_before_first_kept_replays_normally() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    source.append_n(10);
    source.trim_before(6);

    let mut sub = hub.subscribe(5);
    assert_eq!(next_seqs(&mut sub, 5).await, range(6, 10));
    assert_idle(&mut sub).await;
}

#[tokio::test]
async fn subscriber_that_lags_past_trimming_gets_resync() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 4);
    let mut sub = hub.subscribe(0);
    for _ in 0..3 {
        commit(&source, &hub);
    }
    assert_eq!(next_seqs(&mut sub, 3).await, range(1, 3));

    for _ in 0..27 {
        commit(&source, &hub);
    }
    source.trim_before(20);

    assert_eq!(
        next(&mut sub).await.unwrap(),
        Delivery::Resync { first_kept: 20 }
    );
    assert_eq!(sub.cursor(), 30);
    assert_idle(&mut sub).await;
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![31]);
}

#[tokio::test]
async fn gap_fill_into_trimmed_range_gets_resync() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    let mut sub = hub.subscribe(0);
    assert_idle(&mut sub).await;

    // 1..=5 were journaled but their announcements never came, and 1..=3
    // were trimmed before the subscriber read them.
    source.append_n(5);
    source.trim_before(4);
    commit(&source, &hub);

    assert_eq!(
        next(&mut sub).await.unwrap(),
        Delivery::Resync { first_kept: 4 }
    );
    assert_eq!(sub.cursor(), 6);
    assert_idle(&mut sub).await;
}
