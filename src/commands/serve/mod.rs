//! `session-prune serve`: the engine behind the HTTP API until Ctrl-C or SIGTERM.
//!
//! Start-up prints where it listens (with `--json`, one line
//! `{"status":"listening","address","url","password","workspaces"}`), so that a script that asked for port
//! 0 learns the port. On a signal the server stops accepting connections, ends every event
//! stream, lets requests in flight finish (a prune is never cut short), closes the journal and
//! prints `{"status":"stopped"}` (exit 0).

use std::sync::Arc;

use anyhow::Context;
use pruning_server::{
    self as http, AppState, ConnectionLimits, ServerOptions, UpkeepOptions, Workspaces,
};
use serde_json::json;

mod config;

pub use config::Args;
use config::{validate, LogFormat};

use super::{open_engine_unless_busy, Outcome};
use crate::cli::config::Config;

use crate::output;
use crate::output::say;

/// Serves until stopped.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let serve = &validate(args)?;
    start_log(serve.log_format);
    let limits = connection_limits()?;
    let mut writable = true;
    let archiving = super::Archiving::chosen(config, serve.archive, serve.no_archive);
    let engine = match open_engine_unless_busy(config, archiving, super::Soundness::Reported) {
        Ok(Ok(engine)) => engine,
        // On read-only media the read routes still serve (docs/read-only-media.md).
        Err(error) if read_only(&error) => {
            let engine = open_read_only_engine(config)?;
            eprintln!(
                "note: serving read-only ({}): previews, history, receipts and events work; \
                 prunes are answered blocked/unavailable{}",
                super::diagnose::explain(&format!("{error:#}"), config),
                if serve.auto_clean.is_some() {
                    ", and --auto-clean runs no clean"
                } else {
                    ""
                }
            );
            writable = false;
            engine
        }
        Err(error) => return Err(error),
        Ok(Err(detail)) => {
            eprintln!("blocked: {detail}");
            if config.json {
                output::json_line(&json!({ "status": "blocked", "error": detail }))?;
            }
            return Ok(Outcome::Blocked);
        }
    };
    let options = ServerOptions {
        password: serve.password.clone(),
        workspaces: serve.workspaces.clone(),
        heartbeat: serve.heartbeat,
        allowed_origins: serve.allowed_origins.clone(),
        // A read-only server would refuse every prune of every run.
        upkeep: serve.auto_clean.as_ref().filter(|_| writable).map(|auto| {
            let config = config.clone();
            UpkeepOptions {
                every: auto.every,
                clean: auto.clean.clone(),
                archive_keep: auto.archive_keep,
                explain: Arc::new(move |failure: &str| super::diagnose::explain(failure, &config)),
            }
        }),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let upkeep_every = options.upkeep.as_ref().map(|upkeep| upkeep.every);
    if upkeep_every.is_some()
        && !matches!(
            engine.store().auto_vacuum(),
            Ok(pruning_opencode::AutoVacuum::Incremental)
        )
    {
        eprintln!(
            "note: {} keeps the pages a clean frees until `vacuum`: each run prunes, but the \
             file shrinks only after `session-prune vacuum --online-shrink` (once, with OpenCode \
             stopped), from which on every run gives them back",
            config.db.display()
        );
    }
    let state = AppState::new(Arc::new(engine), options);
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(serve.listen)
            .await
            .with_context(|| {
                format!(
                    "listening on {} (choose another address with --listen; 127.0.0.1:0 picks a free port)",
                    serve.listen
                )
            })?;
        let address = listener.local_addr()?;
        // Installed before the address is announced: a signal sent as soon as a script reads
        // it must stop the server gracefully, not kill it.
        let stop = stop_signal(serve.stop_with_stdin).context("installing the signal handlers")?;
        announce(
            config.json,
            address,
            &serve.workspaces,
            serve.password.is_some(),
            upkeep_every,
        )?;
        http::serve_with(listener, state, limits, stop)
            .await
            .context("serving HTTP")
    })?;
    // Dropping the runtime waits for engine calls still on the blocking pool; the last handle
    // to the engine goes with them, which closes the journal.
    drop(runtime);
    if config.json {
        output::json_line(&json!({ "status": "stopped" }))?;
    } else {
        say!("stopped: every request answered, the journal closed")?;
    }
    Ok(Outcome::Done)
}

/// Sends the server's log lines (`tracing` events of level `info` and above) to stderr, as
/// `format` says. Called once, before the server starts; a second call in the same process
/// keeps the first.
fn start_log(format: LogFormat) {
    let lines = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .with_target(false)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => lines.try_init(),
        LogFormat::Json => lines.json().flatten_event(true).try_init(),
    };
}

/// Whether opening for writing failed because the database or the journal cannot be written
/// here (read-only media, or a file or folder this user may not write).
fn read_only(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<pruning_engine::StoreError>(),
            Some(pruning_engine::StoreError::ReadOnly { .. })
        ) || matches!(
            cause.downcast_ref::<pruning_engine::EngineError>(),
            Some(pruning_engine::EngineError::Store(
                pruning_engine::StoreError::ReadOnly { .. }
            ))
        ) || cause.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied
            )
        })
    })
}

