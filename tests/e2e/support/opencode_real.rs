//! Harness for running real OpenCode binaries against a database this project pruned: the
//! pinned 1.18.34 ([`VERSION`]) and the older releases of the version matrix.
//!
//! It provides:
//! - [`binary`] / [`binary_of`]: finds the binary of a release (`$OPENCODE_BIN_<VERSION with
//!   dots as _>`, for the pinned one also `$OPENCODE_BIN`; the copy
//!   `scripts/install-opencode.sh VERSION` puts under `target/`; or installs it when npm is at
//!   hand). When none can be had it panics under `CI=true` (a skipped interop test is a failure
//!   there) and otherwise prints `SKIPPED` and why and returns `None`.
//! - [`MockModel`]: an OpenAI-compatible chat-completions server on loopback that streams a fixed
//!   plain-text reply and records every request.
//! - [`OpenCode`]: an isolated OpenCode home (own HOME and XDG dirs, npm/bun registry and proxies
//!   pointed at a closed loopback port, config pointing the fixture's provider at the mock, a
//!   work tree whose root commit is the fixture's project id, see [`Layout`]) with the fixture
//!   database copied in, `export`, and [`OpenCode::serve`], whose [`Server`] stops the server
//!   (SIGTERM with [`Server::terminate`], SIGKILL on drop) and its descendants.
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

/// Where `scripts/install-opencode.sh` installs the pinned [`VERSION`].
pub fn installed_binary() -> PathBuf {
    installed_binary_of(VERSION)
}

/// Where `scripts/install-opencode.sh VERSION` installs `version`: `target/opencode-real/` for
/// the pinned [`VERSION`], `target/opencode-versions/VERSION/` for any other release.
pub fn installed_binary_of(version: &str) -> PathBuf {
    let prefix = if version == VERSION {
        workspace().join("target/opencode-real")
    } else {
        workspace().join("target/opencode-versions").join(version)
    };
    prefix.join("node_modules/opencode-linux-x64/bin/opencode")
}

/// The variable naming an explicit binary for `version`: `OPENCODE_BIN_1_18_34` for 1.18.34.
pub fn binary_variable(version: &str) -> String {
    format!("OPENCODE_BIN_{}", version.replace('.', "_"))
}

/// The pinned OpenCode [`VERSION`]: [`binary_of`] with that version.
pub fn binary() -> Option<PathBuf> {
    binary_of(VERSION)
}

/// The OpenCode binary of `version`, or `None` (after printing `SKIPPED` and why) when it
/// cannot be had outside CI.
///
/// Order: the variable [`binary_variable`] names (for the pinned [`VERSION`] also
/// `$OPENCODE_BIN`, which CI sets) when set, and then only it: an explicit choice is never
/// replaced; else [`installed_binary_of`]; else `scripts/install-opencode.sh VERSION` when npm is
/// on `PATH`. Each candidate must print exactly `version` for `--version`.
///
/// Panics when no binary can be had and `CI` is `true` (or `1`).
pub fn binary_of(version: &str) -> Option<PathBuf> {
    match locate_binary(version) {
        Ok(path) => Some(path),
        Err(reason) if running_in_ci() => panic!(
            "CI is set and the OpenCode {version} interop test cannot run: {reason}. \
             In CI a skipped interop test is a failure: install the binary with \
             `bash scripts/install-opencode.sh {version}` (as .ci/run does) or set {}.",
            binary_variable(version)
        ),
        Err(reason) => {
            eprintln!(
                "SKIPPED: the OpenCode {version} interop test did not run: {reason}. \
                 Run `bash scripts/install-opencode.sh {version}` (needs npm) or set {} to an \
                 opencode {version} binary.",
                binary_variable(version)
            );
            None
        }
    }
}

fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The explicit binary for `version` and the variable that named it, if one is set.
fn explicit_binary(version: &str) -> Option<(String, PathBuf)> {
    let mut names = vec![binary_variable(version)];
    if version == VERSION {
        names.push("OPENCODE_BIN".to_string());
    }
    names.into_iter().find_map(|name| {
        std::env::var_os(&name)
            .filter(|value| !value.is_empty())
            .map(|value| (name, PathBuf::from(value)))
    })
}

/// Serialises the installs this process starts: tests of one release run on several threads,
/// and two npm installs into one prefix would trip over each other.
static INSTALLING: Mutex<()> = Mutex::new(());

fn locate_binary(version: &str) -> Result<PathBuf, String> {
    if let Some((name, path)) = explicit_binary(version) {
        return match check_version(&path, version) {
            Ok(()) => Ok(path),
            Err(why) => Err(format!("{name}={} is not usable ({why})", path.display())),
        };
    }
    let installed = installed_binary_of(version);
    let _installing = lock(&INSTALLING);
    let first = match check_version(&installed, version) {
        Ok(()) => return Ok(installed),
        Err(why) => why,
    };
    let Some(npm) = find_on_path("npm") else {
        return Err(format!(
            "{} is not set, {} is not usable ({first}), and npm is not on PATH to install \
             opencode-linux-x64@{version}",
            binary_variable(version),
            installed.display()
        ));
    };
    let script = workspace().join("scripts/install-opencode.sh");
    eprintln!(
        "opencode {version} not found at {} ({first}); installing it with {} (npm: {})",
        installed.display(),
        script.display(),
        npm.display()
    );
    let out = run_bounded(
        Command::new("bash").arg(&script).arg(version),
        INSTALL_TIMEOUT,
    )
    .map_err(|e| format!("{} failed: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {version} exited with {}: {}",
            script.display(),
            out.status,
            out.stderr.trim()
        ));
    }
    check_version(&installed, version)
        .map(|()| installed.clone())
        .map_err(|why| {
            format!(
                "after installing, {} is not usable ({why})",
                installed.display()
            )
        })
}

