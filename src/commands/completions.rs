//! `session-prune completions SHELL`: the shell's completion script for every command and flag,
//! generated from the command line's clap definition ([`crate::cli::args::Cli`]), on stdout.

use std::io::Write as _;

use clap::CommandFactory;
use clap_complete::Shell;

use super::Outcome;
use crate::cli::args::Cli;
use crate::cli::config::Config;
use crate::cli::error::ConfigError;

/// `completions` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete in.
    #[arg(value_name = "SHELL")]
    shell: Shell,
}

/// Prints the completion script of `shell` on stdout (the global flags other than `--json` are
/// not used).
///
/// Errors: [`ConfigError::NotJson`] with `--json` (a script is not a JSON document); writing
/// stdout.
pub fn run(Args { shell }: Args, config: &Config) -> anyhow::Result<Outcome> {
    if config.json {
        return Err(ConfigError::NotJson("completions prints a shell script").into());
    }
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "session-prune", &mut script);
    std::io::stdout().lock().write_all(&script)?;
    Ok(Outcome::Done)
}
