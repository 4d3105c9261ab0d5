//! `audit` over 10,000 receipts, against reading the same receipts (the least an audit does).
//!
//! Set-up: the fixture plus 100 sessions of 100 completed messages (one bash part of 2 KB and
//! a text part each), all pruned by `session-prune clean --all --apply` (the release binary,
//! built first): 10,000 receipts more than the fixture's own. docs/ARCHITECTURE.md, "Performance
//! targets": the whole audit under 5 s.

mod common;

use std::process::Command;

use criterion::{criterion_group, criterion_main, Criterion};
use pruning_engine::{AuditScope, Journal, SessionStore};
use pruning_opencode::{OpenCodeStore, StoreOptions};

const SESSIONS: usize = 100;
const MESSAGES_PER_SESSION: usize = 100;

fn audit_10k(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::fixture_copy(dir.path());
    {
        let conn = rusqlite::Connection::open(&db).expect("open");
        conn.execute_batch("BEGIN").expect("begin");
        for s in 0..SESSIONS {
            let session = common::add_session(&conn, &format!("ses_bench_audit_{s:04}"));
            for m in 0..MESSAGES_PER_SESSION {
                common::insert_message(
                    &conn,
                    &session,
                    &format!("msg_bench_{s:04}_{m:04}"),
                    1,
                    2000,
                );
            }
        }
        conn.execute_batch("COMMIT").expect("commit");
    }
    let binary = common::release_binary();
    let out = Command::new(&binary)
        .arg("--db")
        .arg(&db)
        .args(["--abandoned-after", "never", "clean", "--all", "--apply"])
        .args(["--keep-last-turns", "0"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "run {} (cargo build --release first): {e}",
                binary.display()
            )
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let store = OpenCodeStore::open(&db, StoreOptions::default()).expect("store");
    let journal =
        Journal::open_read_only(&dir.path().join("opencode.db.prune-journal")).expect("journal");
    let receipts = store.receipts(None).expect("receipts").len();
    assert!(
        receipts >= SESSIONS * MESSAGES_PER_SESSION,
        "{receipts} receipts after {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report = pruning_engine::audit(&store, Some(&journal), AuditScope::All).expect("audit");
    assert!(report.ok, "{:?}", report.discrepancies);
    assert_eq!(report.receipts as usize, receipts);

    let mut group = c.benchmark_group("audit_10k");
    group.sample_size(10);
    group.bench_function("read_receipts", |b| {
        b.iter(|| std::hint::black_box(store.receipts(None).expect("receipts")))
    });
    group.bench_function("audit", |b| {
        b.iter(|| {
            std::hint::black_box(
                pruning_engine::audit(&store, Some(&journal), AuditScope::All).expect("audit"),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, audit_10k);
criterion_main!(benches);
