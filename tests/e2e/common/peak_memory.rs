//! Running the binary and measuring its peak resident memory.
//!
//! A child's `ru_maxrss` counts the address space it started from: a process spawned by this
//! test binary (hundreds of MB while its tests run) reports at least this binary's own peak. So
//! the command is started by a small Python process that forks it from its own few MB and
//! reports `os.wait4`'s `ru_maxrss`, and the peak of its anonymous memory, sampled. Without `python3` a measurement is skipped (saying so),
//! except under CI, where it fails.
#![allow(dead_code)]

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};

/// What a run printed, its exit code and its peak memory in bytes.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident set (`ru_maxrss`): with the pages of files the process maps, such as the
    /// database a read-only connection reads through a memory map.
    pub peak: u64,
    /// Peak anonymous resident memory (`RssAnon` of /proc/PID/status, sampled every
    /// millisecond): what the process allocated, without any mapped file.
    pub anon_peak: u64,
}

/// Forks argv[2:], samples its `RssAnon` every millisecond until it exits, and writes
/// "EXIT_CODE MAXRSS_KIB MAX_RSS_ANON_KIB" to the file argv[1].
const SPAWNER: &str = "\
import os, sys, time
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
anon = 0
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    try:
        with open('/proc/%d/status' % pid) as status_file:
            for line in status_file:
                if line.startswith('RssAnon:'):
                    anon = max(anon, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.001)
with open(sys.argv[1], 'w') as out:
    out.write('%d %d %d' % (os.waitstatus_to_exitcode(status), usage.ru_maxrss, anon))
";

/// Runs the binary with `--db db` and `args`, and measures it; `None` (after saying why) when
/// `python3` is not installed outside CI.
pub fn measured(db: &Path, args: &[&str]) -> Option<Run> {
    let found = Command::new("python3")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        crate::skip::cannot_run(
            "python3 is not installed, and it is needed to measure a command's peak memory",
            "Install it: apt-get install python3.",
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, err, report) = (
        dir.path().join("out"),
        dir.path().join("err"),
        dir.path().join("report"),
    );
    let status = Command::new("python3")
        .arg("-c")
        .arg(SPAWNER)
        .arg(&report)
        .arg(crate::common::cli::BINARY)
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .status()
        .unwrap();
    let stderr = std::fs::read_to_string(err).unwrap();
    assert!(status.success(), "the spawner failed: {stderr}");
    let report = std::fs::read_to_string(report).unwrap();
    let numbers: Vec<i64> = report
        .split(' ')
        .map(|n| n.parse().expect("a number"))
        .collect();
    let [code, kib, anon_kib] = numbers[..] else {
        panic!("three numbers: {report}");
    };
    Some(Run {
        code: i32::try_from(code).expect("an exit code"),
        stdout: std::fs::read_to_string(out).unwrap(),
        stderr,
        peak: kib as u64 * 1024,
        anon_peak: anon_kib as u64 * 1024,
    })
}
