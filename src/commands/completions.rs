//! `session-prune completions SHELL`: the shell's completion script for every command and flag,
//! generated from the command line's clap definition ([`crate::cli::args::Cli`]), on stdout.

use std::io::Write as _;

use clap::CommandFactory;
use clap_complete::Shell;

use super::Outcome;
use crate::cli::args::Cli;
use crate::cli::config::Config;
use crate::cli::error::ConfigError;

/// The binary's name, as the scripts complete it.
const BIN: &str = "session-prune";

/// clap_complete's bash script spells the case label of each command `session__subcmd__prune__`
/// `subcmd__clean` but the variable it matches `session__prune__subcmd__clean` when the
/// binary's name holds a `-` (clap-rs/clap#6421), so nothing after a command would complete.
/// The labels are given the variable's spelling; no other text of the script holds that prefix.
fn bash_labels_fixed(script: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(script)
        .replace("session__subcmd__prune", "session__prune")
        .into_bytes()
}

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
    clap_complete::generate(shell, &mut command, BIN, &mut script);
    if shell == Shell::Bash {
        script = bash_labels_fixed(&script);
    }
    std::io::stdout().lock().write_all(&script)?;
    Ok(Outcome::Done)
}
