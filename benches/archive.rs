//! What `--archive` costs a clean, measured side by side in one run on a generated V1 database
//! (the `scale_clean` generator's, shared through `benches/common/scale.rs`):
//! - `clean --all --apply --archive` against `clean --all --apply` of copies of the same
//!   database, alternated twice, the faster of each kept (docs/ARCHITECTURE.md, "Performance
//!   targets": at most 1.5x slower);
//! - the row data the clean freed against the bytes it wrote to the archive, on that database and
//!   on the real fixture (the compression ratio).
//!
//! The run ends with one line in exactly this form, which scripts read:
//!
//! ```text
//! ARCHIVE mb=<size> archive_vs_plain=<x> freed_vs_archived=<x> fixture_freed_vs_archived=<x> archived_mb=<n>
//! ```
//!
//! ```text
//! cargo build --release && cargo bench --bench archive -- [--mb 300] [--dir target/scale]
//! ```

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

struct Options {
    megabytes: u64,
    dir: PathBuf,
}

fn options() -> Options {
    let mut options = Options {
        megabytes: 300,
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/scale"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mb" => options.megabytes = args.next().and_then(|v| v.parse().ok()).unwrap_or(300),
            "--dir" => options.dir = args.next().map(PathBuf::from).unwrap_or(options.dir),
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    options
}

/// Runs the release binary's `clean --all --apply` (with `extra`) on a fresh copy of `source` at
/// `copy`: its JSON report and how long it took.
fn clean(source: &Path, copy: &Path, extra: &[&str]) -> (Value, Duration) {
    for stale in ["db-wal", "db-shm", "db.prune-journal", "db.prune-archive"] {
        let _ = std::fs::remove_file(copy.with_extension(stale));
    }
    std::fs::copy(source, copy).expect("copy");
    let started = Instant::now();
    let out = Command::new(common::release_binary())
        .arg("--db")
        .arg(copy)
        .args([
            "--json",
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
        ])
        .args(extra)
        .output()
        .expect("run target/release/session-prune (cargo build --release first)");
    let elapsed = started.elapsed();
    assert!(
        out.status.success(),
        "{extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).expect("JSON"), elapsed)
}

/// Freed row data over archived bytes of a clean's report.
fn freed_vs_archived(report: &Value) -> f64 {
    let freed = report["bytes"].as_u64().expect("bytes") as f64;
    let archived = report["archiveBytes"].as_u64().expect("archiveBytes") as f64;
    freed / archived
}

fn main() {
    let options = options();
    std::fs::create_dir_all(&options.dir).expect("dir");
    let source = options
        .dir
        .join(format!("scale-{}mb.db", options.megabytes));
    if !source.exists() {
        eprintln!("generating {} ...", source.display());
        common::scale::generate(&source, options.megabytes);
    }
    let fixture_dir = tempfile::tempdir().expect("tempdir");
    let fixture = common::fixture_copy(fixture_dir.path());
    let (fixture_report, _) = clean(
        &fixture,
        &fixture_dir.path().join("clean.db"),
        &["--archive"],
    );
    let fixture_ratio = freed_vs_archived(&fixture_report);
    println!(
        "fixture: {} bytes freed, {} archived: {fixture_ratio:.1}x",
        fixture_report["bytes"], fixture_report["archiveBytes"]
    );

    let copy = options.dir.join("archive-bench.db");
    let mut plain = Duration::MAX;
    let mut archived = Duration::MAX;
    let mut report = Value::Null;
    for round in 1..=2 {
        let (_, took) = clean(&source, &copy, &[]);
        println!(
            "round {round}: clean --apply            {:.2} s",
            took.as_secs_f64()
        );
        plain = plain.min(took);
        let (with, took) = clean(&source, &copy, &["--archive"]);
        println!(
            "round {round}: clean --apply --archive  {:.2} s",
            took.as_secs_f64()
        );
        archived = archived.min(took);
        report = with;
    }
    for stale in [
        "db",
        "db-wal",
        "db-shm",
        "db.prune-journal",
        "db.prune-archive",
    ] {
        let _ = std::fs::remove_file(copy.with_extension(stale));
    }
    let ratio = freed_vs_archived(&report);
    let archived_bytes = report["archiveBytes"].as_u64().unwrap_or(0);
    println!(
        "{} MB database: {} messages pruned, {:.1} MB freed, {:.1} MB archived",
        options.megabytes,
        report["pruned"],
        report["bytes"].as_u64().unwrap_or(0) as f64 / 1e6,
        archived_bytes as f64 / 1e6
    );
    println!(
        "ARCHIVE mb={} archive_vs_plain={:.2} freed_vs_archived={ratio:.1} fixture_freed_vs_archived={fixture_ratio:.1} archived_mb={:.1}",
        options.megabytes,
        archived.as_secs_f64() / plain.as_secs_f64(),
        archived_bytes as f64 / 1e6
    );
}
