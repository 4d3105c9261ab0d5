//! `session-prune man`: the manual page (roff), generated from the command line's clap
//! definition ([`crate::cli::args::Cli`]): the main page on stdout, or with `--dir` the main
//! page and one page per command (`session-prune-clean.1`, ...) written into a folder.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;
use serde_json::json;

use super::Outcome;
use crate::cli::args::Cli;
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output::{self, say};

/// `man` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write `session-prune.1` and a page per command into this existing folder (for
    /// `MANPATH`, e.g. ~/.local/share/man/man1) instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the main page, or writes every page into `dir` and lists the files written (with
/// `--json`: `{"written": [PATH, ...]}`).
///
/// Errors: [`ConfigError::NotJson`] with `--json` and no `--dir` (a page is not a JSON
/// document); [`ConfigError::ManFolder`] when `dir` is not an existing folder (nothing
/// written); writing a page.
pub fn run(Args { dir }: Args, config: &Config) -> anyhow::Result<Outcome> {
    let Some(dir) = dir else {
        if config.json {
            return Err(ConfigError::NotJson(
                "man prints a roff page (with --dir it lists the pages it writes)",
            )
            .into());
        }
        let mut page = Vec::new();
        clap_mangen::Man::new(Cli::command()).render(&mut page)?;
        std::io::stdout().lock().write_all(&page)?;
        return Ok(Outcome::Done);
    };
    if !dir.is_dir() {
        return Err(ConfigError::ManFolder(dir.display().to_string()).into());
    }
    clap_mangen::generate_to(Cli::command(), &dir)
        .with_context(|| format!("writing the manual pages into {}", dir.display()))?;
    let written: Vec<String> = page_names()
        .iter()
        .map(|name| dir.join(name).display().to_string())
        .collect();
    if config.json {
        output::json_document(&json!({ "written": written }))?;
    } else {
        for path in &written {
            say!("{path}")?;
        }
    }
    Ok(Outcome::Done)
}

/// The file names `clap_mangen::generate_to` gives the pages: the command's display name
/// (`session-prune`, `session-prune-clean`, `session-prune-archive-purge`) and section 1, for
/// the command and every command under it, sorted.
fn page_names() -> Vec<String> {
    fn walk(command: &clap::Command, names: &mut Vec<String>) {
        let name = command.get_display_name().unwrap_or(command.get_name());
        names.push(format!("{name}.1"));
        for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
            walk(sub, names);
        }
    }
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let mut names = Vec::new();
    walk(&command, &mut names);
    names.sort();
    names
}
