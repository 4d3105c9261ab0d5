//! Online shrink: `vacuum --online-shrink` switches the file to `auto_vacuum = INCREMENTAL`,
//! after which `clean --apply` and `prune-batch` give the pages they free back to the disk
//! without a `vacuum`; a file OpenCode left as it is gives nothing back and is told how to
//! switch; the give back waits for no writer and writes nothing where no write may run.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::Fixture;
use pruning_opencode::{AutoVacuum, OpenCodeStore, StoreOptions};
use rusqlite::Connection;
use serde_json::Value;

/// `PRAGMA name` of the fixture's database.
fn pragma(fx: &Fixture, name: &str) -> i64 {
    fx.scalar(&format!("PRAGMA {name}"))
}

/// The database file's size on disk, bytes.
fn file_size(fx: &Fixture) -> u64 {
    std::fs::metadata(&fx.db).unwrap().len()
}

/// Every part row, `(id, data)` by id.
fn parts(fx: &Fixture) -> Vec<(String, String)> {
    fx.sql()
        .prepare("SELECT id, data FROM part ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn switch(fx: &Fixture) -> Value {
    let out = run(&fx.db, &["--json", "vacuum", "--online-shrink"]);
    assert_exit(&out, 0);
    json(&out)
}

#[test]
fn vacuum_online_shrink_switches_the_file_and_keeps_its_content() {
    let fx = Fixture::work();
    let before = parts(&fx);
    assert_eq!(pragma(&fx, "auto_vacuum"), 0);
    let doc = switch(&fx);
    assert_eq!(doc["status"], "vacuumed", "{doc}");
    assert_eq!(doc["autoVacuum"], "incremental", "{doc}");
    assert_eq!(pragma(&fx, "auto_vacuum"), 2);
    let after = parts(&fx);
    assert_eq!(after, before);
    // A plain vacuum later keeps the mode.
    let out = run(&fx.db, &["--json", "vacuum"]);
    assert_exit(&out, 0);
    assert_eq!(json(&out)["autoVacuum"], "incremental");
}

#[test]
fn a_clean_of_a_switched_file_gives_every_freed_page_back_without_vacuum() {
    let online = Fixture::work();
    switch(&online);
    let size_switched = file_size(&online);
    let dry = run(&online.db, &["--json", "clean", "--all"]);
    assert_exit(&dry, 0);
    let dry = json(&dry);
    assert_eq!(dry["file"]["autoVacuum"], "incremental", "{dry}");
    assert_eq!(dry.get("givenBack"), None, "a dry run gives nothing back");
    assert_eq!(file_size(&online), size_switched);

    let out = run(&online.db, &["--json", "clean", "--all", "--apply"]);
    assert_exit(&out, 0);
    let report = json(&out);
    let given = &report["givenBack"];
    let page_size = pragma(&online, "page_size") as u64;
    let pages = given["pages"].as_u64().unwrap();
    assert!(pages > 0, "{report}");
    assert_eq!(given["bytes"].as_u64().unwrap(), pages * page_size);
    assert_eq!(given["leftPages"], 0, "{report}");
    assert_eq!(given.get("stopped"), None, "{report}");
    // Each step held the lock for a time of its own, the longest of them reported.
    let longest = given["longestStepMs"].as_f64().unwrap();
    assert!(longest > 0.0, "{report}");
    assert_eq!(pragma(&online, "freelist_count"), 0);
    // The WAL was written back and truncated: the file is its pages, no more.
    assert_eq!(
        file_size(&online),
        pragma(&online, "page_count") as u64 * page_size
    );
    assert_eq!(
        given["fileBytesAfter"].as_u64().unwrap(),
        file_size(&online)
    );
    assert_eq!(
        given["fileBytesBefore"].as_u64().unwrap() - file_size(&online),
        pages * page_size
    );
    assert_exit(&run(&online.db, &["audit"]), 0);

    // The same clean on a file left as OpenCode keeps it, then a vacuum: the online shrink's
    // file is within 10 % of that one.
    let offline = Fixture::work();
    assert_exit(&run(&offline.db, &["clean", "--all", "--apply"]), 0);
    assert_exit(&run(&offline.db, &["vacuum"]), 0);
    let (online_size, offline_size) = (file_size(&online), file_size(&offline));
    assert!(
        online_size * 10 <= offline_size * 11,
        "online {online_size} B, offline {offline_size} B"
    );
    // The same prunes: the same receipts.
    let keys = |fx: &Fixture| -> Vec<String> {
        common::receipts(fx)
            .into_iter()
            .map(|r| r.request_key)
            .collect()
    };
    assert_eq!(keys(&online), keys(&offline));
}

#[test]
fn a_clean_of_a_file_as_opencode_left_it_says_how_to_switch() {
    let fx = Fixture::work();
    let out = run(&fx.db, &["clean", "--all", "--apply"]);
    assert_exit(&out, 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let db = fx.db.display();
    assert!(
        text.lines().any(|line| line
            == format!(
                "the file shrinks only after `session-prune --db {db} vacuum` (with OpenCode \
                 stopped); `session-prune --db {db} vacuum --online-shrink`, once, makes every \
                 clean give the pages it frees back while OpenCode runs"
            )),
        "{text}"
    );
    assert!(!text.contains("given back:"), "{text}");
    assert!(pragma(&fx, "freelist_count") > 0);
    assert_eq!(pragma(&fx, "auto_vacuum"), 0);
    // Its JSON says the mode and gives nothing back.
    let fx = Fixture::work();
    let out = run(&fx.db, &["--json", "clean", "--all", "--apply"]);
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["file"]["autoVacuum"], "none");
    assert_eq!(report.get("givenBack"), None);
}

#[test]
fn prune_batch_gives_the_pages_it_frees_back() {
    let fx = Fixture::work();
    switch(&fx);
    let session: String = fx
        .sql()
        .query_row(
            "SELECT session_id FROM part GROUP BY session_id ORDER BY sum(length(data)) DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let history = run(
        &fx.db,
        &["--json", "history", &session, "--purpose", "prune", "--all"],
    );
    assert_exit(&history, 0);
    let candidates = fx.db.with_file_name("candidates.json");
    std::fs::write(&candidates, &history.stdout).unwrap();
    let out = run(
        &fx.db,
        &[
            "prune-batch",
            &session,
            "--candidates",
            candidates.to_str().unwrap(),
        ],
    );
    assert_exit(&out, 0);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("given back: ")),
        "{text}"
    );
    assert_eq!(pragma(&fx, "freelist_count"), 0);
}

