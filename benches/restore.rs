//! The restore of a 16 MiB message (32 tool parts, each holding its output twice), against two
//! references measured in the same run on the same message:
//! - `prune_archived`: the archived prune of it (the rows captured, compressed, synced, deleted);
//! - `insert_rows`: a bare SQLite transaction inserting the same part rows into a table of the
//!   same shape, committed with `synchronous = FULL` (the least a restore writes).
//!
//! Each restore undoes a prune made (untimed) just before it, and each timed prune is undone
//! (untimed) after it. docs/performance.md.

mod common;

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use pruning_engine::{
    Engine, Journal, PreviewRequest, PreviewResult, PruneRequest, PruneResult, RestoreRequest,
    RestoreResult,
};
use pruning_opencode::{OpenCodeStore, StoreOptions};

const MESSAGE: &str = "msg_bench_restore_16mib";

/// Prunes every technical part of the message (archived): its receipt id.
fn prune(engine: &Engine<OpenCodeStore>) -> uuid::Uuid {
    let preview = PreviewRequest::new(common::SESSION.into(), MESSAGE.into()).expect("request");
    let revision = match pruning_engine::preview(engine.store(), &preview)
        .expect("preview")
        .result
    {
        PreviewResult::Preview { revision, .. } => revision,
        other => panic!("{other:?}"),
    };
    let request = PruneRequest::all_technical(common::SESSION.into(), MESSAGE.into(), revision)
        .expect("request");
    let outcome = engine.prune(&request).expect("prune");
    assert!(
        matches!(outcome.result, PruneResult::Pruned { .. }),
        "{:?}",
        outcome.refusal
    );
    outcome.receipt.expect("a receipt").receipt_id
}

/// Restores the prune with receipt `receipt`.
fn restore(engine: &Engine<OpenCodeStore>, receipt: uuid::Uuid) {
    let outcome = engine
        .restore(&RestoreRequest::new(receipt))
        .expect("restore");
    assert!(
        matches!(outcome.result, RestoreResult::Restored { .. }),
        "{:?}",
        outcome.refusal
    );
}

fn restore_16mib(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::fixture_copy(dir.path());
    let conn = rusqlite::Connection::open(&db).expect("open");
    let written = common::insert_message(&conn, common::SESSION, MESSAGE, 32, 254_000);
    assert!(written < 16 * 1024 * 1024, "{written}");
    conn.execute_batch(
        "CREATE TABLE part_copy AS SELECT * FROM part WHERE 0; PRAGMA synchronous = FULL;",
    )
    .expect("copy table");
    let store = OpenCodeStore::open(
        &db,
        StoreOptions {
            quiet_period: Duration::ZERO,
            ..StoreOptions::default()
        },
    )
    .expect("store");
    store.archive_prunes().expect("archive");
    let engine = Engine::open(
        store,
        Journal::open(&dir.path().join("journal")).expect("journal"),
    )
    .expect("engine");

    let mut group = c.benchmark_group("restore_16mib");
    group.sample_size(10);
    group.throughput(criterion::Throughput::Bytes(written as u64));
    group.bench_function("insert_rows", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                conn.execute_batch(&format!(
                    "BEGIN; INSERT INTO part_copy SELECT * FROM part WHERE message_id = '{MESSAGE}'; COMMIT;"
                ))
                .expect("insert");
                total += started.elapsed();
                conn.execute_batch("DELETE FROM part_copy").expect("delete");
            }
            total
        })
    });
    group.bench_function("prune_archived", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let receipt = prune(&engine);
                total += started.elapsed();
                restore(&engine, receipt);
            }
            total
        })
    });
    group.bench_function("restore", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let receipt = prune(&engine);
                let started = Instant::now();
                restore(&engine, receipt);
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, restore_16mib);
criterion_main!(benches);
