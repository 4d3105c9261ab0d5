//! OpenCode 2's background service in the interop tests ([`Service`]): started in an isolated
//! OpenCode home ([`super::OpenCode`]) with `opencode service start`, found through the
//! registration it writes (`$XDG_STATE_HOME/opencode/service.json`: `{id, version, url, pid,
//! password}`), driven over its HTTP API (`/api/...`, basic authentication as `opencode`), and
//! stopped with `opencode service stop`, then by its pid if it is still there.
//!
//! Facts it relies on, measured with OpenCode 2.0.15 and 2.1.2: the service listens on
//! 127.0.0.1:49374 in every home unless `opencode service set port N` said otherwise (so each
//! test picks a free port); a turn is `POST /api/session/{id}/prompt {text}`, and it has ended
//! when the session's newest message is a new `idle` row (`GET /api/session/{id}/message?
//! limit=1&order=desc`); `session_v2.time_suspended` is set while a run holds the session;
//! a V1 database found at the first start is migrated, and `GET /api/experimental/migration/v1`
//! says `{"status":"completed"}` when it is done.

use std::fs;
use std::net::TcpListener;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, Pid, Signal};
use serde_json::{json, Value};

use super::api::{http_basic, Response};
use super::mock_model::{canary_turn, MockModel};
use super::process::run_bounded;
use super::OpenCode;

/// The mock model and an isolated home configured for the service of OpenCode 2 `version`
/// ([`configure`]); `None` (after saying why, see `super::binary_of`) without its binary.
pub fn home_for(version: &str) -> Option<(MockModel, OpenCode)> {
    let bin = super::binary_of(version)?;
    let mock = MockModel::start();
    let home = OpenCode::new(&bin, &mock.base_url());
    configure(&home, &mock.base_url());
    Some((mock, home))
}

const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(200);

/// Writes the config an OpenCode 2 service of `home` runs with: the layout's provider and model
/// at `model_base_url` (OpenCode 2 converts this 1.x-shaped provider entry), every tool allowed,
/// a context of 1,000,000 tokens (so no compaction starts by itself: the mock reports few).
pub fn configure(home: &OpenCode, model_base_url: &str) {
    let layout = home.layout();
    let model = format!("{}/{}", layout.provider, layout.model);
    let config = json!({
        "model": model,
        "small_model": model,
        "autoupdate": false,
        "share": "disabled",
        "snapshot": true,
        "permission": {
            "read": "allow", "edit": "allow", "write": "allow",
            "shell": "allow", "bash": "allow", "task": "allow"
        },
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
                        "limit": { "context": 1_000_000, "output": 8192 }
                    }
                }
            }
        }
    });
    let text = serde_json::to_string_pretty(&config).expect("serialize the config");
    fs::write(home.root().join("config/opencode/opencode.json"), text)
        .expect("write opencode.json");
}

/// The one chat request OpenCode 2 of `home` sends the model for `text` prompted in `session`:
/// its service started, the turn taken, the service stopped.
pub fn next_request(home: &OpenCode, mock: &MockModel, session: &str, text: &str) -> String {
    let mut service = Service::start(home);
    let before = mock.requests().len();
    service.turn(session, text, Duration::from_secs(90));
    service.stop();
    let chats: Vec<String> = mock.requests()[before..]
        .iter()
        .filter(|r| {
            r.kind == super::mock_model::RequestKind::Chat && r.session_id() == Some(session)
        })
        .map(|r| r.body.clone())
        .collect();
    assert_eq!(chats.len(), 1, "one chat request per prompt");
    chats.into_iter().next().unwrap_or_default()
}

/// A running OpenCode 2 background service of one isolated home. Dropping it stops it.
pub struct Service<'a> {
    home: &'a OpenCode,
    url: String,
    pid: i32,
    password: String,
}

