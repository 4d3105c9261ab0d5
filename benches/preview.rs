//! Preview of a 16 MiB message against two baselines over the same part rows' text:
//! - `serde_json_parse`: each row's text turned into a `serde_json::Value`;
//! - `parse_serialize_hash`: the same parse, then the value serialized again and every byte of
//!   it hashed with SHA-256: the least work a preview can do (it parses, serializes the content
//!   canonically and hashes it for the revision).
//!
//! The preview runs on a writable store (`preview`, as the server's engine reads) and on a
//! read-only one (`preview_read_only`, as `session-prune preview` reads: through a memory map).
//! docs/performance.md: preview within 2x of the parse today; the goal
//! is within 1.3x of `parse_serialize_hash`.

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use pruning_engine::{PreviewRequest, PreviewResult};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use sha2::{Digest, Sha256};

const MESSAGE: &str = "msg_bench_16mib";

fn preview_16mib(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::fixture_copy(dir.path());
    let conn = rusqlite::Connection::open(&db).expect("open");
    // 32 tool parts, each holding its output twice: just under the 16 MiB budget.
    let written = common::insert_message(&conn, common::SESSION, MESSAGE, 32, 254_000);
    assert!(written < 16 * 1024 * 1024, "{written}");
    let texts: Vec<String> = conn
        .prepare("SELECT data FROM part WHERE message_id = ?1 ORDER BY id")
        .expect("prepare")
        .query_map([MESSAGE], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    drop(conn);
    let store = OpenCodeStore::open(&db, StoreOptions::default()).expect("store");
    let request = PreviewRequest::new(common::SESSION.into(), MESSAGE.into()).expect("request");
    match pruning_engine::preview(&store, &request)
        .expect("preview")
        .result
    {
        PreviewResult::Preview { parts, .. } => assert_eq!(parts.len(), 32),
        other => panic!("{other:?}"),
    }

    let mut group = c.benchmark_group("preview_16mib");
    group.sample_size(20);
    group.throughput(criterion::Throughput::Bytes(written as u64));
    group.bench_function("serde_json_parse", |b| {
        b.iter(|| {
            for text in &texts {
                let value: serde_json::Value = serde_json::from_str(text).expect("json");
                std::hint::black_box(value);
            }
        })
    });
    group.bench_function("parse_serialize_hash", |b| {
        b.iter(|| {
            let mut hasher = Sha256::new();
            for text in &texts {
                let value: serde_json::Value = serde_json::from_str(text).expect("json");
                hasher.update(serde_json::to_vec(&value).expect("serialize"));
            }
            std::hint::black_box(hasher.finalize())
        })
    });
    group.bench_function("preview", |b| {
        b.iter(|| std::hint::black_box(pruning_engine::preview(&store, &request).expect("preview")))
    });
    // As `session-prune preview` reads it: a read-only store, which reads the file through a
    // memory map.
    let reader = OpenCodeStore::open_read_only(&db, StoreOptions::default()).expect("reader");
    group.bench_function("preview_read_only", |b| {
        b.iter(|| {
            std::hint::black_box(pruning_engine::preview(&reader, &request).expect("preview"))
        })
    });
    group.finish();
}

criterion_group!(benches, preview_16mib);
criterion_main!(benches);
