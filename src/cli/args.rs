//! The command line as clap parses it ([`Cli`]): the raw flags every command takes (global) and those the contract commands share (scope), as
//! clap parses them. Validation into a [`super::config::Config`] is a separate step, so that
//! every bad input gets one clear error before anything is opened.

use std::path::PathBuf;

use clap::{Args, Parser};

use crate::commands::Command;

// The whole command line: `main` parses it, `completions` and `man` generate from it. Its doc
// comment is the `about` of `--help`.
/// Prune tool output and reasoning from OpenCode session databases, safely and with receipts.
#[derive(Debug, Parser)]
#[command(name = "session-prune", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// OpenCode database file (default: found as OpenCode finds it: OPENCODE_DB, XDG_DATA_HOME,
    /// ~/.local/share/opencode/opencode.db).
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Journal file (default: beside the database, `<database>.prune-journal`).
    #[arg(long, global = true, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// OpenCode channel whose database to find when --db is not given: latest, beta and prod use
    /// opencode.db, any other NAME opencode-NAME.db (dev builds: local).
    #[arg(long, global = true, default_value = "latest", value_name = "NAME")]
    pub channel: String,
    /// Print one JSON document (or JSON lines for streams) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Refuse sessions updated within this long (OpenCode may still be writing them): seconds
    /// (30, 0) or a duration (30s, 5m, 1h30m).
    #[arg(
        long,
        global = true,
        default_value = "30",
        value_name = "DURATION",
        allow_hyphen_values = true
    )]
    pub quiet_period: String,
    /// A session where OpenCode left a run incomplete (killed mid-turn) is refused until nothing
    /// of it was written for this long; then its completed messages can be pruned, and the run's
    /// own message never is. A duration (24h, 90m, 3600) or `never` (always refused).
    #[arg(
        long,
        global = true,
        default_value = "24h",
        value_name = "DURATION|never",
        allow_hyphen_values = true
    )]
    pub abandoned_after: String,
}

/// The sessions `preview`, `prune`, `history` and `prune-batch` may touch; a session outside is
/// refused (not_deletable). By default every session of the database.
#[derive(Debug, Args)]
#[command(next_help_heading = "Scope")]
pub struct ScopeArgs {
    /// Only sessions in this absolute directory or below it (the session's `directory`, shown by
    /// `sessions`).
    #[arg(long, value_name = "DIR")]
    pub directory: Option<String>,
    /// Only sessions of this project (`sessions --json` shows each session's `projectID`;
    /// OpenCode's `global` project is always admitted).
    #[arg(long, value_name = "ID")]
    pub project: Option<String>,
    /// Only sessions of this workspace.
    #[arg(long, value_name = "ID")]
    pub workspace: Option<String>,
}
