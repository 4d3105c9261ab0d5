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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pruning_clean::{AtOnce, CleanError, Mode, Silent};
use pruning_engine::Engine;
use pruning_opencode::{AutoVacuum, OpenCodeStore};

use super::{open_engine_unless_busy, open_store, Archiving, Outcome};
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output;
use args::validate;
pub use args::{size_flag, Args, CleanConfig};
use report::{outcome, print_report};

/// Validates the flags (exit 2 on bad ones), then runs the clean: the input checked, the store
/// (and with `--apply` the engine) opened, the clean run (`pruning_clean::run`), the report
/// printed.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let clean = validate(args)?;
    let stop = stop_on_ctrl_c();
    check_input(config, &clean)?;
    let Some(opened) = Opened::open(config, &clean)? else {
        return Ok(Outcome::Blocked);
    };
    let mode = opened.mode();
    let mut report = if config.json || clean.quiet {
        pruning_clean::run(mode, &clean.clean, &stop, &AtOnce, &mut Silent)
    } else {
        pruning_clean::run(
            mode,
            &clean.clean,
            &stop,
            &AtOnce,
            &mut progress::Stderr::new(),
        )
    }
    .map_err(cause)?;
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

/// What a clean works on: with `--apply` the engine (which holds the store), for a dry run a
/// store of its own.
enum Opened {
    Apply(Box<Engine<OpenCodeStore>>),
    DryRun(Box<OpenCodeStore>),
}

impl Opened {
    /// Opens them; `None` when another process holds the journal (said on stderr, and with
    /// `--json` as the blocked document: exit 3, nothing done).
    fn open(config: &Config, clean: &CleanConfig) -> anyhow::Result<Option<Self>> {
        let archiving = Archiving::chosen(config, clean.archive, clean.no_archive);
        let opened = if clean.apply {
            match open_engine_unless_busy(config, archiving, super::Soundness::Required)? {
                Ok(engine) => Self::Apply(Box::new(engine)),
                Err(detail) => {
                    if config.json {
                        output::json_document(&serde_json::json!({
                            "status": "blocked", "reason": "maintenance_required"
                        }))?;
                    }
                    if !clean.quiet {
                        eprintln!("blocked: maintenance_required: {detail}; nothing was done");
                    }
                    return Ok(None);
                }
            }
        } else {
            if let (Err(detail), false) = (super::check_binding_unless_busy(config)?, clean.quiet) {
                eprintln!(
                    "note: {detail}. The dry run goes on; --apply would be refused \
                     (maintenance_required) while the journal is held"
                );
            }
            Self::DryRun(Box::new(Self::dry_store(config)?))
        };
        let store = opened.mode().store();
        if let (Some(cause), false) = (store.media_read_only(), clean.quiet) {
            eprintln!(
                "note: {} cannot be written ({cause}): its messages are counted as skipped \
                 (read_only), and --apply would be refused",
                config.db.display()
            );
        }
        Ok(Some(opened))
    }

    /// A dry run's store: writable where it can be, so that a write lock another process holds
    /// is reported as the apply would meet it; read-only media get a read-only dry run.
    fn dry_store(config: &Config) -> anyhow::Result<OpenCodeStore> {
        match super::open_store_for_writing(config) {
            Ok(store) => Ok(store),
            Err(error)
                if matches!(
                    error.downcast_ref::<pruning_engine::StoreError>(),
                    Some(pruning_engine::StoreError::ReadOnly { .. })
                ) =>
            {
                open_store(config)
            }
            Err(error) => Err(error),
        }
    }

    /// How the clean answers its prunes: decided here, once, by `--apply`.
    fn mode(&self) -> Mode<'_> {
        match self {
            Self::Apply(engine) => Mode::Apply(engine),
            Self::DryRun(store) => Mode::DryRun(store),
        }
    }
}
