//! An empty file given as `--db` is not a database SQLite may turn into one: every command
//! that uses the database refuses it in the same words (exit 2), and nothing is created
//! beside it: no journal, no archive, no `-wal` or `-shm`.

use crate::common;

use common::cli::run;

#[test]
fn every_command_refuses_an_empty_file_in_the_same_words_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    std::fs::write(&db, b"").unwrap();
    let expected = format!(
        "error: {} is an empty file (0 bytes), not an OpenCode database: pass the database \
         OpenCode writes (`opencode.db` in its data folder; OPENCODE_DB or --channel find it) \
         with --db\n",
        db.display()
    );
    let session = "ses_dd992af4dffe56B7kwrH3SftqX";
    let message = "msg_2266d6d8d001S1dgSZNRxFlv9X";
    let revision = "0".repeat(64);
    let receipt = "0190f5c2-0000-7000-8000-000000000000";
    let commands: Vec<Vec<&str>> = vec![
        vec!["sessions"],
        vec!["stats"],
        vec!["vacuum"],
        vec!["messages", session],
        vec!["window", session],
        vec!["outline", session],
        vec!["preview", session, message],
        vec![
            "prune",
            session,
            message,
            "--revision",
            &revision,
            "--all-technical",
        ],
        vec!["history", session],
        vec!["prune-batch", session, "--candidates", "-"],
        vec!["clean", "--all"],
        vec!["clean", "--all", "--apply", "--archive"],
        vec!["receipts"],
        vec!["restore", receipt],
        vec!["archive", "stats"],
        vec!["archive", "purge", "--older-than", "30d"],
        vec!["audit"],
        vec!["events"],
        vec!["serve", "--listen", "127.0.0.1:0"],
    ];
    for args in &commands {
        let out = run(&db, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), expected, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(files, vec!["opencode.db"], "{args:?} created files");
        assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "{args:?}");
    }
    // With --json, the refusal is the one error document.
    let out = run(&db, &["--json", "receipts"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["exitCode"], 2);
    assert_eq!(
        doc["error"],
        expected.trim_start_matches("error: ").trim_end()
    );
}
