//! Root in a bind-mount sandbox (a sudo hook, a root remote user) writes
//! the worktree the host shares: a setuid-root shell it leaves there runs
//! with euid 0 when the user runs it, a device node it makes opens the
//! host's devices. Once such a sandbox is closed, and as soon as its setup
//! ran something as root, [`defuse`] takes the setuid and setgid bits off
//! every file in the worktree and removes device nodes, and says which.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use super::log::RunLog;
use crate::hooks::Hooks;
use crate::plugin::sandbox::SandboxKind;

/// setuid and setgid.
const PRIVILEGE_BITS: u32 = 0o6000;

/// After a bind-mount sandbox closes: defuse its worktree, warning in the
/// run log.
pub(super) fn after_close(kind: SandboxKind, dir: &Path, log: &RunLog) {
    if kind == SandboxKind::BindMount {
        warn(dir, log);
    }
}

/// After a bind-mount sandbox's setup hooks, when one of them ran as root
/// (a sudo hook, a dev container's): the agent and the host hooks must not
/// find what it left while the sandbox is up.
pub(super) fn after_setup(kind: SandboxKind, hooks: &Hooks, dir: &Path, log: &RunLog) {
    let as_root = hooks.sandbox_on_sandbox_ready.iter().any(|h| h.sudo)
        || hooks.devcontainer.iter().any(|h| h.hook.sudo);
    if kind == SandboxKind::BindMount && as_root {
        warn(dir, log);
    }
}

fn warn(dir: &Path, log: &RunLog) {
    for warning in defuse(dir) {
        log.line(&format!("warning: {warning}"));
    }
}

/// Defuse everything under `dir` (symlinks are not followed): one warning
/// for each file changed or removed, or that could not be.
fn defuse(dir: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    // Under head the repository's objects are in the worktree; no sandbox
    // writes them (ADR 0025), and on a big repository they are most of the
    // files to walk.
    let objects = dir.join(".git/objects");
    walk(dir, &objects, &mut warnings);
    warnings
}

fn walk(dir: &Path, skip: &Path, warnings: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == skip {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        if kind.is_dir() {
            walk(&path, skip, warnings);
        } else if kind.is_block_device() || kind.is_char_device() {
            warnings.push(match std::fs::remove_file(&path) {
                Ok(()) => format!(
                    "removed the device node {} that the sandbox left in the worktree",
                    path.display()
                ),
                Err(e) => format!(
                    "the sandbox left the device node {}, and it could not be removed ({e}): remove it before using the worktree",
                    path.display()
                ),
            });
        } else if kind.is_file() && meta.permissions().mode() & PRIVILEGE_BITS != 0 {
            warnings.push(strip(&path, meta.permissions().mode()));
        }
    }
}

/// Take the bits off; a file the user may not chmod (root's) is removed.
fn strip(path: &Path, mode: u32) -> String {
    let which = match (mode & 0o4000 != 0, mode & 0o2000 != 0) {
        (true, true) => "setuid and setgid",
        (true, false) => "setuid",
        _ => "setgid",
    };
    let plain = std::fs::Permissions::from_mode(mode & !PRIVILEGE_BITS & 0o7777);
    if std::fs::set_permissions(path, plain).is_ok() {
        return format!(
            "took the {which} bit off {}, which the sandbox left in the worktree",
            path.display()
        );
    }
    match std::fs::remove_file(path) {
        Ok(()) => format!(
            "removed {}: the sandbox left it {which} and it cannot be changed here",
            path.display()
        ),
        Err(e) => format!(
            "the sandbox left {} {which}, and it could not be changed or removed ({e}): do not run it",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setuid_and_setgid_bits_come_off_and_device_nodes_go() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        let shell = root.join("sub/sh");
        std::fs::write(&shell, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let group = root.join("g");
        std::fs::write(&group, "").unwrap();
        std::fs::set_permissions(&group, std::fs::Permissions::from_mode(0o2711)).unwrap();
        let plain = root.join("README.md");
        std::fs::write(&plain, "# x\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        // A symlink is not followed: its target is not the worktree's.
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("t");
        std::fs::write(&target, "").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o4755)).unwrap();
        std::os::unix::fs::symlink(&target, root.join("link")).unwrap();
        // Making a device node needs root (CAP_MKNOD); the check runs where it can.
        let node = root.join("null");
        let c_path = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mknod only reads it.
        let made =
            unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) }
                == 0;

        // The repository's objects are git's, never the sandbox's.
        std::fs::create_dir_all(root.join(".git/objects/ab")).unwrap();
        let object = root.join(".git/objects/ab/cd");
        std::fs::write(&object, "").unwrap();
        std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o4444)).unwrap();

        let warnings = defuse(root);

        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&shell), 0o755);
        assert_eq!(mode(&group), 0o711);
        assert_eq!(mode(&plain), 0o644);
        assert_eq!(mode(&target), 0o4755, "a symlink's target is left alone");
        assert_eq!(mode(&object), 0o4444, "not walked");
        let shell_said = format!("took the setuid bit off {}", shell.display());
        assert!(
            warnings.iter().any(|w| w.contains(&shell_said)),
            "{warnings:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains("setgid bit off")),
            "{warnings:?}"
        );
        if made {
            assert!(!node.exists() && std::fs::symlink_metadata(&node).is_err());
            assert!(
                warnings.iter().any(|w| w.contains("device node")),
                "{warnings:?}"
            );
            assert_eq!(warnings.len(), 3, "{warnings:?}");
        } else {
            assert_eq!(warnings.len(), 2, "{warnings:?}");
        }
    }
}
