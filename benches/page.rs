//! The page's time to show the sessions list of a large database: a V1 database of `--mb`
//! (default 1,000) MB generated from the fixture (`common::scale`, about 5,000 sessions at
//! 1 GB), served by the release binary, opened in headless Chromium (chromedriver, as the
//! page's test does) five times, each in a new tab. The time is the page's own
//! (`window.sessionPrune.sessionsShownMs`: from the start of the navigation to the first
//! sessions drawn, which takes the page, its four modules and style, `/health`,
//! `/api/workspaces` and the first sessions page). The reference, in the same run, is the
//! first sessions page fetched alone over loopback (`sessions_route_ms`); also reported: the
//! overview (`GET .../stats`, a scan of every row's size) and the whole `/` with its files
//! fetched alone. Ends with one line scripts read:
//! `PAGE mb=<size> sessions=<n> page_sessions_ms=<best> script_ms=<its part after the script
//! began> sessions_route_ms=<best> page_vs_route=<x> stats_ms=<best>`.
//!
//! Run: `cargo build --release && cargo bench --bench page [-- --mb 1000]`.
//! docs/performance.md.

#[path = "../tests/e2e/common/browser.rs"]
mod browser;
mod common;
#[path = "../tests/e2e/support/skip.rs"]
mod skip;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const RUNS: usize = 5;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `--mb N`, the database's size.
fn megabytes() -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--mb")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("--mb takes a whole number of MB"))
        .unwrap_or(1000)
}

/// The served database: the scale harness's generated file if there is one of this size
/// (generated here otherwise), copied once, so that the server never touches the source.
fn database(megabytes: u64) -> PathBuf {
    let dir = workspace_root().join("target/scale");
    std::fs::create_dir_all(&dir).expect("target/scale");
    let source = dir.join(format!("scale-{megabytes}mb.db"));
    if !source.exists() {
        eprintln!("generating {} ...", source.display());
        common::scale::generate(&source, megabytes);
    }
    let served = dir.join(format!("page-{megabytes}mb.db"));
    if !served.exists() {
        std::fs::copy(&source, &served).expect("copy the database");
    }
    served
}

/// A running `serve`, stopped when dropped (a failed run leaves no server holding the journal).
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `serve` on `db` on a free loopback port; returns the process and its address.
fn serve(db: &Path) -> (Served, String) {
    let binary = workspace_root().join("target/release/session-prune");
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build --release` first",
        binary.display()
    );
    let mut journal = db.as_os_str().to_os_string();
    journal.push(".page-journal");
    let mut child = Command::new(binary)
        .arg("--db")
        .arg(db)
        .arg("--journal")
        .arg(journal)
        .args(["serve", "--json", "--listen", "127.0.0.1:0"])
        .env_remove("SESSION_PRUNE_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start serve");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let served = Served(child);
    let doc: Value = serde_json::from_str(&line).expect("the listening line is JSON");
    (
        served,
        doc["address"].as_str().expect("address").to_string(),
    )
}

/// The best of [`RUNS`] runs of `f`.
fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..RUNS).map(|_| f()).min().expect("runs")
}

fn timed(f: impl FnOnce()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let megabytes = megabytes();
    let db = database(megabytes);
    let (server, address) = serve(&db);
    let base = format!("http://{address}");
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .expect("client");
    let get = |path: &str| -> String {
        let answer = client.get(format!("{base}{path}")).send().expect("GET");
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        answer.text().expect("body")
    };
    let workspaces: Value = serde_json::from_str(&get("/api/workspaces")).expect("JSON");
    let workspace = workspaces[0]["id"]
        .as_str()
        .expect("a workspace")
        .to_string();
    let sessions_path = format!("/api/workspaces/{workspace}/sessions");
    let stats_path = format!("/api/workspaces/{workspace}/stats?top=10");

    // The references, fetched alone.
    let route = best(|| timed(|| drop(get(&sessions_path))));
    let files = best(|| {
        timed(|| {
            for path in [
                "/",
                "/page/app.js",
                "/page/state.js",
                "/page/overview.js",
                "/page/sessions.js",
                "/page/session.js",
                "/page/panel.js",
                "/page/api.js",
                "/page/stream.js",
                "/page/messages.js",
                "/page/reasons.js",
                "/page/events.js",
                "/page/open-session.js",
                "/page/clean.js",
                "/page/app.css",
            ] {
                drop(get(path));
            }
        })
    });
    let stats = best(|| timed(|| drop(get(&stats_path))));
    let mut sessions = 0;
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("{sessions_path}?cursor={c}"),
            None => sessions_path.clone(),
        };
        let page: Value = serde_json::from_str(&get(&path)).expect("JSON");
        sessions += page["sessions"].as_array().map_or(0, Vec::len);
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }

    // The page, each time in a new tab.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let shown: Vec<(f64, f64)> = runtime.block_on(async {
        let browser = browser::Browser::start()
            .await
            .expect("Chromium and chromedriver (apt-get install chromium chromium-driver)");
        let mut shown = Vec::new();
        for _ in 0..RUNS {
            browser.open_tab(&format!("{base}/")).await;
            let value = browser
                .until(
                    "the sessions list",
                    "return document.body.dataset.sessionsShown === 'true' && window.sessionPrune.sessionsShownMs",
                )
                .await;
            let started = browser.eval("return window.sessionPrune.startedMs").await;
            shown.push((value.as_f64().expect("a time"), started.as_f64().expect("a time")));
            // Let the rest of the page (the overview, the further sessions pages) finish, so
            // that the next run starts on a quiet server.
            browser
                .until(
                    "the sessions pages read",
                    "return window.sessionPrune.sessionsLoading === false",
                )
                .await;
            browser
                .until(
                    "the overview",
                    "return !document.getElementById('overview-summary').textContent.startsWith('reading')",
                )
                .await;
        }
        browser.close().await;
        shown
    });
    drop(server);

    let (page, started) = shown
        .iter()
        .copied()
        .fold((f64::INFINITY, 0.0), |best, run| {
            if run.0 < best.0 {
                run
            } else {
                best
            }
        });
    let runs: Vec<f64> = shown.iter().map(|r| r.0).collect();
    println!(
        "page: sessions list shown {page:.0} ms after the navigation began, {:.0} ms after its script began (runs: {runs:.1?})",
        page - started
    );
    println!(
        "first sessions page alone: {:.1} ms; the page and its files alone: {:.1} ms; overview (GET .../stats): {:.0} ms",
        ms(route),
        ms(files),
        ms(stats)
    );
    println!(
        "PAGE mb={megabytes} sessions={sessions} page_sessions_ms={page:.1} script_ms={:.1} sessions_route_ms={:.1} page_vs_route={:.2} stats_ms={:.0}",
        page - started,
        ms(route),
        page / ms(route),
        ms(stats)
    );
}
