//! `serve`'s flags and their validation: the listen address (loopback unless a password is set), the
//! password (`--password` or `SESSION_PRUNE_PASSWORD`), the workspaces and the heartbeat.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use pruning_server::{Origin, Password, Workspace, Workspaces};

use crate::cli::duration::{duration_flag, ANY_DURATION};
use crate::cli::error::ConfigError;
use crate::commands::clean::size_flag;

/// The environment variable that holds the server's password.
pub const PASSWORD_VARIABLE: &str = "SESSION_PRUNE_PASSWORD";

/// The heartbeat intervals `--heartbeat` accepts: from 10 ms to 1 hour, both included.
pub const HEARTBEAT_BOUNDS: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(10)..=Duration::from_secs(3600);

/// `serve` flags, as given.
#[derive(Debug, clap::Args)]
pub struct Args {
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
    /// Keep the rows each prune the server makes removes in the archive beside the database
    /// (`<database>.prune-archive`), durable before the prune commits. The default once that
    /// archive exists.
    #[arg(long)]
    pub archive: bool,
    /// Do not archive, even where the database has an archive (then every prune is archived
    /// unless this is given: a prune that is not archived cannot be undone, nor can the
    /// earlier prunes of its message).
    #[arg(long, conflicts_with = "archive")]
    pub no_archive: bool,
    /// Let pages of this origin (scheme://host or scheme://host:port, e.g.
    /// http://localhost:5173) call the API from a browser (CORS). Repeatable. Default: none,
    /// the same origin only. The password is still required.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// How the log lines on stderr are written (one per request refused or failed, and the
    /// server's own warnings and errors): `text` for people, `json` for one JSON object a line
    /// (`timestamp`, `level`, `message` and the line's fields: `route`, `reason`, `status`, ...).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,
    /// Clean every session on this interval while serving, as `clean --all --apply` with the
    /// policy flags below would (with `--archive` when it is given): only what the fence admits, in batches that
    /// let requests' prunes go between them, each prune receipted and announced, each run
    /// announced (`rpc.codenomad.session-pruning.upkeep`) and logged. The first run starts one
    /// interval after the server; a pause (from the page) lasts until resumed or the server
    /// stops. From 1s to 365d: seconds (3600) or a duration (1h, 5m).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub auto_clean: Option<String>,
    /// With --auto-clean: as `clean --keep-last-turns` (default 2).
    #[arg(long, value_name = "N", requires = "auto_clean")]
    pub keep_last_turns: Option<u32>,
    /// With --auto-clean: as `clean --older-than`.
    #[arg(
        long,
        value_name = "DURATION",
        requires = "auto_clean",
        allow_hyphen_values = true
    )]
    pub older_than: Option<String>,
    /// With --auto-clean: as `clean --before-compaction`.
    #[arg(long, requires = "auto_clean")]
    pub before_compaction: bool,
    /// With --auto-clean: as `clean --until-live-size`.
    #[arg(
        long,
        value_name = "SIZE",
        requires = "auto_clean",
        allow_hyphen_values = true
    )]
    pub until_live_size: Option<String>,
    /// With --auto-clean: as `clean --diffs`.
    #[arg(long, requires = "auto_clean")]
    pub diffs: bool,
    /// With --auto-clean: as `clean --migrated-v1` (the OpenCode 1.x history OpenCode 2 copied).
    #[arg(long, requires = "auto_clean")]
    pub migrated_v1: bool,
    /// With --auto-clean and --archive: after each run, purge the archive entries older than
    /// this (as `archive purge --older-than`), so that the archive does not grow without end.
    #[arg(
        long,
        value_name = "DURATION",
        requires_all = ["auto_clean", "archive"],
        allow_hyphen_values = true
    )]
    pub archive_keep: Option<String>,
    /// With --auto-clean: messages per batch (as `clean --batch-size`; default 16; for testing
    /// the turns).
    #[arg(long, hide = true, value_name = "N", requires = "auto_clean")]
    pub auto_clean_batch_size: Option<usize>,
    /// With --auto-clean: wait this long after each batch, outside the write turn (for
    /// testing the turns).
    #[arg(long, hide = true, value_name = "MS", requires = "auto_clean")]
    pub auto_clean_pause_ms: Option<u64>,
    /// Stop, as on SIGTERM, when standard input reaches its end: for a program that starts the
    /// server with a pipe as its input (the OpenCode plugin), so that the server stops with that
    /// program however it ends, killed included.
    #[arg(long)]
    pub stop_with_stdin: bool,
}

/// The intervals `--auto-clean` accepts: from 1 second to 365 days, both included.
pub const AUTO_CLEAN_BOUNDS: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(365 * 24 * 3600);

/// Messages per batch of an `--auto-clean` run: a request's prune waits for at most one batch
/// (with 256, `clean`'s own, up to 3.5 s on a database of coding work).
pub const AUTO_CLEAN_BATCH: usize = 16;

/// A validated `--auto-clean` and its policy.
#[derive(Debug)]
pub struct AutoClean {
    /// Time between runs.
    pub every: Duration,
    /// The clean each run makes: `clean --all --apply` with the policy flags.
    pub clean: pruning_clean::Clean,
    /// `--archive-keep`: the age past which archive entries are purged after each run.
    pub archive_keep: Option<Duration>,
}

/// `serve --log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `TIMESTAMP LEVEL message field=value ...`.
    Text,
    /// One JSON object a line.
    Json,
}

