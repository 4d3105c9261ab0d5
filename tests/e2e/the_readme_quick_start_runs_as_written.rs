//! The README's "Give the disk back" block, run as written by bash, with `session-prune` on the
//! PATH and a home whose OpenCode database is a copy of the coding-work fixture: every step
//! succeeds, the copy it makes is the database as it was, and the file ends smaller, archived
//! and audited.

use super::common::cli;
use super::common::home::{block_after, OpenCodeHome};

#[test]
fn the_quick_start_backs_up_cleans_vacuums_and_audits_the_database_it_finds() {
    let home = OpenCodeHome::new();
    let original = std::fs::read(home.db()).expect("read the copy");
    let script = block_after("README.md", "## Give the disk back", "sh");
    assert!(
        script.contains("session-prune clean --all --apply --archive"),
        "{script}"
    );

    let out = home.bash(&script);
    cli::assert_exit(&out, 0);

    let data = &home.data;
    assert_eq!(
        std::fs::read(data.join("opencode.db.bak")).expect("the copy"),
        original
    );
    assert!(!data.join("opencode.db-wal.bak").exists());
    assert_eq!(
        std::fs::read(data.join("tool-output.bak/tool_1")).expect("copied spill file"),
        b"spilled output"
    );
    let after = std::fs::metadata(home.db()).expect("database").len();
    assert!(
        after < original.len() as u64 / 2,
        "{after} bytes after, {} before",
        original.len()
    );
    assert!(data.join("opencode.db.prune-archive").exists());
    assert!(home.receipts() > 0);
    // The dry run came first, then the clean, over the fixture's 8 sessions.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dry = stdout
        .find("dry-run: 8 session(s)")
        .expect("the dry run's report");
    let cleaned = stdout
        .find("cleaned: 8 session(s)")
        .expect("the clean's report");
    assert!(dry < cleaned, "{stdout}");
}
