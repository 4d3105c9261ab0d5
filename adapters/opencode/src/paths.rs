//! Where OpenCode keeps its database, resolved exactly as OpenCode does it.
//!
//! Source: OpenCode `storage/db.ts` and `global.ts` (docs/ARCHITECTURE.md, "OpenCode's ids and
//! paths") and CodeNomad's
//! `pruningDatabasePath`: the data directory is `$XDG_DATA_HOME/opencode` when `XDG_DATA_HOME` is
//! absolute, else `~/.local/share/opencode`; `OPENCODE_DB` wins when set (absolute, or relative to
//! the data directory); otherwise channels `latest`, `beta` and `prod` (or
//! `OPENCODE_DISABLE_CHANNEL_DB` = `1`/`true`) use `opencode.db`, any other channel
//! `opencode-<channel>.db` with characters outside `[a-zA-Z0-9._-]` replaced by `-`.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// The channel of a released OpenCode build (`latest`), used when none is given.
pub const DEFAULT_CHANNEL: &str = "latest";

/// Why no database path could be resolved.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathError {
    /// `OPENCODE_DB` is `:memory:`: that database lives only inside the OpenCode process.
    #[error("OPENCODE_DB is :memory:, an in-process database that cannot be opened from outside; pass --db PATH")]
    InMemory,
    /// Neither `XDG_DATA_HOME` (absolute) nor `HOME` is set.
    #[error(
        "cannot find the OpenCode data directory: set HOME or XDG_DATA_HOME, or pass --db PATH"
    )]
    NoHome,
}

/// The inputs of path resolution, read from the environment by [`Environment::from_process`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `XDG_DATA_HOME` (ignored unless absolute).
    pub xdg_data_home: Option<PathBuf>,
    /// `OPENCODE_DB`.
    pub opencode_db: Option<String>,
    /// `OPENCODE_DISABLE_CHANNEL_DB`.
    pub disable_channel_db: Option<String>,
}

impl Environment {
    /// Reads `HOME`, `XDG_DATA_HOME`, `OPENCODE_DB` and `OPENCODE_DISABLE_CHANNEL_DB`; empty
    /// values count as unset.
    pub fn from_process() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            home: var("HOME").map(PathBuf::from),
            xdg_data_home: var("XDG_DATA_HOME").map(PathBuf::from),
            opencode_db: var("OPENCODE_DB"),
            disable_channel_db: var("OPENCODE_DISABLE_CHANNEL_DB"),
        }
    }

    /// OpenCode's data directory: `$XDG_DATA_HOME/opencode` or `~/.local/share/opencode`.
    pub fn data_dir(&self) -> Result<PathBuf, PathError> {
        let base = match &self.xdg_data_home {
            Some(xdg) if xdg.is_absolute() => xdg.clone(),
            _ => self
                .home
                .as_ref()
                .ok_or(PathError::NoHome)?
                .join(".local")
                .join("share"),
        };
        Ok(base.join("opencode"))
    }

    /// The database file of OpenCode's `channel` build.
    pub fn database_path(&self, channel: &str) -> Result<PathBuf, PathError> {
        if let Some(db) = &self.opencode_db {
            if db == ":memory:" {
                return Err(PathError::InMemory);
            }
            let path = Path::new(db);
            if path.is_absolute() {
                return Ok(path.to_path_buf());
            }
            return Ok(self.data_dir()?.join(path));
        }
        Ok(self
            .data_dir()?
            .join(database_file_name(channel, self.channel_db_disabled())))
    }

    fn channel_db_disabled(&self) -> bool {
        matches!(self.disable_channel_db.as_deref(), Some("1") | Some("true"))
    }
}

/// `opencode.db` for `latest`, `beta`, `prod` or when channel databases are disabled, else
/// `opencode-<safe channel>.db`.
pub fn database_file_name(channel: &str, channel_db_disabled: bool) -> String {
    if channel_db_disabled || matches!(channel, "latest" | "beta" | "prod") {
        return "opencode.db".to_string();
    }
    let safe: String = channel
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("opencode-{safe}.db")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment {
            home: Some("/home/u".into()),
            ..Environment::default()
        }
    }

    #[test]
    fn default_is_opencode_db_under_local_share() {
        assert_eq!(
            env().database_path("latest").unwrap(),
            PathBuf::from("/home/u/.local/share/opencode/opencode.db")
        );
    }

    #[test]
    fn absolute_xdg_data_home_wins_and_relative_is_ignored() {
        let mut e = env();
        e.xdg_data_home = Some("/data".into());
        assert_eq!(
            e.database_path("beta").unwrap(),
            PathBuf::from("/data/opencode/opencode.db")
        );
        e.xdg_data_home = Some("rel".into());
        assert_eq!(
            e.database_path("beta").unwrap(),
            PathBuf::from("/home/u/.local/share/opencode/opencode.db")
        );
    }

    #[test]
    fn other_channels_get_their_own_sanitized_file() {
        assert_eq!(
            env().database_path("local").unwrap(),
            PathBuf::from("/home/u/.local/share/opencode/opencode-local.db")
        );
        assert_eq!(
            database_file_name("feat/x y", false),
            "opencode-feat-x-y.db"
        );
        assert_eq!(database_file_name("feat/x", true), "opencode.db");
        let mut e = env();
        e.disable_channel_db = Some("true".into());
        assert_eq!(
            e.database_path("local").unwrap(),
            PathBuf::from("/home/u/.local/share/opencode/opencode.db")
        );
    }

    #[test]
    fn opencode_db_absolute_relative_and_memory() {
        let mut e = env();
        e.opencode_db = Some("/x/y.db".into());
        assert_eq!(e.database_path("local").unwrap(), PathBuf::from("/x/y.db"));
        e.opencode_db = Some("sub/y.db".into());
        assert_eq!(
            e.database_path("local").unwrap(),
            PathBuf::from("/home/u/.local/share/opencode/sub/y.db")
        );
        e.opencode_db = Some(":memory:".into());
        assert_eq!(e.database_path("local"), Err(PathError::InMemory));
        assert_eq!(
            Environment::default().database_path("latest"),
            Err(PathError::NoHome)
        );
    }
}