/// Runs `path --version` in a throwaway home (so the probe writes nothing into the real one).
fn check_version(path: &Path, version: &str) -> Result<(), String> {
    if !path.is_file() {
        return Err("no such file".into());
    }
    let home = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let mut cmd = Command::new(path);
    cmd.arg("--version");
    isolate(&mut cmd, home.path());
    let out = run_bounded(&mut cmd, VERSION_TIMEOUT)?;
    let found = out.stdout.trim();
    if out.status.success() && found == version {
        Ok(())
    } else {
        Err(format!(
            "`--version` exited with {} and printed {found:?}, expected {version:?}",
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
fn isolate(cmd: &mut Command, root: &Path) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let proxy = key.to_ascii_lowercase().ends_with("_proxy");
        let registry = key.to_ascii_lowercase().ends_with("_registry");
        if key.starts_with("OPENCODE") || key.starts_with("GIT_") || proxy || registry {
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
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1");
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

// ------------------------------------------------------------------------------------------
// The isolated OpenCode environment

/// How a fixture's database was written: the directory its sessions name, the git work tree
/// whose root commit is its project id, and the model its messages were answered by.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `session.directory` (and `project.worktree`) as the writer stored it.
    pub directory: String,
    /// The root commit of [`Self::readme`] committed with [`Self::commit_message`] by
    /// `fixture <fixture@example.invalid>` on 2026-01-01T00:00:00Z: the fixture's project id.
    pub project_id: &'static str,
    /// The content of the work tree's only file, `README.txt`.
    pub readme: &'static str,
    /// The message of the work tree's only commit.
    pub commit_message: &'static str,
    /// The provider id the config gives the mock (the one the fixture's messages name).
    pub provider: &'static str,
    /// The model id under that provider.
    pub model: &'static str,
}

impl Layout {
    /// The pinned fixture `tests/fixtures/opencode-1.18.34/`: [`FIXTURE_DIRECTORY`],
    /// [`FIXTURE_PROJECT_ID`], provider `fixture`, model `fixture`.
    pub fn pinned() -> Self {
        Self {
            directory: FIXTURE_DIRECTORY.to_string(),
            project_id: FIXTURE_PROJECT_ID,
            readme: "fixture work dir\n",
            commit_message: "init",
            provider: "fixture",
            model: "fixture",
        }
    }

    /// A fixture of `scripts/opencode-fixtures/generate.py` whose sessions name `directory`
    /// (its manifest's `generator.work_dir`): provider `fixturemock`, model `fixture-model`.
    pub fn generated(directory: &str) -> Self {
        Self {
            directory: directory.to_string(),
            project_id: "af0e546c895ce3b5728a1d2218917e65842fdb3d",
            readme: "fixture work tree\n",
            commit_message: "fixture",
            provider: "fixturemock",
            model: "fixture-model",
        }
    }

    /// The `model` of a prompt body: `{"providerID", "modelID"}`.
    pub fn prompt_model(&self) -> Value {
        json!({ "providerID": self.provider, "modelID": self.model })
    }
}

/// An isolated OpenCode installation: its own home and XDG dirs in a temp dir, the config file
/// pointing the layout's provider at a mock model, and a work tree the sessions are moved to.
pub struct OpenCode {
    bin: PathBuf,
    root: tempfile::TempDir,
    work: PathBuf,
    work_is_fixture_project: bool,
    layout: Layout,
}

impl OpenCode {
    /// [`Self::with_layout`] for the pinned fixture ([`Layout::pinned`]): provider `fixture`
    /// (model `fixture/fixture`).
    pub fn new(bin: &Path, model_base_url: &str) -> Self {
        Self::with_layout(bin, model_base_url, Layout::pinned())
    }

    /// Creates the dirs, the work tree and `$XDG_CONFIG_HOME/opencode/opencode.json` whose
    /// provider `layout.provider` (model `layout.model`) talks to `model_base_url` (ending in
    /// `/v1`), and points npm and bun at [`CLOSED_PORT_URL`] in `~/.npmrc` and `~/.bunfig.toml`
    /// as well (besides the variables [`Self::command`] sets).
    ///
    /// The work tree is made like the generator's: one file and one commit with fixed dates, so
    /// its root commit is the fixture's project id. Without git it is a plain directory, which
    /// OpenCode also accepts (as its `global` project).
    pub fn with_layout(bin: &Path, model_base_url: &str, layout: Layout) -> Self {
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
        fs::write(
            root.path().join("home/.npmrc"),
            format!("registry={CLOSED_PORT_URL}\noffline=true\n"),
        )
        .expect("write .npmrc");
        fs::write(
            root.path().join("home/.bunfig.toml"),
            format!("[install]\nregistry = \"{CLOSED_PORT_URL}\"\n"),
        )
        .expect("write .bunfig.toml");
        let work = root.path().join("work");
        let work_is_fixture_project = match make_work_tree(&work, root.path(), &layout) {
            Ok(commit) if commit == layout.project_id => true,
            Ok(commit) => {
                eprintln!("work tree root commit {commit} is not the fixture's project id");
                false
            }
            Err(why) => {
                eprintln!("work tree is a plain directory (no git repo: {why})");
                false
            }
        };
        let model = format!("{}/{}", layout.provider, layout.model);
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "model": model,
            "small_model": model,
            "autoupdate": false,
            "share": "disabled",
            "permission": { "bash": "allow", "edit": "allow", "task": "allow" },
            // OpenCode's own pruning would rewrite old tool outputs in the request; keep it off
            // so that what the model receives is exactly what the database holds.
            "compaction": { "prune": false, "auto": false },
            "provider": {
                layout.provider: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fixture",
                    "options": { "baseURL": model_base_url, "apiKey": "x" },
                    "models": {
                        layout.model: {
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
            layout,
        }
    }

    /// The layout the environment was made for.
    pub fn layout(&self) -> &Layout {
        &self.layout
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

    /// Copies `fixture` to [`Self::database`] and moves its sessions to the work tree
    /// ([`Self::relocate_sessions`]).
    pub fn install_database(&self, fixture: &Path) -> PathBuf {
        let db = self.database();
        fs::copy(fixture, &db).expect("copy the fixture database");
        self.relocate_sessions();
        db
    }

    /// Copies a fixture folder's `opencode.db` and `tool-output/` (OpenCode's spill files) to
    /// where OpenCode keeps them, `$XDG_DATA_HOME/opencode/`, and returns [`Self::database`].
    /// Nothing in the copy is changed: [`Self::relocate_sessions`] does that.
    pub fn copy_fixture(&self, fixture: &Path) -> PathBuf {
        let db = self.database();
        fs::copy(fixture.join("opencode.db"), &db).expect("copy the fixture database");
        let spill = fixture.join("tool-output");
        if spill.is_dir() {
            let target = self.root.path().join("data/opencode/tool-output");
            fs::create_dir_all(&target).expect("create tool-output/");
            for entry in fs::read_dir(&spill).expect("list tool-output/") {
                let entry = entry.expect("tool-output/ entry");
                fs::copy(entry.path(), target.join(entry.file_name())).expect("copy a spill file");
            }
        }
        db
    }

    /// Moves the sessions of [`Self::database`] to the work tree.
    ///
    /// OpenCode resolves `session.directory` before it prompts the model (a missing directory
    /// fails the turn with `FileSystem.realPath ... ENOENT`) and lists sessions by directory, so
    /// the layout's [`Layout::directory`] is rewritten to [`Self::work_dir`] in
    /// `session.directory`, `project.worktree` and, where the release has it,
    /// `project_directory.directory`. And `session.time_updated` is capped at one minute ago:
    /// the sessions were at rest when the fixture was written, and a machine whose clock is
    /// behind the generator's must not see them as just updated.
    pub fn relocate_sessions(&self) {
        let work = self.work.to_str().expect("temp dir path is UTF-8");
        let from = self.layout.directory.as_str();
        let now_ms = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_millis(),
        )
        .expect("time fits i64");
        let conn = rusqlite::Connection::open(self.database()).expect("open the copied database");
        conn.execute(
            "UPDATE session SET directory = ?1 WHERE directory = ?2",
            [work, from],
        )
        .expect("move session.directory");
        conn.execute(
            "UPDATE project SET worktree = ?1 WHERE worktree = ?2",
            [work, from],
        )
        .expect("move project.worktree");
        let has_project_directory: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master \
                 WHERE type = 'table' AND name = 'project_directory')",
                [],
                |row| row.get(0),
            )
            .expect("look for project_directory");
        if has_project_directory {
            conn.execute(
                "UPDATE project_directory SET directory = ?1 WHERE directory = ?2",
                [work, from],
            )
            .expect("move project_directory.directory");
        }
        conn.execute(
            "UPDATE session SET time_updated = ?1 WHERE time_updated > ?1",
            [now_ms - 60_000],
        )
        .expect("cap session.time_updated");
    }

    /// Every log file OpenCode wrote under `$XDG_DATA_HOME/opencode/log/`, concatenated in
    /// name order (each headed by `==> NAME`).
    pub fn log_files(&self) -> String {
        let dir = self.root.path().join("data/opencode/log");
        let mut names: Vec<PathBuf> = fs::read_dir(&dir)
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.sort();
        let mut all = String::new();
        for path in names {
            let text = fs::read(&path)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            all.push_str(&format!("==> {}\n{text}\n", path.display()));
        }
        all
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

    /// Starts `opencode serve --hostname 127.0.0.1 --port PORT` in its own process group and
    /// waits (bounded) for the URL it prints.
    ///
    /// PORT is a port that was free a moment before: every release (1.2.27 to 1.18.34) takes
    /// `--port 0` to mean its default 4096 first, and only when that is taken any free port; a
    /// test should not take the port a user's OpenCode expects.
    pub fn serve(&self) -> Server {
        let log_path = self.root.path().join("serve.log");
        let log = File::create(&log_path).expect("create serve.log");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("find a free loopback port")
            .port()
            .to_string();
        let mut cmd = self.command();
        cmd.args(["serve", "--hostname", "127.0.0.1", "--port", port.as_str()])
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

/// Makes `work` a git repo with the layout's single commit; returns the root commit hash.
fn make_work_tree(work: &Path, root: &Path, layout: &Layout) -> Result<String, String> {
    fs::write(work.join("README.txt"), layout.readme).map_err(|e| e.to_string())?;
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
    git(&["commit", "-q", "-m", layout.commit_message])?;
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
    /// Asks the server to stop as a user would (SIGTERM to its pid), waits up to `grace` for it
    /// to exit, then kills its process group and every descendant still alive (SIGKILL), and
    /// says which of the two stopped it.
    pub fn terminate(&mut self, grace: Duration) -> Stopped {
        let Some(child) = self.child.as_mut() else {
            return Stopped::AlreadyGone;
        };
        let pid = child.id();
        if let Ok(Some(_)) = child.try_wait() {
            self.stop();
            return Stopped::AlreadyGone;
        }
        // Taken while the server is alive: once it exits, its children are re-parented and no
        // longer found under it.
        let descendants = descendants_of(pid);
        let mut cmd = Command::new("kill");
        cmd.arg("-TERM").arg("--").arg(pid.to_string());
        let _ = run_bounded(&mut cmd, Duration::from_secs(5));
        let deadline = Instant::now() + grace;
        let outcome = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break Stopped::OnSigterm(status);
            }
            if Instant::now() >= deadline {
                break Stopped::Killed;
            }
            thread::sleep(Duration::from_millis(20));
        };
        if outcome == Stopped::Killed {
            self.stop();
        } else {
            // Anything it started and left behind: its process group, then the descendants
            // seen before the signal.
            self.child = None;
            let mut targets = vec![format!("-{pid}")];
            targets.extend(descendants.iter().map(u32::to_string));
            signal_kill(&targets);
        }
        outcome
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
    // Read until the body is complete by its own framing (Content-Length or the last chunk):
    // releases up to 1.3 keep the connection open despite `Connection: close`, so EOF may never
    // come. EOF before that ends the body too.
    loop {
        if let Some(response) =
            parse_response(&raw, false).map_err(|e| format!("{method} {path_and_query}: {e}"))?
        {
            return Ok(response);
        }
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
    parse_response(&raw, true)
        .map_err(|e| format!("{method} {path_and_query}: {e}"))?
        .ok_or_else(|| format!("{method} {path_and_query}: the answer ended early"))
}

/// Parses an HTTP/1.1 response from `raw`: `Ok(None)` while it is incomplete, unless `at_eof`
/// (then a body without Content-Length or chunking is whatever came).
fn parse_response(raw: &[u8], at_eof: bool) -> Result<Option<Response>, String> {
    let Some(split) = find(raw, b"\r\n\r\n") else {
        return if at_eof {
            Err("no HTTP head".into())
        } else {
            Ok(None)
        };
    };
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        if name == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        } else if name == "content-length" {
            length = Some(
                value
                    .trim()
                    .parse::<usize>()
                    .map_err(|e| format!("bad Content-Length {value:?}: {e}"))?,
            );
        }
    }
    let rest = &raw[split + 4..];
    let body = if chunked {
        match dechunk(rest) {
            Ok(body) => body,
            Err(_) if !at_eof => return Ok(None),
            Err(e) => return Err(e),
        }
    } else if let Some(length) = length {
        match rest.get(..length) {
            Some(body) => body.to_vec(),
            None if !at_eof => return Ok(None),
            None => return Err(format!("body of {} bytes, {length} announced", rest.len())),
        }
    } else if at_eof {
        rest.to_vec()
    } else {
        return Ok(None);
    };
    Ok(Some(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }))
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
