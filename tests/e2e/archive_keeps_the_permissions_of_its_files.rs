//! The archive holds the exact rows prunes removed: tool outputs and reasoning, as private as
//! the database they came from. Its file is no more readable than the database (as SQLite makes
//! its own side files, `-wal` and `-shm`, with the database's permissions), and `archive purge`,
//! which writes a new file and renames it over the old one (docs/ARCHITECTURE.md, "Archive",
//! "Retention"), keeps the permissions the archive had, whatever a purge killed before it left
//! beside it.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::archive::{archive_path, prune_archived, restore_out};
use common::cli::{assert_exit, json, run};
use common::*;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_purge_keeps_the_permissions_the_archive_had() {
    let fx = Fixture::new();
    let first = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    assert_exit(&restore_out(&fx.db, &first), 0);
    let archive = archive_path(&fx);
    set_mode(&archive, 0o600);

    // The restored prune's entry is no longer needed: the purge rewrites the file without it.
    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 0);
    assert_eq!(json(&purge)["purged"], 1, "{}", json(&purge));
    assert_eq!(
        format!("{:o}", mode(&archive)),
        "600",
        "the purge made the archive readable by others"
    );
}

#[test]
fn the_archive_of_a_private_database_is_private() {
    let fx = Fixture::new();
    set_mode(&fx.db, 0o600);
    prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    assert_eq!(
        format!("{:o}", mode(&archive_path(&fx)) & 0o077),
        "0",
        "the archive of a database only its owner may read is readable by others"
    );
}

#[test]
fn a_purge_after_one_killed_mid_rewrite_keeps_the_permissions_the_archive_had() {
    let fx = Fixture::new();
    let first = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    assert_exit(&restore_out(&fx.db, &first), 0);
    let archive = archive_path(&fx);
    let had = mode(&archive);

    // A purge killed while it wrote the new file left it beside the archive, half written.
    let mut stale = archive.clone().into_os_string();
    stale.push(".rewrite");
    let stale = std::path::PathBuf::from(stale);
    std::fs::write(&stale, b"SPARCHIV").expect("stale rewrite");
    set_mode(&stale, 0o400);

    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 0);
    assert_eq!(json(&purge)["purged"], 1, "{}", json(&purge));
    assert_eq!(
        format!("{:o}", mode(&archive)),
        format!("{had:o}"),
        "the archive took the permissions of the file the killed purge left"
    );
}
