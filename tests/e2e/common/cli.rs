//! Running the `session-prune` binary in tests, and checking what it printed.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The one way tests start the binary: a command for `session-prune` built by this test run,
/// to add arguments, environment and pipes to.
pub fn session_prune() -> Command {
    Command::new(BINARY)
}

/// The path of the binary this test run built (for a test that starts it through another
/// program: `strace`, `python3`, a shell).
pub const BINARY: &str = env!("CARGO_BIN_EXE_session-prune");

/// Runs the binary on `db` with `args`.
pub fn run(db: &Path, args: &[&str]) -> Output {
    session_prune()
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

/// Runs the binary on `db` with `args`, writing `stdin` to its standard input.
pub fn run_with_stdin(db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = session_prune()
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

/// Checks the exit code, showing stderr when it is not `code`.
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Checks that `out` exited with `code` and printed one JSON error document mentioning `words`.
pub fn assert_json_error(out: &Output, code: i32, words: &str) {
    assert_exit(out, code);
    let doc = json(out);
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["exitCode"], code);
    assert!(doc["error"].as_str().unwrap().contains(words), "{doc}");
}

/// `--quiet-period 0 --json ARGS` on `db`, expected to exit 0: its JSON document.
pub fn document(db: &Path, args: &[&str]) -> Value {
    let out = run(db, &[&["--quiet-period", "0", "--json"][..], args].concat());
    assert_exit(&out, 0);
    json(&out)
}

/// Stdout parsed as one JSON document.
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Previews `message` of `session` and prunes all its technical parts with the CLI (no server
/// may hold the journal); returns the prune's JSON answer.
pub fn prune_all(db: &Path, session: &str, message: &str) -> Value {
    let out = run(db, &["preview", session, message, "--json"]);
    assert_exit(&out, 0);
    let revision = json(&out)["revision"]
        .as_str()
        .expect("revision")
        .to_string();
    let out = run(
        db,
        &[
            "prune",
            session,
            message,
            "--revision",
            &revision,
            "--all-technical",
            "--json",
        ],
    );
    assert_exit(&out, 0);
    json(&out)
}

/// `--json --quiet-period 0 clean --all --apply --keep-last-turns 0 EXTRA` on `db`: its exit
/// code and its report.
pub fn clean_everything(db: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let args = [
        &["--json", "--quiet-period", "0", "clean", "--all", "--apply"][..],
        &["--keep-last-turns", "0"],
        extra,
    ]
    .concat();
    let out = run(db, &args);
    (out.status.code(), json(&out))
}
