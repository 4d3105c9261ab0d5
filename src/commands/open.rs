//! Opening what the commands work on: the OpenCode store (read-only for commands that only read),
//! the journal (read-only likewise) and the engine, and the words for a journal another
//! process holds.

use pruning_engine::{Engine, Journal};
use pruning_opencode::{OpenCodeStore, StoreOptions};

use crate::cli::config::Config;

/// Refuses a file that holds neither OpenCode generation, or V1 or V2 tables without the
/// columns every listing reads, naming what is missing.
pub fn require_opencode(store: &OpenCodeStore, db: &std::path::Path) -> anyhow::Result<()> {
    let schema = store.schema()?;
    if !schema.is_supported() {
        anyhow::bail!(
            "{} is not an OpenCode database (neither V1 session, message and part tables nor V2 session_message)",
            db.display()
        );
    }
    refuse_rowless(store, db)?;
    if schema.has_v1() {
        if let Some(why) = schema.v1_unsupported() {
            anyhow::bail!("{}: {why}", db.display());
        }
    }
    if let Some(why) = store.v2_unreadable()? {
        anyhow::bail!("{}: {why}", db.display());
    }
    Ok(())
}

/// Refuses a layout whose tables with a JSON `data` column cannot be read by row number
/// (declared `WITHOUT ROWID`), in words, for the commands that read messages without the other
/// checks of [`require_opencode`].
pub fn refuse_rowless(store: &OpenCodeStore, db: &std::path::Path) -> anyhow::Result<()> {
    if let Some(why) = store.schema()?.rowless() {
        anyhow::bail!("{}: {why}", db.display());
    }
    Ok(())
}

/// Refuses a journal bound to another database than `--db`'s, as opening the engine would, for
/// commands that read without opening it (`events`, `prune --dry-run`). Nothing is written.
pub fn check_binding(config: &Config) -> anyhow::Result<()> {
    if !config.journal.exists() || !config.db.is_file() {
        return Ok(());
    }
    let Some(journal) = open_journal_for_reading(&config.journal)? else {
        return Ok(());
    };
    // The engine's own binding rules, opened read-only: nothing is written.
    Engine::open_read_only(open_store(config)?, journal)?;
    Ok(())
}

/// Opens the journal for a command that only reads it: read-only, so that it writes nothing
/// (no fsync) and works on a read-only file, folder or mount. `None` when there is no journal
/// file (nothing was journaled there). A journal a killed process left unclosed is repaired by
/// one writable open first, when the file can be written; otherwise the error says so.
///
/// Errors: the journal's open errors ([`pruning_journal::OpenError`]), with the path.
pub fn open_journal_for_reading(path: &std::path::Path) -> anyhow::Result<Option<Journal>> {
    // An emptied journal holds nothing to read, as a missing one.
    if std::fs::metadata(path).map_or(true, |found| found.is_file() && found.len() == 0) {
        return Ok(None);
    }
    match Journal::open_read_only(path) {
        Ok(journal) => Ok(Some(journal)),
        Err(pruning_journal::OpenError::NeedsRepair { .. }) => {
            match Journal::open(path) {
                Ok(repaired) => drop(repaired),
                Err(error) if unreadable(&error) => return Err(with_advice(error)),
                Err(error) => {
                    return Err(anyhow::Error::new(error).context(format!(
                        "journal {} was not closed cleanly and must be repaired by a writable \
                         open, which failed; make it writable once (or run a command that \
                         writes) and retry",
                        path.display()
                    )))
                }
            }
            Ok(Some(Journal::open_read_only(path).map_err(with_advice)?))
        }
        Err(error) => Err(with_advice(error)),
    }
}

/// The lock of the journal at `path` held by another process now, as the error a writable open
/// would meet (its words name the holder: [`busy_detail`]); `None` when it is free, when there
/// is no journal yet, or when a read-only open cannot tell (the writable open then says). Reads
/// only: a clean tells a held journal at once, before it plans.
pub fn journal_held(path: &std::path::Path) -> Option<anyhow::Error> {
    if std::fs::metadata(path).map_or(true, |found| !found.is_file() || found.len() == 0) {
        return None;
    }
    match Journal::open_read_only(path) {
        Err(error @ pruning_journal::OpenError::Locked { .. }) => Some(error.into()),
        _ => None,
    }
}

