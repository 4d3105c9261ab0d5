//! `archive purge` while another process holds the archive for writing (`serve --archive`):
//! the dry run only counts, so it answers; the purge is refused as a busy journal is (exit 3,
//! `maintenance_required`), and the archive stays as it was.

use crate::common;

use common::archive::{archive_of, prune_archived};
use common::cli::{assert_exit, json, run};
use common::http::Server;
use common::*;

fn archived_twice() -> Fixture {
    let fx = Fixture::new();
    prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    fx
}

#[test]
fn a_purge_dry_run_counts_while_a_server_archives() {
    let fx = archived_twice();
    let server = Server::start(&fx.db, &["--archive"]);
    let before = std::fs::read(archive_of(&fx.db)).expect("archive");
    let out = run(
        &fx.db,
        &[
            "--json",
            "archive",
            "purge",
            "--older-than",
            "0",
            "--dry-run",
        ],
    );
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["status"], "dry-run");
    assert_eq!(report["purged"], 1, "{report}");
    assert_eq!(std::fs::read(archive_of(&fx.db)).expect("archive"), before);
    server.stop();
}

#[test]
fn a_purge_is_blocked_while_a_server_archives_and_changes_nothing() {
    let fx = archived_twice();
    let server = Server::start(&fx.db, &["--archive"]);
    let before = std::fs::read(archive_of(&fx.db)).expect("archive");
    let out = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&out, 3);
    let doc = json(&out);
    assert_eq!(doc["status"], "blocked", "{doc}");
    assert_eq!(doc["reason"], "maintenance_required", "{doc}");
    assert_eq!(std::fs::read(archive_of(&fx.db)).expect("archive"), before);
    server.stop();
}
