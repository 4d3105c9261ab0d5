//! Every file session-prune creates beside a database readable by its owner only (OpenCode 2
//! keeps `opencode.db` at 0600) is readable by its owner only too: the journal, the archive,
//! SQLite's `-wal` and `-shm` after a clean and a `vacuum`, and a cursor file of `events
//! --follow --url`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common;

use common::archive::{clean_archived, prunes};
use common::cli::{assert_exit, run};
use common::http::{events_path, Server, WORKSPACE};
use common::Fixture;

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_journal_archive_wal_and_cursor_file_of_a_0600_database_are_0600() {
    let fx = Fixture::new();
    std::fs::set_permissions(&fx.db, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(!fx.journal.exists());

    let report = clean_archived(&fx.db, &[]);
    assert!(prunes(&report) > 0, "{report}");
    let out = run(&fx.db, &["vacuum"]);
    assert_exit(&out, 0);

    let cursor_file = fx.dir.path().join("opencode.db.cursor");
    {
        let server = Server::start(&fx.db, &[]);
        let mut client = common::cli::session_prune()
            .args(["events", "--follow", "--url"])
            .arg(server.url(&events_path(WORKSPACE)))
            .arg("--cursor-file")
            .arg(&cursor_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the client");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !cursor_file.exists() {
            assert!(Instant::now() < deadline, "no cursor file within 60 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = client.kill();
        let _ = client.wait();
        server.stop();
    }

    let mut seen = Vec::new();
    for entry in std::fs::read_dir(fx.dir.path()).expect("the folder") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("opencode.db") {
            assert_eq!(format!("{:o}", mode(&path)), "600", "{name}");
            seen.push(name);
        }
    }
    seen.sort();
    for expected in [
        "opencode.db",
        "opencode.db.cursor",
        "opencode.db.prune-archive",
        "opencode.db.prune-journal",
    ] {
        assert!(seen.iter().any(|n| n == expected), "{expected} in {seen:?}");
    }
}