/// Whether the journal file is no journal, or a damaged one: no command can use it as it is.
fn unreadable(error: &pruning_journal::OpenError) -> bool {
    matches!(
        error,
        pruning_journal::OpenError::NotAJournal { .. } | pruning_journal::OpenError::Damaged { .. }
    )
}

/// The journal's open error, with what to do about a file that is no journal or a damaged one
/// (docs/refusals.md); other errors as they are.
fn with_advice(error: pruning_journal::OpenError) -> anyhow::Error {
    let advice = match &error {
        pruning_journal::OpenError::NotAJournal { .. } => {
            "if it is not the journal, name the journal with --journal PATH; if the journal was \
             overwritten, put a copy of it back, or move this file aside and run `session-prune \
             journal new-epoch` (its events are lost; the receipts in the database stay)"
        }
        pruning_journal::OpenError::Damaged { .. } => {
            "put a copy of the journal back; when there is none, move this file aside and run \
             `session-prune journal new-epoch` (its events are lost; the receipts in the \
             database stay)"
        }
        _ => return error.into(),
    };
    anyhow::anyhow!("{error}: {advice}")
}

/// Refuses a journal file that is no journal or a damaged one, for a command that writes the
/// database without journaling (`vacuum`): a journal that cannot be read is refused before the
/// file it belongs to is rewritten, as every other writing command refuses it. A journal another
/// process holds is left to that process. Nothing is written.
///
/// Errors: the journal's open error, with what to do.
pub fn refuse_unreadable_journal(path: &std::path::Path) -> anyhow::Result<()> {
    match open_journal_for_reading(path) {
        Err(error) if journal_busy(&error) => Ok(()),
        Err(error) => Err(error),
        Ok(None) => Ok(()),
        Ok(Some(journal)) => read_whole(&journal).map_err(|error| {
            anyhow::anyhow!(
                "{error}: put a copy of the journal {} back; when there is none, move it aside \
                 and run `session-prune journal new-epoch` (its events are lost; the receipts in \
                 the database stay)",
                path.display()
            )
        }),
    }
}

/// Reads what the audit reads of `journal`: its binding and epoch, every intent, every event
/// and the receipt digest kept beside it (a page that does not read is met as
/// [`pruning_journal::ReadError::Damaged`] or a storage error).
fn read_whole(journal: &Journal) -> Result<(), pruning_journal::ReadError> {
    journal.bound_database()?;
    journal.epoch()?;
    journal.intents()?;
    journal.pending_intents()?;
    let mut since = journal.trimmed_through()?;
    loop {
        let page = journal.events_after(since, 1_024)?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        for event in &page {
            journal.receipt_digest(event.event_id)?;
        }
        since = last.seq;
    }
}

/// [`check_binding`], or `Ok(Err(detail))` when another process holds the journal: a dry run
/// then reports itself blocked (`maintenance_required`), as the prune it stands for would.
pub fn check_binding_unless_busy(config: &Config) -> anyhow::Result<Result<(), String>> {
    match check_binding(config) {
        Ok(()) => Ok(Ok(())),
        Err(error) if journal_busy(&error) => Ok(Err(busy_detail(&error))),
        Err(error) => Err(error),
    }
}

/// What to tell a person whose command found the journal held by another process; where the
/// OpenCode plugin registered its server beside the database (`<database>.session-prune-serve.json`,
/// docs/plugin.md, "The server"), that it is the plugin's and what to do instead.
pub fn busy_detail(error: &anyhow::Error) -> String {
    let plugin = plugin_server(error)
        .map(|pid| {
            format!(
                "; the OpenCode plugin's server (pid {pid}) holds it while OpenCode runs: prune \
                 from inside OpenCode (/prune, /prune all), or stop OpenCode first"
            )
        })
        .unwrap_or_default();
    format!(
        "{error:#}; another session-prune process holds the journal (a prune or a clean, which \
         ends by itself, or `serve`, which holds it until stopped: use its HTTP API, or stop \
         it){plugin}; try again when it is done"
    )
}

