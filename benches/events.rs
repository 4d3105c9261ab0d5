//! The event stream over HTTP, on loopback, against an in-process server over a copy of the
//! real fixture:
//! - `events/replay_100k_sse`: a new SSE subscriber with `since=0` reads 100,000 journaled
//!   events, about 23.7 MB of SSE text (criterion; docs/ARCHITECTURE.md, "Performance
//!   targets": under 100 ms). Measured 61 to 81 ms (criterion's intervals over six runs on 2
//!   shared, busy cores; 215 to 281 ms before frames were written straight into the chunks and
//!   this client parsed linearly). What remains is mostly the server's: reading and decoding
//!   the journal's records, the JSON of their data, allocation, and the socket copies;
//!   this client's receiving and parsing take about a sixth of the CPU time;
//! - fan-out to 1,000 concurrent SSE subscribers: 200 events published 20 ms apart (below
//!   saturation: the delivery latency), then a burst of 300 (the most deliveries per second);
//!   p50/p99 latency from publish to a subscriber's parse, deliveries per second (printed).
//!   Subscribers and server share the machine's cores.
//!
//! ```text
//! cargo bench --bench events [-- [replay|fan_out] [--subscribers 1000]]
//! ```
//!
//! A name given runs only the measurements whose name holds it.
//!
//! Events are journaled directly (intents and commits in bulk), then published through the
//! engine's hub, so the numbers are those of the journal, the hub and the HTTP stream, not of
//! pruning.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;
use pruning_engine::{Engine, Journal, PrunedEvent};
use pruning_journal::{Commit, Intent, IntentState, Selection};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use pruning_server::{AppState, ServerOptions, Workspace, Workspaces};
use tokio::runtime::Runtime;
use uuid::Uuid;

const REPLAYED: u64 = 100_000;
const PACED: u64 = 200;
const BURST: u64 = 300;

struct Bench {
    _dir: tempfile::TempDir,
    engine: Arc<Engine<OpenCodeStore>>,
    address: String,
    runtime: Runtime,
}

