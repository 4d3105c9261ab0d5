//! The isolated OpenCode home the interop tests run real OpenCode releases in ([`OpenCode`]:
//! own HOME and XDG dirs, npm/bun registry and proxies pointed at a closed loopback port, a
//! config pointing the fixture's provider at the mock model, a work tree whose root commit is
//! the fixture's project id, see [`Layout`]), with the fixture database copied in, `export`,
//! and [`OpenCode::serve`].
//!
//! The rest of the harness lives beside this file and is re-exported here:
//! - `binary.rs`: which release binary to run ([`binary`], [`binary_of`]);
//! - `process.rs`: isolated, bounded child processes and the running server ([`Server`]);
//! - `mock_model.rs`: the OpenAI-compatible model OpenCode talks to ([`MockModel`]);
//! - `api.rs`: the client of OpenCode's own HTTP API ([`http`]);
//! - `service.rs`: OpenCode 2's background service ([`Service`]).
// Each interop test (and `benches/scale_clean.rs`) uses a part of the harness.
#![allow(dead_code)]

mod api;
mod binary;
mod mock_model;
mod process;
mod service;

#[allow(unused_imports)]
pub use api::{http, http_basic, query_value, Response};
#[allow(unused_imports)]
pub use binary::{binary, binary_of, workspace, VERSION};
#[allow(unused_imports)]
pub use mock_model::{canary_turn, MockModel, ModelRequest, RequestKind, REPLY_TEXT, TITLE_TEXT};
#[allow(unused_imports)]
pub use process::{run_bounded, Captured, Server, Stopped};
#[allow(unused_imports)]
pub use service::{
    configure as configure_service, home_for as opencode2_home, next_request, Service,
};

use process::{isolate, CLOSED_PORT_URL};

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

/// The work directory stored in the fixture's `session.directory` and `project.worktree`.
pub const FIXTURE_DIRECTORY: &str = "/tmp/oc-cache/run/work";
/// OpenCode's project id of the fixture: the root commit of the generator's work tree.
pub const FIXTURE_PROJECT_ID: &str = "acd687b6218323a9c4e26490721b570cacab4aef";

const GIT_TIMEOUT: Duration = Duration::from_secs(20);

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

    /// The coding-work fixture `tests/fixtures/opencode-1.18.34-work/`: its generator's work
    /// tree (twelve modules, committed with fixed dates) is not made here, so its project is
    /// given to this work tree instead ([`OpenCode::adopt_project`]); provider `fixture`, model
    /// `fixture`.
    pub fn work() -> Self {
        Self {
            directory: "/root/oc-work-cache/run/work".to_string(),
            project_id: "acd3a93f58d146ff8f4fc043f813c7d5ce0bb784",
            readme: "fixture work dir\n",
            commit_message: "init",
            provider: "fixture",
            model: "fixture",
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
    /// The work tree's root commit (its OpenCode project id), when it is a git repo.
    work_commit: Option<String>,
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
        let work_commit = match make_work_tree(&work, root.path(), &layout) {
            Ok(commit) => Some(commit),
            Err(why) => {
                eprintln!("work tree is a plain directory (no git repo: {why})");
                None
            }
        };
        let work_is_fixture_project = work_commit.as_deref() == Some(layout.project_id);
        if let Some(commit) = work_commit.as_deref().filter(|_| !work_is_fixture_project) {
            eprintln!("work tree root commit {commit} is not the fixture's project id");
        }
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
            work_commit,
            work_is_fixture_project,
            layout,
        }
    }

    /// Runs another OpenCode binary in this environment from now on (a file one release wrote,
    /// continued by another).
    pub fn set_binary(&mut self, bin: &Path) {
        self.bin = bin.to_path_buf();
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

    /// Gives the layout's project, in [`Self::database`], the work tree's project id (its root
    /// commit): `project.id` and every `project_id` column that names it. For a fixture whose
    /// work tree cannot be made again here ([`Layout::work`]), so that OpenCode finds its
    /// sessions in this work tree's project. Returns `false` when the work tree is no git repo.
    pub fn adopt_project(&self) -> bool {
        let Some(commit) = &self.work_commit else {
            return false;
        };
        let from = self.layout.project_id;
        let conn = rusqlite::Connection::open(self.database()).expect("open the copied database");
        // The rows move one table at a time: the references hold again once all have moved.
        conn.execute_batch("PRAGMA foreign_keys = OFF")
            .expect("foreign keys off");
        let tables: Vec<String> = {
            let mut stmt = conn
                .prepare(
                    "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c \
                     WHERE m.type = 'table' AND c.name = 'project_id'",
                )
                .expect("list the tables naming a project");
            let names = stmt.query_map([], |row| row.get(0)).expect("query");
            names.map(|name| name.expect("table name")).collect()
        };
        for table in tables {
            conn.execute(
                &format!("UPDATE \"{table}\" SET project_id = ?1 WHERE project_id = ?2"),
                [commit.as_str(), from],
            )
            .expect("move a project_id");
        }
        conn.execute(
            "UPDATE project SET id = ?1 WHERE id = ?2",
            [commit.as_str(), from],
        )
        .expect("move project.id");
        true
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
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("find a free loopback port")
            .port()
            .to_string();
        let mut cmd = self.command();
        cmd.args(["serve", "--hostname", "127.0.0.1", "--port", port.as_str()]);
        Server::start(&mut cmd, &self.root.path().join("serve.log"))
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

/// Words of a log line about a database another connection held.
const BUSY_WORDS: [&str; 3] = ["database is locked", "sqlite_busy", "sqlite_locked"];

/// Panics on a line of OpenCode's `log` that says it met a busy database, or an `ERROR` line
/// about the database: what a process writing beside OpenCode must never cause.
#[allow(dead_code)]
pub fn assert_no_database_trouble(log: &str) {
    for line in log.lines() {
        let lower = line.to_lowercase();
        assert!(
            !BUSY_WORDS.iter().any(|word| lower.contains(word)),
            "OpenCode met a busy database: {line}"
        );
        if line.contains("ERROR") {
            assert!(
                !lower.contains("database") && !lower.contains("sqlite"),
                "OpenCode logged a database error: {line}"
            );
        }
    }
}

/// The text parts of `session` in `db` whose text is exactly `text` (the prompts a test sent).
#[allow(dead_code)]
pub fn text_parts(db: &Path, session: &str, text: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row(
        "SELECT count(*) FROM part WHERE session_id = ?1 \
         AND json_extract(data, '$.type') = 'text' AND json_extract(data, '$.text') = ?2",
        [session, text],
        |row| row.get(0),
    )
    .expect("prompts")
}
