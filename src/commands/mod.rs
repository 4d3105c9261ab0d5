//! The commands. Each command module owns one command whole: its flags (`Args`, parsed by
//! clap), their validation into what it runs (errors are [`ConfigError`]s: exit code 2, before
//! anything is opened) and its run, which returns the process [`Outcome`]. Adding a command
//! takes its module and three lines here: the `mod`, the [`Command`] variant (its doc comment is
//! the command's help) and its arm in [`Command::run`]. Two modules are not commands: `open`
//! (opening the store, the journal and the engine) and `diagnose` (a failure's cause in words).

mod archive;
mod audit;
mod clean;
mod completions;
mod demo;
pub mod diagnose;
mod events;
mod history;
pub(crate) mod journal;
mod man;
mod messages;
mod open;
mod outline;
mod preview;
mod prune;
mod prune_batch;
mod receipts;
mod restore;
mod serve;
mod sessions;
mod stats;
mod vacuum;
mod window;

use clap::Subcommand;

pub(crate) use open::{
    busy_detail, check_binding, check_binding_unless_busy, journal_busy, journal_held, open_engine,
    open_engine_over, open_engine_unless_busy, open_journal_for_reading, open_reader, open_store,
    open_store_for_writing, open_store_to_plan_writes, refuse_lost_journal, refuse_rowless,
    require_opencode, Archiving, Soundness,
};

use crate::cli::config::Config;
#[cfg(doc)]
use crate::cli::error::ConfigError;

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List sessions with message count, total bytes and prunable bytes (all their tool and
    /// reasoning content and its snapshot copies, also in messages a clean skips), largest
    /// first.
    Sessions(sessions::Args),
    /// Where the bytes are: per table, per event type, technical content, snapshot copies,
    /// spill files, file and free-page sizes, and the largest sessions (read-only).
    Stats(stats::Args),
    /// Rebuild the database file to give freed space back to the disk (SQLite VACUUM). Run it
    /// with OpenCode stopped; it checks free disk space first and never runs on its own.
    Vacuum(vacuum::Args),
    /// List the messages of a session with their tool and reasoning parts (read-only).
    Messages(messages::Args),
    /// At most 200 messages of a session, oldest first: the newest, the oldest, or around,
    /// before or after a message (read-only; --json as `POST .../session-history/window`).
    Window(window::Args),
    /// One line per message of a session: sequence number, type, tool and reasoning parts,
    /// first tool; 16,384 a page (read-only; --json as `POST .../session-history/outline`).
    Outline(outline::Args),
    /// Show the revision and the technical parts of a message (read-only).
    Preview(preview::Args),
    /// Remove technical parts of a completed assistant message. Exit 0 pruned, 3 blocked, 2 bad input.
    Prune(prune::Args),
    /// Page through history (read-only): find text, count tool and reasoning parts, or list the
    /// messages of a session a batch prune could take (--purpose prune).
    History(history::Args),
    /// Prune every tool and reasoning part of several messages of one session, each message
    /// with its own receipt, whole or not at all. Exit 0 all pruned, 3 any blocked.
    PruneBatch(prune_batch::Args),
    /// Prune the technical parts of every completed message of some sessions, or all: a dry
    /// run unless --apply. Each message gets its own receipt, whole or not at all; transactions
    /// of several messages hold SQLite's write lock at most 50 ms, and batches share their
    /// fsyncs. Exit 0 when it ran (skipped messages are reported), 130 when stopped
    /// by Ctrl-C (what committed stays committed).
    Clean(clean::Args),
    /// List the receipts of committed prunes (the audit trail).
    Receipts(receipts::Args),
    /// Undo an archived prune: put back exactly the rows it removed, when the message is
    /// unchanged since (journaled and announced like a prune). Exit 0 restored, 3 blocked, 2
    /// bad input.
    Restore(restore::Args),
    /// The prune archive beside the database: `stats` (entries, bytes, compression, oldest),
    /// `purge --older-than DURATION` (its retention).
    Archive(archive::Args),
    /// The journal: `new-epoch` starts a new one from the receipts of a database whose journal
    /// was lost (deleted or emptied), which every command that writes refuses until then.
    Journal(journal::Args),
    /// Check every receipt against the database and the journal: the receipt chain, each
    /// receipt's journaled event, no removed part back, each pruned message's revision
    /// (read-only). Exit 0 when everything holds, 1 with every discrepancy.
    Audit(audit::Args),
    /// Print journaled prune events after a cursor, then (with --follow) new ones as they commit;
    /// or (with --follow --url) follow a running server's event stream across reconnects.
    Events(events::Args),
    /// Serve the engine over HTTP: the CodeNomad-compatible routes, receipts, and a resumable
    /// Server-Sent Events stream of prunes (GET /openapi.json describes them). Holds the journal
    /// until stopped with Ctrl-C or SIGTERM, so other `session-prune` processes report it busy.
    Serve(serve::Args),
    /// Run the whole flow on a copy of a small database made by real OpenCode (ignores --db and
    /// --journal: it makes its own in a temporary folder).
    Demo(demo::Args),
    /// Print a shell's completion script for every command and flag (bash, elvish, fish,
    /// powershell, zsh).
    ///
    /// E.g. `session-prune completions bash > ~/.local/share/bash-completion/completions/session-prune`.
    Completions(completions::Args),
    /// Print the manual page (roff), or with --dir write it and a page per command into a folder.
    ///
    /// E.g. `session-prune man | man -l -`, or `session-prune man --dir ~/.local/share/man/man1`.
    Man(man::Args),
}

