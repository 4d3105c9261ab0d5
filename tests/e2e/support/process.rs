//! Child processes of the OpenCode interop tests: commands cut off from the user's home and from
//! the network ([`isolate`]), runs bounded in time with their output captured ([`run_bounded`]),
//! and a running `opencode serve` ([`Server`]) that is stopped with every process it started.
//!
//! Every wait is bounded; processes are signalled by PID, never by name.

use std::fs::{self, File};
use std::io::{Read, Seek};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, kill_process_group, Pid, Signal};

const SERVER_START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// A loopback port nothing listens on (the discard port): registry and proxy variables point
/// here, so a download OpenCode attempts fails at once instead of reaching the network.
pub const CLOSED_PORT_URL: &str = "http://127.0.0.1:9/";

/// Points a command at its own home: HOME and the XDG dirs under `root`, OpenCode's network
/// features and default plugins off, and every other `OPENCODE_*` variable (config, database,
/// password overrides) and `GIT_*` variable (a `GIT_DIR` from a hook would redirect git)
/// removed.
///
/// Releases up to 1.15 install `@opencode-ai/plugin` into their config dir at start-up (with
/// their own bun: `opencode install --no-cache`; `OPENCODE_DISABLE_DEFAULT_PLUGINS` does not
/// stop that), and while that install waits on the network they ignore SIGTERM; the npm and bun
/// registry and every proxy variable are therefore set to [`CLOSED_PORT_URL`], with loopback
/// (where the mock model listens) exempt from the proxy.
///
/// `TMPDIR` is `root/tmp` too: every start of an OpenCode binary unpacks an 8 MB native library
/// into the temporary folder and leaves it there, which in the shared `/tmp` added up to
/// gigabytes over test runs; under `root` it goes with the test's folder.
pub fn isolate(cmd: &mut Command, root: &Path) {
    let tmp = root.join("tmp");
    // A folder that cannot be made shows as OpenCode's own failure to start, with its words.
    let _ = std::fs::create_dir_all(&tmp);
    cmd.env("TMPDIR", &tmp);
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let lower = key.to_ascii_lowercase();
        if key.starts_with("OPENCODE")
            || key.starts_with("GIT_")
            || lower.ends_with("_proxy")
            || lower.ends_with("_registry")
        {
            cmd.env_remove(key);
        }
    }
    for (key, dir) in [
        ("HOME", "home"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ] {
        cmd.env(key, root.join(dir));
    }
    for flag in [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_SHARE",
        "GIT_CONFIG_NOSYSTEM",
    ] {
        cmd.env(flag, "1");
    }
    for key in [
        "npm_config_registry",
        "NPM_CONFIG_REGISTRY",
        "BUN_CONFIG_REGISTRY",
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
    ] {
        cmd.env(key, CLOSED_PORT_URL);
    }
    cmd.env("no_proxy", "127.0.0.1,localhost")
        .env("NO_PROXY", "127.0.0.1,localhost");
}

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
///
/// Errors (as text): the command cannot start, does not finish within `timeout`, or its output
/// cannot be read back.
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> Result<Captured, String> {
    let program = cmd.get_program().to_owned();
    let temp = |e: std::io::Error| format!("temp file: {e}");
    let mut stdout = tempfile::tempfile().map_err(temp)?;
    let mut stderr = tempfile::tempfile().map_err(temp)?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(stdout.try_clone().map_err(temp)?)
        .stderr(stderr.try_clone().map_err(temp)?)
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let status = match wait_for(&mut child, timeout) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{program:?} did not finish within {timeout:?}"));
        }
        Err(e) => return Err(format!("waiting for {program:?}: {e}")),
    };
    Ok(Captured {
        status,
        stdout: read_all(&mut stdout)?,
        stderr: read_all(&mut stderr)?,
    })
}

