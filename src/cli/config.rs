//! The validated configuration: raw flags turned into paths and contract requests, or one clear
//! error (exit code 2) before anything is opened.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pruning_adapters::opencode::{CleanPolicy, Environment};
use pruning_engine::history::HistoryCandidate;
use pruning_engine::{
    HistoryRequest, PreviewRequest, PruneBatchRequest, PruneRequest, Purpose, Scope, MAX_BATCH,
};

use super::args::{
    CleanArgs, Cli, Command, HistoryArgs, PruneArgs, PruneBatchArgs, PurposeArg, ScopeArgs,
};
use super::duration::{duration_flag, ANY_DURATION};
pub use super::error::ConfigError;

/// What to do.
#[derive(Debug)]
pub enum Action {
    /// List sessions.
    Sessions,
    /// Where the bytes are.
    Stats {
        /// Largest sessions to list.
        top: usize,
    },
    /// VACUUM the database.
    Vacuum {
        /// Even while other processes have it open.
        force: bool,
        /// Free bytes to assume (a test seam).
        assume_free_bytes: Option<u64>,
    },
    /// List a session's messages.
    Messages {
        /// The session.
        session: String,
    },
    /// Preview one message.
    Preview(PreviewRequest),
    /// Scan history.
    History {
        /// The validated request.
        request: HistoryRequest,
        /// Follow the cursor to the end.
        all: bool,
    },
    /// Prune every technical part of several messages, in batches of at most 16.
    PruneBatch {
        /// The batches, in order.
        batches: Vec<PruneBatchRequest>,
        /// Plan only.
        dry_run: bool,
    },
    /// Clean many messages.
    Clean(CleanConfig),
    /// Prune (or, dry, plan) one message.
    Prune {
        /// The validated request.
        request: PruneRequest,
        /// Plan only.
        dry_run: bool,
    },
    /// List receipts.
    Receipts {
        /// Of one session only.
        session: Option<String>,
    },
    /// Print events.
    Events {
        /// Cursor.
        since: u64,
        /// Keep printing new ones.
        follow: bool,
        /// Poll interval with `follow`.
        poll: Duration,
    },
    /// Serve the HTTP API.
    Serve(super::serve::ServeConfig),
    /// Run the demo.
    Demo {
        /// Keep the temporary folder.
        keep: bool,
    },
}

/// A validated command line.
#[derive(Debug)]
pub struct Config {
    /// The OpenCode database.
    pub db: PathBuf,
    /// The journal file.
    pub journal: PathBuf,
    /// JSON output.
    pub json: bool,
    /// Quiet period of the fence.
    pub quiet_period: Duration,
    /// The command.
    pub action: Action,
    /// How to run this binary on the same files, for the commands the output suggests:
    /// `session-prune` plus the `--db`, `--journal` and `--channel` flags that were given.
    pub invocation: String,
}

/// A validated `clean`.
#[derive(Debug, Clone)]
pub struct CleanConfig {
    /// The sessions, or `None` for every session.
    pub sessions: Option<Vec<String>>,
    /// Write (else: a dry run).
    pub apply: bool,
    /// What to prune.
    pub policy: CleanPolicy,
    /// Remove unreferenced spill files of pruned parts.
    pub spill_files: bool,
    /// Messages per batch (1 or more).
    pub batch_size: usize,
    /// Wait after each batch (a test seam for interruption).
    pub pause: Duration,
}

