use crate::common;

use common::{assert_idle, commit, next_seqs, range, MemorySource};
use pruning_events::Hub;

#[tokio::test]
async fn ten_thousand_events_through_a_buffer_of_sixteen() {
    let source = MemorySource::new();
    let hub = Hub::new(source.clone(), 16);
    let mut sub = hub.subscribe(0);

    for _ in 0..10_000 {
        commit(&source, &hub);
    }

    assert_eq!(next_seqs(&mut sub, 10_000).await, range(1, 10_000));
    assert_eq!(sub.cursor(), 10_000);
    assert_idle(&mut sub).await;
    assert_eq!(hub.receiver_count(), 1);

    // Still subscribed and live after the catch-up.
    commit(&source, &hub);
    assert_eq!(next_seqs(&mut sub, 1).await, vec![10_001]);
}

#[tokio::test]
async fn repeated_lags_while_reading_slowly() {
    let source = MemorySource::new();
    let hub = Hub::with_page_size(source.clone(), 4, 5);
    let mut sub = hub.subscribe(0);
    let mut seen = Vec::new();

    for round in 0..50 {
        for _ in 0..(round % 13) {
            commit(&source, &hub);
        }
        let expected = usize::try_from(source.len()).unwrap() - seen.len();
        seen.extend(next_seqs(&mut sub, expected.min(3)).await);
    }
    let rest = usize::try_from(source.len()).unwrap() - seen.len();
    seen.extend(next_seqs(&mut sub, rest).await);

    assert_eq!(seen, range(1, source.len()));
    assert_idle(&mut sub).await;
}
