//! The upkeep benchmark: how much smaller a database shaped like real coding work gets when a
//! clean gives its freed pages back itself (the file switched once by `vacuum --online-shrink`),
//! against the same clean followed by `vacuum` with OpenCode stopped, and the longest hold of
//! SQLite's write lock by the clean and its give back. On copies of one database:
//!
//! - `online`: `vacuum --online-shrink`, then `clean --all --apply --timings`;
//! - `offline`: `clean --all --apply`, then `vacuum`;
//!
//! each audited (it must hold), and the two must have committed the same receipts. What the
//! switch itself costs (the pointer-map pages) is printed beside: the size of a plain `vacuum`
//! of the original against `vacuum --online-shrink` of it. The run ends
//! with one line in exactly this form, which scripts read:
//!
//! ```text
//! UPKEEP mb=<size> online_shrink_pct=<x> offline_vacuum_pct=<x> max_lock_ms=<x>
//! ```
//!
//! where `mb` is the database's size (MB, 10^6 bytes, its WAL included), each `_pct` how much
//! smaller the database and its WAL are after (percent of the original), and `max_lock_ms` the
//! online clean's longest hold of the write lock (its prunes', compactions' and give back
//! steps'), in ms. Before it, the give back's own figures.
//!
//! ```text
//! cargo build --release && cargo bench --bench upkeep -- [--db PATH] [--mb 300] [--dir target/upkeep]
//! ```
//!
//! `--db` names a database to measure (one made by `opencode-real-work`'s generator, with
//! OpenCode stopped); without it, one of `--mb` MB is generated from the fixture
//! `tests/fixtures/opencode-1.18.34-work` under `--dir`, and kept there for the next run.

mod common;

use common::scale::generate_from;
use common::{copy_of, release_json, size, smaller_pct};

use std::path::{Path, PathBuf};

use rusqlite::Connection;

fn options() -> (Option<PathBuf>, u64, PathBuf) {
    let mut db = None;
    let mut megabytes = 300;
    let mut dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/upkeep");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--db" => db = args.next().map(PathBuf::from),
            "--mb" => megabytes = args.next().and_then(|v| v.parse().ok()).unwrap_or(300),
            "--dir" => dir = args.next().map(PathBuf::from).unwrap_or(dir),
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    (db, megabytes, dir)
}

/// The database and its WAL, bytes.
fn on_disk(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    size(db) + size(Path::new(&wal))
}

/// The request keys of the receipts `db` holds, in the order they committed.
fn request_keys(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT request_key FROM session_prune_receipt ORDER BY rowid")
        .expect("receipts");
    let keys = stmt.query_map([], |r| r.get(0)).expect("query");
    keys.map(Result::unwrap).collect()
}

fn audit_holds(db: &Path, name: &str) {
    let (report, _) = release_json(db, &["audit"]);
    assert_eq!(
        report["ok"], true,
        "{name}: the audit does not hold: {report}"
    );
}

fn main() {
    let (db, megabytes, dir) = options();
    std::fs::create_dir_all(&dir).expect("dir");
    let source = db.unwrap_or_else(|| {
        let generated = dir.join(format!("work-{megabytes}mb.db"));
        if !generated.exists() {
            eprintln!("generating {} ...", generated.display());
            let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/opencode-1.18.34-work/opencode.db");
            let partial = generated.with_extension("partial");
            generate_from(&partial, &fixture, megabytes);
            std::fs::rename(&partial, &generated).expect("keep the generated database");
        }
        generated
    });
    let original = on_disk(&source);

    let online = copy_of(&source, &dir, "online");
    let (switched, _) = release_json(&online, &["vacuum", "--online-shrink"]);
    assert_eq!(switched["autoVacuum"], "incremental", "{switched}");
    let switched_bytes = on_disk(&online);
    // What the switch costs: the same VACUUM without it leaves the file without pointer maps.
    let plain = copy_of(&source, &dir, "plain");
    release_json(&plain, &["vacuum"]);
    eprintln!(
        "switch: a vacuum leaves {} bytes, with --online-shrink {switched_bytes} bytes \
         (pointer maps: {:+.2} %)",
        on_disk(&plain),
        100.0 * (switched_bytes as f64 / on_disk(&plain) as f64 - 1.0)
    );
    let (report, took) = release_json(&online, &["clean", "--all", "--apply", "--timings"]);
    assert_eq!(report["failed"], 0, "{report}");
    let given = &report["givenBack"];
    assert_eq!(
        given["leftPages"], 0,
        "every freed page is given back: {report}"
    );
    let max_lock_ms = report["writeLock"]["maxMs"].as_f64().expect("writeLock");
    audit_holds(&online, "online");
    eprintln!(
        "online: {original} -> {switched_bytes} bytes switched -> {} bytes after the clean \
         ({:.2} s); given back {} bytes in {} steps, the longest {} ms; write lock {}",
        on_disk(&online),
        took.as_secs_f64(),
        given["bytes"],
        given["steps"],
        given["longestStepMs"],
        report["writeLock"]
    );

    let offline = copy_of(&source, &dir, "offline");
    let (report, _) = release_json(&offline, &["clean", "--all", "--apply"]);
    assert_eq!(report["failed"], 0, "{report}");
    release_json(&offline, &["vacuum"]);
    audit_holds(&offline, "offline");
    assert_eq!(
        request_keys(&online),
        request_keys(&offline),
        "both cleans commit the same receipts"
    );
    eprintln!("offline: {original} -> {} bytes", on_disk(&offline));

    println!(
        "UPKEEP mb={} online_shrink_pct={:.1} offline_vacuum_pct={:.1} max_lock_ms={:.1}",
        original / 1_000_000,
        smaller_pct(original, on_disk(&online)),
        smaller_pct(original, on_disk(&offline)),
        max_lock_ms
    );
}
