//! The peers benchmark: how our cleanup compares with the tools a user might run instead, each on
//! its own copy of the same V1 database, each with its most thorough cleanup that keeps the
//! conversation text (the user and assistant `text` parts):
//!
//! - `ours`: `clean --all --apply --keep-last-turns 0`, then `vacuum` (every tool and reasoning
//!   part of the completed messages, and the superseded snapshots of the event log);
//! - `ocgc` (PyPI `ocgc` 0.1.0): `purge --strip-reasoning --force`, then `vacuum --force` (the
//!   reasoning parts; its other purges delete whole sessions);
//! - `ocman` (PyPI `ocman` 1.3.0): `db clean-orphans -y` (rows of sessions that no longer exist),
//!   then `reclaim --reclaim-parts -y` (WAL checkpoint and `VACUUM`, then the output of the tool
//!   parts OpenCode's own prune marked compacted, with a retention of 0 days in its
//!   `ocman.toml`); its `db clean` and deletes remove whole sessions;
//! - `opencode_db` (PyPI `opencode-db` 0.14.0, Python 3.12 or newer): `vacuum --force
//!   --no-backup` (checkpoint, `VACUUM`, `REINDEX`, `ANALYZE`); its `prune` and `delete` remove
//!   whole sessions, so `vacuum` is all it can do that keeps the text.
//!
//! The Python tools are installed from PyPI, pinned, into `target/peers-venv` (`ocgc`, `ocman`,
//! with `python3`) and `target/peers-venv-opencode-db` (with the first Python 3.12 or newer of
//! `SESSION_PRUNE_PEERS_PYTHON`, `python3.13`, `python3.12`, `python3`, pyenv's versions) on the
//! first run. Each runs with `HOME` set to a folder of its own beside its copy, so nothing of the
//! user's home is read or written (ocman's mandatory backup lands there), and stdin closed.
//!
//! Each copy is measured after its tool, and after a plain SQLite `VACUUM` when the tool left
//! free pages or a WAL behind (untimed), so every tool is measured at the same floor. Each copy
//! is checked: `PRAGMA integrity_check`, and the count, bytes and SHA-256 of its user and
//! assistant text parts against the copy's before the tool ran (a tool that loses text is
//! reported, its numbers still given). The run ends with one line in exactly this form, which
//! scripts read:
//!
//! ```text
//! PEERS mb=<size> ours_s=<x.xx> ours_pct=<x.x> ocgc_s=<x.xx> ocgc_pct=<x.x> ocman_s=<x.xx> ocman_pct=<x.x> opencode_db_s=<x.xx> opencode_db_pct=<x.x>
//! ```
//!
//! where `mb` is the size of the source database file (MB, 10^6 bytes), each `_s` the wall time
//! of that tool's cleanup (every command of it, processes started included) and each `_pct` how
//! much smaller the database and its WAL are after it (percent of the original's). A tool that
//! could not be installed or failed has `na` for both. Before it, on stderr: what each tool ran,
//! what it said, its sizes, its checks, and any error.
//!
//! ```text
//! cargo build --release --bin session-prune && cargo bench --bench peers -- --db PATH [--dir target/peers]
//! ```
//!
//! `--db` (default: `SESSION_PRUNE_PEERS_DB`) names the V1 database to measure (one made by
//! `opencode-real-work`'s generator, or a copy of a real one, with OpenCode stopped); without
//! either the benchmark says how to make one and prints `PEERS skipped: ...`. The copies (and the
//! tools' homes) are made under `--dir` one tool at a time and removed after each.

mod common;

use common::{copy_of, release_binary, size, smaller_pct};

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use sha2::{Digest, Sha256};

/// The Python packages, pinned.
const OCGC: &str = "ocgc==0.1.0";
const OCMAN: &str = "ocman==1.3.0";
const OPENCODE_DB: &str = "opencode-db==0.14.0";

/// Lines of a tool's output worth repeating: what it removed, skipped or gave back.
const SAID: [&str; 8] = [
    "Deleted",
    "SKIPPED",
    "Emptied",
    "Clean slate",
    "Reclaimed",
    "Saved",
    "Freed",
    "Size after",
];

struct Options {
    db: Option<PathBuf>,
    dir: PathBuf,
}