/// The pid of the OpenCode plugin's server registered beside the database of the journal
/// `error` found held, if there is such a registration (the journal is `<database>.prune-journal`).
fn plugin_server(error: &anyhow::Error) -> Option<u64> {
    let journal = error.chain().find_map(|cause| {
        match cause.downcast_ref::<pruning_journal::OpenError>() {
            Some(pruning_journal::OpenError::Locked { path, .. }) => Some(path.clone()),
            _ => None,
        }
    })?;
    let database = journal.to_str()?.strip_suffix(".prune-journal")?;
    let registration =
        std::fs::read_to_string(format!("{database}.session-prune-serve.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&registration)
        .ok()?
        .get("pid")?
        .as_u64()
}

/// Whether `error` is the journal being held by another process past the open's retry window,
/// or the prune archive being held by another process (a purge rewriting it).
pub fn journal_busy(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<pruning_journal::OpenError>(),
            Some(pruning_journal::OpenError::Locked { .. })
        ) || matches!(
            cause.downcast_ref::<pruning_engine::StoreError>(),
            Some(pruning_engine::StoreError::ArchiveBusy(_))
        )
    })
}

/// Refuses a database file that is cut short (docs/ARCHITECTURE.md, "Sound files"), as found
/// when the configuration was read, before SQLite opens it: SQLite would make `-wal` and `-shm`
/// files beside it.
///
/// Errors: [`pruning_engine::StoreError::Damaged`] with what was found and what to do.
pub fn refuse_cut_short(config: &Config) -> Result<(), pruning_engine::StoreError> {
    match &config.cut_short {
        Some(finding) => Err(pruning_engine::StoreError::Damaged {
            path: config.db.display().to_string(),
            detail: pruning_opencode::cut_short_words(&config.db, finding),
        }),
        None => Ok(()),
    }
}

/// Opens the database named by the configuration for a command that only reads: read-only, so
/// that it works on read-only files, folders and mounts and never writes; closing it leaves the
/// WAL as it is.
pub fn open_store(config: &Config) -> anyhow::Result<OpenCodeStore> {
    refuse_cut_short(config)?;
    let options = StoreOptions {
        quiet_period: config.quiet_period,
        abandoned_after: config.abandoned_after,
    };
    let store = OpenCodeStore::open_read_only(&config.db, options)?;
    store.leave_wal_on_close()?;
    Ok(store)
}

/// Opens the database for a command that writes or predicts a write (`vacuum`, the dry runs of
/// `prune` and `prune-batch`): a database that cannot be written is refused here, as the prune
/// would be. Closing it leaves the WAL as it is.
pub fn open_store_for_writing(config: &Config) -> anyhow::Result<OpenCodeStore> {
    refuse_cut_short(config)?;
    let options = StoreOptions {
        quiet_period: config.quiet_period,
        abandoned_after: config.abandoned_after,
    };
    let store = open_writable(config, options)?;
    store.leave_wal_on_close()?;
    store.check_sound()?;
    Ok(store)
}

/// [`open_store_for_writing`] without its integrity check: for a clean, which starts the check
/// beside its planning ([`OpenCodeStore::check_sound_beside`]) and writes only once it answered
/// (docs/ARCHITECTURE.md, "Sound files").
pub fn open_store_to_plan_writes(config: &Config) -> anyhow::Result<OpenCodeStore> {
    let options = StoreOptions {
        quiet_period: config.quiet_period,
        abandoned_after: config.abandoned_after,
    };
    let store = open_writable(config, options)?;
    store.leave_wal_on_close()?;
    Ok(store)
}

/// [`OpenCodeStore::open`], except that a file that cannot be written here and is damaged too
/// is refused as damaged: that is what matters more (read commands fail on it as well), and
/// what a writable copy would meet.
fn open_writable(config: &Config, options: StoreOptions) -> anyhow::Result<OpenCodeStore> {
    refuse_cut_short(config)?;
    match OpenCodeStore::open(&config.db, options) {
        Err(read_only @ pruning_engine::StoreError::ReadOnly { .. }) => {
            if let Ok(reader) = OpenCodeStore::open_read_only(&config.db, options) {
                if let Err(damaged @ pruning_engine::StoreError::Damaged { .. }) =
                    reader.check_sound()
                {
                    return Err(damaged.into());
                }
            }
            Err(read_only.into())
        }
        opened => Ok(opened?),
    }
}

