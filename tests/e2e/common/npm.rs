//! The npm packages of `scripts/npm-pack.sh`, packed from this build's binary and installed
//! offline into a folder (docs/npm.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::skip;

/// The two tarballs, packed from this build's binary, in a folder of their own.
pub struct Packed {
    _dir: tempfile::TempDir,
    /// `session-prune-VERSION.tgz`.
    pub launcher: PathBuf,
    /// `session-prune-linux-x64-gnu-VERSION.tgz`.
    pub binary: PathBuf,
}

/// Packs the packages; `None` (said, or under CI a failure) where npm is missing.
pub fn pack() -> Option<Packed> {
    let npm = Command::new("npm").arg("--version").output();
    if !npm.is_ok_and(|out| out.status.success()) {
        skip::cannot_run("npm is missing", "install Node.js 18 or later with npm");
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(root.join("scripts/npm-pack.sh"))
        .arg(dir.path())
        .arg("--binary")
        .arg(super::cli::BINARY)
        .output()
        .expect("npm-pack.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = env!("CARGO_PKG_VERSION");
    let launcher = dir.path().join(format!("session-prune-{version}.tgz"));
    let binary = dir
        .path()
        .join(format!("session-prune-linux-x64-gnu-{version}.tgz"));
    let mut packed: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    packed.sort();
    assert_eq!(
        packed,
        [
            format!("session-prune-{version}.tgz"),
            format!("session-prune-linux-x64-gnu-{version}.tgz")
        ]
    );
    Some(Packed {
        _dir: dir,
        launcher,
        binary,
    })
}

/// `npm install --offline` of `tarballs` into the empty folder `prefix`.
pub fn install(prefix: &Path, tarballs: &[&Path]) {
    let out = Command::new("npm")
        .current_dir(prefix)
        .args(["install", "--offline", "--no-audit", "--no-fund"])
        .args(tarballs)
        .output()
        .expect("npm install");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
