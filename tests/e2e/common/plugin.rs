//! What the tests of the OpenCode plugin share, whichever major runs it: naming the installed
//! plugin in OpenCode's config, a client of OpenCode's event stream, waiting for what the plugin
//! does in the background, and the plugin's log (docs/plugin.md).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::cli::{json, run};

/// Names the installed plugin folder in OpenCode's config (`opencode.json`) as docs/plugin.md
/// says, `file://` and the folder, with `options`.
pub fn add_plugin(config: &Path, plugin: &Path, options: &Value) {
    let mut document: Value =
        serde_json::from_str(&std::fs::read_to_string(config).expect("read config"))
            .expect("config JSON");
    let entry = format!("file://{}", plugin.to_str().expect("utf-8 path"));
    document["plugin"] = json!([[entry, options]]);
    std::fs::write(config, document.to_string()).expect("write config");
}

/// The plugin's log beside the database, or "" when there is none.
pub fn plugin_log(db: &Path) -> String {
    std::fs::read_to_string(format!("{}.session-prune-plugin.log", db.display()))
        .unwrap_or_default()
}

/// A client of an event stream (`request`, sent on a thread of its own): the `data:` lines it
/// received so far.
pub fn event_lines(request: reqwest::blocking::RequestBuilder) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let received = Arc::clone(&lines);
    thread::spawn(move || {
        let Ok(answer) = request.send() else {
            return;
        };
        for line in BufReader::new(answer).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data:") {
                received.lock().expect("lock").push(data.trim().to_string());
            }
        }
    });
    lines
}

/// A client for [`event_lines`]: no timeout, since a stream does not end.
pub fn streaming_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(None)
        .build()
        .expect("client")
}

/// The events a client received, parsed (lines that are not JSON are left out).
pub fn events(lines: &Mutex<Vec<String>>) -> Vec<Value> {
    lines
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect()
}

/// Waits until `done` answers true or `timeout` passes; whether it did.
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(150));
    }
}

/// Once OpenCode stopped, its plugin's server stops too: waits until a command can take the
/// journal, then checks that `audit --json` holds with at least `receipts` receipts.
pub fn audit_holds_once_the_plugin_server_stops(db: &Path, receipts: u64) {
    let mut last = String::new();
    let audited = wait_until(Duration::from_secs(15), || {
        let out = run(db, &["audit", "--json"]);
        if out.status.code() != Some(0) {
            last = String::from_utf8_lossy(&out.stderr).into_owned();
            return false;
        }
        let report = json(&out);
        assert_eq!(report["ok"], true, "{report}");
        assert!(report["receipts"].as_u64() >= Some(receipts), "{report}");
        true
    });
    assert!(
        audited,
        "the plugin's server still holds the journal: {last}"
    );
}

/// What an idle clean keeping the last turn (`{"idleClean": "apply", "keepLastTurns": 1}`) does
/// to a session of three canary turns (`canary_turn`), whichever major runs it: once turn 3 went
/// idle, turns 1 and 2 are pruned and turn 3 is kept; turn 4's request (`take_turn_4` takes the
/// turn and returns its chat request's body) carries none of what was pruned and turn 3's
/// output; turn 4's idle clean then takes turn 3. `holding(text)` counts the session's rows
/// that hold `text`; `timeout` bounds each wait.
pub fn idle_clean_keeps_the_last_turn(
    holding: impl Fn(&str) -> i64,
    take_turn_4: impl FnOnce() -> String,
    timeout: Duration,
) {
    wait_until(timeout, || holding("TOOL_CANARY_2") == 0);
    for pruned in [
        "TOOL_CANARY_1",
        "TOOL_CANARY_2",
        "REASONING_CANARY_1",
        "REASONING_CANARY_2",
    ] {
        assert_eq!(holding(pruned), 0, "{pruned} is pruned");
    }
    assert_eq!(holding("TOOL_CANARY_3"), 1, "the last turn is kept");
    let next = take_turn_4();
    for pruned in ["TOOL_CANARY_1", "TOOL_CANARY_2", "REASONING_CANARY_1"] {
        assert!(!next.contains(pruned), "{pruned} was sent");
    }
    assert!(next.contains("TOOL_CANARY_3"), "the kept turn is sent");
    assert!(
        wait_until(timeout, || holding("TOOL_CANARY_3") == 0),
        "turn 4's idle clean took turn 3"
    );
}
