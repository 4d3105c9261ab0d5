//! Browsing a 20,000-message V1 session (copies of the fixture's first four messages, about
//! 120 MB): a window of the newest 200 messages and the first outline page (16,384 entries),
//! each against a bare SQLite read of the same rows in the same run (`bare_window_rows`: the
//! 200 messages and their parts; `bare_outline_rows`: the 16,384 messages and their parts), and
//! the revalidation of the whole outline after one message is appended (`outline_revalidate`:
//! both pages sent back with the checkpoints of the scan before). Ends with the `BROWSE` line:
//! the two ratios (best of five alternated runs each) and the rows revalidation parsed.
//! docs/performance.md.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use pruning_engine::browse::{
    KnownCheckpoint, OutlineRequest, OutlineResult, Target, WindowRequest, WindowResult,
};
use pruning_opencode::{Browser, StoreOptions};
use rusqlite::{params, Connection};

const SESSION: &str = "ses_bench_browse_20k";
const MESSAGES: usize = 20_000;

/// Fills the session with `count` copies of the fixture session's first four messages, each
/// 1 ms after the last.
fn grow(conn: &Connection, count: usize, first: usize) {
    let models: Vec<String> = {
        let mut stmt = conn
            .prepare("SELECT id FROM message WHERE session_id = ?1 ORDER BY time_created LIMIT 4")
            .expect("prepare");
        stmt.query_map([common::SESSION], |r| r.get(0))
            .expect("models")
            .collect::<Result<_, _>>()
            .expect("models")
    };
    let tx = conn.unchecked_transaction().expect("begin");
    for i in first..first + count {
        let id = format!("msg_bench{i:08}");
        let model = &models[i % models.len()];
        tx.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data)
             SELECT ?1, ?2, ?3, ?3, data FROM message WHERE id = ?4",
            params![id, SESSION, 1_000_000 + i as i64, model],
        )
        .expect("message");
        tx.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
             SELECT 'prt_bench' || ?1 || substr(id, 4), ?1, ?2, ?3, ?3, data
             FROM part WHERE message_id = ?4",
            params![id, SESSION, 1_000_000 + i as i64, model],
        )
        .expect("parts");
    }
    tx.commit().expect("commit");
}

fn window(browser: &Arc<Browser>) -> usize {
    let request = WindowRequest {
        session_id: SESSION.into(),
        target: Target::Latest {},
    };
    match browser
        .lease()
        .expect("lease")
        .window(&request)
        .expect("window")
    {
        WindowResult::Window { messages, .. } => messages.len(),
        other => panic!("{other:?}"),
    }
}

/// The same 200 messages and their parts, read as text with no JSON work.
fn bare_window(conn: &Connection) -> usize {
    let mut messages = conn
        .prepare_cached(
            "SELECT id, data FROM message WHERE session_id = ?1
             ORDER BY time_created DESC, id DESC LIMIT 200",
        )
        .expect("prepare");
    let mut parts = conn
        .prepare_cached("SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id")
        .expect("prepare");
    let mut bytes = 0;
    let rows: Vec<(String, String)> = messages
        .query_map([SESSION], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows");
    for (id, data) in &rows {
        bytes += data.len();
        let texts: Vec<String> = parts
            .query_map([id], |r| r.get(1))
            .expect("parts")
            .collect::<Result<_, _>>()
            .expect("parts");
        bytes += texts.iter().map(String::len).sum::<usize>();
    }
    assert_eq!(rows.len(), 200);
    bytes
}

fn outline(
    browser: &Arc<Browser>,
    cursor: Option<pruning_engine::browse::OutlineCursor>,
    known: &[KnownCheckpoint],
) -> (OutlineResult, u64) {
    let request = OutlineRequest {
        session_id: SESSION.into(),
        cursor,
        after: -1,
        known: known.to_vec(),
    };
    browser
        .lease()
        .expect("lease")
        .outline_counted(&request)
        .expect("outline")
}

/// The first 16,384 messages and their parts, read as text.
fn bare_outline(conn: &Connection) -> usize {
    let mut stmt = conn
        .prepare_cached(
            "SELECT m.data, (SELECT group_concat(p.data) FROM part p WHERE p.message_id = m.id)
             FROM message m WHERE m.session_id = ?1 ORDER BY m.time_created, m.id LIMIT 16384",
        )
        .expect("prepare");
    let mut bytes = 0;
    let mut rows = stmt.query([SESSION]).expect("rows");
    while let Some(row) = rows.next().expect("row") {
        bytes += row.get::<_, String>(0).expect("data").len();
        bytes += row
            .get::<_, Option<String>>(1)
            .expect("parts")
            .map_or(0, |p| p.len());
    }
    bytes
}

/// Every page of the outline, sending back `known`: the checkpoints it answered, and the
/// rows it parsed for entries.
fn whole_outline(browser: &Arc<Browser>, known: &[KnownCheckpoint]) -> (Vec<KnownCheckpoint>, u64) {
    let mut checkpoints = Vec::new();
    let mut parsed = 0;
    let mut cursor = None;
    loop {
        let (result, rows) = outline(browser, cursor, known);
        parsed += rows;
        let OutlineResult::Outline {
            checkpoints: page,
            cursor: next,
            ..
        } = result
        else {
            panic!("{result:?}");
        };
        checkpoints.extend(page.into_iter().map(|c| KnownCheckpoint {
            after: c.after,
            through: c.through,
            digest: c.digest,
            changed: None,
        }));
        match next {
            Some(next) => cursor = Some(next),
            None => return (checkpoints, parsed),
        }
    }
}

fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn browse_20k(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::fixture_copy(dir.path());
    let conn = Connection::open(&db).expect("open");
    common::add_session(&conn, SESSION);
    grow(&conn, MESSAGES, 0);
    let browser = Browser::open(&db, StoreOptions::default()).expect("browser");
    let reader = Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("reader");

    let mut group = c.benchmark_group("browse_20k");
    group.sample_size(10);
    group.bench_function("window_latest", |b| b.iter(|| window(&browser)));
    group.bench_function("bare_window_rows", |b| b.iter(|| bare_window(&reader)));
    group.bench_function("outline_first_page", |b| {
        b.iter(|| outline(&browser, None, &[]))
    });
    group.bench_function("bare_outline_rows", |b| b.iter(|| bare_outline(&reader)));
    let (known, parsed_first) = whole_outline(&browser, &[]);
    group.bench_function("outline_revalidate", |b| {
        b.iter(|| whole_outline(&browser, &known))
    });
    group.finish();

    grow(&conn, 1, MESSAGES);
    let (_, parsed_after_append) = whole_outline(&browser, &known);
    let (mut w, mut bw, mut o, mut bo) =
        (Duration::MAX, Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        w = w.min(best_of(1, || {
            window(&browser);
        }));
        bw = bw.min(best_of(1, || {
            bare_window(&reader);
        }));
        o = o.min(best_of(1, || {
            outline(&browser, None, &[]);
        }));
        bo = bo.min(best_of(1, || {
            bare_outline(&reader);
        }));
    }
    println!(
        "BROWSE window_vs_bare={:.2} outline_vs_bare={:.2} window_ms={:.1} outline_ms={:.1} \
         first_scan_rows_parsed={parsed_first} revalidate_rows_parsed={parsed_after_append} of {}",
        w.as_secs_f64() / bw.as_secs_f64(),
        o.as_secs_f64() / bo.as_secs_f64(),
        w.as_secs_f64() * 1e3,
        o.as_secs_f64() * 1e3,
        MESSAGES + 1
    );
}

criterion_group!(benches, browse_20k);
criterion_main!(benches);
