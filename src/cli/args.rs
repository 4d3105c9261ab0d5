//! The raw command line, as clap parses it. Validation into a [`super::config::Config`] is a
//! separate step, so that every bad input gets one clear error before anything is opened.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand};

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

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List sessions with message count, total bytes and prunable bytes (all their tool and
    /// reasoning content and its snapshot copies, also in messages a clean skips), largest
    /// first.
    Sessions,
    /// Where the bytes are: per table, per event type, technical content, snapshot copies,
    /// spill files, file and free-page sizes, and the largest sessions (read-only).
    Stats {
        /// How many of the largest sessions to list.
        #[arg(long, default_value_t = 10, value_name = "N")]
        top: usize,
    },
    /// Rebuild the database file to give freed space back to the disk (SQLite VACUUM). Run it
    /// with OpenCode stopped; it checks free disk space first and never runs on its own.
    Vacuum {
        /// Run even while other processes have the database open.
        #[arg(long)]
        force: bool,
        /// Free bytes to assume instead of asking the file system (for testing the check).
        #[arg(long, hide = true, value_name = "BYTES")]
        assume_free_bytes: Option<u64>,
    },
    /// List the messages of a session with their tool and reasoning parts (read-only).
    Messages {
        /// Session id (ses_...).
        session: String,
    },
    /// Show the revision and the technical parts of a message (read-only).
    Preview {
        /// Session id (ses_...).
        session: String,
        /// Message id (msg_...).
        message: String,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Remove technical parts of a completed assistant message. Exit 0 pruned, 3 blocked, 2 bad input.
    Prune(PruneArgs),
    /// Page through history (read-only): find text, count tool and reasoning parts, or list the
    /// messages of a session a batch prune could take (--purpose prune).
    History(HistoryArgs),
    /// Prune every tool and reasoning part of several messages of one session, each message in
    /// its own transaction with its own receipt. Exit 0 all pruned, 3 any blocked.
    PruneBatch(PruneBatchArgs),
    /// Prune the technical parts of every completed message of some sessions, or all: a dry
    /// run unless --apply. Each message is its own transaction with its own receipt; batches
    /// share their fsyncs. Exit 0 when it ran (skipped messages are reported), 130 when stopped
    /// by Ctrl-C (what committed stays committed).
    Clean(CleanArgs),
    /// List the receipts of committed prunes (the audit trail).
    Receipts {
        /// Only receipts of this session.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// Print journaled prune events after a cursor, then (with --follow) new ones as they commit.
    Events {
        /// Print events with a sequence number greater than this.
        #[arg(long, default_value_t = 0, value_name = "SEQ")]
        since: u64,
        /// Keep running and print events as they are journaled.
        #[arg(long)]
        follow: bool,
        /// With --follow: how often to look for new events, in milliseconds.
        #[arg(long, default_value_t = 500, value_name = "MS", requires = "follow")]
        poll_ms: u64,
    },
    /// Serve the engine over HTTP: the CodeNomad-compatible routes, receipts, and a resumable
    /// Server-Sent Events stream of prunes (GET /openapi.json describes them). Holds the journal
    /// until stopped with Ctrl-C or SIGTERM, so other `session-prune` processes report it busy.
    Serve(ServeArgs),
    /// Run the whole flow on a copy of a small database made by real OpenCode (ignores --db and
    /// --journal: it makes its own in a temporary folder).
    Demo {
        /// Keep the demo's temporary folder and print its path.
        #[arg(long)]
        keep: bool,
    },
}

/// `serve` arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on, IP:PORT (port 0 picks a free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:7281", value_name = "ADDR")]
    pub listen: String,
    /// Require this password on every request (bearer token, or HTTP basic auth with any user
    /// name). Prefer the SESSION_PRUNE_PASSWORD environment variable: other users can read a
    /// command line. Required to listen beyond loopback.
    #[arg(long, value_name = "PASSWORD")]
    pub password: Option<String>,
    /// A workspace the API serves, as ID=DIR: sessions in DIR or below belong to it.
    /// Repeatable. Default: OpenCode's projects (their worktree) and workspaces (their
    /// directory), read from the database.
    #[arg(long = "workspace", value_name = "ID=DIR")]
    pub workspaces: Vec<String>,
    /// How often an idle event stream sends a `heartbeat` event, from 10ms to 1h: seconds (15)
    /// or a duration (15s, 500ms).
    #[arg(
        long,
        default_value = "15s",
        value_name = "DURATION",
        allow_hyphen_values = true
    )]
    pub heartbeat: String,
}

