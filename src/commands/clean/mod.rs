//! `session-prune clean (SESSION... | --all) [--apply]`: prune the technical parts of every
//! completed message a policy selects, one message per transaction, in batches that share their
//! journal writes and WAL sync (docs/ARCHITECTURE.md, "Bulk work"), through the engine's one write
//! path.
//! A dry run (the default) reads only. Progress goes to stderr: a bar on a terminal, a line
//! every few seconds otherwise, nothing with `--json`. Ctrl-C stops after the current transaction.
//!
//! The clean itself (its phases, the walk, the dry run and the apply, the report's figures) is
//! the `pruning-clean` crate's; this module opens what it works on, and says what it did: the
//! flags and their validation are `args.rs`, the report in words `report.rs`, the progress line
//! `progress.rs`.

mod args;
mod progress;
mod report;
mod writer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pruning_clean::{AtOnce, CleanError, Mode, Silent};
use pruning_opencode::{AutoVacuum, IntegrityTimes, OpenCodeStore};

use super::{open_store, Archiving, Outcome};
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output;
use args::validate;
pub use args::{size_flag, Args, CleanConfig};
use report::{outcome, print_report};
use writer::{LaterEngine, NotOpened};

/// Validates the flags (exit 2 on bad ones), then runs the clean: the input checked, the store
/// opened and its integrity check started beside (with `--apply` the engine is opened at the
/// first write: [`writer`]), the clean run (`pruning_clean::run`), the report printed.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let clean = validate(args)?;
    let stop = stop_on_ctrl_c();
    check_input(config, &clean)?;
    if clean.apply {
        // Held now: blocked at once, rather than after the planning and the check.
        if let Some(held) = super::journal_held(&config.journal) {
            return not_opened(Some(NotOpened::Busy(held)), config, &clean);
        }
    }
    let planned = Planned::open(config, &clean)?;
    let archiving = Archiving::chosen(config, clean.archive, clean.no_archive);
    let later = clean
        .apply
        .then(|| LaterEngine::new(config, archiving, &planned.store));
    let mode = match &later {
        Some(writer) => Mode::Apply(writer),
        None => Mode::DryRun(&planned.store),
    };
    let ran = if config.json || clean.quiet {
        pruning_clean::run(mode, &clean.clean, &stop, &AtOnce, &mut Silent)
    } else {
        pruning_clean::run(
            mode,
            &clean.clean,
            &stop,
            &AtOnce,
            &mut progress::Stderr::new(),
        )
    };
    let mut report = match ran {
        Ok(report) => report,
        Err(CleanError::EngineNotOpened) => {
            return not_opened(later.and_then(|writer| writer.failure()), config, &clean)
        }
        Err(error) => {
            // A read that met damage before the check answered: the check's words name it.
            planned.integrity()?;
            return Err(cause(error));
        }
    };
    // Answered only once the integrity check has: a file that is not sound is refused by the
    // dry run as the apply refuses it.
    let integrity = planned.integrity()?;
    if clean.clean.timings {
        report.integrity_check = integrity;
    }
    if let Some(failure) = report.first_failure.take() {
        report.first_failure = Some(super::diagnose::explain(&failure, config));
    }
    if clean.quiet {
        if let Some(failure) = &report.first_failure {
            eprintln!("clean: {} prune(s) failed: {failure}", report.failed);
        }
    } else if config.json {
        output::json_document(&report)?;
    } else {
        print_report(&report, &clean, &config.invocation)?;
    }
    Ok(outcome(&report, clean.apply))
}

/// The error of a clean as the rest of the binary reads it: the store's or the engine's own,
/// whose kinds set the exit code and the words of a diagnosis.
fn cause(error: CleanError) -> anyhow::Error {
    match error {
        CleanError::Store(error) => error.into(),
        CleanError::Engine(error) => error.into(),
        other => other.into(),
    }
}

