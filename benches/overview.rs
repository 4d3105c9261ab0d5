//! The overview against `VACUUM INTO` of the same file (a copy of every live page), timed in
//! the same run, alternated, the best of each kept:
//! - `stats --json` (the estimate: a sample of rows) and `stats --json --exact` (every row),
//!   each a run of the release binary, as a user runs them;
//! - the first page of `GET .../sessions` (the browse store's `sessions`, in this process);
//! - how far the estimate is from the exact figures: the largest error of any byte figure of
//!   `technical` and `copies` and of the largest sessions' prunable bytes, in % of the file,
//!   and whether every error of `technical` and `copies` is within the margin the estimate
//!   states.
//!
//! The run ends with one line in exactly this form, which scripts read:
//!
//! ```text
//! OVERVIEW mb=<size> stats_vs_vacuum_into=<x> exact_vs_vacuum_into=<x> sessions_page_vs_vacuum_into=<x> worst_error_pct=<x> within_margin=<true|false>
//! ```
//!
//! ```text
//! cargo bench --bench overview -- [--mb 1000] [--dir target/scale] [--db PATH] [--rounds 3]
//! ```
//!
//! `--db` measures that database (a copy of it is never needed: every step reads); else the
//! generated `scale-<mb>mb.db` of `benches/scale_clean.rs` in `--dir`, generated when missing.
//! Needs `cargo build --release` first.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use pruning_opencode::{Browser, StoreOptions};
use serde_json::Value;

struct Options {
    megabytes: u64,
    dir: PathBuf,
    db: Option<PathBuf>,
    rounds: usize,
}

fn options() -> Options {
    let mut options = Options {
        megabytes: 1000,
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/scale"),
        db: None,
        rounds: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mb" => options.megabytes = args.next().and_then(|v| v.parse().ok()).unwrap_or(1000),
            "--dir" => options.dir = args.next().map(PathBuf::from).unwrap_or(options.dir),
            "--db" => options.db = args.next().map(PathBuf::from),
            "--rounds" => options.rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(3),
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    options
}

/// Runs `session-prune --db DB --json stats [extra]`: its document and how long it took.
fn stats(db: &Path, extra: &[&str]) -> (Value, Duration) {
    let started = Instant::now();
    let out = Command::new(common::release_binary())
        .arg("--db")
        .arg(db)
        .args(["--json", "stats"])
        .args(extra)
        .output()
        .expect("run target/release/session-prune (cargo build --release first)");
    let elapsed = started.elapsed();
    assert!(
        out.status.success(),
        "stats {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).expect("JSON"), elapsed)
}

/// The byte figures of `technical` and `copies` of a stats document, by name.
fn figures(document: &Value) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    let bytes = |v: &Value| v["bytes"].as_u64().unwrap_or(0);
    for key in ["toolParts", "reasoningParts", "snapshotEvents", "v2Entries"] {
        found.push((key.to_string(), bytes(&document["technical"][key])));
    }
    for key in ["diffsInMessages", "diffsInSnapshots"] {
        found.push((key.to_string(), bytes(&document["copies"][key])));
    }
    for superseded in document["copies"]["supersededSnapshots"]
        .as_array()
        .into_iter()
        .flatten()
    {
        found.push((
            format!("superseded {}", superseded["type"].as_str().unwrap_or("?")),
            bytes(superseded),
        ));
    }
    found
}

fn main() {
    let options = options();
    let db = match &options.db {
        Some(db) => db.clone(),
        None => {
            std::fs::create_dir_all(&options.dir).expect("dir");
            let db = options
                .dir
                .join(format!("scale-{}mb.db", options.megabytes));
            if !db.exists() {
                eprintln!("generating {} ...", db.display());
                common::scale::generate(&db, options.megabytes);
            }
            db
        }
    };
    let file_bytes = std::fs::metadata(&db).expect("size").len();
    let megabytes = file_bytes / 1_000_000;
    let copy = std::env::temp_dir().join(format!("overview-vacuum-into-{}.db", std::process::id()));
    let browser = Browser::open(&db, StoreOptions::default()).expect("browser");
    let first_page = || {
        let started = Instant::now();
        let page = browser
            .lease()
            .expect("lease")
            .sessions(None, &|_| true)
            .expect("sessions page");
        assert!(!page.sessions.is_empty(), "no sessions in {}", db.display());
        started.elapsed()
    };

    let (mut vacuum, mut estimate, mut exact, mut page) =
        (Duration::MAX, Duration::MAX, Duration::MAX, Duration::MAX);
    let (mut estimated, mut measured) = (Value::Null, Value::Null);
    for round in 0..options.rounds.max(1) {
        let v = common::time_vacuum_into(&db, &copy);
        let (e_doc, e) = stats(&db, &[]);
        let (x_doc, x) = stats(&db, &["--exact"]);
        let p = first_page();
        println!(
            "round {round}: VACUUM INTO {:.3} s, stats {:.3} s, stats --exact {:.3} s, sessions page {:.1} ms",
            v.as_secs_f64(),
            e.as_secs_f64(),
            x.as_secs_f64(),
            p.as_secs_f64() * 1e3
        );
        vacuum = vacuum.min(v);
        estimate = estimate.min(e);
        exact = exact.min(x);
        page = page.min(p);
        (estimated, measured) = (e_doc, x_doc);
    }

    let margin = estimated["estimate"]["marginBytes"].as_u64().unwrap_or(0);
    assert!(measured["estimate"].is_null(), "--exact is marked exact");
    let exact_figures = figures(&measured);
    let estimated_figures = figures(&estimated);
    let mut worst = 0u64;
    let mut within = true;
    for (name, exact_bytes) in &exact_figures {
        let guess = estimated_figures
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, b)| *b);
        let error = guess.abs_diff(*exact_bytes);
        println!("  {name:<32} exact {exact_bytes:>13} estimate {guess:>13} error {error:>11}");
        worst = worst.max(error);
        within &= error <= margin;
    }
    for key in ["tables", "events", "databaseBytes", "spill"] {
        assert_eq!(
            estimated[key], measured[key],
            "`{key}` is exact in the estimate too"
        );
    }
    // The largest sessions are the same, with the same figures but the prunable bytes of
    // those beyond the read budget, which are estimated.
    let sessions = |doc: &Value| -> Vec<Value> {
        let mut list = doc["sessions"].as_array().cloned().unwrap_or_default();
        for session in &mut list {
            if let Some(object) = session.as_object_mut() {
                object.remove("prunableBytes");
                object.remove("prunableEstimated");
            }
        }
        list
    };
    assert_eq!(
        sessions(&estimated),
        sessions(&measured),
        "the largest sessions"
    );
    for (guess, exact) in estimated["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(measured["sessions"].as_array().into_iter().flatten())
    {
        let (guess, exact) = (
            guess["prunableBytes"].as_u64().unwrap_or(0),
            exact["prunableBytes"].as_u64().unwrap_or(0),
        );
        worst = worst.max(guess.abs_diff(exact));
    }
    println!(
        "estimate: {} rows read whole, {} entities read, margin {margin} bytes",
        estimated["estimate"]["sampledRows"], estimated["estimate"]["entitiesRead"]
    );
    let ratio = |d: Duration| d.as_secs_f64() / vacuum.as_secs_f64();
    println!(
        "OVERVIEW mb={megabytes} stats_vs_vacuum_into={:.2} exact_vs_vacuum_into={:.2} sessions_page_vs_vacuum_into={:.4} worst_error_pct={:.2} within_margin={within}",
        ratio(estimate),
        ratio(exact),
        ratio(page),
        worst as f64 * 100.0 / file_bytes as f64
    );
}
