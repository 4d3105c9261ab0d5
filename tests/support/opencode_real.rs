//! Harness for running the real OpenCode 1.18.34 binary against a database this project pruned.
//!
//! It provides:
//! - [`binary`]: finds the pinned binary (`$OPENCODE_BIN`, the copy `scripts/install-opencode.sh`
//!   puts under `target/opencode-real/`, or installs it when npm is at hand). When none can be
//!   had it panics under `CI=true` (a skipped interop test is a failure there) and otherwise
//!   prints why and returns `None`.
//! - [`MockModel`]: an OpenAI-compatible chat-completions server on loopback that streams a fixed
//!   plain-text reply and records every request.
//! - [`OpenCode`]: an isolated OpenCode home (own HOME and XDG dirs, config pointing provider
//!   `fixture` at the mock, a work tree) with the fixture database copied in, `export`, and
//!   [`OpenCode::serve`], whose [`Server`] kills the server and its descendants on drop.
//! - [`http`]: a minimal HTTP/1.1 client for the server's API.
//!
//! Every wait is bounded; processes started here are stopped by PID, never by name.
// Each interop test uses a part of the harness.
#![allow(dead_code)]

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The OpenCode version the fixture was written by and the test runs.
pub const VERSION: &str = "1.18.34";
/// Text the mock streams for every chat request that is not a title request.
pub const REPLY_TEXT: &str = "Continued after prune.";
/// Text the mock answers to a title request.
pub const TITLE_TEXT: &str = "Fixture title";
/// The work directory stored in the fixture's `session.directory` and `project.worktree`.
pub const FIXTURE_DIRECTORY: &str = "/tmp/oc-cache/run/work";
/// OpenCode's project id of the fixture: the root commit of the generator's work tree.
pub const FIXTURE_PROJECT_ID: &str = "acd687b6218323a9c4e26490721b570cacab4aef";

const VERSION_TIMEOUT: Duration = Duration::from_secs(30);
const INSTALL_TIMEOUT: Duration = Duration::from_secs(240);
const GIT_TIMEOUT: Duration = Duration::from_secs(20);
const SERVER_START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

// ------------------------------------------------------------------------------------------
// Finding the binary

/// The workspace root (the root package's manifest directory).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `scripts/install-opencode.sh` installs the binary.
pub fn installed_binary() -> PathBuf {
    workspace().join("target/opencode-real/node_modules/opencode-linux-x64/bin/opencode")
}

/// The pinned OpenCode binary, or `None` (after printing why) when it cannot be had outside CI.
///
/// Order: `$OPENCODE_BIN` when set (and then only it: an explicit choice is never replaced),
/// else [`installed_binary`], else `scripts/install-opencode.sh` when npm is on `PATH`. Each
/// candidate must print exactly [`VERSION`] for `--version`.
///
/// Panics when no binary can be had and `CI` is `true` (or `1`).
pub fn binary() -> Option<PathBuf> {
    match locate_binary() {
        Ok(path) => Some(path),
        Err(reason) if running_in_ci() => panic!(
            "CI is set and the OpenCode {VERSION} interop test cannot run: {reason}. \
             In CI a skipped interop test is a failure: install the binary with \
             `bash scripts/install-opencode.sh` (as .ci/run does) or set OPENCODE_BIN."
        ),
        Err(reason) => {
            eprintln!(
                "SKIPPED: the OpenCode {VERSION} interop test did not run: {reason}. \
                 Run `bash scripts/install-opencode.sh` (needs npm) or set OPENCODE_BIN to an \
                 opencode {VERSION} binary."
            );
            None
        }
    }
}

fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