fn options() -> Options {
    let mut options = Options {
        db: std::env::var_os("SESSION_PRUNE_PEERS_DB")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
        dir: target().join("peers"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--db" => options.db = args.next().map(PathBuf::from).or(options.db),
            "--dir" => options.dir = args.next().map(PathBuf::from).unwrap_or(options.dir),
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    options
}

/// The project's `target` folder.
fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target")
}

/// `path` with `suffix` appended to its name (`-wal`, `.prune-journal`).
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The database and its WAL, bytes.
fn on_disk(db: &Path) -> u64 {
    size(db) + size(&beside(db, "-wal"))
}

/// Removes what it holds (files and folders) when dropped, even when the run panics.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for path in &self.0 {
            if path.is_dir() {
                let _ = std::fs::remove_dir_all(path);
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// A copy of `source` (and its WAL when it has one) at `dir/NAME.db`, on disk before any tool
/// runs (so no tool pays for writing the copy back), and what to remove after.
fn fresh_copy(source: &Path, dir: &Path, name: &str) -> (PathBuf, Scratch) {
    let db = copy_of(source, dir, name);
    let home = dir.join(format!("{name}-home"));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).expect("the tool's home");
    let mut scratch = vec![home];
    for suffix in ["", "-wal", "-shm", ".prune-journal", ".prune-archive"] {
        scratch.push(beside(&db, suffix));
    }
    let wal = beside(source, "-wal");
    if size(&wal) > 0 {
        std::fs::copy(&wal, beside(&db, "-wal")).expect("copy the WAL");
    }
    for file in [db.clone(), beside(&db, "-wal")] {
        if let Ok(f) = File::open(&file) {
            f.sync_all().expect("sync the copy");
        }
    }
    (db, Scratch(scratch))
}

/// The user and assistant text of a V1 database: its parts, the bytes of their text, and the
/// SHA-256 of that text in part order.
#[derive(PartialEq)]
struct Text {
    parts: u64,
    bytes: u64,
    digest: String,
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} parts, {} bytes, sha256 {}",
            self.parts,
            self.bytes,
            &self.digest[..12]
        )
    }
}

/// Opens `db` read-only: it neither checkpoints nor removes the WAL when it closes.
fn read_only(db: &Path) -> rusqlite::Result<Connection> {
    Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

fn conversation_text(db: &Path) -> Result<Text, String> {
    let conn = read_only(db).map_err(|e| e.to_string())?;
    let mut stmt = conn
        .prepare(
            "SELECT coalesce(json_extract(p.data, '$.text'), '') FROM part p \
             JOIN message m ON m.id = p.message_id \
             WHERE json_extract(p.data, '$.type') = 'text' \
               AND json_extract(m.data, '$.role') IN ('user', 'assistant') \
             ORDER BY p.id",
        )
        .map_err(|e| format!("not a V1 database? {e}"))?;
    let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
    let mut text = Text {
        parts: 0,
        bytes: 0,
        digest: String::new(),
    };
    let mut hasher = Sha256::new();
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let part: String = row.get(0).map_err(|e| e.to_string())?;
        text.parts += 1;
        text.bytes += part.len() as u64;
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    text.digest = hex::encode(hasher.finalize());
    Ok(text)
}

/// `PRAGMA integrity_check`'s first line (`ok` when the file is sound).
fn integrity(db: &Path) -> String {
    read_only(db)
        .and_then(|conn| conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)))
        .unwrap_or_else(|e| format!("cannot check: {e}"))
}

/// Free pages of `db`.
fn free_pages(db: &Path) -> i64 {
    read_only(db)
        .and_then(|conn| conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)))
        .unwrap_or(0)
}

/// The floor every tool is measured at: a plain `VACUUM` when the tool left free pages or a WAL
/// behind (closing the connection then checkpoints and removes the WAL). How long it took, if
/// it ran.
fn floor(db: &Path) -> Result<Option<Duration>, String> {
    if free_pages(db) == 0 && size(&beside(db, "-wal")) == 0 {
        return Ok(None);
    }
    let started = Instant::now();
    let conn = Connection::open(db).map_err(|e| e.to_string())?;
    conn.execute_batch("VACUUM").map_err(|e| e.to_string())?;
    conn.close().map_err(|(_, e)| e.to_string())?;
    Ok(Some(started.elapsed()))
}

