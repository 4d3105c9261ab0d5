use crate::common;

use common::{commit, MemorySource};
use pruning_events::{Delivery, Hub};
use tokio_stream::StreamExt;

#[tokio::test]
async fn stream_replays_then_goes_live_then_ends() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 4);
    source.append_n(3);
    let stream = hub.subscribe(1).into_stream();
    for _ in 0..10 {
        commit(&source, &hub);
    }
    drop(hub);

    let seqs: Vec<u64> = stream
        .map(|item| match item {
            Ok(Delivery::Event(event)) => event.seq,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
        .await;
    assert_eq!(seqs, (2..=13).collect::<Vec<_>>());
}

#[test]
fn stream_is_send() {
    fn assert_send<T: Send + 'static>(_: &T) {}
    let hub = Hub::new(MemorySource::new(), 4);
    assert_send(&hub.subscribe(0).into_stream());
    assert_send(&hub.subscribe(0));
    assert_send(&hub);
}
