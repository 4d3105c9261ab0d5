//! The npm packages `scripts/npm-pack.sh` packs (the launcher `session-prune` and the binary's
//! package `session-prune-linux-x64-gnu`), installed with npm into an empty folder, give a
//! working `npx session-prune`: the same version, the same clean as the binary itself, its exit
//! codes, and signals passed on; and without the binary's package, words that say what to
//! install (exit 1). Everything is installed from the local tarballs, offline.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;

use common::cli::{assert_exit, json, run};
use common::npm::{install, pack};
use common::*;
use serde_json::Value;

/// `npx --no -- session-prune ARGS` in `prefix` (the installed command, nothing downloaded).
fn npx(prefix: &Path, args: &[&str]) -> Output {
    Command::new("npx")
        .current_dir(prefix)
        .args(["--no", "--", "session-prune"])
        .args(args)
        .output()
        .expect("npx")
}

#[test]
fn npx_session_prune_is_the_binary_with_its_version_its_clean_and_its_exit_codes() {
    let Some(packed) = pack() else { return };
    let prefix = tempfile::tempdir().expect("prefix");
    install(prefix.path(), &[&packed.launcher, &packed.binary]);

    let version = npx(prefix.path(), &["--version"]);
    assert_exit(&version, 0);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("session-prune {}\n", env!("CARGO_PKG_VERSION"))
    );

    // The same clean as the binary run directly, on two copies of the same database.
    let through_npm = Fixture::work();
    let direct = Fixture::work();
    let db = through_npm.db.to_str().expect("utf-8 path");
    let args = ["--json", "--quiet-period", "0", "clean", "--all", "--apply"];
    let cleaned = npx(prefix.path(), &[&["--db", db][..], &args].concat());
    assert_exit(&cleaned, 0);
    let expected = run(&direct.db, &args);
    assert_exit(&expected, 0);
    let figures = |mut report: Value| {
        report["file"]
            .as_object_mut()
            .expect("file")
            .remove("liveAfter");
        report
    };
    let cleaned = figures(json(&cleaned));
    assert_eq!(cleaned["status"], "cleaned");
    assert_eq!(cleaned["pruned"], 80);
    assert_eq!(cleaned, figures(json(&expected)));

    // Bad input keeps its exit code through the launcher.
    let missing = npx(
        prefix.path(),
        &["--db", "/nonexistent/opencode.db", "stats"],
    );
    assert_exit(&missing, 2);
}

#[test]
fn a_signal_to_the_launcher_stops_the_binary_as_on_a_terminal() {
    let Some(packed) = pack() else { return };
    let prefix = tempfile::tempdir().expect("prefix");
    install(prefix.path(), &[&packed.launcher, &packed.binary]);
    let fx = Fixture::work();
    let launcher = prefix.path().join("node_modules/.bin/session-prune");
    let mut child = Command::new("node")
        .arg(&launcher)
        .arg("--db")
        .arg(&fx.db)
        .args(["--quiet-period", "0", "serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node");
    // Its lines on stdout, read on a thread of their own so that no read can hang the test.
    let stdout = child.stdout.take().expect("stdout");
    let (lines, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Duration::from_secs(30);
    loop {
        match said.recv_timeout(deadline) {
            Ok(line) if line == "stop with Ctrl-C" => break,
            Ok(_) => {}
            Err(error) => {
                let _ = child.kill();
                panic!("the server never said it serves ({error})");
            }
        }
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            panic!("the launcher did not end within {deadline:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Both processes ended: their stdout is closed, and the reader's channel with it.
    let mut rest = Vec::new();
    while let Ok(line) = said.recv_timeout(deadline) {
        rest.push(line);
    }
    // The binary stopped as it does on SIGTERM (every request answered, the journal closed),
    // and the launcher ended with its exit code.
    assert_eq!(
        rest,
        ["stopped: every request answered, the journal closed"],
        "{status:?}"
    );
    assert_eq!(status.code(), Some(0));
}

#[test]
fn without_the_binarys_package_the_launcher_says_what_to_install() {
    let Some(packed) = pack() else { return };
    let prefix = tempfile::tempdir().expect("prefix");
    install(prefix.path(), &[&packed.launcher]);
    let out = npx(prefix.path(), &["--version"]);
    assert_exit(&out, 1);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "session-prune: the package session-prune-linux-x64-gnu, which holds the binary for \
         linux-x64-gnu, is not installed: install session-prune again with optional \
         dependencies (npm install session-prune, without --omit=optional or --no-optional), or \
         build it with `cargo install --locked --path .`\n"
    );
}

#[test]
fn npm_pack_refuses_bad_arguments_and_packs_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().expect("out");
    let pack = |args: &[&str]| {
        Command::new("bash")
            .arg(root.join("scripts/npm-pack.sh"))
            .args(args)
            .output()
            .expect("npm-pack.sh")
    };
    let folder = out.path().join("packages");
    let folder = folder.to_str().expect("utf-8 path");
    for (args, words) in [
        (
            vec![],
            "usage: scripts/npm-pack.sh OUTDIR [--binary PATH]\n".to_string(),
        ),
        (
            vec![folder, "--binary"],
            "usage: scripts/npm-pack.sh OUTDIR [--binary PATH]\n".to_string(),
        ),
        (
            vec![folder, "--release"],
            "usage: scripts/npm-pack.sh OUTDIR [--binary PATH]\n".to_string(),
        ),
        (
            vec![folder, "--binary", "/nonexistent/session-prune"],
            "npm-pack: /nonexistent/session-prune is not an executable\n".to_string(),
        ),
    ] {
        let refused = pack(&args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&refused.stderr), words, "{args:?}");
    }
    assert!(
        !Path::new(folder).exists(),
        "nothing is made for a refused pack"
    );
}

#[test]
fn the_readmes_npm_line_installs_a_working_command() {
    let Some(packed) = pack() else { return };
    // The README's line, in a folder holding `out/` as the packing leaves it, installed for
    // this test only (`--prefix`, as the README says for a user) and offline.
    let home = tempfile::tempdir().expect("home");
    let out = home.path().join("out");
    std::fs::create_dir(&out).expect("out");
    for tarball in [&packed.launcher, &packed.binary] {
        std::fs::copy(tarball, out.join(tarball.file_name().expect("name"))).expect("copy");
    }
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README");
    let line = "scripts/npm-pack.sh out && npm install -g ./out/session-prune-*.tgz";
    assert!(
        readme.contains(line),
        "the README's npm line changed: {line}"
    );
    let prefix = home.path().join("local");
    let installed = Command::new("bash")
        .current_dir(home.path())
        .arg("-c")
        .arg("npm install -g --offline --no-audit --no-fund --prefix \"$1\" ./out/session-prune-*.tgz")
        .arg("bash")
        .arg(&prefix)
        .output()
        .expect("npm install -g");
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let version = Command::new(prefix.join("bin/session-prune"))
        .arg("--version")
        .output()
        .expect("session-prune");
    assert_exit(&version, 0);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("session-prune {}\n", env!("CARGO_PKG_VERSION"))
    );
}
