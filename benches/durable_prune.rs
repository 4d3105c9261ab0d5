//! One durable prune against the fsyncs it needs.
//!
//! A prune in a running engine makes two durable writes: the journaled intent (redb commit) and
//! the SQLite transaction (WAL commit with `synchronous = FULL`); its commit mark rides the next
//! durable write (docs/ARCHITECTURE.md, "Sequence numbers after a crash"). The baseline writes
//! 4 KiB and calls `fdatasync` twice on files in the same folder. docs/performance.md: a prune
//! within 1.3x of that.

mod common;

use std::io::Write;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use pruning_engine::{Engine, Journal, PreviewRequest, PreviewResult, PruneRequest, PruneResult};
use pruning_opencode::{OpenCodeStore, StoreOptions};

fn durable_prune(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::fixture_copy(dir.path());
    let conn = rusqlite::Connection::open(&db).expect("open");
    let store = OpenCodeStore::open(
        &db,
        StoreOptions {
            quiet_period: Duration::ZERO,
            ..StoreOptions::default()
        },
    )
    .expect("store");
    let engine = Engine::open(
        store,
        Journal::open(&dir.path().join("journal")).expect("journal"),
    )
    .expect("engine");
    let mut counter = 0u64;

    let mut group = c.benchmark_group("durable_prune");
    group.sample_size(30);
    group.bench_function("fsync_floor_2x", |b| {
        let mut files: Vec<std::fs::File> = (0..2)
            .map(|i| std::fs::File::create(dir.path().join(format!("sync{i}"))).expect("file"))
            .collect();
        let page = vec![7u8; 4096];
        b.iter(|| {
            for file in &mut files {
                file.write_all(&page).expect("write");
                file.sync_data().expect("fdatasync");
            }
        })
    });
    // In the fixture's largest session (1.3 MB of parts and snapshot events, all read by the
    // fence) and in a new session of its own. Each sample prunes a new message; the one pruned
    // before is deleted first, so that sessions do not grow while the benchmark runs.
    for (name, large) in [
        ("prune_one_message_in_large_session", true),
        ("prune_one_message_in_small_session", false),
    ] {
        let mut previous: Option<String> = None;
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    counter += 1;
                    if let Some(old) = previous.take() {
                        common::delete_message(&conn, &old);
                    }
                    let session = if large {
                        common::SESSION.to_string()
                    } else {
                        common::add_session(&conn, &format!("ses_bench_{counter:020}"))
                    };
                    let id = format!("msg_bench_{counter:08}");
                    common::insert_message(&conn, &session, &id, 1, 8 * 1024);
                    previous = Some(id.clone());
                    let request = PreviewRequest::new(session.clone(), id.clone()).expect("req");
                    let revision = match engine.preview(&request).expect("preview") {
                        PreviewResult::Preview { revision, .. } => revision,
                        other => panic!("{other:?}"),
                    };
                    PruneRequest::all_technical(session, id, revision).expect("req")
                },
                |request| {
                    let outcome = engine.prune(&request).expect("prune");
                    assert!(
                        matches!(outcome.result, PruneResult::Pruned { .. }),
                        "{outcome:?}"
                    );
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, durable_prune);
criterion_main!(benches);