fn clean_config(args: CleanArgs) -> Result<CleanConfig, ConfigError> {
    let older_than = match args.older_than {
        None => None,
        Some(text) => Some(duration_flag("--older-than", &text, ANY_DURATION)?),
    };
    if args.batch_size == 0 {
        return Err(ConfigError::BatchSize);
    }
    let names = |list: Vec<String>| -> Vec<String> {
        list.into_iter()
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty())
            .collect()
    };
    for session in &args.sessions {
        PreviewRequest::new(session.clone(), "m".into())?;
    }
    let mut sessions = args.sessions;
    let mut seen = std::collections::HashSet::new();
    sessions.retain(|id| seen.insert(id.clone()));
    Ok(CleanConfig {
        sessions: (!args.all).then_some(sessions),
        apply: args.apply,
        policy: CleanPolicy {
            older_than,
            keep_last_turns: args.keep_last_turns,
            tools: args.tools.map(names),
            skip_tools: names(args.skip_tools),
            min_bytes: args.min_bytes,
            reasoning: !args.no_reasoning,
        },
        spill_files: args.include_spill_files,
        batch_size: args.batch_size,
        pause: Duration::from_millis(args.pause_ms),
    })
}

/// `word` quoted for a POSIX shell when it holds anything but plain path characters.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The default journal of a database: `<database>.prune-journal` beside it.
pub fn default_journal(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".prune-journal");
    db.with_file_name(name)
}

impl Config {
    /// Validates the raw command line. Errors: [`ConfigError`].
    pub fn from_cli(cli: Cli) -> Result<Self, ConfigError> {
        let quiet_period = duration_flag("--quiet-period", &cli.global.quiet_period, ANY_DURATION)?;
        let action = match cli.command {
            Command::Sessions => Action::Sessions,
            Command::Stats { top } => Action::Stats { top },
            Command::Vacuum {
                force,
                assume_free_bytes,
            } => Action::Vacuum {
                force,
                assume_free_bytes,
            },
            Command::Messages { session } => Action::Messages { session },
            Command::Preview {
                session,
                message,
                scope: flags,
            } => Action::Preview(PreviewRequest::new(session, message)?.within(scope(flags)?)),
            Command::Prune(args) => prune_action(args)?,
            Command::History(args) => history_action(args)?,
            Command::PruneBatch(args) => batch_action(args)?,
            Command::Clean(args) => Action::Clean(clean_config(args)?),
            Command::Receipts { session } => Action::Receipts { session },
            Command::Events {
                since,
                follow,
                poll_ms,
            } => Action::Events {
                since,
                follow,
                poll: Duration::from_millis(poll_ms.max(10)),
            },
            Command::Serve(args) => Action::Serve(super::serve::serve_config(args)?),
            Command::Demo { keep } => Action::Demo { keep },
        };
        let explicit_db = cli.global.db.is_some();
        let db = match (&action, cli.global.db) {
            (_, Some(db)) => db,
            // The demo makes its own database.
            (Action::Demo { .. }, None) => PathBuf::new(),
            (_, None) => Environment::from_process().database_path(&cli.global.channel)?,
        };
        let explicit_journal = cli.global.journal.is_some();
        let journal = cli.global.journal.unwrap_or_else(|| default_journal(&db));
        if !matches!(action, Action::Demo { .. }) {
            if is_database_file(&db, &journal) {
                return Err(ConfigError::JournalIsDatabase(
                    journal.display().to_string(),
                ));
            }
            let folder = match journal.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if explicit_journal && !folder.is_dir() {
                return Err(ConfigError::JournalFolder(folder.display().to_string()));
            }
        }
        let mut invocation = String::from("session-prune");
        if explicit_db {
            invocation.push_str(&format!(" --db {}", shell_word(&db.display().to_string())));
        } else if cli.global.channel != pruning_adapters::opencode::DEFAULT_CHANNEL {
            invocation.push_str(&format!(" --channel {}", shell_word(&cli.global.channel)));
        }
        if explicit_journal {
            invocation.push_str(&format!(
                " --journal {}",
                shell_word(&journal.display().to_string())
            ));
        }
        Ok(Self {
            invocation,
            db,
            journal,
            json: cli.global.json,
            quiet_period,
            action,
        })
    }
}

/// The scope flags as a [`Scope`]: the directory must be absolute and is normalized by
/// [`normalize_directory`]; ids must not be empty.
fn scope(args: ScopeArgs) -> Result<Scope, ConfigError> {
    let directory = match args.directory {
        None => None,
        Some(dir) => Some(normalize_directory(&dir).ok_or(ConfigError::ScopeDirectory(dir))?),
    };
    for (flag, value) in [
        ("--project", &args.project),
        ("--workspace", &args.workspace),
    ] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(ConfigError::EmptyScope(flag));
        }
    }
    Ok(Scope {
        directory,
        project_id: args.project,
        workspace_id: args.workspace,
    })
}