/// Deletes enough rows of a switched copy that its freelist holds pages; returns their count.
fn free_some_pages(fx: &Fixture) -> i64 {
    fx.exec("DELETE FROM event");
    let free = pragma(fx, "freelist_count");
    assert!(free > 0);
    free
}

#[test]
fn the_give_back_stops_while_another_connection_holds_the_write_lock() {
    let fx = Fixture::work();
    switch(&fx);
    let free = free_some_pages(&fx);
    let store = fx.store(0);
    assert_eq!(store.auto_vacuum().unwrap(), AutoVacuum::Incremental);
    let writer = Connection::open(&fx.db).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let given = store.give_back_pages(&|| false).unwrap();
    assert_eq!(given.pages, 0);
    assert_eq!(given.steps, 0);
    assert_eq!(given.longest_step_ms, 0.0);
    assert_eq!(given.left_pages, free as u64);
    assert_eq!(
        given.stopped.as_deref(),
        Some("OpenCode kept the write lock")
    );
    writer.execute_batch("ROLLBACK").unwrap();
    // Once the lock is free, the next one gives every page back.
    let given = store.give_back_pages(&|| false).unwrap();
    assert_eq!(given.pages, free as u64);
    assert_eq!(given.left_pages, 0);
    assert_eq!(store.write_lock().transactions, given.steps + 1);
}

