//! A process that archives prunes writes its entries to the archive file that is beside the
//! database, never to one a purge has replaced since the process opened it: `archive purge`
//! rewrites the archive and renames the new file over the old one, so a writer that opened the
//! old file before the rename and takes its lock after the purge let go of it would append
//! entries to a file no path names any more, and its prunes would commit with receipts whose
//! entries are lost.
//!
//! strace stops the clean right after it opened the archive (before it locks it); the purge
//! then runs whole; then the clean goes on. Whatever it does then, every archived receipt's
//! entry must read back (audit).

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::archive::{archive_of, audit_report, prune_archived};
use common::cli::{assert_exit, json, run};
use common::*;

/// strace's path, or `None` (see [`common::strace::strace`]).
fn strace() -> Option<&'static str> {
    common::strace::strace("to stop a process between two system calls")
}

/// The pid of the traced process (strace's child), once it holds the archive open: its `openat`
/// returned, and the SIGSTOP strace injected into that call stops it before its next
/// instruction, so it cannot have locked the file yet.
fn tracee_holding(strace_pid: u32, archive: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/{strace_pid}/task/{strace_pid}/children"))
                .unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            let holds = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|fds| {
                    fds.flatten()
                        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|to| to == archive))
                })
                .unwrap_or(false);
            if holds {
                return pid.parse().expect("pid");
            }
        }
        assert!(
            Instant::now() < deadline,
            "the clean never opened the archive"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Lets the stopped clean go on until it ends (a thread that stopped after a first SIGCONT
/// gets another).
fn resume_until_it_ends(clean: &mut std::process::Child, tracee: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let _ = Command::new("kill")
            .args(["-CONT", &tracee.to_string()])
            .status();
        if clean.try_wait().expect("clean").is_some() {
            return;
        }
        assert!(Instant::now() < deadline, "the clean never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn clean_stopped_after_opening_the_archive(strace: &str, db: &Path) -> std::process::Child {
    let archive = archive_of(db);
    Command::new(strace)
        .args(["-f", "-qq", "-o", "/dev/null", "-P"])
        .arg(&archive)
        .args([
            "-e",
            "trace=openat",
            "-e",
            "inject=openat:signal=SIGSTOP:when=1",
        ])
        .arg(crate::common::cli::BINARY)
        .arg("--db")
        .arg(db)
        .args([
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--apply",
            "--archive",
            "--keep-last-turns",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace runs")
}

#[test]
fn a_clean_that_opened_the_archive_before_a_purge_replaced_it_loses_no_entry() {
    let Some(strace) = strace() else {
        return;
    };
    let fx = Fixture::new();
    fx.skip_audit();
    // Two prunes of one message: the first one's entry is old and not the newest: purgeable.
    prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));

    let mut clean = clean_stopped_after_opening_the_archive(strace, &fx.db);
    let tracee = tracee_holding(clean.id(), &archive_of(&fx.db));
    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    resume_until_it_ends(&mut clean, tracee);
    assert_exit(&purge, 0);
    assert_eq!(json(&purge)["purged"], 1);

    let (code, report) = audit_report(&fx.db);
    assert_eq!(code, 0, "{report}");
}