/// A scope directory in its normalized text, or `None` when it is not absolute. The path rules
/// (which paths are absolute, POSIX or Windows, and how `.` and `..` resolve) are the engine's,
/// [`pruning_engine::scope::AbsolutePath`], so a directory compares the same way once normalized:
/// `/a/./b/../c/` -> `/a/c`, `C:\work\repo\` -> `C:/work/repo`, `/x/work\sub` unchanged.
pub fn normalize_directory(dir: &str) -> Option<String> {
    pruning_engine::scope::normalize(dir)
}

fn history_action(args: HistoryArgs) -> Result<Action, ConfigError> {
    let scope = scope(args.scope)?;
    let purpose = match args.purpose {
        PurposeArg::Search => Purpose::Search,
        PurposeArg::Stats => Purpose::Stats,
        PurposeArg::Prune => Purpose::Prune,
    };
    let request = HistoryRequest::new(
        args.session,
        args.query,
        !args.no_technical,
        purpose,
        args.cursor,
    )?;
    Ok(Action::History {
        request: request.within(scope),
        all: args.all,
    })
}

fn batch_action(args: PruneBatchArgs) -> Result<Action, ConfigError> {
    let scope = scope(args.scope)?;
    let path = args.candidates.display().to_string();
    let bad = |detail: String| ConfigError::Candidates {
        path: path.clone(),
        detail,
    };
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| bad(e.to_string()))?
    } else {
        std::fs::read_to_string(&args.candidates).map_err(|e| bad(e.to_string()))?
    };
    let candidates = parse_candidates(&text, &args.session).map_err(bad)?;
    let batches = candidates
        .chunks(MAX_BATCH)
        .map(|chunk| {
            PruneBatchRequest::new(args.session.clone(), chunk.to_vec())
                .map(|batch| batch.within(scope.clone()))
        })
        .collect::<Result<_, _>>()?;
    Ok(Action::PruneBatch {
        batches,
        dry_run: args.dry_run,
    })
}

/// A batch body as a file may hold it: `{sessionID, candidates}` and nothing else.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    #[serde(rename = "sessionID")]
    session_id: String,
    candidates: Vec<HistoryCandidate>,
}

