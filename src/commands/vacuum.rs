//! `session-prune vacuum [--force] [--online-shrink]`: give the space prunes freed back to the
//! disk. Refuses, changing nothing, while other processes have the database open (unless
//! `--force`) and when the disk lacks the room VACUUM needs; reports the size before and after.
//! `--online-shrink` switches the file to `auto_vacuum = INCREMENTAL` with that VACUUM, so that
//! every later clean gives the pages it frees back while OpenCode runs (docs/ARCHITECTURE.md,
//! "Online shrink"). `--into PATH` writes the vacuumed database to a new file instead (for a
//! disk without room for a rebuild in place: the copy needs the live size at PATH and nothing
//! beside the database), leaving the database as it is.

use pruning_opencode::{
    free_space, other_processes, process_named, AutoVacuum, Needs, VacuumError,
};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{open_store_for_writing, Outcome};
use crate::cli::config::{shell_word, Config};
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;

/// The `--json` document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    /// `vacuumed`, `copied` (`--into`: the copy written, the database as it was), or
    /// `refused` (nothing was changed).
    status: &'static str,
    /// Why it refused, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// Processes that have the database open (refused without `--force`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pids: Vec<u32>,
    /// Bytes VACUUM needs free (live data, once per place it writes).
    needed_bytes: u64,
    /// Bytes free where it writes (the least of the places).
    free_bytes: u64,
    /// Database plus WAL before, bytes.
    bytes_before: u64,
    /// Database plus WAL after, bytes (equal to before when refused, and with `--into`).
    bytes_after: u64,
    /// With `--into`: the vacuumed copy's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    into: Option<String>,
    /// With `--into`, once written: the copy's size, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    into_bytes: Option<u64>,
    /// The file's `auto_vacuum` mode after: `incremental` once `--online-shrink` switched it
    /// (every clean then gives freed pages back), else `none` (or `full`).
    auto_vacuum: AutoVacuum,
}

/// `vacuum` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run even while other processes have the database open.
    #[arg(long)]
    force: bool,
    /// Also switch the file to SQLite's incremental auto-vacuum, once: from then on every
    /// `clean --apply` (and `prune-batch`, on the command line or through `serve`) gives the pages it frees
    /// back to the disk while OpenCode runs, without another vacuum. OpenCode reads and writes
    /// such a file as any other; it costs one pointer-map page per 819 pages (4 KiB pages: 0.12 % of the file)
    #[arg(long)]
    online_shrink: bool,
    /// Write the vacuumed database to this new file instead, leaving the database as it is: for
    /// a disk without room for a rebuild in place (which needs twice the live size beside the
    /// database). The copy needs the live size free where it goes and nothing beside the
    /// database; it is synced and checked, and removed if any step fails or Ctrl-C stops it.
    /// Then, with OpenCode stopped, move it over the database (the command says how). Not
    /// while another process has the database open (no --force: what it writes after the copy
    /// would be lost by the move)
    #[arg(long, value_name = "PATH", conflicts_with_all = ["online_shrink", "force"])]
    into: Option<std::path::PathBuf>,
    /// Free bytes to assume instead of asking the file system (for testing the check).
    #[arg(long, hide = true, value_name = "BYTES")]
    assume_free_bytes: Option<u64>,
}

/// Runs the checks and, when they pass, VACUUM.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let Args {
        force,
        online_shrink,
        into,
        assume_free_bytes: assume_free,
    } = args;
    if let Some(into) = &into {
        check_into(into)?;
    }
    let store = open_store_for_writing(config)?;
    super::open::refuse_unreadable_journal(&config.journal)?;
    let before = files_size(config);
    super::require_opencode(&store, &config.db)?;
    let needs = store.vacuum_needs()?;
    let mut doc = Document {
        status: "refused",
        reason: None,
        pids: Vec::new(),
        needed_bytes: 0,
        free_bytes: 0,
        bytes_before: before,
        bytes_after: before,
        into: into.as_ref().map(|path| path.display().to_string()),
        into_bytes: None,
        auto_vacuum: store.auto_vacuum()?,
    };
    if let Some(into) = &into {
        return run_into(&store, config, into, &needs, assume_free, doc);
    }

    // Room: the temporary copy and the WAL each take up to the live size; on one file system,
    // both at once.
    let (temp_free, temp_fs) = match assume_free {
        Some(bytes) => (bytes, 0),
        None => free_space(&needs.temp_dir)?,
    };
    let (db_free, db_fs) = match assume_free {
        Some(bytes) => (bytes, 0),
        None => free_space(&needs.database_dir)?,
    };
    let same = temp_fs == db_fs;
    doc.needed_bytes = if same {
        needs.live_bytes.saturating_mul(2)
    } else {
        needs.live_bytes
    };
    doc.free_bytes = temp_free.min(db_free);
    if let Some(shortage) = room_shortage(&needs, same, temp_free, db_free) {
        doc.reason = Some(format!(
            "{shortage}. {}",
            copy_elsewhere(config, &needs, doc.auto_vacuum)
        ));
        return refuse(config, &doc);
    }

    doc.pids = other_processes(&config.db);
    if !doc.pids.is_empty() && !force {
        doc.reason = Some(holders_words(&doc.pids, true));
        return refuse(config, &doc);
    }

    if !config.json {
        say!(
            "vacuuming {} ({} live)...",
            output::bytes(before),
            output::bytes(needs.live_bytes)
        )?;
    }
    let truncated = match store.vacuum(online_shrink) {
        Ok(truncated) => truncated,
        Err(error @ VacuumError::Busy(_)) => {
            doc.reason = Some(format!("{error}; stop OpenCode and run again"));
            return refuse(config, &doc);
        }
        Err(error) => return Err(error.into()),
    };
    doc.auto_vacuum = store.auto_vacuum()?;
    drop(store);
    doc.status = "vacuumed";
    if !truncated {
        doc.reason = Some("another process reads the database, so the WAL could not be truncated: the file shrinks at OpenCode's next checkpoint".into());
    }
    doc.bytes_after = files_size(config);
    if config.json {
        output::json_document(&doc)?;
    } else {
        say!(
            "vacuumed: {} -> {} ({} given back)",
            output::bytes(doc.bytes_before),
            output::bytes(doc.bytes_after),
            output::bytes(doc.bytes_before.saturating_sub(doc.bytes_after))
        )?;
        if let Some(note) = &doc.reason {
            say!("note: {note}")?;
        }
        if online_shrink {
            say!(
                "online shrink is on: every clean --apply now gives the pages it frees back \
                 while OpenCode runs"
            )?;
        }
    }
    Ok(Outcome::Done)
}

