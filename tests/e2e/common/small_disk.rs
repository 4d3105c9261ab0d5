//! A small disk for tests of running out of room: a tmpfs mounted on a new folder (root only;
//! CI runs as root, and there a test that cannot mount one fails).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// A tmpfs mounted on a new folder, unmounted on drop.
pub struct SmallDisk {
    _parent: tempfile::TempDir,
    pub mount: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`3M`); `None`, after saying so, when not root outside CI.
    pub fn mount(size: &str) -> Option<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            crate::skip::cannot_run(
                "mounting a small tmpfs needs root",
                "Run the tests as root (CI does).",
            );
            return None;
        }
        let parent = tempfile::tempdir().expect("tempdir");
        let mount = parent.path().join("disk");
        std::fs::create_dir(&mount).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount)
            .status()
            .expect("mount");
        assert!(status.success(), "mount tmpfs");
        Some(Self {
            _parent: parent,
            mount,
        })
    }

    /// Gives the tmpfs another size.
    pub fn resize(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.mount)
            .status()
            .expect("remount");
        assert!(status.success(), "resize tmpfs");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}
