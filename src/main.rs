//! `session-prune`: prune tool output and reasoning from OpenCode session databases.
//!
//! Exit codes: 0 done (pruned), 1 failure (storage, journal, I/O), 2 bad input (nothing
//! journaled or written), 3 blocked (the engine refused; nothing changed, but for a `clean --apply` whose other
//! prunes committed: run it again later), 130 interrupted by
//! Ctrl-C (`clean`: what committed stays committed).

mod cli;
mod commands;
mod output;

use std::process::ExitCode;

use clap::Parser;
use cli::args::Cli;
use cli::config::{Config, ConfigError};
use commands::Outcome;

const EXIT_FAILURE: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;
const EXIT_BLOCKED: u8 = 3;
const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    // redb meets some damage with a panic, which the journal's open turns into an error that
    // says it in words: that panic is not printed as well.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !pruning_journal::panic_is_reported() {
            default_hook(info);
        }
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => error.exit(), // --help, --version
        Err(error) => {
            // Raw arguments: one that is not UTF-8 is exactly what this error may be about. After
            // `--`, `--json` is a value, not the flag.
            let json = std::env::args_os()
                .skip(1)
                .take_while(|arg| arg != "--")
                .any(|arg| arg == "--json");
            if json {
                let text = error.to_string();
                let summary: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .take_while(|line| !line.is_empty())
                    .collect();
                let summary = summary.join(" ");
                let summary = summary.trim_start_matches("error: ");
                let doc = serde_json::json!({ "status": "error", "exitCode": EXIT_BAD_INPUT, "error": summary });
                let _ = output::say!("{doc}");
            }
            let _ = error.print();
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let json = cli.global.json;
    let command = cli.command;
    let uses_database = command.uses_database();
    let config = match Config::from_global(cli.global, uses_database) {
        Ok(config) => config,
        Err(error) => return fail(json, EXIT_BAD_INPUT, &error.to_string()),
    };
    // A panic inside a dependency (redb on a damaged journal file, say) is reported like any
    // failure: exit 1 and, with --json, one JSON document.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| command.run(&config)));
    let ran = match ran {
        Ok(ran) => ran,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            let message = format!(
                "internal error: {what}. If the journal {} is damaged, move it aside: the receipts in the database remain the audit record",
                config.journal.display()
            );
            return fail(json, EXIT_FAILURE, &message);
        }
    };
    match ran {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Blocked) => ExitCode::from(EXIT_BLOCKED),
        Ok(Outcome::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Ok(Outcome::Failed) => ExitCode::from(EXIT_FAILURE),
        // The reader of stdout went away (`session-prune sessions | head`): not a failure.
        Err(error) if error.chain().any(output::is_closed_pipe) => ExitCode::SUCCESS,
        Err(error) => {
            let code = if error.chain().any(is_bad_input) {
                EXIT_BAD_INPUT
            } else {
                EXIT_FAILURE
            };
            // The causes `diagnose` words are the database's and the journal's.
            let message = if uses_database {
                commands::diagnose::explain(&format!("{error:#}"), &config)
            } else {
                format!("{error:#}")
            };
            fail(json, code, &message)
        }
    }
}

/// Whether a cause is bad input (exit 2): a command line that cannot be run, a session the
/// database does not hold, or a request that breaks the contract (nothing was journaled).
fn is_bad_input(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause.is::<ConfigError>()
        || cause.is::<commands::UnknownSession>()
        || cause.is::<commands::UnknownReceipt>()
        || cause.is::<commands::journal::NothingToStart>()
        || cause.is::<pruning_engine::ContractError>()
        || matches!(
            cause.downcast_ref::<pruning_engine::EngineError>(),
            Some(pruning_engine::EngineError::Contract(_))
        )
}

/// Reports an error on stderr and, with `--json`, as `{"status":"error","exitCode","error"}` on
/// stdout, so that a script always gets one JSON document.
fn fail(json: bool, code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    if json {
        let doc = serde_json::json!({ "status": "error", "exitCode": code, "error": message });
        let _ = output::say!("{doc}");
    }
    ExitCode::from(code)
}
