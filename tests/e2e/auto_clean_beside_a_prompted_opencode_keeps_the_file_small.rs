//! A live OpenCode 1.18.34 `serve` on a database of coding work switched by `vacuum
//! --online-shrink`, driven with prompts, while `serve --auto-clean` runs beside it
//! (`--quiet-period 0 --keep-last-turns 0`: it goes for what OpenCode has just written): every
//! prompt is answered and stored, OpenCode logs no busy database and no database error, every
//! run prunes without a failure and gives its pages back, and at the end the file is within
//! 10 % of what `clean --all --apply` with the same flags and `vacuum` make of it.
//!
//! By default it runs on `tests/fixtures/opencode-1.18.34-work/` with six prompts and a run
//! every 2 s. The same test is the measurement of docs/performance.md ("Upkeep beside a
//! running OpenCode") when given a larger database: `SESSION_PRUNE_LIVE_FIXTURE` names a folder
//! of the coding-work generator's output (`opencode.db`, `tool-output/`),
//! `SESSION_PRUNE_LIVE_SECS` how long prompts are sent (default: six prompts),
//! `SESSION_PRUNE_LIVE_EVERY` the interval (default 2s), `SESSION_PRUNE_LIVE_SVG` a file to
//! write the file's size over time to, `SESSION_PRUNE_LIVE_SWITCH=0` leaves the file as
//! OpenCode made it (to time prompts without the switch), and `SESSION_PRUNE_LIVE_BIN` names the
//! server's binary (the release build), `SESSION_PRUNE_LIVE_QUIET` the fence's quiet period
//! (default 0), and `SESSION_PRUNE_LIVE_CLEAN=0` runs no clean (to time prompts alone). It prints one `SIZE` line per second
//! and a last `LIVE_AUTO_CLEAN` line.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under `CI=true`,
//! where it fails.

use crate::common;
use crate::opencode_real;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::cli::{assert_exit, run};
use opencode_real::{http, query_value, Layout, MockModel, OpenCode};
use rusqlite::Connection;
use serde_json::{json, Value};

const PROMPT_TIMEOUT: Duration = Duration::from_secs(120);
/// Prompts sent when no duration is given.
const PROMPTS: usize = 6;
const SESSIONS: usize = 4;
const PROMPT: &str = "Carry on with the work while the upkeep runs: say you are done.";
const UPKEEP: &str = "/api/session-pruning/upkeep";

/// What the environment asks of this run (see the module's first lines).
struct Asked {
    fixture: PathBuf,
    seconds: Option<u64>,
    every: String,
    svg: Option<PathBuf>,
    switch: bool,
    /// The server's binary: this test run's, or `SESSION_PRUNE_LIVE_BIN` (the release build, for
    /// a measurement: a debug build is tens of times slower and holds the lock as long).
    bin: Option<PathBuf>,
    /// The fence's quiet period: `SESSION_PRUNE_LIVE_QUIET`, default `0` (the clean goes for
    /// what OpenCode has just written; `serve`'s own default is 30 s).
    quiet: String,
    /// `SESSION_PRUNE_LIVE_CLEAN=0`: no clean runs (`--auto-clean 365d`), to time prompts on
    /// the file alone; nothing about runs or sizes is asserted then.
    clean: bool,
}

impl Asked {
    fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            fixture: var("SESSION_PRUNE_LIVE_FIXTURE").map_or_else(
                || opencode_real::workspace().join("tests/fixtures/opencode-1.18.34-work"),
                PathBuf::from,
            ),
            seconds: var("SESSION_PRUNE_LIVE_SECS").map(|s| s.parse().expect("seconds")),
            every: var("SESSION_PRUNE_LIVE_EVERY").unwrap_or_else(|| "2s".into()),
            svg: var("SESSION_PRUNE_LIVE_SVG").map(PathBuf::from),
            switch: var("SESSION_PRUNE_LIVE_SWITCH").as_deref() != Some("0"),
            bin: var("SESSION_PRUNE_LIVE_BIN").map(PathBuf::from),
            quiet: var("SESSION_PRUNE_LIVE_QUIET").unwrap_or_else(|| "0".into()),
            clean: var("SESSION_PRUNE_LIVE_CLEAN").as_deref() != Some("0"),
        }
    }
}

/// Bytes of the database file and its WAL.
fn on_disk(db: &Path) -> u64 {
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    [db, wal.as_path()]
        .iter()
        .map(|path| std::fs::metadata(path).map_or(0, |meta| meta.len()))
        .sum()
}

/// The prompts stored in `session`: its text parts that hold [`PROMPT`].
fn prompts_in(db: &Path, session: &str) -> i64 {
    opencode_real::text_parts(db, session, PROMPT)
}

/// The directory the fixture's sessions name (the generator's work tree).
fn directory_of(db: &Path) -> String {
    let conn = Connection::open(db).expect("open");
    conn.query_row("SELECT directory FROM session LIMIT 1", [], |row| {
        row.get(0)
    })
    .expect("a session")
}

