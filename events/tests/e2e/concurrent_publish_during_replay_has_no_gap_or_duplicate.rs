use crate::common;

use std::sync::Arc;

use common::{assert_idle, commit, next_seqs, range, MemorySource};
use pruning_events::Hub;
use tokio::task::JoinSet;

const TOTAL: u64 = 2_000;

async fn wait_until(source: &MemorySource, len: u64) {
    while source.len() < len {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn subscribers_joining_mid_stream_get_exactly_their_range() {
    let source = MemorySource::new();
    let hub = Hub::with_page_size(source.clone(), 8, 64);

    let mut readers = JoinSet::new();
    // (cursor, when to subscribe: once this many events are journaled)
    let plan = [
        (0, 0),
        (0, 700),
        (1, 5),
        (17, 300),
        (250, 250),
        (500, 100),
        (999, 1_000),
        (1_000, 1_200),
        (1_500, 1_999),
        (1_999, 1_999),
    ];
    for (cursor, join_at) in plan {
        let source = Arc::clone(&source);
        let hub = hub.clone();
        readers.spawn(async move {
            wait_until(&source, join_at).await;
            let mut sub = hub.subscribe(cursor);
            drop(hub);
            let want = usize::try_from(TOTAL - cursor).unwrap();
            let got = next_seqs(&mut sub, want).await;
            assert_eq!(got, range(cursor + 1, TOTAL), "subscriber at {cursor}");
            assert_idle(&mut sub).await;
        });
    }

    let writer = {
        let source = Arc::clone(&source);
        let hub = hub.clone();
        tokio::spawn(async move {
            for i in 0..TOTAL {
                commit(&source, &hub);
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };

    writer.await.unwrap();
    while let Some(done) = readers.join_next().await {
        done.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_committers_publishing_out_of_order() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 32);
    let mut early = hub.subscribe(0);

    let mut writers = JoinSet::new();
    for _ in 0..4 {
        let source = Arc::clone(&source);
        let hub = hub.clone();
        writers.spawn(async move {
            for _ in 0..TOTAL / 4 {
                // Journal then publish, with other committers in between.
                let event = source.append();
                tokio::task::yield_now().await;
                hub.publish(event);
            }
        });
    }
    wait_until(&source, TOTAL / 2).await;
    let mut late = hub.subscribe(100);

    let (got_early, got_late) = tokio::join!(
        next_seqs(&mut early, usize::try_from(TOTAL).unwrap()),
        next_seqs(&mut late, usize::try_from(TOTAL - 100).unwrap()),
    );
    assert_eq!(got_early, range(1, TOTAL));
    assert_eq!(got_late, range(101, TOTAL));
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    assert_idle(&mut early).await;
    assert_idle(&mut late).await;
}

#[tokio::test]
async fn event_published_ahead_of_its_predecessor_waits_for_it() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 64);
    let mut sub = hub.subscribe(0);
    assert_idle(&mut sub).await;

    let first = source.append();
    let second = source.append();
    hub.publish(second);
    assert_eq!(next_seqs(&mut sub, 2).await, range(1, 2));
    // The late announcement of 1 is a duplicate.
    hub.publish(first);
    assert_idle(&mut sub).await;
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![3]);
}
