//! The journal of a database reached through a symlink (to the file, or to its folder) is the
//! one beside the file the link leads to: a second process that comes by another path finds the
//! server's journal held and is refused (exit 3) with nothing changed, where it once made a
//! journal of its own beside the link and pruned beside the server. A journal an earlier release
//! left beside a link is not taken over silently: exit 2, saying where to move it.

use crate::common;

use common::cli::{assert_exit, run};
use common::http::Server;
use common::*;

#[test]
fn a_clean_through_a_symlink_is_refused_beside_the_server_and_changes_nothing() {
    let fx = Fixture::new();
    let links = tempfile::tempdir().expect("tempdir");
    let file_link = links.path().join("opencode.db");
    std::os::unix::fs::symlink(&fx.db, &file_link).expect("symlink to the file");
    let folder_link = links.path().join("data");
    std::os::unix::fs::symlink(fx.db.parent().expect("folder"), &folder_link)
        .expect("symlink to the folder");
    let server = Server::start(&fx.db, &["--auto-clean", "1h"]);
    let (db, journal) = (fx.file_digest(), fx.journal_digest());
    for path in [file_link.clone(), folder_link.join("opencode.db")] {
        let out = run(&path, &["clean", "--all", "--apply"]);
        assert_exit(&out, 3);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("maintenance_required"), "{stderr}");
        assert_eq!(
            (fx.file_digest(), fx.journal_digest()),
            (db.clone(), journal.clone())
        );
    }
    assert!(!links.path().join("opencode.db.prune-journal").exists());
    server.stop();
}

#[test]
fn a_journal_left_beside_a_link_is_refused_with_where_it_belongs() {
    let fx = Fixture::new();
    let links = tempfile::tempdir().expect("tempdir");
    let link = links.path().join("opencode.db");
    std::os::unix::fs::symlink(&fx.db, &link).expect("symlink");
    let left = links.path().join("opencode.db.prune-journal");
    std::fs::write(&left, b"an older journal").expect("a journal beside the link");
    let db = fx.file_digest();
    let out = run(&link, &["clean", "--all", "--apply"]);
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("mv {} {}", left.display(), fx.journal.display())),
        "{stderr}"
    );
    assert_eq!(fx.file_digest(), db);
    assert!(!fx.journal.exists());
    assert_eq!(std::fs::read(&left).expect("left"), b"an older journal");
}