impl Command {
    /// Whether the command works on the database `--db` names (or OpenCode's, found): every
    /// command but `demo`, which makes its own, `events --url`, which follows a server, and
    /// `completions` and `man`, which print what the command line is.
    pub fn uses_database(&self) -> bool {
        match self {
            Command::Demo(_) | Command::Completions(_) | Command::Man(_) => false,
            Command::Events(args) => args.uses_database(),
            _ => true,
        }
    }

    /// Whether the command writes the database, or predicts a write (`prune`, `prune-batch`,
    /// `clean`, `restore`, `vacuum`, `serve`): these are refused before anything is opened
    /// while a process holds a deleted or replaced file of the database (docs/ARCHITECTURE.md,
    /// "Sound files").
    fn writes(&self) -> bool {
        matches!(
            self,
            Command::Prune(_)
                | Command::PruneBatch(_)
                | Command::Clean(_)
                | Command::Restore(_)
                | Command::Vacuum(_)
                | Command::Serve(_)
                | Command::Journal(_)
        )
    }

    /// Validates the command's flags, then runs it on `config`'s files.
    ///
    /// Errors: a [`ConfigError`] for flags that cannot be run (nothing opened); otherwise what
    /// the command met, for `main` to report.
    pub fn run(self, config: &Config) -> anyhow::Result<Outcome> {
        if self.writes() {
            // Before SQLite opens the file: an open would create a new -wal and -shm beside
            // the deleted ones another process still uses.
            pruning_opencode::refuse_detached(&config.db)?;
        }
        match self {
            Command::Sessions(args) => sessions::run(args, config),
            Command::Stats(args) => stats::run(args, config),
            Command::Vacuum(args) => vacuum::run(args, config),
            Command::Messages(args) => messages::run(args, config),
            Command::Window(args) => window::run(args, config),
            Command::Outline(args) => outline::run(args, config),
            Command::Preview(args) => preview::run(args, config),
            Command::Prune(args) => prune::run(args, config),
            Command::History(args) => history::run(args, config),
            Command::PruneBatch(args) => prune_batch::run(args, config),
            Command::Clean(args) => clean::run(args, config),
            Command::Receipts(args) => receipts::run(args, config),
            Command::Restore(args) => restore::run(args, config),
            Command::Archive(args) => archive::run(args, config),
            Command::Journal(args) => journal::run(args, config),
            Command::Audit(args) => audit::run(args, config),
            Command::Events(args) => events::run(args, config),
            Command::Serve(args) => serve::run(args, config),
            Command::Demo(args) => demo::run(args, config),
            Command::Completions(args) => completions::run(args, config),
            Command::Man(args) => man::run(args, config),
        }
    }
}

/// How a command ended, as an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done (exit 0).
    Done,
    /// Refused by the engine: nothing changed (exit 3).
    Blocked,
    /// Stopped by Ctrl-C; what committed stays committed (exit 130).
    Interrupted,
    /// Ran, but some of its work failed; the report says what (exit 1).
    Failed,
}

/// A session id the database does not hold, given to a listing (exit 2: bad input).
#[derive(Debug, thiserror::Error)]
#[error("there is no session {0} in this database (`sessions` lists them)")]
pub struct UnknownSession(pub String);

/// A receipt id the database does not hold, given to `restore` (exit 2: bad input; over HTTP
/// the same request is `blocked`/`not_deletable`, as the contract answers it).
#[derive(Debug, thiserror::Error)]
#[error("there is no receipt {0} in this database: nothing was changed (`receipts` lists them)")]
pub struct UnknownReceipt(pub uuid::Uuid);
