//! The space benchmark on OpenCode 2 databases: how much smaller a database the real OpenCode 2
//! wrote (`kind=native`), or migrated from an OpenCode 1.x one (`kind=migrated`), gets after a
//! clean and `vacuum`. On copies of one database:
//!
//! - `default`: `clean --all --apply`;
//! - `keep0`: `clean --all --apply --keep-last-turns 0`;
//! - `migrated_v1` (migrated only): `clean --all --apply --migrated-v1`, which also removes the
//!   1.x rows OpenCode 2 copied; every text OpenCode 2 reads must be byte for byte the same
//!   after it (checked);
//!
//! each followed by `vacuum` and the audit (it must hold). The run ends with one line in exactly
//! this form, which scripts read:
//!
//! ```text
//! SPACE2 version=<2.x> kind=<native|migrated> mb=<size> default_pct=<x> keep0_pct=<x> migrated_v1_pct=<x|na>
//! ```
//!
//! where `version` is the OpenCode 2 release that wrote the newest session, `mb` the database's
//! size (MB, 10^6 bytes) and each `_pct` how much smaller the file is after that clean and
//! `vacuum` (percent of the original). Before it, on stderr: `ideal_pct`, the same for a copy
//! where plain SQL removed every tool and reasoning item of the completed assistant rows outside
//! each session's last 2 user turns (the reference the default clean is held to), and `stats`'s
//! wall time against `VACUUM INTO` of the same file.
//!
//! ```text
//! cargo build --release && cargo bench --bench space2 -- --db PATH [--dir target/space2]
//! ```
//!
//! `--db` names a database made by OpenCode 2 (`opencode2-real-work`'s generator, with its
//! service stopped); without it the benchmark says so and does nothing.

mod common;

use common::{copy_of, release_json as session_prune, size, smaller_pct, time_vacuum_into};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rusqlite::Connection;
use serde_json::Value;

struct Options {
    db: Option<PathBuf>,
    dir: PathBuf,
}

fn options() -> Options {
    let mut options = Options {
        db: None,
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/space2"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--db" => options.db = args.next().map(PathBuf::from),
            "--dir" => options.dir = args.next().map(PathBuf::from).unwrap_or(options.dir),
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    options
}

/// One clean of a copy with `extra`, then `vacuum` and the audit: the copy and its size after.
fn clean_and_vacuum(source: &Path, dir: &Path, name: &str, extra: &[&str]) -> (PathBuf, u64) {
    let db = copy_of(source, dir, name);
    let (report, clean) = session_prune(&db, &[&["clean", "--all", "--apply"][..], extra].concat());
    assert_eq!(report["failed"], 0, "{name}: {report}");
    let (_, vacuum) = session_prune(&db, &["vacuum"]);
    let audit = Command::new(common::release_binary())
        .arg("--db")
        .arg(&db)
        .arg("audit")
        .output()
        .expect("audit");
    assert!(audit.status.success(), "{name}: the audit does not hold");
    eprintln!(
        "{name}: {} -> {} bytes; clean {:.2} s ({}), vacuum {:.2} s",
        size(source),
        size(&db),
        clean.as_secs_f64(),
        report["bytesByKind"],
        vacuum.as_secs_f64()
    );
    let after = size(&db);
    (db, after)
}

/// The texts OpenCode 2 reads, by row: a row's `text` and `summary`, and its content's text
/// items.
fn texts(db: &Path) -> BTreeMap<String, Vec<String>> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT id, data FROM session_message")
        .expect("select");
    let rows = stmt
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .expect("rows");
    let mut found = BTreeMap::new();
    for row in rows {
        let (id, data) = row.expect("row");
        let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
        let mut texts: Vec<String> = ["text", "summary"]
            .iter()
            .filter_map(|key| value[*key].as_str().map(str::to_string))
            .collect();
        for item in value["content"].as_array().into_iter().flatten() {
            if item["type"] == "text" {
                texts.push(item["text"].as_str().unwrap_or_default().to_string());
            }
        }
        found.insert(id, texts);
    }
    found
}