#[test]
fn the_give_back_stops_when_asked_before_its_first_step() {
    let fx = Fixture::work();
    switch(&fx);
    let free = free_some_pages(&fx);
    let digest = fx.file_digest();
    let given = fx.store(0).give_back_pages(&|| true).unwrap();
    assert_eq!((given.pages, given.steps), (0, 0));
    assert_eq!(given.left_pages, free as u64);
    assert_eq!(given.stopped.as_deref(), Some("it was stopped"));
    assert_eq!(fx.file_digest(), digest);
}

#[test]
fn the_give_back_writes_nothing_through_a_read_only_store_or_on_a_file_not_switched() {
    let fx = Fixture::work();
    switch(&fx);
    let free = free_some_pages(&fx);
    let digest = fx.file_digest();
    let reader = OpenCodeStore::open_read_only(&fx.db, StoreOptions::default()).unwrap();
    let given = reader.give_back_pages(&|| false).unwrap();
    assert_eq!((given.pages, given.steps), (0, 0));
    assert_eq!(given.left_pages, free as u64);
    assert_eq!(
        given.stopped.as_deref(),
        Some("it was opened for reading only")
    );
    drop(reader);
    assert_eq!(fx.file_digest(), digest);

    let plain = Fixture::work();
    let free = free_some_pages(&plain);
    let digest = plain.file_digest();
    let given = plain.store(0).give_back_pages(&|| false).unwrap();
    assert_eq!((given.pages, given.steps), (0, 0));
    assert_eq!(given.left_pages, free as u64);
    assert_eq!(
        given.stopped.as_deref(),
        Some("the file's auto_vacuum is not incremental")
    );
    assert_eq!(plain.file_digest(), digest);
}

#[test]
fn until_file_size_prunes_oldest_first_until_the_file_given_back_is_that_small() {
    let fx = Fixture::work();
    switch(&fx);
    let out = run(
        &fx.db,
        &[
            "--json",
            "clean",
            "--all",
            "--apply",
            "--until-file-size",
            "15MB",
        ],
    );
    assert_exit(&out, 0);
    let report = json(&out);
    let until = &report["untilFileSize"];
    assert_eq!(until["target"], 15_000_000, "{report}");
    assert_eq!(until["reached"], true, "{report}");
    // Measured after the give back: the file on disk, at most the target.
    assert_eq!(until["liveAfter"].as_u64().unwrap(), file_size(&fx));
    assert!(file_size(&fx) <= 15_000_000, "{report}");
    // It stopped early: a clean without a target prunes more.
    let whole = Fixture::work();
    let all = json(&run(&whole.db, &["--json", "clean", "--all"]));
    assert!(
        report["pruned"].as_u64().unwrap() < all["pruned"].as_u64().unwrap(),
        "{report}"
    );
    // A target the policies cannot reach says so.
    let out = run(&fx.db, &["clean", "--all", "--until-file-size", "1"]);
    assert_exit(&out, 0);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("(target 1 B); the policies leave too little to reach the target"),
        "{text}"
    );
}

#[test]
fn until_file_size_on_a_file_not_switched_is_bad_input_and_changes_nothing() {
    let fx = Fixture::work();
    let (database, journal) = (fx.file_digest(), fx.journal_digest());
    let out = run(
        &fx.db,
        &["clean", "--all", "--apply", "--until-file-size", "15MB"],
    );
    assert_exit(&out, 2);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("--until-file-size needs a file that gives freed pages back by itself")
            && stderr.contains("vacuum --online-shrink"),
        "{stderr}"
    );
    assert_eq!(fx.file_digest(), database);
    assert_eq!(fx.journal_digest(), journal);
    // With --until-live-size it is refused as a contradiction of flags.
    let out = run(
        &fx.db,
        &[
            "clean",
            "--all",
            "--until-file-size",
            "1MB",
            "--until-live-size",
            "1MB",
        ],
    );
    assert_exit(&out, 2);
    assert_eq!(fx.file_digest(), database);
}
