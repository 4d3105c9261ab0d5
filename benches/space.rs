//! The space benchmark: how much smaller a database shaped like real coding work gets after a
//! clean and `vacuum`, for each clean, and how long they take against SQLite's `VACUUM INTO` of
//! the same file, timed in the same run. On copies of one database:
//!
//! - `default`: `clean --all --apply` (compaction, then the parts before the last 2 turns);
//! - `keep0`: `clean --all --apply --keep-last-turns 0`;
//! - `diffs`: `clean --all --apply --keep-last-turns 0 --diffs` (the file bodies of every
//!   turn's summary diffs emptied too);
//!
//! each followed by `vacuum`, and the audit of each (it must hold). The run ends with one line
//! in exactly this form, which scripts read:
//!
//! ```text
//! SPACE mb=<size> default_pct=<x> keep0_pct=<x> diffs_pct=<x> clean_s=<x> vacuum_s=<x> vacuum_into_s=<x>
//! ```
//!
//! where `mb` is the database's size (MB, 10^6 bytes), each `_pct` how much smaller the file is
//! after that clean and `vacuum` (percent of the original), `clean_s` and `vacuum_s` the default
//! clean's and its vacuum's wall time, and `vacuum_into_s` the wall time of `VACUUM INTO` of the
//! original. Before it, the tables and indexes that remain largest after the `diffs` clean.
//! Then a second line, the goals on coding work:
//!
//! ```text
//! WORK mb=<size> clean_vs_vacuum_into=<x> stats_vs_vacuum_into=<x>
//! ```
//!
//! the default clean's time and `stats --json`'s over `VACUUM INTO`'s, each the fastest of
//! [`ROUNDS`] alternated runs (the disk's pace varies from run to run; a fresh copy for each
//! clean).
//!
//! ```text
//! cargo build --release && cargo bench --bench space -- [--db PATH] [--mb 300] [--dir target/space]
//! ```
//!
//! `--db` names a database to measure (one made by `opencode-real-work`'s generator, with
//! OpenCode stopped); without it, one of `--mb` MB is generated from the fixture
//! `tests/fixtures/opencode-1.18.34-work` (each copy of its rows with its ids renamed) under
//! `--dir`, and kept there for the next run.
//!
//! With `--in-place` (for sizes whose copies do not fit on the disk; not with `--db`) only the
//! `WORK` line is measured, from one round: `VACUUM INTO`, `stats --json`, then the default
//! clean of the generated database itself; the cleaned database is removed, so the next run
//! generates it again.

mod common;

use common::scale::generate_from;
use common::{copy_of, release_json as session_prune, size, smaller_pct};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rusqlite::Connection;

struct Options {
    db: Option<PathBuf>,
    megabytes: u64,
    dir: PathBuf,
    in_place: bool,
}

fn options() -> Options {
    let mut options = Options {
        db: None,
        megabytes: 300,
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/space"),
        in_place: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--db" => options.db = args.next().map(PathBuf::from),
            "--mb" => options.megabytes = args.next().and_then(|v| v.parse().ok()).unwrap_or(300),
            "--dir" => options.dir = args.next().map(PathBuf::from).unwrap_or(options.dir),
            "--in-place" => options.in_place = true,
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    options
}

/// One clean of a copy, then `vacuum` and the audit: the file's size after, and the clean's and
/// the vacuum's wall times.
fn clean_and_vacuum(
    source: &Path,
    dir: &Path,
    name: &str,
    extra: &[&str],
) -> (u64, Duration, Duration) {
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
        "{name}: {} -> {} bytes; clean {:.2} s ({} bytes of row data: {}), vacuum {:.2} s",
        size(source),
        size(&db),
        clean.as_secs_f64(),
        report["bytesByKind"],
        report["file"],
        vacuum.as_secs_f64()
    );
    (size(&db), clean, vacuum)
}

/// The tables and indexes that hold most pages of `db`, `(name, bytes)`, largest first.
fn largest(db: &Path) -> Vec<(String, i64)> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6")
        .expect("dbstat");
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query");
    rows.map(Result::unwrap).collect()
}