/// A validated `serve` command line.
#[derive(Debug)]
pub struct ServeConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The password every request must carry, if any.
    pub password: Option<Password>,
    /// Where workspace ids come from.
    pub workspaces: Workspaces,
    /// Heartbeat interval of idle event streams.
    pub heartbeat: Duration,
    /// Archive what each prune removes (`--archive`).
    pub archive: bool,
    /// Never archive (`--no-archive`), even where the database has an archive.
    pub no_archive: bool,
    /// Origins allowed to call the API from a browser (`--allow-origin`).
    pub allowed_origins: Vec<Origin>,
    /// How log lines are written (`--log-format`).
    pub log_format: LogFormat,
    /// The clean on a schedule (`--auto-clean`), if any.
    pub auto_clean: Option<AutoClean>,
    /// `--stop-with-stdin`: stop when standard input reaches its end.
    pub stop_with_stdin: bool,
}

/// Validates `serve`'s flags, reading the password from `SESSION_PRUNE_PASSWORD` when
/// `--password` is not given.
///
/// Errors: [`ConfigError::Listen`], [`ConfigError::EmptyPassword`],
/// [`ConfigError::OpenWithoutPassword`] (an address beyond loopback with no password),
/// [`ConfigError::Workspace`], [`ConfigError::Duration`] (a `--heartbeat` that is not a
/// duration within [`HEARTBEAT_BOUNDS`], an `--auto-clean` outside [`AUTO_CLEAN_BOUNDS`]), and
/// the clean's own errors for its policy flags.
pub fn validate(args: Args) -> Result<ServeConfig, ConfigError> {
    let auto_clean = auto_clean(&args)?;
    let listen = listen_address(&args.listen)?;
    let given = match args.password {
        Some(text) => Some(text),
        // Set but not UTF-8 is not "unset": it must not leave the server open.
        None => match std::env::var_os(PASSWORD_VARIABLE) {
            None => None,
            Some(raw) => Some(raw.into_string().map_err(|_| ConfigError::EmptyPassword)?),
        },
    };
    let password = match given {
        None => None,
        Some(text) => Some(Password::new(text).ok_or(ConfigError::EmptyPassword)?),
    };
    if password.is_none() && !listen.ip().is_loopback() {
        return Err(ConfigError::OpenWithoutPassword(listen));
    }
    let workspaces = if args.workspaces.is_empty() {
        Workspaces::Discovered
    } else {
        let mut given: Vec<Workspace> = Vec::new();
        for text in &args.workspaces {
            let workspace = workspace(text).ok_or_else(|| ConfigError::Workspace(text.clone()))?;
            if given.iter().any(|w| w.id == workspace.id) {
                return Err(ConfigError::Workspace(text.clone()));
            }
            given.push(workspace);
        }
        Workspaces::Given(given)
    };
    let heartbeat = duration_flag("--heartbeat", &args.heartbeat, HEARTBEAT_BOUNDS)?;
    Ok(ServeConfig {
        auto_clean,
        listen,
        password,
        workspaces,
        heartbeat,
        archive: args.archive,
        no_archive: args.no_archive,
        allowed_origins: args
            .allow_origins
            .iter()
            .map(|text| Origin::parse(text).ok_or_else(|| ConfigError::Origin(text.clone())))
            .collect::<Result<_, _>>()?,
        log_format: args.log_format,
        stop_with_stdin: args.stop_with_stdin,
    })
}

/// `--auto-clean` and its policy flags, each read as `clean` reads its flag of the same name
/// (the same parsers, the same defaults: `pruning_clean::Clean::default`).
fn auto_clean(args: &Args) -> Result<Option<AutoClean>, ConfigError> {
    let Some(every) = &args.auto_clean else {
        return Ok(None);
    };
    let every = duration_flag("--auto-clean", every, AUTO_CLEAN_BOUNDS)?;
    let archive_keep = match &args.archive_keep {
        None => None,
        Some(age) => Some(duration_flag("--archive-keep", age, ANY_DURATION)?),
    };
    let mut clean = pruning_clean::Clean {
        // Small batches: a prune a page asks for waits for the batch in the write turn.
        batch_size: args.auto_clean_batch_size.unwrap_or(AUTO_CLEAN_BATCH),
        pause: Duration::from_millis(args.auto_clean_pause_ms.unwrap_or(0)),
        before_compaction: args.before_compaction,
        diffs: args.diffs,
        migrated_v1: args.migrated_v1,
        ..pruning_clean::Clean::default()
    };
    if let Some(turns) = args.keep_last_turns {
        clean.policy.keep_last_turns = turns;
    }
    if let Some(age) = &args.older_than {
        clean.policy.older_than = Some(duration_flag("--older-than", age, ANY_DURATION)?);
    }
    if clean.batch_size == 0 {
        return Err(ConfigError::BatchSize);
    }
    if let Some(size) = &args.until_live_size {
        clean.until_live_size = Some(size_flag("--until-live-size", size)?);
    }
    Ok(Some(AutoClean {
        every,
        clean,
        archive_keep,
    }))
}

/// `127.0.0.1:7281`, `[::1]:7281`, or a name such as `localhost:7281` (its first address).
fn listen_address(text: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut found| found.next())
        .ok_or_else(|| ConfigError::Listen(text.to_string()))
}

/// `ID=DIR` with a non-empty id and an absolute directory (normalized as the scope flags are).
fn workspace(text: &str) -> Option<Workspace> {
    let (id, directory) = text.split_once('=')?;
    let id = id.trim();
    if id.is_empty() || id.contains('/') {
        return None;
    }
    Some(Workspace {
        id: id.to_string(),
        directory: pruning_engine::scope::normalize(directory)?,
    })
}