/// Whether the prunes of an engine are archived (`--archive`: docs/ARCHITECTURE.md, "Archive").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archiving {
    /// Prunes keep nothing of what they remove.
    Off,
    /// Each prune keeps what it removes in the archive beside the database.
    On,
}

/// What opening an engine does with a file that is not sound (docs/ARCHITECTURE.md, "Sound
/// files").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Soundness {
    /// Refuse it: the command writes, and nothing is journaled or written (`prune`, `clean`,
    /// `restore`, ...).
    Required,
    /// Say so on stderr and go on: reads still work, and the store refuses every write
    /// (`serve`, whose reads stay useful; `events`, which only reads).
    Reported,
}

impl Archiving {
    /// Whether a command's prunes are archived: `--archive` turns it on, `--no-archive` off,
    /// and without either they are archived once the database has an archive beside it
    /// (`<database>.prune-archive`): every later prune is then archived too, so that no receipt
    /// is stranded behind one that cannot be undone (restores undo a message's prunes newest
    /// first; docs/ARCHITECTURE.md, "Archive").
    pub fn chosen(config: &Config, archive: bool, no_archive: bool) -> Self {
        if no_archive {
            Self::Off
        } else if archive || pruning_opencode::archive_path(&config.db).is_file() {
            Self::On
        } else {
            Self::Off
        }
    }
}

/// Refuses a database whose journal was lost: [`pruning_engine::EngineError::JournalMissing`]
/// when the database holds receipts and `journal` names no file, or an empty one. Checked
/// before the journal is opened, which would make a new one there (the engine refuses to bind
/// it as well: docs/ARCHITECTURE.md, "Journal epochs").
///
/// Errors: that refusal; the store's.
pub fn refuse_lost_journal(store: &OpenCodeStore, journal: &std::path::Path) -> anyhow::Result<()> {
    let lost = match std::fs::metadata(journal) {
        Ok(found) => found.is_file() && found.len() == 0,
        Err(error) => error.kind() == std::io::ErrorKind::NotFound,
    };
    if !lost {
        return Ok(());
    }
    use pruning_engine::SessionStore as _;
    if let Some(database_id) = store.database_id()? {
        let receipts = store.receipts_high_water()?.receipts;
        return Err(pruning_engine::EngineError::JournalMissing {
            database_id,
            receipts,
        }
        .into());
    }
    Ok(())
}

/// Refuses a journal the engine would refuse to write with (another database's, another
/// epoch's: [`pruning_engine::check_journal_binding`]) after reading it read-only, so that the refusal
/// leaves every byte of it as it was: a writable open marks the file open before the binding is
/// checked. A journal that cannot be read read-only (held by another process, left unclosed by
/// a killed one) is left to the writable open, which says why.
///
/// Errors: the binding refusal; the store's.
fn refuse_foreign_journal(store: &OpenCodeStore, journal: &std::path::Path) -> anyhow::Result<()> {
    let written = std::fs::metadata(journal).is_ok_and(|found| found.len() > 0);
    if !written {
        return Ok(());
    }
    if let Ok(reader) = Journal::open_read_only(journal) {
        pruning_engine::check_journal_binding(store, &reader)?;
    }
    Ok(())
}

/// [`open_engine`], or `Ok(Err(detail))` when another process holds the journal past the
/// open's retry window: nothing was journaled or written, and the caller reports the request
/// as blocked (`maintenance_required`).
pub fn open_engine_unless_busy(
    config: &Config,
    archiving: Archiving,
    soundness: Soundness,
) -> anyhow::Result<Result<Engine<OpenCodeStore>, String>> {
    match open_engine(config, archiving, soundness) {
        Ok(engine) => Ok(Ok(engine)),
        Err(error) if journal_busy(&error) => Ok(Err(busy_detail(&error))),
        Err(error) => Err(error),
    }
}