/// Bad `--into` paths, before anything is opened (exit 2): one that exists (never written
/// over), one whose folder does not.
fn check_into(into: &std::path::Path) -> Result<(), ConfigError> {
    let bad = |why| ConfigError::VacuumInto {
        path: into.display().to_string(),
        why,
    };
    if into.symlink_metadata().is_ok() {
        return Err(bad("it exists"));
    }
    let beside = |suffix| {
        pruning_opencode::side_file(into, suffix)
            .symlink_metadata()
            .is_ok()
    };
    if beside("-journal") || beside("-wal") {
        return Err(bad(
            "SQLite's -journal or -wal of that name lies beside it (left by a copy that was \
             killed?): remove it first",
        ));
    }
    let folder = into
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| std::path::Path::new("."));
    if !folder.is_dir() {
        return Err(bad("its folder does not exist"));
    }
    Ok(())
}

/// `vacuum --into PATH`: the room at PATH and the other processes checked, then `VACUUM INTO`
/// (synced and checked; removed if any step fails), and what to do with the copy.
fn run_into(
    store: &pruning_opencode::OpenCodeStore,
    config: &Config,
    into: &std::path::Path,
    needs: &Needs,
    assume_free: Option<u64>,
    mut doc: Document,
) -> anyhow::Result<Outcome> {
    let folder = into
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| std::path::Path::new("."));
    let free = match assume_free {
        Some(bytes) => bytes,
        None => free_space(folder)?.0,
    };
    doc.needed_bytes = needs.live_bytes;
    doc.free_bytes = free;
    if free < needs.live_bytes {
        doc.reason = Some(format!(
            "not enough free disk space: the vacuumed copy needs {} in {}, which has {} free",
            output::bytes(needs.live_bytes),
            folder.display(),
            output::bytes(free)
        ));
        return refuse(config, &doc);
    }
    doc.pids = other_processes(&config.db);
    if !doc.pids.is_empty() {
        doc.reason = Some(format!(
            "{}: what they write after the copy would not be in it, and moving the copy in \
             place would lose it",
            holders_words(&doc.pids, false)
        ));
        return refuse(config, &doc);
    }
    if !config.json {
        say!(
            "writing the vacuumed database ({} live) to {}...",
            output::bytes(needs.live_bytes),
            into.display()
        )?;
    }
    let written = match store.vacuum_into(into, stop_on_ctrl_c()) {
        Ok(written) => written,
        Err(error @ VacuumError::Busy(_)) => {
            doc.reason = Some(format!("{error}; stop OpenCode and run again"));
            return refuse(config, &doc);
        }
        Err(_) if STOP.load(Ordering::SeqCst) => {
            eprintln!(
                "interrupted: nothing of the copy {} is left, and the database is as it was",
                into.display()
            );
            return Ok(Outcome::Interrupted);
        }
        Err(error @ VacuumError::Copy { .. }) => {
            // Where it failed: the copy's disk (full, read-only), not the database's.
            let now = free_space(folder).map_or_else(
                |_| "cannot be read".to_string(),
                |(free, _)| format!("has {} free", output::bytes(free)),
            );
            anyhow::bail!("{error}; the disk holding {} {now}", folder.display());
        }
        Err(error) => return Err(error.into()),
    };
    doc.status = "copied";
    doc.into_bytes = Some(written);
    if config.json {
        output::json_document(&doc)?;
    } else {
        let word = |path: &std::path::Path| shell_word(&path.display().to_string());
        let db = word(&config.db);
        let side = |suffix| word(&pruning_opencode::side_file(&config.db, suffix));
        say!(
            "copied: {} -> {} at {} (the database is as it was)",
            output::bytes(doc.bytes_before),
            output::bytes(written),
            into.display()
        )?;
        say!(
            "to give the space back, stop OpenCode (for OpenCode 2 also `opencode service stop`), \
             then: mv {} {db} && rm -f {} {}",
            word(into),
            side("-wal"),
            side("-shm")
        )?;
    }
    Ok(Outcome::Done)
}

