//! A command that only reads makes no durable write: not one `fsync`, `fdatasync`,
//! `sync_file_range`, `syncfs`, `sync` or `msync` call, counted with strace over the whole process
//! (docs/performance.md). Each runs on a database with a committed
//! prune, its receipt and a journal that holds its event, so that every read has something to
//! read.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::cli::assert_exit;
use common::*;

/// The system calls that make a write durable.
const SYNC_CALLS: &[&str] = &[
    "fsync",
    "fdatasync",
    "sync_file_range",
    "syncfs",
    "sync",
    "msync",
];

/// strace's path, or `None` (see [`common::strace::strace`]).
fn strace() -> Option<&'static str> {
    common::strace::strace("to count sync calls")
}

/// Runs the binary with `args` on `db` under strace; returns its exit code and the sync calls
/// it made, one line each, with the path of the file synced (`fsync(4</tmp/x/opencode.db-wal>)`).
fn sync_calls(strace: &str, db: &Path, args: &[&str]) -> (i32, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("strace.log");
    let out = Command::new(strace)
        .arg("-f")
        .arg("-qq")
        // Each file descriptor with its path.
        .arg("-y")
        .arg("-e")
        .arg(format!("trace={}", SYNC_CALLS.join(",")))
        .arg("-o")
        .arg(&log)
        .arg(crate::common::cli::BINARY)
        .arg("--db")
        .arg(db)
        .arg("--quiet-period")
        .arg("0")
        .args(args)
        .output()
        .expect("strace runs");
    let text = std::fs::read_to_string(&log).expect("strace log");
    let calls = text
        .lines()
        .filter(|line| {
            // `PID name(args) = result`: keep the calls, not the exit lines.
            let call = line.split_whitespace().nth(1).unwrap_or("");
            SYNC_CALLS
                .iter()
                .any(|name| call.starts_with(&format!("{name}(")))
        })
        .map(str::to_string)
        .collect();
    (out.status.code().unwrap_or(-1), calls)
}

#[test]
fn every_read_command_makes_no_sync_call() {
    let Some(strace) = strace() else {
        return;
    };
    let fx = Fixture::new();
    // One committed prune: a receipt in the database and an event in the journal.
    let (_, outcome) = prune_turn5_once(&fx);
    assert!(outcome.refusal.is_none(), "{:?}", outcome.refusal);
    let commands: &[&[&str]] = &[
        &["sessions"],
        &["stats"],
        &["messages", MANY_TURNS],
        &["preview", MANY_TURNS, TURN1],
        &["history", MANY_TURNS, "--query", "the"],
        &["history", MANY_TURNS, "--purpose", "prune"],
        &["history", "--all", "--purpose", "stats"],
        &["receipts"],
        &["audit"],
        &["events"],
        &["clean", "--all"],
    ];
    for args in commands {
        for json in [false, true] {
            let mut args = args.to_vec();
            if json {
                args.push("--json");
            }
            let (code, calls) = sync_calls(strace, &fx.db, &args);
            assert_eq!(code, 0, "session-prune {}", args.join(" "));
            assert_eq!(
                calls,
                Vec::<String>::new(),
                "session-prune {} made sync calls",
                args.join(" ")
            );
        }
    }
}

#[test]
fn a_prune_syncs_the_wal_and_never_checkpoints_on_close() {
    // The counter itself: a command that writes durably is seen making sync calls, so a zero
    // above is a zero and not a blind counter. Of the database's files, a prune syncs its WAL
    // (twice when it starts a new WAL: its header, then the commit; once when the WAL is
    // there) and its folder once (SQLite's first sync of a WAL it opens), never the database
    // file: no checkpoint when it closes, so the next prune finds the WAL in place.
    let Some(strace) = strace() else {
        return;
    };
    let fx = Fixture::new();
    // The journal is made first: its creation syncs its own files and the folder.
    drop(fx.engine());
    let page = common::cli::run(
        &fx.db,
        &[
            "--json",
            "--quiet-period",
            "0",
            "history",
            MANY_TURNS,
            "--purpose",
            "prune",
        ],
    );
    assert_exit(&page, 0);
    let page = common::cli::json(&page);
    let candidates = page["candidates"].as_array().expect("candidates");
    assert!(candidates.len() >= 2, "{page}");
    let mut wal = fx.db.clone().into_os_string();
    wal.push("-wal");
    let wal = std::path::PathBuf::from(wal);
    let empty = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert_eq!(empty, 0, "the prunes start on an empty WAL");
    for (n, candidate) in candidates[..2].iter().enumerate() {
        let (code, calls) = sync_calls(
            strace,
            &fx.db,
            &[
                "prune",
                MANY_TURNS,
                candidate["messageID"].as_str().expect("id"),
                "--revision",
                candidate["revision"].as_str().expect("revision"),
                "--all-technical",
            ],
        );
        assert_eq!(code, 0, "prune {n}");
        let on = |path: &Path| {
            let name = format!("<{}>", path.display());
            calls.iter().filter(|c| c.contains(&name)).count()
        };
        let wal_syncs = if n == 0 { 2 } else { 1 };
        assert_eq!(on(&wal), wal_syncs, "prune {n}: {calls:#?}");
        assert_eq!(on(fx.dir.path()), 1, "prune {n}: {calls:#?}");
        assert_eq!(on(&fx.db), 0, "prune {n}: {calls:#?}");
        // The journal: at least the intent and the commit mark.
        assert!(on(&fx.journal) >= 2, "prune {n}: {calls:#?}");
        assert_eq!(
            calls.len(),
            on(&wal) + on(fx.dir.path()) + on(&fx.journal),
            "prune {n} synced another file: {calls:#?}"
        );
        let left = std::fs::metadata(&wal).map_or(0, |m| m.len());
        assert!(left > 0, "prune {n} left no WAL");
    }
}