/// Candidates from history pages (one document, or JSON lines from `history --all --json`), a
/// batch body or a bare array. A batch body for another session, a blocked page, or a message
/// listed twice is refused. No candidates at all is not an error: there is nothing to prune.
fn parse_candidates(text: &str, session: &str) -> Result<Vec<HistoryCandidate>, String> {
    let documents: Vec<serde_json::Value> = match serde_json::from_str(text) {
        Ok(value) => vec![value],
        Err(whole) => text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .map_err(|_| format!("not JSON: {whole}"))?,
    };
    let mut candidates: Vec<HistoryCandidate> = Vec::new();
    for value in documents {
        let mut page = candidates_of(value, session)?;
        candidates.append(&mut page);
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = candidates.iter().find(|c| !seen.insert(&c.message_id)) {
        return Err(format!("message {} is listed twice", twice.message_id));
    }
    Ok(candidates)
}

/// The candidates of one JSON document.
fn candidates_of(value: serde_json::Value, session: &str) -> Result<Vec<HistoryCandidate>, String> {
    let bad = |e: serde_json::Error| format!("bad candidate: {e}");
    match value {
        serde_json::Value::Array(_) => serde_json::from_value(value).map_err(bad),
        serde_json::Value::Object(mut page) if page.contains_key("status") => {
            match page.get("status").and_then(|v| v.as_str()) {
                Some("page") => {}
                Some("blocked") => {
                    let reason = page.get("reason").and_then(|v| v.as_str()).unwrap_or("?");
                    return Err(format!(
                        "the input is a blocked history answer ({reason}), not a page of candidates"
                    ));
                }
                _ => return Err("the input is not a history page (status is not \"page\")".into()),
            }
            let list = page.remove("candidates").ok_or(
                "no `candidates` key (expected the output of `history SESSION --purpose prune --json`)",
            )?;
            serde_json::from_value(list).map_err(bad)
        }
        serde_json::Value::Object(_) => {
            let body: BatchBody = serde_json::from_value(value)
                .map_err(|e| format!("not a batch body {{sessionID, candidates}}: {e}"))?;
            if body.session_id != session {
                return Err(format!(
                    "the candidates are for session {}, not {session}",
                    body.session_id
                ));
            }
            Ok(body.candidates)
        }
        _ => Err("expected a JSON object or array".into()),
    }
}

fn prune_action(args: PruneArgs) -> Result<Action, ConfigError> {
    let scope = scope(args.scope)?;
    let request = match args.indexes {
        Some(list) => {
            let indexes = parse_indexes(&list)?;
            PruneRequest::with_indexes(args.session, args.message, args.revision, &indexes)?
        }
        None => PruneRequest::all_technical(args.session, args.message, args.revision)?,
    };
    Ok(Action::Prune {
        request: request.within(scope),
        dry_run: args.dry_run,
    })
}

/// Whether `journal` is `db` or SQLite's `-wal`, `-shm` or `-journal` file of it: by path after
/// following symbolic links (a dangling one too: SQLite may create its target later) and
/// resolving folders, and by device and inode where both files exist (hard links).
fn is_database_file(db: &Path, journal: &Path) -> bool {
    let family: Vec<PathBuf> = ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| {
            let mut name = resolve(db).into_os_string();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect();
    let target = resolve(journal);
    if family.contains(&target) {
        return true;
    }
    same_inode_as_any(journal, &family)
}

/// `path` with every symbolic link followed (up to 40, dangling ones included) and its folder
/// made canonical; the path itself when that fails.
fn resolve(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&current) {
            Ok(target) => {
                current = match current.parent() {
                    Some(parent) if target.is_relative() => parent.join(target),
                    _ => target,
                };
            }
            Err(_) => break,
        }
    }
    let Some(name) = current.file_name().map(|n| n.to_os_string()) else {
        return current;
    };
    let parent = match current.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::canonicalize(&parent) {
        Ok(parent) => parent.join(name),
        Err(_) => current,
    }
}

#[cfg(unix)]
fn same_inode_as_any(path: &Path, others: &[PathBuf]) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    others.iter().any(|other| {
        std::fs::metadata(other).is_ok_and(|o| o.dev() == meta.dev() && o.ino() == meta.ino())
    })
}

#[cfg(not(unix))]
fn same_inode_as_any(_path: &Path, _others: &[PathBuf]) -> bool {
    false
}

/// Parses `0,2,5` (spaces allowed). An empty list is left for the contract to reject.
pub fn parse_indexes(list: &str) -> Result<Vec<i64>, ConfigError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| ConfigError::Index(s.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::normalize_directory;

    #[test]
    fn scope_directories_are_absolute_and_normalized() {
        assert_eq!(normalize_directory("/a/./b/../c/").as_deref(), Some("/a/c"));
        assert_eq!(normalize_directory("/").as_deref(), Some("/"));
        assert_eq!(normalize_directory("/..").as_deref(), Some("/"));
        assert_eq!(
            normalize_directory("C:\\work\\repo").as_deref(),
            Some("C:/work/repo")
        );
        assert_eq!(
            normalize_directory("/x/work\\sub/..").as_deref(),
            Some("/x")
        );
        assert_eq!(
            normalize_directory("\\\\server\\share\\..").as_deref(),
            Some("//server/share")
        );
        assert_eq!(normalize_directory("\\work"), None);
        assert_eq!(normalize_directory("tmp/work"), None);
        assert_eq!(normalize_directory(""), None);
    }
}