/// The engine over the database opened read-only and the journal opened read-only (or, with no
/// journal file, an empty one in memory: nothing was journaled there). A database with receipts
/// whose journal is lost is refused, as a writable open refuses it: its events could not be
/// served.
fn open_read_only_engine(
    config: &Config,
) -> anyhow::Result<pruning_engine::Engine<pruning_opencode::OpenCodeStore>> {
    let store = super::open_store(config)?;
    super::refuse_lost_journal(&store, &config.journal)?;
    let journal = match super::open_journal_for_reading(&config.journal)? {
        Some(journal) => journal,
        None => pruning_engine::Journal::in_memory()?,
    };
    Ok(pruning_engine::Engine::open_read_only(store, journal)?)
}

// Hidden settings, for tests: they override the defaults of
// `ConnectionLimits::for_this_process`, so that a test sees a timeout in a second.

/// The header-read timeout, a duration such as `500ms`.
const HEADER_READ_TIMEOUT_VARIABLE: &str = "SESSION_PRUNE_SERVE_HEADER_READ_TIMEOUT";
/// The idle timeout, a duration such as `1s`.
const IDLE_TIMEOUT_VARIABLE: &str = "SESSION_PRUNE_SERVE_IDLE_TIMEOUT";
/// The most connections served at once, a count.
const MAX_CONNECTIONS_VARIABLE: &str = "SESSION_PRUNE_SERVE_MAX_CONNECTIONS";

/// The connection limits, with the hidden overrides applied.
///
/// Errors: an override that is not a positive duration or count (or not UTF-8).
fn connection_limits() -> anyhow::Result<ConnectionLimits> {
    let mut limits = ConnectionLimits::for_this_process();
    let duration = |name: &str, text: String| {
        humantime::parse_duration(text.trim())
            .ok()
            .filter(|d| !d.is_zero())
            .with_context(|| format!("{name}={text:?} is not a positive duration"))
    };
    if let Some(text) = variable(HEADER_READ_TIMEOUT_VARIABLE)? {
        limits.header_read_timeout = duration(HEADER_READ_TIMEOUT_VARIABLE, text)?;
    }
    if let Some(text) = variable(IDLE_TIMEOUT_VARIABLE)? {
        limits.idle_timeout = duration(IDLE_TIMEOUT_VARIABLE, text)?;
    }
    if let Some(text) = variable(MAX_CONNECTIONS_VARIABLE)? {
        limits.max_connections =
            text.trim()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .with_context(|| {
                    format!("{MAX_CONNECTIONS_VARIABLE}={text:?} is not a positive count")
                })?;
    }
    Ok(limits)
}

/// The value of the environment variable `name`, if set.
///
/// Errors: a value that is not UTF-8.
fn variable(name: &str) -> anyhow::Result<Option<String>> {
    match std::env::var(name) {
        Ok(text) => Ok(Some(text)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => anyhow::bail!("{name} is not UTF-8"),
    }
}

fn announce(
    json: bool,
    address: std::net::SocketAddr,
    workspaces: &Workspaces,
    password: bool,
    auto_clean: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    let url = format!("http://{address}");
    let listed = match workspaces {
        Workspaces::Discovered => json!("discovered"),
        Workspaces::Given(list) => json!(list),
    };
    if json {
        return output::json_line(&json!({
            "status": "listening",
            "address": address.to_string(),
            "url": url,
            "page": format!("{url}/"),
            "workspaces": listed,
            "password": password,
            "autoCleanEveryMs": auto_clean.map(|every| every.as_millis() as u64),
        }));
    }
    say!("listening on {url} (GET {url}/openapi.json describes the API)")?;
    say!("the page: open {url}/ in a browser")?;
    match workspaces {
        Workspaces::Discovered => say!(
            "workspaces: OpenCode's projects and workspaces (GET {url}/api/workspaces lists them)"
        )?,
        Workspaces::Given(list) => {
            for workspace in list {
                say!("workspace {} = {}", workspace.id, workspace.directory)?;
            }
        }
    }
    if password {
        say!("every request needs the password: Authorization: Bearer PASSWORD, or basic auth")?;
    } else {
        say!("no password: any program of this machine may use it (set SESSION_PRUNE_PASSWORD to require one)")?;
    }
    if let Some(every) = auto_clean {
        say!(
            "upkeep: a clean every {} (the first one interval from now; GET {url}/api/session-pruning/upkeep says where it stands)",
            humantime::format_duration(every)
        )?;
    }
    say!("stop with Ctrl-C")?;
    Ok(())
}

/// A future that completes on Ctrl-C (SIGINT) or SIGTERM, or, with `with_stdin`, when standard
/// input reaches its end (or cannot be read); the handlers are installed when this returns.
/// Must be called within the runtime.
///
/// Errors: the I/O error of installing a handler.
#[cfg(unix)]
fn stop_signal(
    with_stdin: bool,
) -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
            () = stdin_closed(with_stdin) => {}
        }
    })
}

/// A future that completes on Ctrl-C, or, with `with_stdin`, when standard input reaches its end.
///
/// Errors: none here (the handler is installed when the future is first polled).
#[cfg(not(unix))]
fn stop_signal(
    with_stdin: bool,
) -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    Ok(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = stdin_closed(with_stdin) => {}
        }
    })
}

/// Completes when standard input reaches its end or fails to be read (`--stop-with-stdin`);
/// never when `watch` is false. What is read is discarded.
async fn stdin_closed(watch: bool) {
    use tokio::io::AsyncReadExt;
    if !watch {
        return std::future::pending().await;
    }
    let mut stdin = tokio::io::stdin();
    let mut buffer = [0_u8; 256];
    while let Ok(read) = stdin.read(&mut buffer).await {
        if read == 0 {
            return;
        }
    }
}
