//! The scale harness of `clean`: generates a V1 database of a chosen size from the real
//! fixture's rows, then measures, from one run side by side:
//! - clean throughput (MB of row data per second) and peak RSS, batches of 1,000 against one
//!   durable prune per message (`--batch-size 1`);
//! - clean against SQLite's `VACUUM INTO` of the same database (a copy of every live page: the
//!   floor a rewrite of the file costs), timed in the same run;
//! - with `--opencode`: bytes freed after VACUUM by `clean` against OpenCode 1.18.34's own
//!   `DELETE /session/{id}/message/{mid}/part/{pid}` of the same parts on a copy of the same
//!   database, and the parts per second of each.
//!
//! The run ends with two lines in exactly this form, which scripts read:
//!
//! ```text
//! RATIO mb=<size> clean_vs_vacuum_into=<x> batch_vs_single=<x> vs_opencode_parts=<x|na> rss_mib=<n> mb_per_s=<n>
//! LOCK mb=<size> p50_ms=<x> p99_ms=<x> max_ms=<x>
//! ```
//!
//! where `LOCK` gives how long the batch clean's write transactions held SQLite's write lock
//! (median, 99th percentile, longest; ms), which OpenCode waits up to 5 s for.
//!
//! With `--in-place` (for sizes whose copies do not fit on the disk: 10 GB needs 20 GB free, not
//! 40) the batch clean runs on the generated database itself, as a person runs it (its text
//! report, its progress lines), there is no `--batch-size 1` run and no `RATIO` line, and the
//! run ends with `IN-PLACE mb=<size> clean_vs_vacuum_into=<x> rss_mib=<n> mb_per_s=<n>`, the
//! `LOCK` line and `ETA at_s=<x> said_left_s=<x> left_s=<x> error_pct=<x>` (the time left the
//! progress line nearest half way said, against the time the clean then took); the cleaned
//! database is removed, so the next run generates it again.
//!
//! `clean_vs_vacuum_into` is the batch clean's time over `VACUUM INTO`'s, `batch_vs_single` the
//! time of one durable prune per message over the batch clean's, `vs_opencode_parts` clean's
//! parts per second over OpenCode's (`na` without `--opencode`), `rss_mib` the batch clean's
//! peak resident set (MiB) and `mb_per_s` its MB (10^6 bytes) of row data per second.
//!
//! ```text
//! cargo bench --bench scale_clean -- [--mb 1000] [--dir target/scale] [--opencode | --in-place]
//! ```
//!
//! The database is generated, not committed: each copy of the fixture's V1 rows (`session`,
//! `message`, `part`, `event_sequence`, `event`) gets its ids renamed (every `ses_`, `msg_`,
//! `prt_` and `evt_` id inside any text gains a suffix), so copies are independent sessions
//! whose snapshots and receipts match as in the original.

mod common;
#[path = "../tests/e2e/support/opencode_real.rs"]
mod opencode_real;
#[path = "../tests/e2e/support/skip.rs"]
mod skip;

use common::scale::generate;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

struct Options {
    megabytes: u64,
    dir: PathBuf,
    opencode: bool,
    in_place: bool,
}

fn options() -> Options {
    let mut options = Options {
        megabytes: 1000,
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/scale"),
        opencode: false,
        in_place: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mb" => options.megabytes = args.next().and_then(|v| v.parse().ok()).unwrap_or(1000),
            "--dir" => options.dir = args.next().map(PathBuf::from).unwrap_or(options.dir),
            "--opencode" => options.opencode = true,
            "--in-place" => options.in_place = true,
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    options
}

fn session_prune(db: &Path, args: &[&str]) -> (Value, Duration, u64) {
    let started = Instant::now();
    let out = Command::new(common::release_binary())
        .arg("--db")
        .arg(db)
        .arg("--json")
        .args(args)
        .output()
        .expect("run target/release/session-prune (cargo build --release first)");
    let elapsed = started.elapsed();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        serde_json::from_slice(&out.stdout).expect("JSON"),
        elapsed,
        peak_child_rss_kib(),
    )
}

