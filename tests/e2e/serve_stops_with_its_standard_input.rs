//! `serve --stop-with-stdin` stops as on SIGTERM when its standard input reaches its end (the
//! OpenCode plugin starts it with a pipe, so the server ends with OpenCode however OpenCode
//! ends); without the flag, an input that ends changes nothing.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

use common::cli::{assert_exit, run, BINARY};
use common::Fixture;
use serde_json::Value;

/// Starts `serve` on `fx` with `flags`, its standard input a pipe; the child and its first line.
fn serve(
    fx: &Fixture,
    flags: &[&str],
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(BINARY)
        .arg("--db")
        .arg(&fx.db)
        .args(["serve", "--json", "--listen", "127.0.0.1:0"])
        .args(flags)
        .env_remove("SESSION_PRUNE_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the listening line");
    let listening: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(listening["status"], "listening", "{line}");
    (child, stdout)
}

fn wait(child: &mut std::process::Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn a_server_started_with_stop_with_stdin_stops_when_its_input_ends() {
    let fx = Fixture::new();
    let (mut child, mut stdout) = serve(&fx, &["--stop-with-stdin"]);
    drop(child.stdin.take());
    let status = wait(&mut child, Duration::from_secs(15)).expect("the server stopped");
    assert_eq!(status.code(), Some(0));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the stopped line");
    assert_eq!(line.trim(), r#"{"status":"stopped"}"#);
    // The journal is free again.
    assert_exit(&run(&fx.db, &["--json", "receipts"]), 0);
    assert_exit(&run(&fx.db, &["--json", "audit"]), 0);
}

#[test]
fn without_the_flag_an_input_that_ends_leaves_the_server_running() {
    let fx = Fixture::new();
    let (mut child, _stdout) = serve(&fx, &[]);
    drop(child.stdin.take());
    assert!(
        wait(&mut child, Duration::from_secs(1)).is_none(),
        "the server still runs"
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM");
    let status = wait(&mut child, Duration::from_secs(15)).expect("the server stopped");
    assert_eq!(status.code(), Some(0));
}
