//! OpenCode 2's background service, as a process that holds the database: found among the
//! processes with the database's files open (`schema::holders`), told by its command line, and
//! named with what its registration says.
//!
//! Source: docs/opencode-versions.md, "OpenCode 2": `opencode service start` runs a detached
//! `opencode serve --service` and registers it in `$XDG_STATE_HOME/opencode/service.json`
//! (`~/.local/state/opencode/` without `XDG_STATE_HOME`) as `{id, version, url, pid, password}`;
//! `opencode service stop` stops it and removes the file. It keeps running after `opencode run`
//! and the TUI exit. Linux only (`/proc`); elsewhere nothing is found.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// OpenCode 2's background service, holding the database open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpenCodeService {
    /// Its process id.
    pub pid: u32,
    /// The OpenCode release its registration names (`2.1.2`), when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The URL its registration names (`http://127.0.0.1:49374`), when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl OpenCodeService {
    /// Process `pid` as OpenCode 2's background service: its command line runs `serve` with
    /// `--service`; `None` for any other process (or one that cannot be read).
    pub fn of_pid(pid: u32) -> Option<Self> {
        of_process(pid)
    }

    /// `OpenCode 2.1.2's background service (pid 1234, http://127.0.0.1:49374)`, with what is
    /// known.
    pub fn describe(&self) -> String {
        let release = match &self.version {
            Some(version) => format!("OpenCode {version}'s background service"),
            None => "OpenCode 2's background service".to_string(),
        };
        match &self.url {
            Some(url) => format!("{release} (pid {}, {url})", self.pid),
            None => format!("{release} (pid {})", self.pid),
        }
    }
}

/// The OpenCode 2 background services among the processes (other than this one) that have the
/// database, its `-wal` or its `-shm` open, by pid.
pub fn holding(database: &Path) -> Vec<OpenCodeService> {
    let mut pids: Vec<u32> = super::schema::holders::held(database, false)
        .into_iter()
        .map(|held| held.pid)
        .collect();
    pids.dedup();
    pids.into_iter().filter_map(of_process).collect()
}

/// Process `pid` as OpenCode 2's background service: its command line runs `serve` with
/// `--service`; `None` for any other process (or one that cannot be read).
pub fn of_process(pid: u32) -> Option<OpenCodeService> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let serves = args.iter().any(|arg| *arg == b"serve");
    let service = args.iter().any(|arg| *arg == b"--service");
    if !(serves && service) {
        return None;
    }
    let registration = registration_of(pid)
        .and_then(|path| std::fs::read(path).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .filter(|found| found["pid"].as_u64() == Some(u64::from(pid)));
    let text = |key: &str| {
        registration
            .as_ref()
            .and_then(|found| found[key].as_str())
            .map(str::to_string)
    };
    Some(OpenCodeService {
        pid,
        version: text("version"),
        url: text("url"),
    })
}

/// Where process `pid` registered itself: `opencode/service.json` in the state folder its
/// environment names (`XDG_STATE_HOME` when absolute, else `HOME/.local/state`).
fn registration_of(pid: u32) -> Option<PathBuf> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let var = |name: &str| {
        let prefix = format!("{name}=");
        environ
            .split(|b| *b == 0)
            .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
            .and_then(|value| std::str::from_utf8(value).ok())
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    let state = match var("XDG_STATE_HOME") {
        Some(state) if state.is_absolute() => state,
        _ => var("HOME")?.join(".local/state"),
    };
    Some(state.join("opencode/service.json"))
}