fn locate_binary() -> Result<PathBuf, String> {
    if let Some(explicit) = std::env::var_os("OPENCODE_BIN").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(explicit);
        return match check_version(&path) {
            Ok(()) => Ok(path),
            Err(why) => Err(format!(
                "OPENCODE_BIN={} is not usable ({why})",
                path.display()
            )),
        };
    }
    let installed = installed_binary();
    let first = match check_version(&installed) {
        Ok(()) => return Ok(installed),
        Err(why) => why,
    };
    let Some(npm) = find_on_path("npm") else {
        return Err(format!(
            "OPENCODE_BIN is not set, {} is not usable ({first}), and npm is not on PATH to \
             install opencode-linux-x64@{VERSION}",
            installed.display()
        ));
    };
    let script = workspace().join("scripts/install-opencode.sh");
    eprintln!(
        "opencode {VERSION} not found at {} ({first}); installing it with {} (npm: {})",
        installed.display(),
        script.display(),
        npm.display()
    );
    let out = run_bounded(Command::new("bash").arg(&script), INSTALL_TIMEOUT)
        .map_err(|e| format!("{} failed: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} exited with {}: {}",
            script.display(),
            out.status,
            out.stderr.trim()
        ));
    }
    check_version(&installed)
        .map(|()| installed.clone())
        .map_err(|why| {
            format!(
                "after installing, {} is not usable ({why})",
                installed.display()
            )
        })
}

/// Runs `path --version` in a throwaway home (so the probe writes nothing into the real one).
fn check_version(path: &Path) -> Result<(), String> {
    if !path.is_file() {
        return Err("no such file".into());
    }
    let home = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let mut cmd = Command::new(path);
    cmd.arg("--version");
    isolate(&mut cmd, home.path());
    let out = run_bounded(&mut cmd, VERSION_TIMEOUT)?;
    let found = out.stdout.trim();
    if out.status.success() && found == VERSION {
        Ok(())
    } else {
        Err(format!(
            "`--version` exited with {} and printed {found:?}, expected {VERSION:?}",
            out.status
        ))
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

// ------------------------------------------------------------------------------------------
// Bounded child processes

/// What a finished child printed.
#[derive(Debug)]
pub struct Captured {
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output (lossy UTF-8).
    pub stdout: String,
    /// Standard error (lossy UTF-8).
    pub stderr: String,
}

/// Runs a command to completion with stdin closed and its output captured in anonymous files
/// (so a grandchild that keeps a pipe open cannot block the read). Kills it after `timeout`.
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> Result<Captured, String> {
    let mut stdout = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let mut stderr = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let out_handle = stdout.try_clone().map_err(|e| format!("temp file: {e}"))?;
    let err_handle = stderr.try_clone().map_err(|e| format!("temp file: {e}"))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out_handle)
        .stderr(err_handle)
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{:?} did not finish within {timeout:?}",
                    cmd.get_program()
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {:?}: {e}", cmd.get_program())),
        }
    };
    Ok(Captured {
        status,
        stdout: read_all(&mut stdout)?,
        stderr: read_all(&mut stderr)?,
    })
}

fn read_all(file: &mut File) -> Result<String, String> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(|e| format!("reading captured output: {e}"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Points a command at its own home: HOME and the XDG dirs under `root`, OpenCode's network
/// features off, and every other `OPENCODE_*` variable (config, database, password overrides),
/// `GIT_*` variable (a `GIT_DIR` from a hook would redirect git) and proxy variable (the mock is
/// on loopback) removed.
fn isolate(cmd: &mut Command, root: &Path) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let proxy = key.to_ascii_lowercase().ends_with("_proxy");
        if key.starts_with("OPENCODE") || key.starts_with("GIT_") || proxy {
            cmd.env_remove(key);
        }
    }
    cmd.env("HOME", root.join("home"))
        .env("XDG_DATA_HOME", root.join("data"))
        .env("XDG_CONFIG_HOME", root.join("config"))
        .env("XDG_STATE_HOME", root.join("state"))
        .env("XDG_CACHE_HOME", root.join("cache"))
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1");
}

// ------------------------------------------------------------------------------------------
// The isolated OpenCode environment

/// An isolated OpenCode installation: its own home and XDG dirs in a temp dir, the config file
/// pointing provider `fixture` at a mock model, and a work tree the sessions are moved to.
pub struct OpenCode {
    bin: PathBuf,
    root: tempfile::TempDir,
    work: PathBuf,
    work_is_fixture_project: bool,
}