#[test]
fn an_auto_clean_beside_a_prompted_opencode_loses_no_prompt_and_keeps_the_file_small() {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let asked = Asked::from_env();
    let mock = MockModel::start();
    let layout = Layout {
        directory: directory_of(&asked.fixture.join("opencode.db")),
        ..Layout::work()
    };
    let env = OpenCode::with_layout(&bin, &mock.base_url(), layout);
    let db = env.copy_fixture(&asked.fixture);
    if asked.switch {
        assert_exit(&run(&db, &["vacuum", "--online-shrink"]), 0);
    }
    env.relocate_sessions();
    assert!(env.adopt_project(), "the work tree is a git repo");
    let sessions = largest_sessions(&db);
    let start_bytes = on_disk(&db);

    let mut opencode = env.serve();
    let command = match &asked.bin {
        Some(bin) => std::process::Command::new(bin),
        None => common::cli::session_prune(),
    };
    let server = common::http::Server::start_command(
        command,
        &db,
        &[
            "--quiet-period".into(),
            asked.quiet.clone(),
            "--auto-clean".into(),
            if asked.clean {
                asked.every.clone()
            } else {
                "365d".into()
            },
            "--keep-last-turns".into(),
            "0".into(),
        ],
        &[],
    );
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let runs: Mutex<BTreeMap<u64, Value>> = Mutex::new(BTreeMap::new());
    let mut points: Vec<(u64, u64)> = Vec::new();
    let mut prompt_ms: Vec<u128> = Vec::new();
    std::thread::scope(|scope| {
        // The watcher stops when the prompts end, and when a failed prompt panics.
        let _stop_watching = SetOnDrop(&done);
        // Every 200 ms: each finished run (by its number) and, every second, the file's size.
        let watcher = scope.spawn(|| {
            let mut points = Vec::new();
            let mut next_point = Duration::ZERO;
            while !done.load(Ordering::SeqCst) {
                let (status, body) = common::http::get(&server.url(UPKEEP));
                assert_eq!(status, 200, "{body}");
                let state = common::http::parse(&body);
                if let Some(number) = state["lastRun"]["run"].as_u64() {
                    runs.lock()
                        .expect("runs")
                        .insert(number, state["lastRun"].clone());
                }
                if started.elapsed() >= next_point {
                    let point = (started.elapsed().as_millis() as u64, on_disk(&db));
                    println!("SIZE t_ms={} bytes={}", point.0, point.1);
                    points.push(point);
                    next_point += Duration::from_secs(1);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            points
        });
        let mut n = 0;
        loop {
            let enough = match asked.seconds {
                Some(seconds) => started.elapsed() >= Duration::from_secs(seconds),
                None => n >= PROMPTS,
            };
            if enough {
                break;
            }
            let took = prompt(&env, &opencode, &sessions[n % sessions.len()], n);
            prompt_ms.push(took.as_millis());
            n += 1;
        }
        // One run that started after the last prompt was stored: it saw everything.
        if asked.clean {
            wait_for_a_run_after(&server, common::now_ms());
        }
        std::thread::sleep(Duration::from_millis(400));
        done.store(true, Ordering::SeqCst);
        points = watcher.join().expect("the watcher");
    });
    let serve_log = opencode.log();
    opencode.stop();
    let (status, _) = server.stop();
    assert!(status.success());

    // Every prompt stored (each was answered).
    let sent = prompt_ms.len();
    for (i, session) in sessions.iter().enumerate() {
        let prompts = (0..sent).filter(|n| n % sessions.len() == i).count() as i64;
        assert_eq!(prompts_in(&db, session), prompts, "prompts of {session}");
    }
    let log = format!("{serve_log}\n{}", env.log_files());
    opencode_real::assert_no_database_trouble(&log);
    let runs = runs.into_inner().expect("runs");
    assert!(runs.len() >= 2 || !asked.clean, "runs seen: {runs:?}");
    let mut given_back = 0;
    for run in runs.values() {
        assert_eq!(run["status"], "cleaned", "{run}");
        assert_eq!(run["counts"]["failed"], 0, "{run}");
        given_back += run["counts"]["bytesGivenBack"].as_u64().expect("bytes");
    }
    assert_eq!(given_back > 0, asked.switch && asked.clean, "{runs:?}");

    // What the same clean and a vacuum make of the file as it is now.
    let final_bytes = on_disk(&db);
    let reference = tempfile::tempdir().expect("tempdir");
    let copy = reference.path().join("opencode.db");
    std::fs::copy(&db, &copy).expect("copy");
    // With its journal: a database with receipts is not written without it.
    let journal = db.with_file_name("opencode.db.prune-journal");
    std::fs::copy(&journal, reference.path().join("opencode.db.prune-journal"))
        .expect("copy the journal");
    let clean = [
        "--quiet-period",
        "0",
        "clean",
        "--all",
        "--apply",
        "--keep-last-turns",
        "0",
        "--quiet",
    ];
    assert_exit(&run(&copy, &clean), 0);
    assert_exit(&run(&copy, &["vacuum"]), 0);
    let reference_bytes = on_disk(&copy);
    let ratio = final_bytes as f64 / reference_bytes as f64;
    let mean_prompt_ms = prompt_ms.iter().sum::<u128>() / sent.max(1) as u128;
    println!(
        "LIVE_AUTO_CLEAN switched={} start_mb={:.1} final_mb={:.1} reference_mb={:.1} ratio={ratio:.3} runs={} prompts={sent} lost=0 mean_prompt_ms={mean_prompt_ms} max_prompt_ms={}",
        asked.switch,
        start_bytes as f64 / 1e6,
        final_bytes as f64 / 1e6,
        reference_bytes as f64 / 1e6,
        runs.len(),
        prompt_ms.iter().max().copied().unwrap_or(0),
    );
    if let Some(svg) = &asked.svg {
        std::fs::write(svg, plot(&points, reference_bytes)).expect("write the SVG");
    }
    if asked.switch && asked.clean {
        assert!(
            ratio <= 1.10,
            "the file is {final_bytes} B, clean + vacuum make {reference_bytes} B"
        );
    }
}

/// Waits (at most 300 s) for a run of `server` that started after `ms` (ms since the epoch).
fn wait_for_a_run_after(server: &common::http::Server, ms: i64) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (_, body) = common::http::get(&server.url(UPKEEP));
        let state = common::http::parse(&body);
        if state["lastRun"]["startedAt"].as_i64() > Some(ms) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no run after the prompts: {state}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The sessions with the most messages, at most [`SESSIONS`].
fn largest_sessions(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT session_id FROM message GROUP BY session_id ORDER BY count(*) DESC, session_id LIMIT ?1")
        .expect("sessions");
    let sessions: Vec<String> = stmt
        .query_map([SESSIONS as i64], |row| row.get(0))
        .expect("sessions")
        .map(|row| row.expect("row"))
        .collect();
    assert!(sessions.iter().all(|s| prompts_in(db, s) == 0));
    sessions
}

/// Sends prompt `n` to `session` and waits for its answer; how long that took.
fn prompt(env: &OpenCode, opencode: &opencode_real::Server, session: &str, n: usize) -> Duration {
    let path = format!(
        "/session/{session}/message?directory={}",
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let body = json!({
        "parts": [{"type": "text", "text": PROMPT}],
        "model": env.layout().prompt_model()
    });
    let sent = Instant::now();
    let reply = http(opencode.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT)
        .unwrap_or_else(|e| panic!("prompt {n} failed: {e}\n{}", opencode.log()));
    let took = sent.elapsed();
    let errors = || -> String {
        let logs = env.log_files();
        let lines: Vec<&str> = logs.lines().filter(|line| line.contains("ERROR")).collect();
        lines.join("\n")
    };
    assert_eq!(
        reply.status,
        200,
        "prompt {n}: {}\n{}\n{}",
        reply.body,
        opencode.log(),
        errors()
    );
    assert_eq!(
        reply.json()["info"]["finish"],
        "stop",
        "prompt {n}: {}\n{}\n{}",
        reply.body,
        opencode.log(),
        errors()
    );
    took
}

/// The file's size over time as an SVG line chart, with the size clean + vacuum make as a
/// dashed line.
fn plot(points: &[(u64, u64)], reference: u64) -> String {
    const W: f64 = 640.0;
    const H: f64 = 320.0;
    const PAD: f64 = 48.0;
    let last_t = points.last().map_or(1, |p| p.0.max(1)) as f64;
    let top = points.iter().map(|p| p.1).max().unwrap_or(1).max(reference) as f64 * 1.05;
    let x = |t: u64| PAD + (t as f64 / last_t) * (W - 2.0 * PAD);
    let y = |b: u64| H - PAD - (b as f64 / top) * (H - 2.0 * PAD);
    let mut line = String::new();
    for (t, bytes) in points {
        let _ = write!(line, "{:.1},{:.1} ", x(*t), y(*bytes));
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n\
         <line x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <text x=\"{PAD}\" y=\"20\">database file + WAL (MB) over {secs:.0} s, serve --auto-clean beside a prompted OpenCode</text>\n\
         <text x=\"4\" y=\"{top_y:.1}\">{top_mb:.0}</text><text x=\"4\" y=\"{b}\">0</text>\n\
         <text x=\"{r}\" y=\"{label_y}\" text-anchor=\"end\">{secs:.0} s</text>\n\
         <line x1=\"{PAD}\" y1=\"{ref_y:.1}\" x2=\"{r}\" y2=\"{ref_y:.1}\" stroke=\"gray\" stroke-dasharray=\"4 4\"/>\n\
         <text x=\"{r}\" y=\"{ref_label:.1}\" text-anchor=\"end\" fill=\"gray\">clean + vacuum: {ref_mb:.1} MB</text>\n\
         <polyline points=\"{line}\" fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"2\"/>\n\
         </svg>\n",
        b = H - PAD,
        r = W - PAD,
        secs = last_t / 1000.0,
        top_y = PAD + 4.0,
        top_mb = top / 1e6,
        label_y = H - PAD + 16.0,
        ref_y = y(reference),
        ref_label = y(reference) - 4.0,
        ref_mb = reference as f64 / 1e6,
    )
}
