//! Why a command line cannot be run: one error per flag that can be wrong, each saying what to
//! give instead (exit code 2, before anything is opened).

use pruning_engine::ContractError;
use thiserror::Error;

/// A command line that cannot be run. Exit code 2.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The request breaks the contract.
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// No database could be located.
    #[error(transparent)]
    Path(#[from] pruning_opencode::PathError),
    /// The database path names no file.
    #[error("cannot open database {0}: no such file; nothing was changed (is OpenCode's data elsewhere? pass --db PATH or --channel NAME)")]
    NoDatabase(String),
    /// The database path names a folder, a device or another thing that is not a file.
    #[error("--db {path} is {what}: nothing was read or written; pass OpenCode's opencode.db (in its data folder; OPENCODE_DB or --channel find it)")]
    NotAFile {
        /// The path.
        path: String,
        /// What it is instead.
        what: &'static str,
    },
    /// The database path names a file that does not begin with SQLite's header.
    #[error("{0} is not an SQLite database (it does not begin with SQLite's header), or that header is damaged: nothing was read or written. Check that --db names OpenCode's opencode.db; if it does, restore it from a backup, or stop OpenCode and try to recover a copy (sqlite3 {0} .recover | sqlite3 recovered.db)")]
    NotSqlite(String),
    /// The database path names an empty file (the words of
    /// [`pruning_opencode::empty_database`]).
    #[error("{0}")]
    EmptyDatabase(String),
    /// A journal lies beside a symlink to the database, where none is beside the file itself.
    #[error("{found} lies beside a link to the database; its journal belongs beside the file the link leads to, {expected}, so that every path to the database finds it: move it there (mv {found} {expected}), or name it with --journal")]
    JournalBesideLink {
        /// The journal found beside the link.
        found: String,
        /// Where it belongs.
        expected: String,
    },
    /// The journal path names the database or one of SQLite's files beside it.
    #[error("--journal {0} is the database or one of its SQLite files (-wal, -shm, -journal); the journal needs a file of its own")]
    JournalIsDatabase(String),
    /// `vacuum --into` names a file that exists, or a folder that does not.
    #[error("--into {path}: {why}; nothing was written (name a new file in an existing folder, on a disk with room for the vacuumed database)")]
    VacuumInto {
        /// The path given.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The journal's folder does not exist.
    #[error(
        "the folder of the journal, {0}, does not exist (create it, or pass another --journal)"
    )]
    JournalFolder(String),
    /// The journal path names a folder.
    #[error("--journal {0} is a folder; the journal is a file (name one inside it, e.g. {0}/opencode.db.prune-journal)")]
    JournalIsFolder(String),
    /// A receipt id is not a UUID.
    #[error("`{0}` is not a receipt id (a UUID such as 0190f5c2-...; `receipts` lists them)")]
    ReceiptId(String),
    /// An index is not an integer.
    #[error("--indexes: `{0}` is not an integer (expected e.g. --indexes 0,2)")]
    Index(String),
    /// A duration flag (`--quiet-period`, `--older-than`, `--heartbeat`) is unreadable or
    /// outside the flag's bounds.
    #[error("{flag} {value}: {problem} (accepted forms: {DURATION_FORMS})")]
    Duration {
        /// The flag, `--quiet-period`.
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: DurationProblem,
    },
    /// `--abandoned-after` is neither `never` nor a readable duration.
    #[error("--abandoned-after {value}: {problem} (accepted: never, or {DURATION_FORMS})")]
    AbandonedAfter {
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: DurationProblem,
    },
    /// A size flag (`clean --until-live-size`) is unreadable.
    #[error("{flag} {value}: {problem} (a size such as 2GB, 500MiB or 1000000 bytes)")]
    Size {
        /// The flag.
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `clean --until-file-size` on a file that keeps its freed pages until `vacuum`.
    #[error("--until-file-size needs a file that gives freed pages back by itself, and {0} keeps them until `vacuum`: run `session-prune vacuum --online-shrink` once (with OpenCode stopped), or use --until-live-size and `vacuum` afterwards")]
    NotShrinking(String),
    /// `clean --quiet --json`.
    #[error("--quiet with --json: --json prints one document for a script to read, --quiet prints nothing but a failure; choose one")]
    QuietJson,
    /// `--batch-size 0`.
    #[error("--batch-size must be at least 1")]
    BatchSize,
    /// `--directory` is not an absolute path.
    #[error("--directory {0}: give an absolute directory (OpenCode stores each session's directory as an absolute path; `sessions` lists them)")]
    ScopeDirectory(String),
    /// An id flag (a scope id, `receipts --session`) is empty.
    #[error("{0} needs an id (it may not be empty)")]
    EmptyScope(&'static str),
    /// `serve --listen` is not an address.
    #[error("--listen {0}: give an IP address and port such as 127.0.0.1:7281 (port 0 picks a free one)")]
    Listen(String),
    /// `serve` beyond loopback with no password.
    #[error("--listen {0} is reachable from other machines: set a password (SESSION_PRUNE_PASSWORD or --password) or listen on 127.0.0.1")]
    OpenWithoutPassword(std::net::SocketAddr),
    /// A password no `Authorization` header can carry.
    #[error("the password is empty, not UTF-8, starts or ends with a space, or holds a control character, so no Authorization header can carry it: set another SESSION_PRUNE_PASSWORD or --password, or neither")]
    EmptyPassword,
    /// `serve --allow-origin` is not an origin.
    #[error("--allow-origin {0}: give an origin as a browser sends it, scheme://host[:port] with no path (e.g. --allow-origin http://localhost:5173)")]
    Origin(String),
    /// `serve --workspace` is not `ID=DIR` with an absolute directory.
    #[error("--workspace {0}: give ID=DIR with an absolute directory, each ID once (e.g. --workspace app=/home/me/app)")]
    Workspace(String),
    /// `outline --cursor` is not `AFTER:THROUGH`.
    #[error("--cursor {0}: give AFTER:THROUGH, the two sequence numbers of a page's cursor (e.g. --cursor 16383:20000)")]
    OutlineCursor(String),
    /// `events --url` is not an http URL.
    #[error("--url {url}: {detail} (e.g. --url http://127.0.0.1:7281/api/workspaces/ID/session-pruning/events)")]
    EventsUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// `events --cursor-file` cannot be read or does not hold an event id.
    #[error("--cursor-file {path}: {detail}")]
    CursorFile {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// The server `events --url` follows refused the request itself (a password, a workspace,
    /// a URL that is no event stream): trying again would not help.
    #[error("{url} answered {status}: {detail}")]
    Remote {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// What it said, and what to do.
        detail: String,
    },
    /// `--json` given to a command whose output is not JSON (`completions`, `man` without
    /// `--dir`): what it prints instead.
    #[error("--json does not apply here: {0}. Run it without --json")]
    NotJson(&'static str),
    /// `man --dir` names no existing folder, or one holding a folder where a page goes: the path
    /// and what is wrong (`does not exist`, `is not a folder`, `holds a folder named ...`).
    #[error("--dir {0}: give an existing folder (e.g. mkdir -p ~/.local/share/man/man1 first)")]
    ManFolder(String),
    /// The candidates file cannot be read or holds no candidates.
    #[error("--candidates {path}: {detail}")]
    Candidates {
        /// The file (`-` for stdin).
        path: String,
        /// What is wrong.
        detail: String,
    },
}

/// The forms a duration flag takes, as its error message lists them.
pub const DURATION_FORMS: &str =
    "a whole number of seconds such as 30, or a duration such as 30s, 500ms, 5m, 7d, 1h30m";

/// Why a duration flag's value was refused (the caller names the flag and the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationProblem {
    /// The text is neither a number of seconds nor a humantime duration (humantime's words).
    Unreadable(String),
    /// The duration lies outside the flag's bounds (in words: `from 10ms to 1h`, `at least 1s`).
    OutOfBounds(String),
}

impl std::fmt::Display for DurationProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreadable(detail) => write!(f, "not a duration: {detail}"),
            Self::OutOfBounds(bounds) => write!(f, "must be {bounds}"),
        }
    }
}