/// An engine over a fixture copy, served on a free loopback port.
fn start() -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::fixture_copy(dir.path());
    let store = OpenCodeStore::open(&db, StoreOptions::default()).expect("store");
    let journal = Journal::open(&dir.path().join("journal")).expect("journal");
    let engine = Arc::new(Engine::open(store, journal).expect("engine"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let state = AppState::new(
        Arc::clone(&engine),
        ServerOptions {
            password: None,
            workspaces: Workspaces::Given(vec![Workspace {
                id: "work".into(),
                directory: "/tmp/oc-cache/run/work".into(),
            }]),
            heartbeat: Duration::from_secs(15),
            allowed_origins: Vec::new(),
            upkeep: None,
        },
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    runtime.spawn(pruning_server::serve(
        listener,
        state,
        std::future::pending(),
    ));
    Bench {
        _dir: dir,
        engine,
        address,
        runtime,
    }
}

/// Journals `count` pending intents of prunes in the fixture's session.
fn record_intents(engine: &Engine<OpenCodeStore>, count: u64) -> Vec<Intent> {
    let intents: Vec<Intent> = (0..count)
        .map(|_| {
            let id = Uuid::now_v7();
            let mut request_key = [0u8; 32];
            request_key[..16].copy_from_slice(id.as_bytes());
            Intent {
                intent_id: id,
                request_key,
                session_id: common::SESSION.into(),
                message_id: format!("msg_{}", id.simple()),
                revision: "0".repeat(64),
                selection: Selection::AllTechnical,
                created_at_ms: pruning_engine::now_ms(),
                state: IntentState::Pending,
            }
        })
        .collect();
    for chunk in intents.chunks(10_000) {
        engine.journal().record_intents(chunk).expect("intents");
    }
    intents
}

/// Marks `intents` committed in one journal write per 10,000; returns their events.
fn commit(engine: &Engine<OpenCodeStore>, intents: &[Intent]) -> Vec<PrunedEvent> {
    let mut events = Vec::with_capacity(intents.len());
    for chunk in intents.chunks(10_000) {
        let commits: Vec<Commit> = chunk
            .iter()
            .map(|intent| Commit {
                intent_id: intent.intent_id,
                event_id: Uuid::now_v7(),
                revision_after: "1".repeat(64),
                removed_count: 1,
                committed_at_ms: pruning_engine::now_ms(),
                kind: pruning_journal::EventKind::Pruned,
                receipt_digest: Some([1; 32]),
            })
            .collect();
        let committed = engine.journal().commit(&commits).expect("commit");
        events.extend(committed.into_iter().map(PrunedEvent::from));
    }
    events
}

/// Reads an SSE stream until the event with id `last`; calls `seen(id)` for each event.
///
/// Parses as a client reads a stream: each received byte is looked at a bounded number of
/// times (the end of each event is found once, its lines split once), and what follows the
/// last complete event is kept for the next chunk.
async fn read_until(
    client: &reqwest::Client,
    url: &str,
    last: u64,
    mut seen: impl FnMut(u64),
    ready: Option<tokio::sync::mpsc::Sender<()>>,
) {
    let mut response = client.get(url).send().await.expect("GET events");
    assert_eq!(response.status().as_u16(), 200);
    if let Some(ready) = ready {
        ready.send(()).await.expect("ready");
    }
    let pruned_line = b"event: rpc.codenomad.session-pruning.pruned".as_slice();
    let event_end = memchr::memmem::Finder::new(b"\n\n");
    let mut buffer: Vec<u8> = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("chunk") {
        // A previous chunk's incomplete event may end with `\n`, and this chunk start with `\n`.
        let mut search_from = buffer.len().saturating_sub(1);
        buffer.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(at) = event_end.find(&buffer[search_from..]) {
            let end = search_from + at + 2;
            let event = &buffer[start..end];
            start = end;
            search_from = end;
            let mut lines = event.split(|&b| b == b'\n');
            if !lines.clone().any(|line| line == pruned_line) {
                continue;
            }
            let id: u64 = lines
                .find_map(|line| line.strip_prefix(b"id: "))
                .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
                .expect("id");
            seen(id);
            if id >= last {
                return;
            }
        }
        buffer.drain(..start);
    }
    panic!("the stream ended before event {last}");
}

fn replay(c: &mut Criterion, bench: &Bench) {
    let intents = record_intents(&bench.engine, REPLAYED);
    let events = commit(&bench.engine, &intents);
    let last = events.last().expect("events").seq;
    let url = format!(
        "http://{}/api/workspaces/work/session-pruning/events?since={}",
        bench.address,
        last - REPLAYED
    );
    let client = reqwest::Client::new();
    let mut group = c.benchmark_group("events");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("replay_100k_sse", |b| {
        b.iter(|| {
            let mut count = 0u64;
            bench
                .runtime
                .block_on(read_until(&client, &url, last, |_| count += 1, None));
            assert_eq!(count, REPLAYED);
        })
    });
    group.finish();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn fan_out(bench: &Bench, subscribers: usize) {
    let hub = bench.engine.hub();
    let intents = record_intents(&bench.engine, PACED + BURST);
    let since = bench.engine.journal().last_seq().expect("last seq");
    let last = since + PACED + BURST;
    let url_live = format!(
        "http://{}/api/workspaces/work/session-pruning/events?since={since}",
        bench.address
    );
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let received: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(subscribers);
    let mut tasks = Vec::new();
    for _ in 0..subscribers {
        let (client, url, received, ready) = (
            client.clone(),
            url_live.clone(),
            Arc::clone(&received),
            ready_tx.clone(),
        );
        tasks.push(bench.runtime.spawn(async move {
            let mut local = Vec::with_capacity((PACED + BURST) as usize);
            read_until(
                &client,
                &url,
                last,
                |id| local.push((id, Instant::now())),
                Some(ready),
            )
            .await;
            received.lock().expect("lock").extend(local);
        }));
    }
    bench.runtime.block_on(async {
        for _ in 0..subscribers {
            ready_rx.recv().await.expect("ready");
        }
    });
    // Every stream is live (it had nothing to replay); the events are journaled now, in one
    // write, and then announced one by one as committers do.
    std::thread::sleep(Duration::from_millis(500));
    let events = commit(&bench.engine, &intents);
    assert_eq!(events.last().expect("events").seq, last);
    let mut phases = Vec::new();
    for (name, range, gap) in [
        (
            "paced, 20 ms apart",
            0..PACED as usize,
            Duration::from_millis(20),
        ),
        (
            "burst",
            PACED as usize..(PACED + BURST) as usize,
            Duration::ZERO,
        ),
    ] {
        let started = Instant::now();
        for event in &events[range.clone()] {
            sent.lock().expect("lock").insert(event.seq, Instant::now());
            hub.publish(event.clone());
            if !gap.is_zero() {
                std::thread::sleep(gap);
            }
        }
        phases.push((name, range, started));
    }
    bench.runtime.block_on(async {
        for task in tasks {
            task.await.expect("subscriber");
        }
    });
    let received = received.lock().expect("lock");
    let sent = sent.lock().expect("lock");
    println!("events/fan_out: {subscribers} SSE subscribers on loopback");
    for (name, range, started) in phases {
        let seqs = events[range.start].seq..=events[range.end - 1].seq;
        let mut latencies: Vec<Duration> = received
            .iter()
            .filter(|(id, _)| seqs.contains(id))
            .map(|(id, at)| at.duration_since(sent[id]))
            .collect();
        latencies.sort();
        let finished = received
            .iter()
            .filter(|(id, _)| seqs.contains(id))
            .map(|(_, at)| *at)
            .max()
            .expect("deliveries");
        let wall = finished.duration_since(started);
        println!(
            "  {name}: {} events x {subscribers} = {} deliveries in {:.3} s = {:.0} deliveries/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            range.len(),
            latencies.len(),
            wall.as_secs_f64(),
            latencies.len() as f64 / wall.as_secs_f64(),
            percentile(&latencies, 0.50).as_secs_f64() * 1e3,
            percentile(&latencies, 0.99).as_secs_f64() * 1e3,
            latencies.last().expect("latencies").as_secs_f64() * 1e3,
        );
    }
}

fn main() {
    let mut subscribers = 1000;
    let mut filter = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--subscribers" {
            subscribers = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--subscribers N");
        } else if !arg.starts_with('-') {
            filter = Some(arg);
        }
    }
    let runs = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let bench = start();
    let mut criterion = Criterion::default().with_filter("events");
    if runs("events/replay_100k_sse") {
        replay(&mut criterion, &bench);
    }
    if runs("events/fan_out") {
        fan_out(&bench, subscribers);
    }
    criterion.final_summary();
}
