//! strace, which the tests that count, stop or kill a process at a system call run it under.
#![allow(dead_code)]

use std::process::Command;

/// strace's path, or `None` when it is not installed: the caller says so and passes, except in
/// CI, where this fails, naming `what` strace is needed for.
pub fn strace(what: &str) -> Option<&'static str> {
    let found = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success());
    if found {
        return Some("strace");
    }
    crate::skip::cannot_run(
        &format!("strace is not installed, and it is needed {what}"),
        "Install it: apt-get install strace.",
    );
    None
}