impl OpenCode {
    /// Creates the dirs, the work tree and `$XDG_CONFIG_HOME/opencode/opencode.json` whose
    /// provider `fixture` (model `fixture/fixture`) talks to `model_base_url` (ending in `/v1`).
    ///
    /// The work tree is made like the generator's: one file and one commit with fixed dates, so
    /// its root commit is the fixture's project id. Without git it is a plain directory, which
    /// OpenCode also accepts (as its `global` project).
    pub fn new(bin: &Path, model_base_url: &str) -> Self {
        let root = tempfile::Builder::new()
            .prefix("opencode-real-")
            .tempdir()
            .expect("create the OpenCode temp dir");
        for dir in [
            "home",
            "data/opencode",
            "config/opencode",
            "state",
            "cache",
            "work",
        ] {
            fs::create_dir_all(root.path().join(dir)).expect("create an OpenCode dir");
        }
        let work = root.path().join("work");
        let work_is_fixture_project = match make_work_tree(&work, root.path()) {
            Ok(commit) if commit == FIXTURE_PROJECT_ID => true,
            Ok(commit) => {
                eprintln!("work tree root commit {commit} is not the fixture's project id");
                false
            }
            Err(why) => {
                eprintln!("work tree is a plain directory (no git repo: {why})");
                false
            }
        };
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "fixture/fixture",
            "small_model": "fixture/fixture",
            "autoupdate": false,
            "share": "disabled",
            "permission": { "bash": "allow", "edit": "allow", "task": "allow" },
            // OpenCode's own pruning would rewrite old tool outputs in the request; keep it off
            // so that what the model receives is exactly what the database holds.
            "compaction": { "prune": false, "auto": false },
            "provider": {
                "fixture": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fixture",
                    "options": { "baseURL": model_base_url, "apiKey": "x" },
                    "models": {
                        "fixture": {
                            "name": "Fixture",
                            "tool_call": true,
                            "reasoning": true,
                            "limit": { "context": 200000, "output": 8192 }
                        }
                    }
                }
            }
        });
        let text = serde_json::to_string_pretty(&config).expect("serialize the config");
        fs::write(root.path().join("config/opencode/opencode.json"), text)
            .expect("write opencode.json");
        Self {
            bin: bin.to_path_buf(),
            root,
            work,
            work_is_fixture_project,
        }
    }

    /// The temp dir holding everything.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The work tree (cwd of OpenCode, and the sessions' directory after [`Self::install_database`]).
    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// Whether the work tree's root commit is the fixture's project id.
    pub fn work_is_fixture_project(&self) -> bool {
        self.work_is_fixture_project
    }

    /// `$XDG_DATA_HOME/opencode/opencode.db`.
    pub fn database(&self) -> PathBuf {
        self.root.path().join("data/opencode/opencode.db")
    }

    /// Copies `fixture` to [`Self::database`] and moves its sessions to the work tree.
    ///
    /// OpenCode resolves `session.directory` before it prompts the model (a missing directory
    /// fails the turn with `FileSystem.realPath ... ENOENT`), so the fixture's
    /// [`FIXTURE_DIRECTORY`] is rewritten to [`Self::work_dir`] in `session.directory`,
    /// `project.worktree` and `project_directory.directory`. And `session.time_updated` is
    /// capped at one minute ago: the sessions were at rest when the fixture was written, and a
    /// machine whose clock is behind the generator's must not see them as just updated.
    pub fn install_database(&self, fixture: &Path) -> PathBuf {
        let db = self.database();
        fs::copy(fixture, &db).expect("copy the fixture database");
        let work = self.work.to_str().expect("temp dir path is UTF-8");
        let now_ms = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_millis(),
        )
        .expect("time fits i64");
        let conn = rusqlite::Connection::open(&db).expect("open the copied database");
        conn.execute(
            "UPDATE session SET directory = ?1 WHERE directory = ?2",
            [work, FIXTURE_DIRECTORY],
        )
        .expect("move session.directory");
        conn.execute(
            "UPDATE project SET worktree = ?1 WHERE worktree = ?2",
            [work, FIXTURE_DIRECTORY],
        )
        .expect("move project.worktree");
        conn.execute(
            "UPDATE project_directory SET directory = ?1 WHERE directory = ?2",
            [work, FIXTURE_DIRECTORY],
        )
        .expect("move project_directory.directory");
        conn.execute(
            "UPDATE session SET time_updated = ?1 WHERE time_updated > ?1",
            [now_ms - 60_000],
        )
        .expect("cap session.time_updated");
        drop(conn);
        db
    }

    /// A command running the OpenCode binary in this environment, cwd = the work tree.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        isolate(&mut cmd, self.root.path());
        cmd.current_dir(&self.work);
        cmd
    }

    /// `opencode export SESSION_ID`, bounded by `timeout`.
    pub fn export(&self, session_id: &str, timeout: Duration) -> Captured {
        let mut cmd = self.command();
        cmd.arg("export").arg(session_id);
        run_bounded(&mut cmd, timeout).unwrap_or_else(|e| panic!("opencode export: {e}"))
    }

    /// Starts `opencode serve --hostname 127.0.0.1 --port 0` in its own process group and
    /// waits (bounded) for the URL it prints.
    pub fn serve(&self) -> Server {
        let log_path = self.root.path().join("serve.log");
        let log = File::create(&log_path).expect("create serve.log");
        let mut cmd = self.command();
        cmd.args(["serve", "--hostname", "127.0.0.1", "--port", "0"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().expect("start opencode serve");
        let mut server = Server {
            child: Some(child),
            url: String::new(),
            log: log_path,
        };
        let deadline = Instant::now() + SERVER_START_TIMEOUT;
        loop {
            if let Some(url) = find_url(&server.log()) {
                server.url = url;
                return server;
            }
            if let Some(status) = server
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "opencode serve exited with {status} before listening:\n{}",
                    server.log()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "opencode serve printed no URL within {SERVER_START_TIMEOUT:?}:\n{}",
                    server.log()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Makes `work` a git repo with the generator's single commit; returns the root commit hash.
fn make_work_tree(work: &Path, root: &Path) -> Result<String, String> {
    fs::write(work.join("README.txt"), "fixture work dir\n").map_err(|e| e.to_string())?;
    let git = |args: &[&str]| -> Result<String, String> {
        let mut cmd = Command::new("git");
        isolate(&mut cmd, root);
        cmd.current_dir(work)
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .args([
                "-c",
                "user.email=fixture@example.invalid",
                "-c",
                "user.name=fixture",
            ])
            .args([
                "-c",
                "commit.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args);
        let out = run_bounded(&mut cmd, GIT_TIMEOUT)?;
        if out.status.success() {
            Ok(out.stdout.trim().to_string())
        } else {
            Err(format!(
                "git {} exited with {}: {}",
                args.join(" "),
                out.status,
                out.stderr.trim()
            ))
        }
    };
    git(&["init", "-q"])?;
    git(&["add", "README.txt"])?;
    git(&["commit", "-q", "-m", "init"])?;
    git(&["rev-list", "--max-parents=0", "HEAD"])
}

fn find_url(log: &str) -> Option<String> {
    let start = log.find("http://127.0.0.1:")?;
    let rest = &log[start + "http://127.0.0.1:".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty()).then(|| format!("http://127.0.0.1:{digits}"))
}

// ------------------------------------------------------------------------------------------
// The running server

/// A running `opencode serve`. Dropping it (also while unwinding from a failed assertion)
/// kills the server, its process group and every descendant found under it.
pub struct Server {
    child: Option<Child>,
    url: String,
    log: PathBuf,
}

impl Server {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What the server printed so far.
    pub fn log(&self) -> String {
        fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Kills the server and everything it started, and waits (bounded) for it. Idempotent.
    /// SIGKILL is enough: every committed write is in the database or its WAL, which the next
    /// connection recovers.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        let descendants = descendants_of(pid);
        let _ = child.kill();
        // The server's own process group (it was started with process_group(0)), then anything
        // that left the group (OpenCode starts tools in their own sessions).
        signal_kill(&[format!("-{pid}")]);
        signal_kill(&descendants.iter().map(u32::to_string).collect::<Vec<_>>());
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        eprintln!("opencode serve (pid {pid}) did not exit within {STOP_TIMEOUT:?} of SIGKILL");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends SIGKILL to the given pids (or `-PGID`s) with `kill(1)`; errors are ignored (a process
/// may already be gone).
fn signal_kill(targets: &[String]) {
    if targets.is_empty() {
        return;
    }
    let mut cmd = Command::new("kill");
    cmd.arg("-KILL").arg("--").args(targets);
    let _ = run_bounded(&mut cmd, Duration::from_secs(5));
}

/// Every live descendant of `pid`, from `/proc/*/stat`.
fn descendants_of(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                parents.push((child, ppid));
            }
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(child, ppid) in &parents {
            if ppid == parent && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

// ------------------------------------------------------------------------------------------
// HTTP client

/// A response: status code and body.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Body (chunked encoding removed).
    pub body: String,
}

impl Response {
    /// The body as JSON; panics with the body when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "response (HTTP {}) is not JSON ({e}): {}",
                self.status, self.body
            )
        })
    }
}

/// One HTTP/1.1 request to `base` (`http://HOST:PORT`), `Connection: close`, bounded by
/// `timeout` overall.
pub fn http(
    base: &str,
    method: &str,
    path_and_query: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Response, String> {
    let authority = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("not an http URL: {base}"))?;
    let addr: SocketAddr = authority
        .parse()
        .map_err(|e| format!("bad address {authority}: {e}"))?;
    let deadline = Instant::now() + timeout;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path_and_query} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        payload.len()
    );
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(payload.as_bytes()))
        .map_err(|e| format!("send {method} {path_and_query}: {e}"))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "{method} {path_and_query}: no complete answer within {timeout:?}"
            ));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted) => {}
            Err(e) => {
                return Err(format!(
                    "{method} {path_and_query}: reading the answer: {e}"
                ))
            }
        }
    }
    let split = find(&raw, b"\r\n\r\n")
        .ok_or_else(|| format!("{method} {path_and_query}: no HTTP head"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("{method} {path_and_query}: bad status line in {head:?}"))?;
    let chunked = lines.any(|line| {
        let lower = line.to_ascii_lowercase();
        lower.starts_with("transfer-encoding:") && lower.contains("chunked")
    });
    let rest = &raw[split + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Percent-encodes a query value (keeps unreserved characters and `/`).
pub fn query_value(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Removes HTTP chunked transfer encoding.
fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let end = find(data, b"\r\n").ok_or("chunked body: missing chunk size line")?;
        let line = String::from_utf8_lossy(&data[..end]);
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|e| format!("chunked body: bad size {size_text:?}: {e}"))?;
        data = &data[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            return Err("chunked body: truncated chunk".into());
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

// ------------------------------------------------------------------------------------------
// The mock model

/// What a request to the mock was taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A chat completion without tools whose system prompt mentions a title.
    Title,
    /// Any other chat completion (a turn, or a summary).
    Chat,
    /// Anything else (a model list, an unknown path).
    Other,
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// HTTP method.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Headers as received (names lowercased).
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: String,
    /// How the mock classified it.
    pub kind: RequestKind,
}

impl ModelRequest {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The session OpenCode sent this request for: its `x-opencode-session-id` header.
    pub fn session_id(&self) -> Option<&str> {
        self.header("x-opencode-session-id")
    }

    /// The text of the newest `user` message of a chat request.
    pub fn last_user_text(&self) -> Option<String> {
        let body = self.json();
        let messages = body.get("messages")?.as_array()?;
        messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| content_text(&m["content"]))
    }
}

/// Text of an OpenAI message `content` (a string or a list of `{type, text}` parts).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// An OpenAI-compatible `POST /v1/chat/completions` server on `127.0.0.1:0`, one thread per
/// connection. Title requests get [`TITLE_TEXT`], every other chat request [`REPLY_TEXT`]
/// (streamed as `chat.completion.chunk` SSE when asked to stream), `finish_reason` `stop`.
/// Every request is recorded. Dropping it stops accepting and joins the accept thread.
pub struct MockModel {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl MockModel {
    /// Binds a free loopback port and starts serving.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the mock model");
        let addr = listener.local_addr().expect("mock model address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (requests, stop) = (requests.clone(), stop.clone());
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let requests = requests.clone();
                    thread::spawn(move || {
                        if let Err(e) = serve_connection(stream, &requests) {
                            eprintln!("mock model: connection error: {e}");
                        }
                    });
                }
            })
        };
        Self {
            addr,
            requests,
            stop,
            accept: Some(accept),
        }
    }

    /// The provider base URL: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// A copy of every request received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn serve_connection(stream: TcpStream, requests: &Mutex<Vec<ModelRequest>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line)? == 0 {
        return Ok(()); // a bare connect (the wake-up from Drop)
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let body = if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok())
    {
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        body
    } else if header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        read_chunked(&mut reader)?
    } else {
        Vec::new()
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let kind = classify(&method, &path, &parsed);
    lock(requests).push(ModelRequest {
        method,
        path,
        headers,
        body,
        kind,
    });

    let mut out = stream;
    match kind {
        RequestKind::Other => write_json(
            &mut out,
            &json!({"object": "list", "data": [{"id": "fixture", "object": "model"}]}),
        ),
        RequestKind::Title | RequestKind::Chat => {
            let text = if kind == RequestKind::Title {
                TITLE_TEXT
            } else {
                REPLY_TEXT
            };
            if parsed["stream"] == true {
                write_stream(&mut out, text)
            } else {
                write_json(&mut out, &completion(text))
            }
        }
    }
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if size == 0 {
            let mut trailer = String::new();
            reader.read_line(&mut trailer)?;
            return Ok(out);
        }
        let start = out.len();
        out.resize(start + size, 0);
        reader.read_exact(&mut out[start..])?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn classify(method: &str, path: &str, body: &Value) -> RequestKind {
    if method != "POST"
        || !path
            .split('?')
            .next()
            .unwrap_or("")
            .ends_with("/chat/completions")
    {
        return RequestKind::Other;
    }
    let has_tools = body["tools"]
        .as_array()
        .is_some_and(|tools| !tools.is_empty());
    let system: String = body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "system")
                .map(|m| content_text(&m["content"]))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    if !has_tools && system.to_ascii_lowercase().contains("title") {
        RequestKind::Title
    } else {
        RequestKind::Chat
    }
}

fn usage() -> Value {
    json!({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105})
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-interop",
        "object": "chat.completion",
        "created": 0,
        "model": "fixture",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": usage()
    })
}

fn write_json(out: &mut TcpStream, value: &Value) -> std::io::Result<()> {
    let body = value.to_string();
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

/// Streams `text` as `chat.completion.chunk` events: the role, one chunk per word, an empty
/// delta with `finish_reason: "stop"` and usage, then `[DONE]`. The connection is closed after.
fn write_stream(out: &mut TcpStream, text: &str) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Connection: close\r\n\r\n",
    )?;
    let event = |delta: Value, finish: Value, usage: Option<Value>| {
        let mut chunk = json!({
            "id": "chatcmpl-interop",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fixture",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage;
        }
        format!("data: {chunk}\n\n")
    };
    out.write_all(event(json!({"role": "assistant"}), Value::Null, None).as_bytes())?;
    for piece in text.split_inclusive(' ') {
        out.write_all(event(json!({"content": piece}), Value::Null, None).as_bytes())?;
        out.flush()?;
    }
    out.write_all(event(json!({}), json!("stop"), Some(usage())).as_bytes())?;
    out.write_all(b"data: [DONE]\n\n")?;
    out.flush()
}