/// The alternative that needs no room beside the database: the vacuumed copy written to
/// another disk, then moved over the database; and, for a file not switched, the switch that
/// spares every later vacuum once there is room.
fn copy_elsewhere(config: &Config, needs: &Needs, auto_vacuum: AutoVacuum) -> String {
    let name = config
        .db
        .file_name()
        .map_or_else(|| "opencode.db".into(), |name| name.to_string_lossy());
    let mut words = format!(
        "Or write the vacuumed database to another disk with {} free: `{} vacuum --into {}`, \
         then move it over this one with OpenCode stopped",
        output::bytes(needs.live_bytes),
        config.invocation,
        shell_word(&format!("/path/on/that/disk/{name}"))
    );
    if auto_vacuum != AutoVacuum::Incremental {
        words.push_str(
            "; once this disk has the room, `vacuum --online-shrink` needs it one last time: \
             every clean after it gives the pages it frees back without a vacuum",
        );
    }
    words
}

/// Set by Ctrl-C (or SIGTERM) during `--into`: the copy stops and is removed. A second one
/// ends the process at once (exit 130).
static STOP: AtomicBool = AtomicBool::new(false);

/// [`STOP`], with the handler that sets it installed.
fn stop_on_ctrl_c() -> &'static AtomicBool {
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    &STOP
}

fn refuse(config: &Config, doc: &Document) -> anyhow::Result<Outcome> {
    let reason = doc.reason.as_deref().unwrap_or("");
    if config.json {
        output::json_document(doc)?;
        eprintln!("refused: {reason}");
    } else {
        say!("refused: {reason}; nothing was changed")?;
    }
    Ok(Outcome::Blocked)
}

/// Bytes of the database file and its WAL.
fn files_size(config: &Config) -> u64 {
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = config.db.clone().into_os_string();
    wal.push("-wal");
    size(&config.db) + size(std::path::Path::new(&wal))
}

/// Why VACUUM lacks room, naming each place it writes, the free space there, and the remedy
/// that helps: `SQLITE_TMPDIR` moves the temporary copy only, never the WAL beside the
/// database. `None` when there is room.
fn room_shortage(needs: &Needs, same_disk: bool, temp_free: u64, db_free: u64) -> Option<String> {
    let live = output::bytes(needs.live_bytes);
    let temp = needs.temp_dir.display();
    let beside = needs.database_dir.display();
    if same_disk {
        let needed = needs.live_bytes.saturating_mul(2);
        return (temp_free < needed).then(|| {
            format!(
                "not enough free disk space: VACUUM needs {} on the disk holding {beside}: {live} \
                 for its temporary copy (in {temp}) and {live} for the WAL beside the database; \
                 that disk has {} free. Free space there, or set SQLITE_TMPDIR to a folder on \
                 another disk with {live} free (the WAL stays beside the database)",
                output::bytes(needed),
                output::bytes(temp_free)
            )
        });
    }
    let mut short = Vec::new();
    if db_free < needs.live_bytes {
        short.push(format!(
            "the WAL beside the database needs {live} in {beside}, which has {} free (free space \
             on that disk: SQLITE_TMPDIR does not move the WAL)",
            output::bytes(db_free)
        ));
    }
    if temp_free < needs.live_bytes {
        short.push(format!(
            "the temporary copy needs {live} in {temp}, which has {} free (free space there, or \
             set SQLITE_TMPDIR to a roomier folder)",
            output::bytes(temp_free)
        ));
    }
    (!short.is_empty()).then(|| format!("not enough free disk space: {}", short.join("; ")))
}

/// Why `vacuum` does not run while `pids` hold the database, in words: each process named, OpenCode
/// 2's background service with how to stop it (it keeps running after `opencode run` and the
/// TUI exit), the rest with what they likely are; with `force_helps`, that `--force` runs anyway.
fn holders_words(pids: &[u32], force_helps: bool) -> String {
    let mut services = Vec::new();
    let mut others = Vec::new();
    for pid in pids {
        match pruning_opencode::OpenCodeService::of_pid(*pid) {
            Some(service) => services.push(service.describe()),
            None => others.push(process_named(*pid)),
        }
    }
    let mut words = Vec::new();
    if !services.is_empty() {
        words.push(format!(
            "{} has the database open: `opencode service stop` stops it (it keeps running after \
             `opencode run` and the TUI exit; OpenCode starts it again when next used)",
            services.join(", ")
        ));
    }
    if !others.is_empty() {
        words.push(format!(
            "other processes have the database open ({}): stop them first (OpenCode, or a \
             `session-prune serve`)",
            others.join(", ")
        ));
    }
    if force_helps {
        format!("{}, or pass --force to run anyway", words.join("; "))
    } else {
        words.join("; ")
    }
}