/// A command as a shell would show it (of its environment, `HOME` and `OCGC_DB_PATH`).
fn shown(command: &Command) -> String {
    let mut line = String::new();
    for (var, value) in command.get_envs() {
        if let (Some(value), "HOME" | "OCGC_DB_PATH") = (value, var.to_str().unwrap_or_default()) {
            line.push_str(&format!(
                "{}={} ",
                var.to_string_lossy(),
                value.to_string_lossy()
            ));
        }
    }
    line += &Path::new(command.get_program())
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    for arg in command.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

/// Runs `steps` one after the other, stdin closed: their wall time together, and the lines of
/// their output worth repeating; the first failure ends it, with its output's last lines.
fn run_steps(steps: Vec<Command>) -> Result<(Duration, Vec<String>), String> {
    let mut said = Vec::new();
    let started = Instant::now();
    for mut step in steps {
        let out = step
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", shown(&step)))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        said.extend(
            stdout
                .lines()
                .map(|l| {
                    l.trim_matches(|c: char| c.is_whitespace() || "│╭╮╰╯─".contains(c))
                        .to_string()
                })
                .filter(|l| SAID.iter().any(|s| l.contains(s))),
        );
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
            return Err(format!(
                "{} exited with {}: {}",
                shown(&step),
                out.status,
                tail[tail.len().saturating_sub(4)..].join(" | ")
            ));
        }
    }
    Ok((started.elapsed(), said))
}

/// One tool's cleanup of a copy of `source`: `steps` makes its commands for the copy and the
/// tool's home; `checks` adds notes of the tool's own about the copy after it. Prints what it
/// ran and found; the seconds and percent when it ran to the end.
fn measure(
    name: &str,
    source: &Path,
    dir: &Path,
    steps: impl FnOnce(&Path, &Path) -> Vec<Command>,
    checks: impl FnOnce(&Path) -> Vec<String>,
) -> Option<(f64, f64)> {
    let (db, scratch) = fresh_copy(source, dir, name);
    let home = scratch.0[0].clone();
    let original = on_disk(&db);
    let before = conversation_text(&db);
    let steps = steps(&db, &home);
    for step in &steps {
        eprintln!("{name}: runs {}", shown(step));
    }
    let (took, said) = match run_steps(steps) {
        Ok(ran) => ran,
        Err(e) => {
            eprintln!("{name}: FAILED: {e}");
            return None;
        }
    };
    for line in said {
        eprintln!("{name}: said: {line}");
    }
    let by_tool = on_disk(&db);
    let floor = match floor(&db) {
        Ok(Some(vacuum)) => format!(
            ", {} bytes after a plain VACUUM (untimed, {:.2} s)",
            on_disk(&db),
            vacuum.as_secs_f64()
        ),
        Ok(None) => String::new(),
        Err(e) => {
            eprintln!("{name}: FAILED: the plain VACUUM after it: {e}");
            return None;
        }
    };
    let after = on_disk(&db);
    eprintln!(
        "{name}: {original} -> {by_tool} bytes (file and WAL) in {:.2} s{floor}: {:.1} % smaller",
        took.as_secs_f64(),
        smaller_pct(original, after)
    );
    let text = match (before, conversation_text(&db)) {
        (Ok(before), Ok(after)) if before == after => format!("text kept ({after})"),
        (Ok(before), Ok(after)) => format!("TEXT LOST: before {before}, after {after}"),
        (Err(e), _) | (_, Err(e)) => format!("text not checked: {e}"),
    };
    let mut notes = vec![format!("integrity_check {}", integrity(&db)), text];
    notes.extend(checks(&db));
    eprintln!("{name}: {}", notes.join("; "));
    drop(scratch);
    Some((took.as_secs_f64(), smaller_pct(original, after)))
}

/// `program` of the virtual environment `venv`.
fn venv_bin(venv: &Path, program: &str) -> PathBuf {
    venv.join("bin").join(program)
}

/// Makes the virtual environment `venv` with `python` and installs `packages` from PyPI into
/// it, unless it has every one of `programs` already.
fn venv(
    venv: &Path,
    python: &OsString,
    packages: &[&str],
    programs: &[&str],
) -> Result<(), String> {
    if programs.iter().all(|p| venv_bin(venv, p).exists()) {
        return Ok(());
    }
    eprintln!(
        "peers: installing {} into {} from PyPI",
        packages.join(" "),
        venv.display()
    );
    let steps = vec![
        {
            let mut make = Command::new(python);
            make.args(["-m", "venv"]).arg(venv);
            make
        },
        {
            let mut install = Command::new(venv_bin(venv, "pip"));
            install
                .args(["install", "-q", "--disable-pip-version-check"])
                .args(packages);
            install
        },
    ];
    run_steps(steps).map(|_| ())
}