/// A flag Ctrl-C sets: the clean stops after the current transaction. A second Ctrl-C ends
/// the process at once (exit 130).
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    stop
}

/// Bad input, before anything is opened for writing or a journal made: a file that is not
/// OpenCode's, or a session it does not hold (exit 2).
fn check_input(config: &Config, clean: &CleanConfig) -> anyhow::Result<()> {
    if clean.quiet && config.json {
        return Err(ConfigError::QuietJson.into());
    }
    let reader = open_store(config)?;
    super::require_opencode(&reader, &config.db)?;
    for id in clean.clean.sessions.iter().flatten() {
        if !reader.session_exists(id)? {
            return Err(super::UnknownSession(id.clone()).into());
        }
    }
    if clean.clean.until_file && reader.auto_vacuum()? != AutoVacuum::Incremental {
        return Err(ConfigError::NotShrinking(config.db.display().to_string()).into());
    }
    Ok(())
}

/// The store a clean reads (and, with `--apply`, its engine writes through, opened at the first
/// write: [`writer`]), with its integrity check started beside the planning (not on read-only
/// media, where nothing can be written).
struct Planned {
    store: OpenCodeStore,
    checked_beside: bool,
}

impl Planned {
    /// Opens it: writable where it can be, so that a write lock another process holds is
    /// reported as the apply would meet it; a dry run on read-only media gets a read-only store,
    /// which checks nothing (the apply is refused there as the file cannot be written).
    fn open(config: &Config, clean: &CleanConfig) -> anyhow::Result<Self> {
        if !clean.apply {
            if let (Err(detail), false) = (super::check_binding_unless_busy(config)?, clean.quiet) {
                eprintln!(
                    "note: {detail}. The dry run goes on; --apply would be refused \
                     (maintenance_required) while the journal is held"
                );
            }
        }
        let planned = match super::open_store_to_plan_writes(config) {
            Ok(store) => {
                store.check_sound_beside();
                Self {
                    store,
                    checked_beside: true,
                }
            }
            Err(error)
                if !clean.apply
                    && matches!(
                        error.downcast_ref::<pruning_engine::StoreError>(),
                        Some(pruning_engine::StoreError::ReadOnly { .. })
                    ) =>
            {
                Self {
                    store: open_store(config)?,
                    checked_beside: false,
                }
            }
            Err(error) => return Err(error),
        };
        if let (Some(cause), false) = (planned.store.media_read_only(), clean.quiet) {
            eprintln!(
                "note: {} cannot be written ({cause}): its messages are counted as skipped \
                 (read_only), and --apply would be refused",
                config.db.display()
            );
        }
        Ok(planned)
    }

    /// The integrity check's times, once it answered `ok` (waited for here).
    ///
    /// Errors: the check found the file not sound (damaged pages, an index out of step, a
    /// deleted file still held).
    fn integrity(&self) -> anyhow::Result<Option<IntegrityTimes>> {
        if self.checked_beside {
            Ok(Some(self.store.await_sound()?))
        } else {
            Ok(None)
        }
    }
}

/// What the command answers when the apply's engine could not be opened (nothing was journaled
/// or written): blocked when another process holds the journal (said on stderr, and with
/// `--json` as the blocked document: exit 3), else the open's error.
fn not_opened(
    failure: Option<NotOpened>,
    config: &Config,
    clean: &CleanConfig,
) -> anyhow::Result<Outcome> {
    match failure {
        Some(NotOpened::Busy(error)) => {
            if config.json {
                output::json_document(&serde_json::json!({
                    "status": "blocked", "reason": "maintenance_required"
                }))?;
            }
            if !clean.quiet {
                let detail = super::busy_detail(&error);
                eprintln!("blocked: maintenance_required: {detail}; nothing was done");
            }
            Ok(Outcome::Blocked)
        }
        Some(NotOpened::Failed(error)) => Err(error),
        None => Err(CleanError::EngineNotOpened.into()),
    }
}
