use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{commit, next_seqs, range, MemorySource};
use pruning_events::{Delivery, Hub};

#[tokio::test]
async fn recv_dropped_while_waiting_then_event_arrives() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 8);
    let mut sub = hub.subscribe(0);

    for _ in 0..3 {
        let waited = tokio::time::timeout(Duration::from_millis(5), sub.recv()).await;
        assert!(waited.is_err(), "nothing was published yet");
    }
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_cancelled_over_and_over_during_a_stream_of_events() {
    const TOTAL: u64 = 3_000;
    let source = MemorySource::new();
    let hub = Hub::with_page_size(source.clone(), 4, 16);
    let mut sub = hub.subscribe(0);

    // The writer starts once a recv has been cancelled, so that at least one is, however the
    // two tasks are scheduled.
    let started = Arc::new(tokio::sync::Notify::new());
    let writer = {
        let source = Arc::clone(&source);
        let hub = hub.clone();
        let started = Arc::clone(&started);
        tokio::spawn(async move {
            started.notified().await;
            for i in 0..TOTAL {
                commit(&source, &hub);
                if i % 3 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };

    let mut seen = Vec::new();
    let mut cancelled = 0_u32;
    while seen.len() < usize::try_from(TOTAL).unwrap() {
        tokio::select! {
            biased;
            got = sub.recv() => match got.unwrap() {
                Delivery::Event(event) => seen.push(event.seq),
                other => panic!("unexpected {other:?}"),
            },
            () = tokio::task::yield_now() => {
                if cancelled == 0 {
                    started.notify_one();
                }
                cancelled += 1;
            }
        }
    }
    writer.await.unwrap();
    assert_eq!(seen, range(1, TOTAL));
    assert!(cancelled > 0, "the test never cancelled a recv");
}