/// Waits up to `timeout` for `child` to exit: `Ok(None)` when it is still running then. Polls
/// `try_wait` every 10 ms rather than installing a SIGCHLD handler, whose signals would make
/// other tests' socket reads with a timeout fail with `Interrupted` (signal(7)).
fn wait_for(child: &mut Child, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_all(file: &mut File) -> Result<String, String> {
    let mut bytes = Vec::new();
    file.rewind()
        .and_then(|()| file.read_to_end(&mut bytes))
        .map_err(|e| format!("reading captured output: {e}"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A running `opencode serve`. Dropping it (also while unwinding from a failed assertion)
/// kills the server, its process group and every descendant found under it.
pub struct Server {
    child: Option<Child>,
    url: String,
    log: PathBuf,
}

/// How [`Server::terminate`] ended the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// It exited by itself within the grace period after SIGTERM (with this status).
    OnSigterm(ExitStatus),
    /// It was still running at the end of the grace period and was killed.
    Killed,
    /// It had already exited (or been stopped) before.
    AlreadyGone,
}

impl Server {
    /// Starts `cmd` (an `opencode serve`) in its own process group, stdin closed, stdout and
    /// stderr to a new file at `log`, and waits (bounded) for the `http://127.0.0.1:PORT` it
    /// prints there.
    ///
    /// Panics, with the log, when it exits or prints no URL within 30 s.
    pub fn start(cmd: &mut Command, log: &Path) -> Self {
        let file = File::create(log).expect("create the server log");
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log handle"))
            .stderr(file)
            .process_group(0);
        let mut server = Self {
            child: Some(cmd.spawn().expect("start opencode serve")),
            url: String::new(),
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + SERVER_START_TIMEOUT;
        loop {
            if let Some(url) = find_url(&server.log()) {
                server.url = url;
                return server;
            }
            let exited = server
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
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
        let pid = Pid::from_child(&child);
        kill_tree(pid, &descendants_of(pid));
        if !matches!(wait_for(&mut child, STOP_TIMEOUT), Ok(Some(_))) {
            eprintln!(
                "opencode serve (pid {pid:?}) did not exit within {STOP_TIMEOUT:?} of SIGKILL"
            );
        }
    }

    /// Asks the server to stop as a user would (SIGTERM to its pid), waits up to `grace` for it
    /// to exit, then kills its process group and every descendant still alive (SIGKILL), and
    /// says which of the two stopped it.
    pub fn terminate(&mut self, grace: Duration) -> Stopped {
        let Some(child) = self.child.as_mut() else {
            return Stopped::AlreadyGone;
        };
        if let Ok(Some(_)) = child.try_wait() {
            self.stop();
            return Stopped::AlreadyGone;
        }
        let pid = Pid::from_child(child);
        // Taken while the server is alive: once it exits, its children are re-parented and no
        // longer found under it.
        let descendants = descendants_of(pid);
        let _ = kill_process(pid, Signal::TERM);
        match wait_for(child, grace) {
            Ok(Some(status)) => {
                // Anything it started and left behind.
                self.child = None;
                kill_tree(pid, &descendants);
                Stopped::OnSigterm(status)
            }
            _ => {
                self.stop();
                Stopped::Killed
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The first `http://127.0.0.1:PORT` in `log`.
fn find_url(log: &str) -> Option<String> {
    const PREFIX: &str = "http://127.0.0.1:";
    let rest = &log[log.find(PREFIX)? + PREFIX.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty()).then(|| format!("{PREFIX}{digits}"))
}

/// SIGKILL to the process group `pid` leads (the server was started with `process_group(0)`),
/// then to `descendants` (OpenCode starts tools in their own sessions, outside the group).
/// Errors are ignored: a process may be gone already.
fn kill_tree(pid: Pid, descendants: &[Pid]) {
    let _ = kill_process_group(pid, Signal::KILL);
    for &descendant in descendants {
        let _ = kill_process(descendant, Signal::KILL);
    }
}

/// Every live descendant of `pid`, from the parent pid in `/proc/*/stat`.
fn descendants_of(pid: Pid) -> Vec<Pid> {
    let parent_of = |entry: fs::DirEntry| -> Option<(i32, i32)> {
        let child = entry.file_name().to_str()?.parse().ok()?;
        let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let after = &stat[stat.rfind(')')? + 1..];
        Some((child, after.split_whitespace().nth(1)?.parse().ok()?))
    };
    let links: Vec<(i32, i32)> = fs::read_dir("/proc")
        .map(|entries| entries.flatten().filter_map(parent_of).collect())
        .unwrap_or_default();
    let mut found = Vec::new();
    let mut frontier = vec![pid.as_raw_nonzero().get()];
    while let Some(parent) = frontier.pop() {
        for &(child, ppid) in &links {
            if ppid == parent && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found.into_iter().filter_map(Pid::from_raw).collect()
}
