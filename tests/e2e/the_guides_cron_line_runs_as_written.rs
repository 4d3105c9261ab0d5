//! The crontab line of docs/guide.md ("On a schedule"), its command run as cron would run it
//! (by `/bin/sh` with cron's `PATH`, from the home folder): it cleans with an archive, purges
//! the archive's old entries, and a second run finds nothing left to prune.

use super::common::home::{block_after, OpenCodeHome};

/// The command of the guide's crontab line: the line without its five time fields.
fn cron_command() -> String {
    let block = block_after("docs/guide.md", "## On a schedule", "cron");
    let line = block.lines().next().expect("a crontab line");
    let fields: Vec<&str> = line.splitn(6, ' ').collect();
    assert_eq!(fields.len(), 6, "{line}");
    fields[5].to_string()
}

#[test]
fn the_nightly_line_cleans_archives_and_purges_and_its_next_run_finds_nothing() {
    let home = OpenCodeHome::new();
    let command = cron_command();
    assert!(
        command.contains("clean --all --apply --archive"),
        "{command}"
    );

    let cache = home.home.path().join(".cache");
    std::fs::create_dir(&cache).expect("~/.cache");
    let report = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(cache.join("session-prune.json")).expect("report"))
            .expect("the report is one JSON document")
    };

    let first = home.cron(&format!("cd ~ && {command}"));
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let receipts = home.receipts();
    let done = report();
    assert_eq!(done["status"], "cleaned");
    assert_eq!(done["pruned"], 80, "{done}");
    assert_eq!(done["compaction"]["sessions"], 8, "{done}");
    assert_eq!(done["compaction"]["snapshots"], 1273, "{done}");
    assert_eq!(receipts, 88);
    assert!(home.data.join("opencode.db.prune-archive").exists());
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("purge"),
        "the purge's report"
    );

    let second = home.cron(&format!("cd ~ && {command}"));
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(home.receipts(), receipts, "the second run pruned again");
    assert_eq!(report()["pruned"], 0);
}
