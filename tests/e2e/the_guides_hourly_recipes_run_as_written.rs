//! The hourly recipes of docs/guide.md ("Every hour, quietly"), run as written on a database
//! switched by `vacuum --online-shrink`: the crontab line by `/bin/sh` from the home folder, as
//! cron runs it,
//! and the systemd user service (checked by `systemd-analyze verify` with its timer) by its
//! `ExecStart` and `ExecStartPost` lines. Both clean, archive, give the freed pages back and
//! print nothing; a prune refused for now is exit 3, still silent; a failure is one line on
//! stderr.

use super::common::home::{block_after, OpenCodeHome};
use crate::skip;

use std::path::Path;
use std::process::Output;

const SECTION: &str = "### Every hour, quietly";
const SERVICE: &str = "#### `~/.config/systemd/user/session-prune.service`";
const TIMER: &str = "#### `~/.config/systemd/user/session-prune.timer`";

/// The command of the guide's hourly crontab line: the line without its five time fields.
fn cron_command() -> String {
    let block = block_after("docs/guide.md", SECTION, "cron");
    let line = block.lines().next().expect("a crontab line");
    let fields: Vec<&str> = line.splitn(6, ' ').collect();
    assert_eq!(fields.len(), 6, "{line}");
    fields[5].to_string()
}

/// The home switched to online shrink, as the recipe asks first.
fn switched_home() -> OpenCodeHome {
    let home = OpenCodeHome::new();
    let switched = home.bash("session-prune vacuum --online-shrink");
    assert_eq!(
        switched.status.code(),
        Some(0),
        "{}",
        text(&switched.stderr)
    );
    home
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts a silent run that ended with `code`.
fn assert_silent(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(text(&out.stderr), "");
}

/// `PRAGMA name` of the home's database.
fn pragma(home: &OpenCodeHome, name: &str) -> i64 {
    rusqlite::Connection::open(home.db())
        .expect("open")
        .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .expect("pragma")
}

#[test]
fn the_hourly_cron_line_cleans_gives_pages_back_and_says_nothing() {
    let home = switched_home();
    let command = cron_command();
    assert!(command.contains("--quiet"), "{command}");
    let first = home.cron(&format!("cd ~ && {command}"));
    assert_silent(&first, 0);
    assert_eq!(home.receipts(), 88);
    assert_eq!(pragma(&home, "freelist_count"), 0);
    assert!(home.data.join("opencode.db.prune-archive").exists());
    let second = home.cron(&format!("cd ~ && {command}"));
    assert_silent(&second, 0);
    assert_eq!(home.receipts(), 88, "the second run pruned again");
}

#[test]
fn a_quiet_clean_refused_for_now_exits_3_and_says_nothing() {
    let home = switched_home();
    // OpenCode wrote one session a moment ago: it is in its quiet period.
    let conn = rusqlite::Connection::open(home.db()).expect("open");
    let now = pruning_engine::now_ms();
    conn.execute(
        "UPDATE session SET time_updated = ?1 WHERE id = \
         (SELECT session_id FROM message GROUP BY session_id ORDER BY count(*) DESC LIMIT 1)",
        [now],
    )
    .expect("touch a session");
    drop(conn);
    let out = home.bash("cd ~ && session-prune clean --all --apply --archive --quiet");
    assert_silent(&out, 3);
    // After a refusal the line goes on to the purge; after a failure (or a binary not found)
    // it does not.
    assert!(cron_command().contains("case $? in 0|3)"));
    assert!(home.receipts() > 0, "the other sessions were pruned");
    // The crontab line goes on to the purge: the refused prune is the next run's.
    let line = home.cron(&format!("cd ~ && {}", cron_command()));
    assert_silent(&line, 0);
}

#[test]
fn a_quiet_clean_that_fails_says_so_in_one_line_on_stderr() {
    let home = switched_home();
    // The archive cannot be written: a folder stands where its file goes.
    std::fs::create_dir(home.data.join("opencode.db.prune-archive")).expect("a folder");
    let out = home.bash("cd ~ && session-prune clean --all --apply --archive --quiet");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("prune-archive"), "{stderr}");
    assert_eq!(home.receipts(), 0);
}

#[test]
fn quiet_and_json_together_are_bad_input() {
    let home = switched_home();
    let out = home.bash("cd ~ && session-prune --json clean --all --apply --quiet");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--quiet with --json"));
    assert_eq!(home.receipts(), 0);
}

/// A `Key=value` line of an ini block.
fn key<'a>(block: &'a str, name: &str) -> &'a str {
    block
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in\n{block}"))
}

#[test]
fn the_systemd_user_service_and_timer_verify_and_run_as_written() {
    let service = block_after("docs/guide.md", SERVICE, "ini");
    let timer = block_after("docs/guide.md", TIMER, "ini");
    assert_eq!(key(&service, "SuccessExitStatus"), "3");
    assert_eq!(key(&service, "StandardOutput"), "null");
    assert_eq!(key(&timer, "OnCalendar"), "hourly");
    let binary = Path::new(crate::common::cli::BINARY);
    let installed = "%h/.cargo/bin/session-prune";
    assert!(service.contains(installed), "{service}");

    let verify = Path::new("/usr/bin/systemd-analyze");
    if !verify.exists() {
        skip::cannot_run(
            "systemd-analyze is missing",
            "install systemd (apt-get install systemd)",
        );
    } else {
        let units = tempfile::tempdir().expect("units");
        let here = service.replace(installed, &binary.display().to_string());
        std::fs::write(units.path().join("session-prune.service"), here).expect("service");
        std::fs::write(units.path().join("session-prune.timer"), &timer).expect("timer");
        let checked = std::process::Command::new(verify)
            .arg("verify")
            .arg(units.path().join("session-prune.service"))
            .arg(units.path().join("session-prune.timer"))
            .output()
            .expect("systemd-analyze");
        assert_eq!(checked.status.code(), Some(0), "{}", text(&checked.stderr));
        assert_eq!(text(&checked.stderr), "");
    }

    // Its commands, as systemd runs them: `%h` the home folder.
    let home = switched_home();
    let run = |name: &str| {
        let line = key(&service, name).replace("%h/.cargo/bin/", "");
        home.bash(&format!("cd ~ && {line}"))
    };
    let start = run("ExecStart");
    assert_silent(&start, 0);
    assert_eq!(home.receipts(), 88);
    assert_eq!(pragma(&home, "freelist_count"), 0);
    let post = run("ExecStartPost");
    assert_eq!(post.status.code(), Some(0), "{}", text(&post.stderr));
}