/// `prune` arguments.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("selection").required(true).args(["indexes", "all_technical"])))]
pub struct PruneArgs {
    /// Session id (ses_...).
    pub session: String,
    /// Message id (msg_...).
    pub message: String,
    /// The revision printed by `preview` (64 hex characters).
    #[arg(long, value_name = "REV")]
    pub revision: String,
    /// Content indexes of the parts to remove, comma-separated (from `preview`).
    #[arg(long, value_name = "I,J,...", allow_hyphen_values = true)]
    pub indexes: Option<String>,
    /// Remove every tool and reasoning part of the message.
    #[arg(long)]
    pub all_technical: bool,
    /// Check the request against the message now and print what would be removed; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub scope: ScopeArgs,
}

/// What a history page is for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PurposeArg {
    /// Find the query in text (and in tool and reasoning parts unless --no-technical).
    Search,
    /// Count tool and reasoning parts only.
    Stats,
    /// List prunable messages with their revisions (needs SESSION).
    Prune,
}

/// `history` arguments.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Session id (ses_...); all sessions in scope when left out.
    pub session: Option<String>,
    /// Text to find, case-insensitive (at most 200 characters).
    #[arg(long, short, default_value = "", value_name = "TEXT")]
    pub query: String,
    /// Search text parts only, not tool and reasoning parts.
    #[arg(long)]
    pub no_technical: bool,
    /// What the page is for.
    #[arg(long, value_enum, default_value = "search")]
    pub purpose: PurposeArg,
    /// Continue a scan where the page that printed this cursor stopped.
    #[arg(long, value_name = "CURSOR", conflicts_with = "all")]
    pub cursor: Option<String>,
    /// Print every page to the end of the scan (with --json: one page per line).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub scope: ScopeArgs,
}

/// `prune-batch` arguments.
#[derive(Debug, Args)]
pub struct PruneBatchArgs {
    /// Session id (ses_...).
    pub session: String,
    /// JSON file of candidates (`-` for stdin): the output of `history SESSION --purpose prune
    /// --json` (with --all: one page per line), a batch body `{sessionID, candidates}`, or a
    /// bare array of `{messageID, revision, toolCount, reasoningCount}`. Taken 16 at a time.
    #[arg(long, value_name = "FILE")]
    pub candidates: PathBuf,
    /// Check each candidate as a prune would and print what would be removed; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub scope: ScopeArgs,
}

/// `clean` arguments.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["sessions", "all"])))]
pub struct CleanArgs {
    /// Session ids (ses_...).
    pub sessions: Vec<String>,
    /// Every session of the database.
    #[arg(long)]
    pub all: bool,
    /// Do it (without this flag, only report what would be removed).
    #[arg(long)]
    pub apply: bool,
    /// Only messages completed at least this long ago: seconds (604800) or a duration (7d,
    /// 12h, 30m).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub older_than: Option<String>,
    /// Never touch the last N user turns of a session (OpenCode's own prune keeps 2).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub keep_last_turns: u32,
    /// Of tool parts, only those of these tools (comma-separated tool names; reasoning parts
    /// are governed by --no-reasoning).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Never tool parts of these tools (default: skill, as OpenCode keeps it; pass an empty
    /// value to skip none).
    #[arg(
        long,
        value_name = "A,B",
        value_delimiter = ',',
        default_value = "skill"
    )]
    pub skip_tools: Vec<String>,
    /// Only parts of at least this many bytes.
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    pub min_bytes: u64,
    /// Leave reasoning parts alone.
    #[arg(long)]
    pub no_reasoning: bool,
    /// Also remove the spill files (`<data>/tool-output/tool_*`) that no remaining row names: those
    /// of the pruned tool parts, and any an earlier clean or a killed run left.
    #[arg(long)]
    pub include_spill_files: bool,
    /// Messages per batch: their intents share one journal write, their commits one WAL sync.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub batch_size: usize,
    /// Wait this long after each batch (for testing interruption).
    #[arg(long, hide = true, default_value_t = 0, value_name = "MS")]
    pub pause_ms: u64,
}
