//! A command that only reads makes no durable write: not one `fsync`, `fdatasync`,
//! `sync_file_range`, `syncfs`, `sync` or `msync` call, counted with strace over the whole process
//! (docs/ARCHITECTURE.md, "Performance targets"). Each runs on a database with a committed
//! prune, its receipt and a journal that holds its event, so that every read has something to
//! read.

use crate::common;

use std::path::Path;
use std::process::Command;

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

/// strace's path, or `None` (then the test says so and passes, except in CI, where it fails).
fn strace() -> Option<&'static str> {
    let found = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success());
    if found {
        return Some("strace");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "strace is needed to count sync calls (install it: apt-get install strace)"
    );
    eprintln!("SKIPPED: strace is not installed");
    None
}

/// Runs the binary with `args` on `db` under strace; returns its exit code and the sync calls
/// it made, one line each.
fn sync_calls(strace: &str, db: &Path, args: &[&str]) -> (i32, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("strace.log");
    let out = Command::new(strace)
        .arg("-f")
        .arg("-qq")
        .arg("-e")
        .arg(format!("trace={}", SYNC_CALLS.join(",")))
        .arg("-o")
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_session-prune"))
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
fn a_prune_makes_sync_calls_and_the_count_sees_them() {
    // The counter itself: a command that writes durably is seen making sync calls, so a zero
    // above is a zero and not a blind counter.
    let Some(strace) = strace() else {
        return;
    };
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, _) = preview(&engine, MANY_TURNS, TURN5);
    drop(engine);
    let (code, calls) = sync_calls(
        strace,
        &fx.db,
        &[
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &revision,
            "--all-technical",
        ],
    );
    assert_eq!(code, 0);
    assert!(
        calls
            .iter()
            .any(|c| c.contains("fdatasync(") || c.contains("fsync(")),
        "{calls:?}"
    );
}