fn main() {
    let options = options();
    std::fs::create_dir_all(&options.dir).expect("dir");
    let source = match &options.db {
        Some(db) => db.clone(),
        None => {
            let generated = options.dir.join(format!("work-{}mb.db", options.megabytes));
            if !generated.exists() {
                eprintln!("generating {} ...", generated.display());
                let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/fixtures/opencode-1.18.34-work/opencode.db");
                let partial = generated.with_extension("partial");
                generate_from(&partial, &fixture, options.megabytes);
                std::fs::rename(&partial, &generated).expect("keep the generated database");
            }
            generated
        }
    };
    let original = size(&source);
    if options.in_place {
        assert!(
            options.db.is_none(),
            "--in-place cleans the database it measures: it takes a generated one, not --db"
        );
        work_in_place(&source, &options.dir, original);
        return;
    }

    let into = options.dir.join("vacuum-into.db");
    let vacuum_into = common::time_vacuum_into(&source, &into);

    let (default, clean, vacuum) = clean_and_vacuum(&source, &options.dir, "default", &[]);
    let (keep0, _, _) =
        clean_and_vacuum(&source, &options.dir, "keep0", &["--keep-last-turns", "0"]);
    let (diffs, _, _) = clean_and_vacuum(
        &source,
        &options.dir,
        "diffs",
        &["--keep-last-turns", "0", "--diffs"],
    );
    for (name, bytes) in largest(&options.dir.join("diffs.db")) {
        eprintln!("largest after the diffs clean: {name} {bytes} bytes");
    }
    println!(
        "SPACE mb={} default_pct={:.1} keep0_pct={:.1} diffs_pct={:.1} clean_s={:.2} vacuum_s={:.2} vacuum_into_s={:.2}",
        original / 1_000_000,
        smaller_pct(original, default),
        smaller_pct(original, keep0),
        smaller_pct(original, diffs),
        clean.as_secs_f64(),
        vacuum.as_secs_f64(),
        vacuum_into.as_secs_f64()
    );
    print_work(&source, &options.dir, original);
}

/// Alternated runs of each timing of the `WORK` line.
const ROUNDS: usize = 3;

/// The `WORK` line: the default clean (on a fresh copy each round) and `stats --json` against
/// `VACUUM INTO` of the same file, the fastest of [`ROUNDS`] alternated runs of each.
fn print_work(source: &Path, dir: &Path, original: u64) {
    let mut fastest = [Duration::MAX; 3];
    for round in 0..ROUNDS {
        let into = common::time_vacuum_into(source, &dir.join("vacuum-into.db"));
        let copy = copy_of(source, dir, "work");
        let (report, clean) = session_prune(&copy, &["clean", "--all", "--apply"]);
        assert_eq!(report["failed"], 0, "{report}");
        let (_, stats) = session_prune(source, &["stats"]);
        eprintln!(
            "work round {}: VACUUM INTO {:.2} s, clean {:.2} s, stats {:.2} s",
            round + 1,
            into.as_secs_f64(),
            clean.as_secs_f64(),
            stats.as_secs_f64()
        );
        for (best, took) in fastest.iter_mut().zip([into, clean, stats]) {
            *best = (*best).min(took);
        }
    }
    let [into, clean, stats] = fastest.map(|took| took.as_secs_f64());
    println!(
        "WORK mb={} clean_vs_vacuum_into={:.2} stats_vs_vacuum_into={:.2}",
        original / 1_000_000,
        clean / into,
        stats / into
    );
}

/// `--in-place`: the `WORK` line of one round on the generated database `source` itself
/// (`VACUUM INTO`, `stats --json`, the default clean), then the database and its files
/// removed.
fn work_in_place(source: &Path, dir: &Path, original: u64) {
    let into = common::time_vacuum_into(source, &dir.join("vacuum-into.db"));
    let (_, stats) = session_prune(source, &["stats"]);
    let (report, clean) = session_prune(source, &["clean", "--all", "--apply", "--timings"]);
    assert_eq!(report["failed"], 0, "{report}");
    eprintln!(
        "in place: VACUUM INTO {:.2} s, stats {:.2} s, clean {:.2} s ({} bytes of row data; \
         integrity check {})",
        into.as_secs_f64(),
        stats.as_secs_f64(),
        clean.as_secs_f64(),
        report["bytesByKind"],
        report["integrityCheck"]
    );
    println!(
        "WORK mb={} clean_vs_vacuum_into={:.2} stats_vs_vacuum_into={:.2}",
        original / 1_000_000,
        clean.as_secs_f64() / into.as_secs_f64(),
        stats.as_secs_f64() / into.as_secs_f64()
    );
    let name = source
        .file_name()
        .and_then(|name| name.to_str())
        .expect("a generated name");
    for entry in std::fs::read_dir(dir).expect("the folder").flatten() {
        if entry.file_name().to_string_lossy().starts_with(name) {
            let path = entry.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.expect("remove the cleaned database's files");
        }
    }
}