/// Opens the store and its journal, runs recovery and reports what it did on stderr; with
/// [`Archiving::On`], opens the archive beside the database too (recovering it as well). The
/// store's soundness is checked first ([`OpenCodeStore::check_sound`]), before anything is
/// journaled, and a file that is not sound is refused or reported as `soundness` says.
///
/// Closing the store leaves the WAL as it is: every commit is already durable in it, and the
/// checkpoint a last connection runs on close would cost two more syncs (the WAL's and the
/// database file's) and, by resetting the WAL, two in the next process (the WAL's header and
/// its folder). SQLite's own checkpoints during a long run (every 1,000 pages) and OpenCode's
/// still move the WAL into the database file.
pub fn open_engine(
    config: &Config,
    archiving: Archiving,
    soundness: Soundness,
) -> anyhow::Result<Engine<OpenCodeStore>> {
    open_engine_with(config, archiving, &|store| {
        // Before anything is journaled: a file that is not sound is refused whole.
        if let Err(unsound) = store.check_sound() {
            match soundness {
                Soundness::Required => return Err(unsound.into()),
                Soundness::Reported => eprintln!("warning: {unsound}; every write is refused"),
            }
        }
        Ok(())
    })
}

/// [`open_engine`] over `store`, a store of the caller's over the database (a clean's, which
/// planned with it while its integrity check ran beside: [`OpenCodeStore::check_sound_beside`]).
/// The check's answer is waited for first ([`OpenCodeStore::await_sound`]): a file that is not
/// sound is refused before anything is journaled.
pub fn open_engine_over<'s>(
    config: &Config,
    archiving: Archiving,
    store: &'s OpenCodeStore,
) -> anyhow::Result<Engine<&'s OpenCodeStore>> {
    store.await_sound()?;
    bind_engine(config, archiving, store)
}

/// The engine opened as [`open_engine`] says, `sound` deciding what a store that is not sound
/// does (before anything is journaled).
fn open_engine_with(
    config: &Config,
    archiving: Archiving,
    sound: &dyn Fn(&OpenCodeStore) -> anyhow::Result<()>,
) -> anyhow::Result<Engine<OpenCodeStore>> {
    let options = StoreOptions {
        quiet_period: config.quiet_period,
        abandoned_after: config.abandoned_after,
    };
    let store = open_writable(config, options)?;
    store.leave_wal_on_close()?;
    sound(&store)?;
    bind_engine(config, archiving, store)
}

/// The journal checked and opened beside `store` (sound already), the engine over both with
/// its recovery reported on stderr, and the archive opened with [`Archiving::On`].
fn bind_engine<S>(config: &Config, archiving: Archiving, store: S) -> anyhow::Result<Engine<S>>
where
    S: pruning_engine::SessionStore + std::borrow::Borrow<OpenCodeStore>,
{
    let opencode: &OpenCodeStore = store.borrow();
    refuse_lost_journal(opencode, &config.journal)?;
    refuse_foreign_journal(opencode, &config.journal)?;
    let journal = match Journal::open(&config.journal) {
        Ok(journal) => journal,
        // Held by another process: the journal is fine where it is (see `busy_detail`).
        Err(error @ pruning_journal::OpenError::Locked { .. }) => return Err(error.into()),
        Err(error) if unreadable(&error) => return Err(with_advice(error)),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "opening journal {} for writing (every prune is journaled first; a journal \
                 on read-only storage can be moved to writable storage and named with \
                 --journal PATH)",
                config.journal.display()
            )))
        }
    };
    let engine = Engine::open(store, journal)?;
    let recovery = engine.recovery();
    if !recovery.completed.is_empty() || !recovery.abandoned.is_empty() {
        eprintln!(
            "journal recovery: {} committed prune(s) or restore(s) completed, {} unapplied intent(s) abandoned",
            recovery.completed.len(),
            recovery.abandoned.len()
        );
    }
    if archiving == Archiving::On {
        engine.store().borrow().archive_prunes()?;
    }
    Ok(engine)
}

/// Opens the database read-only for browsing session `session_id` (`window`, `outline`): one
/// lease of a [`pruning_opencode::Browser`] over it.
///
/// Errors: the database cannot be opened or is not OpenCode's; [`super::UnknownSession`] (exit
/// 2) when it has no such session.
pub fn open_reader(config: &Config, session_id: &str) -> anyhow::Result<pruning_opencode::Lease> {
    let store = open_store(config)?;
    require_opencode(&store, &config.db)?;
    if !store.session_exists(session_id)? {
        return Err(super::UnknownSession(session_id.to_string()).into());
    }
    let browser = pruning_opencode::Browser::over(store, StoreOptions::default())?;
    Ok(browser.lease()?)
}