impl<'a> Service<'a> {
    /// Picks a free loopback port (`opencode service set port`), runs `opencode service start`
    /// in the home's work tree and reads the registration. Panics, with the service's words,
    /// when it does not come up.
    pub fn start(home: &'a OpenCode) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("find a free loopback port")
            .port();
        let run = |args: &[&str]| {
            let mut cmd = home.command();
            cmd.args(args);
            let out = run_bounded(&mut cmd, COMMAND_TIMEOUT)
                .unwrap_or_else(|e| panic!("opencode {}: {e}", args.join(" ")));
            assert!(
                out.status.success(),
                "opencode {} exited with {}: {}{}",
                args.join(" "),
                out.status,
                out.stdout,
                out.stderr
            );
        };
        run(&["service", "set", "port", &port.to_string()]);
        run(&["service", "start"]);
        let registration = Self::registration_path(home);
        let deadline = Instant::now() + REGISTRATION_TIMEOUT;
        let found = loop {
            let read = fs::read(&registration)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            if let Some(found) = read.filter(|value| value["pid"].is_i64()) {
                break found;
            }
            assert!(
                Instant::now() < deadline,
                "no {} after `opencode service start`",
                registration.display()
            );
            thread::sleep(POLL);
        };
        let pid = i32::try_from(found["pid"].as_i64().expect("pid")).expect("pid fits i32");
        Self {
            home,
            url: found["url"]
                .as_str()
                .expect("url")
                .trim_end_matches('/')
                .to_string(),
            pid,
            password: found["password"].as_str().expect("password").to_string(),
        }
    }

    /// `$XDG_STATE_HOME/opencode/service.json` of `home`.
    pub fn registration_path(home: &OpenCode) -> PathBuf {
        home.root().join("state/opencode/service.json")
    }

    /// The service's base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The service's password (HTTP basic authentication as `opencode`).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The service's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// One request to the service's API; panics when no answer comes.
    pub fn api(&self, method: &str, path: &str, body: Option<&Value>) -> Response {
        http_basic(
            &self.url,
            ("opencode", &self.password),
            method,
            path,
            body,
            REQUEST_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("OpenCode 2 service: {e}"))
    }

