//! `session-prune man`: the manual page (roff), generated from the command line's clap
//! definition ([`crate::cli::args::Cli`]): the main page on stdout, or with `--dir` the main
//! page and one page per command (`session-prune-clean.1`, ...) written into a folder.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
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

/// Prints the main page, or writes every page into `dir` and lists the files written, sorted
/// (with `--json`: `{"written": [PATH, ...]}`). Every page is rendered and written to a temporary
/// file in `dir` before any is put in place (a rename each, which replaces a page or a link of
/// that name rather than writing through it): a failure to write one (a full disk, a folder
/// this user may not write) leaves none of them, and a folder in the place of a page is
/// refused before any is written.
///
/// Errors: [`ConfigError::NotJson`] with `--json` and no `--dir` (a page is not a JSON
/// document); [`ConfigError::ManFolder`] when `dir` is not an existing folder or holds a
/// folder where a page goes (nothing written); writing a page, naming it.
pub fn run(Args { dir }: Args, config: &Config) -> anyhow::Result<Outcome> {
    let Some(dir) = dir else {
        if config.json {
            return Err(ConfigError::NotJson(
                "man prints a roff page (with --dir it lists the pages it writes)",
            )
            .into());
        }
        let (_, page) = pages()?.swap_remove(0);
        std::io::stdout().lock().write_all(&page)?;
        return Ok(Outcome::Done);
    };
    if !dir.is_dir() {
        let what = if dir.exists() {
            "is not a folder"
        } else {
            "does not exist"
        };
        return Err(ConfigError::ManFolder(format!("{} {what}", dir.display())).into());
    }
    let pages = pages()?;
    // A folder where a page goes cannot be replaced by it: refused before anything is written.
    if let Some((name, _)) = pages.iter().find(|(name, _)| dir.join(name).is_dir()) {
        return Err(ConfigError::ManFolder(format!(
            "{} holds a folder named {name}, where that page goes",
            dir.display()
        ))
        .into());
    }
    let mut staged = Vec::new();
    for (name, page) in pages {
        let path = dir.join(&name);
        let file = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .tempfile_in(&dir)
            .and_then(|mut file| {
                file.write_all(&page)?;
                // A page is for every user to read, as a file created with the usual umask.
                file.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644))?;
                Ok(file)
            })
            .with_context(|| format!("writing the manual page {}", path.display()))?;
        staged.push((file, path));
    }
    let mut written = Vec::new();
    for (file, path) in staged {
        file.persist(&path)
            .map_err(|failed| failed.error)
            .with_context(|| format!("writing the manual page {}", path.display()))?;
        written.push(path.display().to_string());
    }
    written.sort();
    if config.json {
        output::json_document(&json!({ "written": written }))?;
    } else {
        for path in &written {
            say!("{path}")?;
        }
    }
    Ok(Outcome::Done)
}

/// Every page, rendered: the main page first (`session-prune.1`), then one per command and
/// command under it (`session-prune-clean.1`, `session-prune-archive-purge.1`), named as
/// `man` finds them, each with the same footer (`session-prune VERSION`). `help` has none: it
/// is `--help`.
fn pages() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    fn walk(
        command: &clap::Command,
        source: &str,
        pages: &mut Vec<(String, Vec<u8>)>,
    ) -> std::io::Result<()> {
        let name = command.get_display_name().unwrap_or(command.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(command.clone())
            .source(source)
            .render(&mut page)?;
        pages.push((format!("{name}.1"), page));
        for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
            walk(sub, source, pages)?;
        }
        Ok(())
    }
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let source = format!("session-prune {}", env!("CARGO_PKG_VERSION"));
    let mut pages = Vec::new();
    walk(&command, &source, &mut pages).context("rendering the manual pages")?;
    Ok(pages)
}