/// `program --version`'s first line.
fn version(program: &Path, flag: &str) -> String {
    Command::new(program)
        .arg(flag)
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout);
            text.lines().next().unwrap_or_default().trim().to_string()
        })
        .unwrap_or_else(|e| format!("{}: {e}", program.display()))
}

/// The first Python 3.12 or newer: `SESSION_PRUNE_PEERS_PYTHON`, then `python3.13`, `python3.12`
/// and `python3` on the PATH, then pyenv's installed versions (whose shims answer only for the
/// versions selected).
fn python312() -> Option<OsString> {
    let mut candidates: Vec<OsString> = std::env::var_os("SESSION_PRUNE_PEERS_PYTHON")
        .into_iter()
        .collect();
    candidates.extend(["python3.13", "python3.12", "python3"].map(OsString::from));
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(Ok(versions)) = pyenv.map(|p| std::fs::read_dir(p.join("versions"))) {
        let mut found: Vec<PathBuf> = versions
            .flatten()
            .map(|v| v.path().join("bin/python3"))
            .collect();
        found.sort();
        candidates.extend(found.into_iter().rev().map(OsString::from));
    }
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import sys; sys.exit(sys.version_info < (3, 12))"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A Python tool's command, its environment its own: `HOME` the tool's folder, none of the
/// variables that would point it at another database or configuration, no colours.
fn python_tool(program: PathBuf, home: &Path) -> Command {
    let mut command = Command::new(program);
    for var in [
        "OPENCODE_DB",
        "OPENCODE_CONFIG_DIR",
        "OCGC_DB_PATH",
        "OPENCODE_DB_BACKUP_DIR",
        "XDG_DATA_HOME",
        "XDG_CONFIG_HOME",
        "PYTHONPATH",
    ] {
        command.env_remove(var);
    }
    command
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env("TERM", "dumb")
        .env("COLUMNS", "100");
    command
}

/// `target/release/session-prune`, built when it is missing.
fn ours_binary() -> Result<PathBuf, String> {
    let binary = release_binary();
    if !binary.exists() {
        eprintln!("ours: building {}", binary.display());
        let mut build = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        build.current_dir(env!("CARGO_MANIFEST_DIR")).args([
            "build",
            "--release",
            "--bin",
            "session-prune",
        ]);
        run_steps(vec![build])?;
    }
    Ok(binary)
}

fn ours(source: &Path, dir: &Path) -> Option<(f64, f64)> {
    let binary = match ours_binary() {
        Ok(binary) => binary,
        Err(e) => {
            eprintln!("ours: FAILED: {e}");
            return None;
        }
    };
    let command = |db: &Path, args: &[&str]| {
        let mut command = Command::new(&binary);
        command.arg("--db").arg(db).arg("--json").args(args);
        command
    };
    measure(
        "ours",
        source,
        dir,
        |db, _| {
            vec![
                command(db, &["clean", "--all", "--apply", "--keep-last-turns", "0"]),
                command(db, &["vacuum"]),
            ]
        },
        |db| {
            let audit = command(db, &["audit"]).stdin(Stdio::null()).output();
            let audit = match audit {
                Ok(out) if out.status.success() => "audit holds".to_string(),
                Ok(out) => format!("AUDIT FAILS: {}", String::from_utf8_lossy(&out.stdout)),
                Err(e) => format!("audit not run: {e}"),
            };
            vec![
                audit,
                format!(
                    "its journal beside the database: {} bytes",
                    size(&beside(db, ".prune-journal"))
                ),
            ]
        },
    )
}

fn main() {
    let options = options();
    let Some(source) = options.db.clone() else {
        eprintln!(
            "peers: no database: pass --db PATH or set SESSION_PRUNE_PEERS_DB to a V1 database \
             of coding work, with OpenCode stopped: one made by `opencode-real-work`'s generator \
             (see tests/fixtures/opencode-1.18.34-work/README.md; e.g. OPENCODE_REAL_SCALE=1 \
             generate.sh OUT makes about 300 MB), or a copy of ~/.local/share/opencode/opencode.db"
        );
        println!("PEERS skipped: no database (--db PATH or SESSION_PRUNE_PEERS_DB)");
        return;
    };
    assert!(source.is_file(), "{}: no such database", source.display());
    std::fs::create_dir_all(&options.dir).expect("dir");
    let mut line = format!("PEERS mb={}", size(&source) / 1_000_000);
    let mut report = |key: &str, outcome: Option<(f64, f64)>| match outcome {
        Some((seconds, pct)) => line.push_str(&format!(" {key}_s={seconds:.2} {key}_pct={pct:.1}")),
        None => line.push_str(&format!(" {key}_s=na {key}_pct=na")),
    };
    eprintln!(
        "peers: {} ({} bytes with its WAL), copies in {}",
        source.display(),
        on_disk(&source),
        options.dir.display()
    );

    report("ours", ours(&source, &options.dir));

    let venv_py = target().join("peers-venv");
    let installed = venv(
        &venv_py,
        &OsString::from("python3"),
        &[OCGC, OCMAN],
        &["ocgc", "ocman"],
    );
    let (ocgc, ocman) = match installed {
        Ok(()) => {
            eprintln!(
                "peers: {}; {}",
                version(&venv_bin(&venv_py, "ocgc"), "--version"),
                version(&venv_bin(&venv_py, "ocman"), "--version")
            );
            let ocgc = measure(
                "ocgc",
                &source,
                &options.dir,
                |db, home| {
                    let step = |args: &[&str]| {
                        let mut command = python_tool(venv_bin(&venv_py, "ocgc"), home);
                        command.env("OCGC_DB_PATH", db).args(args);
                        command
                    };
                    vec![
                        step(&["purge", "--strip-reasoning", "--force"]),
                        step(&["vacuum", "--force"]),
                    ]
                },
                |_| vec!["keeps every session; removes the reasoning parts only".into()],
            );
            let ocman = measure(
                "ocman",
                &source,
                &options.dir,
                |db, home| {
                    // Its retention for compacted tool output, 30 days by default: none.
                    let config = home.join(".config/opencode");
                    std::fs::create_dir_all(&config).expect("ocman's config folder");
                    std::fs::write(
                        config.join("ocman.toml"),
                        "reclaim_parts_retention_days = 0\n",
                    )
                    .expect("ocman.toml");
                    let step = |args: &[&str]| {
                        let mut command = python_tool(venv_bin(&venv_py, "ocman"), home);
                        command.arg("--db").arg(db).args(args);
                        command
                    };
                    vec![
                        step(&["db", "clean-orphans", "-y"]),
                        // The copy is the bench's own: an OpenCode running elsewhere on the
                        // machine would otherwise make it refuse.
                        step(&["reclaim", "--reclaim-parts", "-y", "--while-running"]),
                    ]
                },
                |db| {
                    let backups = db
                        .with_file_name("ocman-home")
                        .join(".local/share/opencode/backups");
                    let copies = std::fs::read_dir(backups).map_or(0, |d| d.count());
                    vec![format!(
                        "keeps every session; made {copies} backup(s) of the database in its \
                         home first (mandatory, in its time)"
                    )]
                },
            );
            (ocgc, ocman)
        }
        Err(e) => {
            eprintln!("peers: ocgc and ocman not installed: {e}");
            (None, None)
        }
    };
    report("ocgc", ocgc);
    report("ocman", ocman);

    let venv_odb = target().join("peers-venv-opencode-db");
    let opencode_db = match python312() {
        None => {
            eprintln!(
                "opencode_db: {OPENCODE_DB} needs Python 3.12 or newer and none was found \
                 (set SESSION_PRUNE_PEERS_PYTHON); not measured"
            );
            None
        }
        Some(python) => match venv(&venv_odb, &python, &[OPENCODE_DB], &["opencode-db"]) {
            Err(e) => {
                eprintln!("opencode_db: not installed: {e}");
                None
            }
            Ok(()) => {
                eprintln!(
                    "peers: {}; its prune and delete remove whole sessions, so only its vacuum \
                     is measured",
                    version(&venv_bin(&venv_odb, "opencode-db"), "--version")
                );
                measure(
                    "opencode_db",
                    &source,
                    &options.dir,
                    |db, home| {
                        let mut command = python_tool(venv_bin(&venv_odb, "opencode-db"), home);
                        command.args(["--lang", "en", "--db-path"]).arg(db).args([
                            "vacuum",
                            "--force",
                            "--no-backup",
                        ]);
                        vec![command]
                    },
                    |_| vec!["keeps everything; its verified backup skipped (--no-backup)".into()],
                )
            }
        },
    };
    report("opencode_db", opencode_db);

    println!("{line}");
}
