//! A home folder holding an OpenCode data folder, for running documented shell recipes as a
//! user would: `session-prune` on the PATH, the database found where OpenCode keeps it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

/// `~/.local/share/opencode/` with a copy of the coding-work fixture as `opencode.db` and one
/// spill file in `tool-output/`, in a home of its own.
pub struct OpenCodeHome {
    /// The home folder.
    pub home: TempDir,
    /// The data folder.
    pub data: PathBuf,
}

impl OpenCodeHome {
    /// A new home in a temporary folder (removed when dropped).
    pub fn new() -> Self {
        let home = tempfile::tempdir().expect("home");
        let data = home.path().join(".local/share/opencode");
        std::fs::create_dir_all(data.join("tool-output")).expect("data folder");
        std::fs::write(data.join("tool-output/tool_1"), "spilled output").expect("spill file");
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34-work/opencode.db");
        std::fs::copy(&source, data.join("opencode.db")).expect("copy fixture");
        // Installed as `cargo install` installs it.
        let bin = home.path().join(".cargo/bin");
        std::fs::create_dir_all(&bin).expect("~/.cargo/bin");
        std::os::unix::fs::symlink(crate::common::cli::BINARY, bin.join("session-prune"))
            .expect("~/.cargo/bin/session-prune");
        Self { home, data }
    }

    /// The database.
    pub fn db(&self) -> PathBuf {
        self.data.join("opencode.db")
    }

    /// Runs `script` with `bash -euo pipefail` in a clean environment: this home, and a PATH
    /// that finds the built `session-prune` first.
    pub fn bash(&self, script: &str) -> Output {
        let binary = Path::new(crate::common::cli::BINARY);
        let path = format!(
            "{}:{}",
            binary.parent().expect("binary folder").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.shell("bash", &["-euo", "pipefail", "-c", script], path)
    }

    /// Runs `line` as cron runs a crontab line: `/bin/sh -c` with this home and cron's own
    /// `PATH` (`/usr/bin:/bin`), which does not find `session-prune`: a line names it where
    /// `cargo install` puts it, `~/.cargo/bin/session-prune` (this home has it there).
    pub fn cron(&self, line: &str) -> Output {
        self.shell("/bin/sh", &["-c", line], "/usr/bin:/bin".into())
    }

    fn shell(&self, shell: &str, args: &[&str], path: String) -> Output {
        Command::new(shell)
            .args(args)
            .env_clear()
            .env("HOME", self.home.path())
            .env("PATH", path)
            .output()
            .unwrap_or_else(|e| panic!("run {shell}: {e}"))
    }

    /// How many receipts the database holds (0 before the first prune made their table).
    pub fn receipts(&self) -> i64 {
        let conn = rusqlite::Connection::open(self.db()).expect("open");
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'session_prune_receipt'",
                [],
                |row| row.get(0),
            )
            .expect("the schema");
        if tables == 0 {
            return 0;
        }
        conn.query_row("SELECT count(*) FROM session_prune_receipt", [], |row| {
            row.get(0)
        })
        .expect("receipts")
    }
}

/// The text of the first fenced block of `lang` after the heading line `heading` in the
/// Markdown file `file` (a path from the project's root).
pub fn block_after(file: &str, heading: &str, lang: &str) -> String {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let section = text
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{file} has no {heading}"))
        .1;
    let block = section
        .split_once(&format!("```{lang}\n"))
        .unwrap_or_else(|| panic!("{file}: no {lang} block after {heading}"))
        .1;
    block
        .split_once("```")
        .expect("the block's end")
        .0
        .to_string()
}
