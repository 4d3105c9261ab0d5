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

/// The README's line that installs the plugin, as a user runs it after the packing.
pub const README_PLUGIN_LINE: &str =
    "scripts/npm-pack.sh out && npm install --prefix ~/.local/share/session-prune ./out/session-prune-*.tgz";

/// Installs the packed tarballs as the README's plugin line does (its `npm install` part, run
/// by bash with `home` as `HOME`, beside `out/` holding the tarballs, offline), after checking
/// the README still holds the line; the plugin folder the README's `"plugin"` entry names.
pub fn install_as_the_readme_says(home: &Path, packed: &Packed) -> std::path::PathBuf {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README");
    assert!(
        readme.contains(README_PLUGIN_LINE)
            && readme.contains(
                r#""plugin": ["file:///home/YOU/.local/share/session-prune/node_modules/session-prune"]"#
            ),
        "the README's plugin lines changed"
    );
    let out = home.join("out");
    std::fs::create_dir_all(&out).expect("out");
    for tarball in [&packed.launcher, &packed.binary] {
        std::fs::copy(tarball, out.join(tarball.file_name().expect("name"))).expect("copy");
    }
    let npm_part = README_PLUGIN_LINE
        .split_once(" && ")
        .expect("pack && install")
        .1
        .replacen(
            "npm install",
            "npm install --offline --no-audit --no-fund",
            1,
        );
    let installed = Command::new("bash")
        .current_dir(home)
        .env("HOME", home)
        .arg("-c")
        .arg(&npm_part)
        .output()
        .expect("npm install");
    assert!(
        installed.status.success(),
        "{npm_part}: {}",
        String::from_utf8_lossy(&installed.stderr)
    );
    home.join(".local/share/session-prune/node_modules/session-prune")
}