    /// [`Self::api`], asserting a 2xx status; the body as JSON (`Null` when empty).
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let answer = self.api(method, path, body);
        assert!(
            (200..300).contains(&answer.status),
            "{method} {path}: HTTP {}: {}",
            answer.status,
            answer.body
        );
        if answer.body.trim().is_empty() {
            Value::Null
        } else {
            answer.json()
        }
    }

    /// Creates a session in the work tree, answered by the layout's model; its id.
    pub fn create_session(&self, title: &str) -> String {
        let layout = self.home.layout();
        let directory = self.home.work_dir().to_str().expect("UTF-8 work dir");
        let body = json!({
            "title": title,
            "location": { "directory": directory },
            "model": { "providerID": layout.provider, "id": layout.model }
        });
        let created = self.call("POST", "/api/session", Some(&body));
        created["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {created}"))
            .to_string()
    }

    /// A new session ([`Self::create_session`]) with `turns` whole turns of
    /// [`canary_turn`] `1..=turns`; its id.
    pub fn session_with_turns(&self, title: &str, turns: u32, timeout: Duration) -> String {
        let session = self.create_session(title);
        for n in 1..=turns {
            self.turn(&session, &canary_turn(n), timeout);
        }
        session
    }

    /// The id of the session's newest message when it is an `idle` row.
    fn newest_idle(&self, session: &str) -> Option<String> {
        let newest = self.call(
            "GET",
            &format!("/api/session/{session}/message?limit=1&order=desc"),
            None,
        );
        let first = newest["data"].get(0)?;
        (first["type"] == "idle").then(|| first["id"].as_str().unwrap_or_default().to_string())
    }

    /// Sends `text` as a prompt and returns at once (the run goes on in the service); the id
    /// of the `idle` row that was the session's newest before, for [`Self::wait_idle`].
    pub fn send_prompt(&self, session: &str, text: &str) -> Option<String> {
        let before = self.newest_idle(session);
        self.call(
            "POST",
            &format!("/api/session/{session}/prompt"),
            Some(&json!({ "text": text })),
        );
        before
    }

    /// Waits until the session's newest message is an `idle` row other than `before`; its
    /// `outcome` (`succeeded` for a turn that ended well).
    pub fn wait_idle(&self, session: &str, before: Option<&str>, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let newest = self.call(
                "GET",
                &format!("/api/session/{session}/message?limit=1&order=desc"),
                None,
            );
            let first = &newest["data"][0];
            if first["type"] == "idle" && first["id"].as_str() != before {
                return first["outcome"].as_str().unwrap_or_default().to_string();
            }
            assert!(
                Instant::now() < deadline,
                "session {session} not idle after {timeout:?}; newest: {first}"
            );
            thread::sleep(POLL);
        }
    }

    /// One whole turn: [`Self::send_prompt`], then [`Self::wait_idle`]; panics unless it
    /// `succeeded`.
    pub fn turn(&self, session: &str, text: &str, timeout: Duration) {
        let before = self.send_prompt(session, text);
        let outcome = self.wait_idle(session, before.as_deref(), timeout);
        assert_eq!(outcome, "succeeded", "the turn {text:?} of {session}");
    }

    /// `POST /api/session/{id}/compact {}`, then waits for the turn it starts to end.
    pub fn compact(&self, session: &str, timeout: Duration) {
        let before = self.newest_idle(session);
        self.call(
            "POST",
            &format!("/api/session/{session}/compact"),
            Some(&json!({})),
        );
        let outcome = self.wait_idle(session, before.as_deref(), timeout);
        assert_eq!(outcome, "succeeded", "the compaction of {session}");
    }

    /// Waits for the migration of a V1 database the service found at its start.
    pub fn wait_migration(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.call("GET", "/api/experimental/migration/v1", None);
            match status["status"].as_str() {
                Some("completed") => return,
                Some("error") => panic!("the V1 migration failed: {status}"),
                _ => {}
            }
            assert!(
                Instant::now() < deadline,
                "the V1 migration did not end in {timeout:?}: {status}"
            );
            thread::sleep(POLL);
        }
    }

    /// Whether the service's process is alive.
    pub fn alive(&self) -> bool {
        self.pid != 0 && running(self.pid)
    }

    /// `opencode service stop`, then TERM and KILL of the service's process group while it is
    /// still there. Bounded; idempotent.
    pub fn stop(&mut self) {
        if self.pid == 0 {
            return;
        }
        let mut cmd = self.home.command();
        cmd.args(["service", "stop"]);
        let _ = run_bounded(&mut cmd, COMMAND_TIMEOUT);
        let gone = |pid: i32| !running(pid);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while !gone(self.pid) && Instant::now() < deadline {
            thread::sleep(POLL);
        }
        if let Some(pid) = Pid::from_raw(self.pid).filter(|_| !gone(self.pid)) {
            let _ = kill_process_group(pid, Signal::TERM);
            let deadline = Instant::now() + STOP_TIMEOUT;
            while !gone(self.pid) && Instant::now() < deadline {
                thread::sleep(POLL);
            }
            let _ = kill_process_group(pid, Signal::KILL);
        }
        self.pid = 0;
    }

    /// Kills the service with SIGKILL (its process group), as a crash would, leaving its
    /// registration and any `time_suspended` it holds in place.
    pub fn kill(&mut self) {
        if let Some(pid) = Pid::from_raw(self.pid) {
            let _ = kill_process_group(pid, Signal::KILL);
            let deadline = Instant::now() + STOP_TIMEOUT;
            while running(self.pid) && Instant::now() < deadline {
                thread::sleep(POLL);
            }
        }
        self.pid = 0;
    }
}

impl Drop for Service<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether process `pid` exists and has not exited (a zombie, exited but not yet reaped by its
/// parent, counts as gone).
fn running(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z'),
        Err(_) => false,
    }
}