/// A copy where plain SQL removed every tool and reasoning item of the completed assistant rows
/// created before each session's second newest user row, then `VACUUM`: its size.
fn ideal(source: &Path, dir: &Path) -> u64 {
    let db = copy_of(source, dir, "ideal");
    let conn = Connection::open(&db).expect("open");
    conn.execute_batch(
        "UPDATE session_message AS m SET data = json_set(data, '$.content', \
           (SELECT json_group_array(json(j.value)) FROM json_each(m.data, '$.content') j \
             WHERE json_extract(j.value, '$.type') NOT IN ('tool', 'reasoning'))) \
         WHERE type = 'assistant' \
           AND json_type(data, '$.time.completed') IN ('integer', 'real') \
           AND time_created < coalesce((SELECT u.time_created FROM session_message u \
                 WHERE u.session_id = m.session_id AND u.type = 'user' \
                 ORDER BY u.time_created DESC LIMIT 1 OFFSET 1), -1); \
         VACUUM;",
    )
    .expect("the reference removal");
    drop(conn);
    size(&db)
}

/// The OpenCode 2 release that wrote the newest session (`session_v2.version` starting `2.`).
fn version_of(db: &Path) -> String {
    let conn = Connection::open(db).expect("open");
    conn.query_row(
        "SELECT version FROM session_v2 WHERE version LIKE '2.%' \
         ORDER BY time_created DESC LIMIT 1",
        [],
        |row| row.get(0),
    )
    .unwrap_or_else(|_| "unknown".to_string())
}

fn main() {
    let options = options();
    let Some(source) = options.db.clone() else {
        eprintln!(
            "space2: no --db given: pass a database OpenCode 2 wrote (see the bench's header)"
        );
        return;
    };
    std::fs::create_dir_all(&options.dir).expect("dir");
    let original = size(&source);
    // One `VACUUM INTO` first reads the whole file into the page cache, so that neither timed
    // figure pays for the first read of it.
    let into = options.dir.join("vacuum-into.db");
    time_vacuum_into(&source, &into);
    let (stats, stats_time) = {
        let started = Instant::now();
        let (stats, _) = session_prune(&source, &["stats"]);
        (stats, started.elapsed())
    };
    let migrated = stats["migratedV1"]["sessions"].as_u64().unwrap_or(0) > 0;
    let vacuum_into = time_vacuum_into(&source, &into);
    eprintln!(
        "stats {:.2} s, VACUUM INTO {:.2} s: ratio {:.3}",
        stats_time.as_secs_f64(),
        vacuum_into.as_secs_f64(),
        stats_time.as_secs_f64() / vacuum_into.as_secs_f64()
    );

    let (_, default) = clean_and_vacuum(&source, &options.dir, "default", &[]);
    let (_, keep0) = clean_and_vacuum(&source, &options.dir, "keep0", &["--keep-last-turns", "0"]);
    let migrated_v1 = if migrated {
        let (db, after) =
            clean_and_vacuum(&source, &options.dir, "migrated_v1", &["--migrated-v1"]);
        let (before, now) = (texts(&source), texts(&db));
        assert_eq!(before, now, "a text OpenCode 2 reads changed");
        format!("{:.1}", smaller_pct(original, after))
    } else {
        "na".to_string()
    };
    eprintln!(
        "ideal_pct={:.1} (every tool and reasoning item outside the last 2 turns, removed by SQL)",
        smaller_pct(original, ideal(&source, &options.dir))
    );
    println!(
        "SPACE2 version={} kind={} mb={} default_pct={:.1} keep0_pct={:.1} migrated_v1_pct={migrated_v1}",
        version_of(&source),
        if migrated { "migrated" } else { "native" },
        original / 1_000_000,
        smaller_pct(original, default),
        smaller_pct(original, keep0),
    );
}
