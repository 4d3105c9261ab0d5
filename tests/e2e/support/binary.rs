//! Which OpenCode release binary an interop test runs: the pinned [`VERSION`] or an older
//! release of the version matrix, taken from an environment variable, from where
//! `scripts/install-opencode.sh` puts it under `target/`, or installed by that script; each
//! candidate must report the wanted version.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::process::{isolate, run_bounded};

/// The OpenCode version the pinned fixture was written by and the interop tests run.
pub const VERSION: &str = "1.18.34";

const VERSION_TIMEOUT: Duration = Duration::from_secs(30);
const INSTALL_TIMEOUT: Duration = Duration::from_secs(240);

/// The workspace root (the root package's manifest directory).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `scripts/install-opencode.sh VERSION` installs `version`: `target/opencode-real/` for
/// the pinned [`VERSION`], `target/opencode-versions/VERSION/` for any other release; the
/// package is `opencode-linux-x64` for 1.x, `@opencode/cli-linux-x64-baseline` for OpenCode 2.
pub fn installed_binary_of(version: &str) -> PathBuf {
    let prefix = if version == VERSION {
        workspace().join("target/opencode-real")
    } else {
        workspace().join("target/opencode-versions").join(version)
    };
    let package = if version.starts_with("1.") {
        "opencode-linux-x64"
    } else {
        "@opencode/cli-linux-x64-baseline"
    };
    prefix
        .join("node_modules")
        .join(package)
        .join("bin/opencode")
}

/// What `opencode --version` prints for `version`: the bare version for 1.x, `opencode vX.Y.Z`
/// for OpenCode 2.
fn printed_version(version: &str) -> String {
    if version.starts_with("1.") {
        version.to_string()
    } else {
        format!("opencode v{version}")
    }
}

/// The variable naming an explicit binary for `version`: `OPENCODE_BIN_1_18_34` for 1.18.34.
pub fn binary_variable(version: &str) -> String {
    format!("OPENCODE_BIN_{}", version.replace('.', "_"))
}

/// The pinned OpenCode [`VERSION`]: [`binary_of`] with that version.
pub fn binary() -> Option<PathBuf> {
    binary_of(VERSION)
}

/// The OpenCode binary of `version`, or `None` (after printing `SKIPPED` and why) when it
/// cannot be had outside CI.
///
/// Order: the variable [`binary_variable`] names (for the pinned [`VERSION`] also
/// `$OPENCODE_BIN`, which CI sets) when set, and then only it: an explicit choice is never
/// replaced; else [`installed_binary_of`]; else what `scripts/install-opencode.sh VERSION`
/// installs there (it needs npm). Each candidate must print exactly `version` for `--version`.
///
/// Panics when no binary can be had and `CI` is `true` (or `1`): there a skipped interop test
/// is a failure.
pub fn binary_of(version: &str) -> Option<PathBuf> {
    let reason = match locate(version) {
        Ok(path) => return Some(path),
        Err(reason) => reason,
    };
    let variable = binary_variable(version);
    crate::skip::cannot_run(
        &format!("the OpenCode {version} interop test did not run: {reason}"),
        &format!(
            "Run `bash scripts/install-opencode.sh {version}` (needs npm; .ci/run does) or set \
             {variable} to an opencode {version} binary."
        ),
    );
    None
}

/// Serialises the installs this process starts: tests of one release run on several threads,
/// and two npm installs into one prefix would trip over each other.
static INSTALLING: Mutex<()> = Mutex::new(());

fn locate(version: &str) -> Result<PathBuf, String> {
    let mut variables = vec![binary_variable(version)];
    if version == VERSION {
        variables.push("OPENCODE_BIN".to_string());
    }
    let explicit = variables.iter().find_map(|name| {
        let value = std::env::var_os(name).filter(|value| !value.is_empty())?;
        Some((name, PathBuf::from(value)))
    });
    if let Some((name, path)) = explicit {
        return check_version(&path, version)
            .map(|()| path.clone())
            .map_err(|why| format!("{name}={} is not usable ({why})", path.display()));
    }
    let installed = installed_binary_of(version);
    let _installing = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    let first = match check_version(&installed, version) {
        Ok(()) => return Ok(installed),
        Err(why) => why,
    };
    let script = workspace().join("scripts/install-opencode.sh");
    eprintln!(
        "opencode {version} not found at {} ({first}); installing it with {}",
        installed.display(),
        script.display()
    );
    let out = run_bounded(
        Command::new("bash").arg(&script).arg(version),
        INSTALL_TIMEOUT,
    )
    .map_err(|e| format!("{} failed: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} is not set, {} is not usable ({first}), and {} {version} exited with {}: {}",
            binary_variable(version),
            installed.display(),
            script.display(),
            out.status,
            out.stderr.trim()
        ));
    }
    check_version(&installed, version)
        .map(|()| installed.clone())
        .map_err(|why| {
            format!(
                "after installing, {} is not usable ({why})",
                installed.display()
            )
        })
}

/// Runs `path --version` in a throwaway home (so the probe writes nothing into the real one).
fn check_version(path: &Path, version: &str) -> Result<(), String> {
    if !path.is_file() {
        return Err("no such file".into());
    }
    let home = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let mut cmd = Command::new(path);
    cmd.arg("--version");
    isolate(&mut cmd, home.path());
    let out = run_bounded(&mut cmd, VERSION_TIMEOUT)?;
    let found = out.stdout.trim();
    if out.status.success() && found == printed_version(version) {
        Ok(())
    } else {
        Err(format!(
            "`--version` exited with {} and printed {found:?}, expected {version:?}",
            out.status
        ))
    }
}
