//! An in-memory journal for the tests: a `Mutex<Vec<E>>` whose `append` returns the new event.
#![allow(dead_code)]

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pruning_events::{Delivery, Hub, RecvError, ReplaySource, Sequenced, Subscription};

/// A committed event: a seq and an id, like the journal's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestEvent {
    pub seq: u64,
    pub id: String,
}

impl Sequenced for TestEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// The error the source fails with when told to.
#[derive(Debug)]
pub struct ReadFailed;

impl fmt::Display for ReadFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("injected read failure")
    }
}

impl std::error::Error for ReadFailed {}

#[derive(Default)]
struct Log {
    events: Vec<TestEvent>,
    last_seq: u64,
}

/// The journal stand-in.
#[derive(Default)]
pub struct MemorySource {
    log: Mutex<Log>,
    failures: AtomicUsize,
    reads: AtomicUsize,
}

impl MemorySource {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Journals a new event with the next seq and returns it.
    pub fn append(&self) -> TestEvent {
        let mut log = self.log.lock().unwrap();
        log.last_seq += 1;
        let event = TestEvent {
            seq: log.last_seq,
            id: format!("evt_{}", log.last_seq),
        };
        log.events.push(event.clone());
        event
    }

    /// Journals `n` events without publishing them.
    pub fn append_n(&self, n: u64) {
        for _ in 0..n {
            self.append();
        }
    }

    /// Drops every event with seq < `first_kept`.
    pub fn trim_before(&self, first_kept: u64) {
        self.log
            .lock()
            .unwrap()
            .events
            .retain(|e| e.seq >= first_kept);
    }

    /// Makes the next `n` reads fail.
    pub fn fail_next_reads(&self, n: usize) {
        self.failures.store(n, Ordering::SeqCst);
    }

    /// How many times `events_after` was called.
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    pub fn len(&self) -> u64 {
        self.log.lock().unwrap().last_seq
    }

    fn failing(&self) -> bool {
        self.failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl ReplaySource for MemorySource {
    type Event = TestEvent;
    type Error = ReadFailed;

    fn events_after(&self, since: u64, limit: usize) -> Result<Vec<TestEvent>, ReadFailed> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.failing() {
            return Err(ReadFailed);
        }
        let log = self.log.lock().unwrap();
        let start = log.events.partition_point(|e| e.seq <= since);
        Ok(log.events[start..].iter().take(limit).cloned().collect())
    }

    fn first_seq(&self) -> Result<Option<u64>, ReadFailed> {
        if self.failing() {
            return Err(ReadFailed);
        }
        Ok(self.log.lock().unwrap().events.first().map(|e| e.seq))
    }
}

/// Journals a new event, then publishes it, as a committer does.
pub fn commit(source: &MemorySource, hub: &Hub<MemorySource>) -> TestEvent {
    let event = source.append();
    hub.publish(event.clone());
    event
}

/// Receives one delivery, failing the test if none comes within 10 s.
pub async fn next(sub: &mut Subscription<MemorySource>) -> Result<Delivery<TestEvent>, RecvError> {
    tokio::time::timeout(Duration::from_secs(10), sub.recv())
        .await
        .expect("no delivery within 10 s")
}

/// Receives `n` deliveries that must all be events, and returns their seqs.
pub async fn next_seqs(sub: &mut Subscription<MemorySource>, n: usize) -> Vec<u64> {
    let mut seqs = Vec::with_capacity(n);
    for _ in 0..n {
        match next(sub).await {
            Ok(Delivery::Event(event)) => {
                assert_eq!(event.id, format!("evt_{}", event.seq));
                seqs.push(event.seq);
            }
            other => panic!("expected an event after {seqs:?}, got {other:?}"),
        }
    }
    seqs
}

/// Asserts that nothing is delivered within 50 ms.
pub async fn assert_idle(sub: &mut Subscription<MemorySource>) {
    if let Ok(got) = tokio::time::timeout(Duration::from_millis(50), sub.recv()).await {
        panic!("expected nothing more, got {got:?}");
    }
}

pub fn range(from: u64, to: u64) -> Vec<u64> {
    (from..=to).collect()
}