/// The largest peak RSS of any child waited for so far, KiB (getrusage, Linux units).
fn peak_child_rss_kib() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a valid pointer.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    if rc == 0 {
        usage.ru_maxrss.max(0) as u64
    } else {
        0
    }
}

fn row_bytes(db: &Path) -> u64 {
    let conn = Connection::open(db).expect("open");
    ["message", "part", "event"]
        .iter()
        .map(|t| {
            conn.query_row(
                &format!("SELECT coalesce(sum(length(CAST(data AS BLOB))), 0) FROM {t}"),
                [],
                |r| r.get::<_, i64>(0),
            )
            .expect("bytes") as u64
        })
        .sum()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

fn main() {
    let options = options();
    std::fs::create_dir_all(&options.dir).expect("dir");
    let source = options
        .dir
        .join(format!("scale-{}mb.db", options.megabytes));
    if !source.exists() {
        eprintln!("generating {} ...", source.display());
        generate(&source, options.megabytes);
    }
    let rows = row_bytes(&source);
    println!(
        "database {}: {:.0} MB file, {:.0} MB of row data",
        source.display(),
        mb(std::fs::metadata(&source).expect("size").len()),
        mb(rows)
    );
    let clean = [
        "clean",
        "--all",
        "--keep-last-turns",
        "0",
        "--apply",
        "--timings",
    ];
    let vacuum_into = common::time_vacuum_into(&source, &options.dir.join("vacuum-into.db"));
    println!(
        "VACUUM INTO of the same database: {:.2} s",
        vacuum_into.as_secs_f64()
    );
    if options.in_place {
        clean_in_place(&source, &clean, options.megabytes, rows, vacuum_into);
        return;
    }
    let mut runs = Vec::new();
    let mut batch_rss = 0;
    for batch in ["1000", "1"] {
        let copy = options.dir.join(format!("clean-batch-{batch}.db"));
        // A WAL a previous run left beside the copy would be applied to the fresh file.
        for stale in ["db-wal", "db-shm", "db.prune-journal"] {
            let _ = std::fs::remove_file(copy.with_extension(stale));
        }
        std::fs::copy(&source, &copy).expect("copy");
        let mut args = clean.to_vec();
        args.extend(["--batch-size", batch]);
        let (report, elapsed, rss) = session_prune(&copy, &args);
        let messages = report["pruned"].as_u64().unwrap_or(0);
        println!(
            "clean --batch-size {batch:>4}: {messages} messages, {} parts in {:.1} s = {:.1} MB/s of row data, {:.0} messages/s, peak RSS so far {:.1} MiB",
            report["parts"],
            elapsed.as_secs_f64(),
            mb(rows) / elapsed.as_secs_f64(),
            messages as f64 / elapsed.as_secs_f64(),
            rss as f64 / 1024.0
        );
        if batch == "1000" {
            batch_rss = rss;
        }
        runs.push((copy, elapsed, report));
    }
    println!(
        "batch of 1000 / per-message durable throughput: {:.1}x",
        runs[1].1.as_secs_f64() / runs[0].1.as_secs_f64()
    );
    let (ours, ours_elapsed, ours_report) = &runs[0];
    let (vacuumed, _, _) = session_prune(ours, &["vacuum"]);
    println!(
        "clean + vacuum: {:.0} MB -> {:.0} MB",
        mb(vacuumed["bytesBefore"].as_u64().unwrap_or(0)),
        mb(vacuumed["bytesAfter"].as_u64().unwrap_or(0))
    );
    let vs_opencode = if options.opencode {
        compare_with_opencode(&source, ours, *ours_elapsed, ours_report, &vacuumed)
    } else {
        None
    };
    println!(
        "RATIO mb={} clean_vs_vacuum_into={:.2} batch_vs_single={:.2} vs_opencode_parts={} rss_mib={:.0} mb_per_s={:.1}",
        options.megabytes,
        ours_elapsed.as_secs_f64() / vacuum_into.as_secs_f64(),
        runs[1].1.as_secs_f64() / runs[0].1.as_secs_f64(),
        vs_opencode.map_or_else(|| "na".to_string(), |x| format!("{x:.2}")),
        batch_rss as f64 / 1024.0,
        mb(rows) / ours_elapsed.as_secs_f64()
    );
    print_lock(options.megabytes, ours_report);
}

/// The `LOCK` line: how long the batch clean's write transactions held SQLite's write lock
/// (its report's `writeLock`).
fn print_lock(megabytes: u64, report: &Value) {
    let lock = &report["writeLock"];
    let ms = |key: &str| lock[key].as_f64().unwrap_or(f64::NAN);
    println!(
        "LOCK mb={megabytes} p50_ms={:.2} p99_ms={:.2} max_ms={:.2}",
        ms("p50Ms"),
        ms("p99Ms"),
        ms("maxMs")
    );
}

/// `--in-place`: the batch clean of `source` itself (then removed), against `vacuum_into`. It
/// runs as a person runs it, without `--json`: its progress lines (stderr, one every 5 s) are
/// read as they come, and the time left the line nearest half way said is set against the time
/// the clean then took (the `ETA` line); the write lock's figures are read from its report.
fn clean_in_place(source: &Path, clean: &[&str], megabytes: u64, rows: u64, vacuum_into: Duration) {
    use std::io::BufRead;
    let mut args = clean.to_vec();
    args.extend(["--batch-size", "1000"]);
    let started = Instant::now();
    let mut child = Command::new(common::release_binary())
        .arg("--db")
        .arg(source)
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run target/release/session-prune (cargo build --release first)");
    let stderr = child.stderr.take().expect("stderr");
    let progress: Vec<(Duration, String)> = std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .map(|line| (started.elapsed(), line))
        .collect();
    let out = child.wait_with_output().expect("wait");
    let elapsed = started.elapsed();
    let rss = peak_child_rss_kib();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "clean in place: {report}");
    println!(
        "clean --batch-size 1000 in place: {:.1} s = {:.1} MB/s of row data, peak RSS {:.1} MiB",
        elapsed.as_secs_f64(),
        mb(rows) / elapsed.as_secs_f64(),
        rss as f64 / 1024.0
    );
    for file in ["db", "db-wal", "db-shm", "db.prune-journal"] {
        let _ = std::fs::remove_file(source.with_extension(file));
    }
    println!(
        "IN-PLACE mb={} clean_vs_vacuum_into={:.2} rss_mib={:.0} mb_per_s={:.1}",
        megabytes,
        elapsed.as_secs_f64() / vacuum_into.as_secs_f64(),
        rss as f64 / 1024.0,
        mb(rows) / elapsed.as_secs_f64()
    );
    let lock = report
        .lines()
        .find_map(|line| line.strip_prefix("write lock: "))
        .unwrap_or_default();
    let figure = |key: &str| {
        lock.split(key)
            .nth(1)
            .and_then(|rest| rest.split(" ms").next())
            .and_then(|x| x.trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    println!(
        "LOCK mb={megabytes} p50_ms={:.2} p99_ms={:.2} max_ms={:.2}",
        figure("p50 "),
        figure("p99 "),
        figure("max ")
    );
    print_eta(&progress, elapsed);
}

/// The `ETA` line: of the progress lines that give a time left, the one nearest half of the
/// clean's `elapsed` time, what it said and what was left, `ETA at_s=<x> said_left_s=<x>
/// left_s=<x> error_pct=<x>` (`ETA none` when no line gave one).
fn print_eta(progress: &[(Duration, String)], elapsed: Duration) {
    let half = elapsed.as_secs_f64() / 2.0;
    let nearest = progress
        .iter()
        .filter_map(|(at, line)| {
            let said = line.split("about ").nth(1)?.split(" left").next()?;
            Some((at.as_secs_f64(), said_seconds(said)?, line))
        })
        .min_by(|a, b| (a.0 - half).abs().total_cmp(&(b.0 - half).abs()));
    match nearest {
        Some((at, said, line)) => {
            let left = elapsed.as_secs_f64() - at;
            println!("progress line nearest half way: {line}");
            println!(
                "ETA at_s={at:.1} said_left_s={said:.0} left_s={left:.1} error_pct={:.1}",
                (said - left).abs() / left.max(0.001) * 100.0
            );
        }
        None => println!("ETA none"),
    }
}

/// Seconds of a time left as the progress line words it: `45s`, `3m 20s`, `1h 05m`.
fn said_seconds(words: &str) -> Option<f64> {
    words.split_whitespace().try_fold(0.0, |total, part| {
        let (number, unit) = part.split_at(part.len().checked_sub(1)?);
        let number: f64 = number.parse().ok()?;
        let scale = match unit {
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        Some(total + number * scale)
    })
}

/// How long SQLite's `VACUUM INTO target` of `source` takes (`target` is replaced, then
/// removed).
/// Deletes the parts `clean` removed through OpenCode's own API on a copy, then vacuums it.
/// Returns clean's parts per second over OpenCode's, or `None` without an OpenCode binary.
fn compare_with_opencode(
    source: &Path,
    ours: &Path,
    ours_elapsed: Duration,
    ours_report: &Value,
    ours_vacuum: &Value,
) -> Option<f64> {
    let bin = opencode_real::binary()?;
    let parts: Vec<(String, String, String)> = {
        let conn = Connection::open(ours).expect("open");
        let mut stmt = conn
            .prepare("SELECT session_id, message_id, part_ids FROM session_prune_receipt")
            .expect("receipts");
        let rows: Vec<(String, String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .map(Result::unwrap)
            .collect();
        rows.into_iter()
            .flat_map(|(s, m, ids)| {
                let ids: Vec<String> = serde_json::from_str(&ids).unwrap_or_default();
                ids.into_iter().map(move |p| (s.clone(), m.clone(), p))
            })
            .collect()
    };
    let mock = opencode_real::MockModel::start();
    let env = opencode_real::OpenCode::new(&bin, &mock.base_url());
    let db = env.install_database(source);
    let before = std::fs::metadata(&db).expect("size").len();
    let mut server = env.serve();
    let directory = opencode_real::query_value(env.work_dir().to_str().expect("UTF-8"));
    let started = Instant::now();
    let mut failed = 0;
    for (session, message, part) in &parts {
        let path =
            format!("/session/{session}/message/{message}/part/{part}?directory={directory}");
        match opencode_real::http(server.url(), "DELETE", &path, None, Duration::from_secs(30)) {
            Ok(reply) if reply.status == 200 => {}
            _ => failed += 1,
        }
    }
    let theirs_elapsed = started.elapsed();
    server.stop();
    let (theirs_vacuum, _, _) = session_prune(&db, &["vacuum", "--force"]);
    let ours_parts = ours_report["parts"].as_u64().unwrap_or(0) as f64;
    println!(
        "OpenCode DELETE part API: {} parts ({failed} failed) in {:.1} s = {:.0} parts/s; clean: {:.0} parts/s ({:.0}x)",
        parts.len(),
        theirs_elapsed.as_secs_f64(),
        parts.len() as f64 / theirs_elapsed.as_secs_f64(),
        ours_parts / ours_elapsed.as_secs_f64(),
        (ours_parts / ours_elapsed.as_secs_f64())
            / (parts.len() as f64 / theirs_elapsed.as_secs_f64())
    );
    let freed_ours = ours_vacuum["bytesBefore"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(ours_vacuum["bytesAfter"].as_u64().unwrap_or(0));
    let freed_theirs = before.saturating_sub(theirs_vacuum["bytesAfter"].as_u64().unwrap_or(0));
    println!(
        "bytes freed after VACUUM: clean {:.0} MB, OpenCode API {:.0} MB ({:.1}x)",
        mb(freed_ours),
        mb(freed_theirs),
        freed_ours as f64 / freed_theirs.max(1) as f64
    );
    Some(
        (ours_parts / ours_elapsed.as_secs_f64())
            / (parts.len() as f64 / theirs_elapsed.as_secs_f64()),
    )
}
