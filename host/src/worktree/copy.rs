//! copyToWorktree: files of the host repository that git does not carry
//! (`.env`, `node_modules`, ...) copied into a worktree before the sandbox
//! starts. Copy-on-write where the filesystem can, never hardlinks: the
//! agent's edits must not write through to the user's files (ADR 0005).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// `timeouts.copyToWorktreeMs` when the caller sets none.
pub const DEFAULT_COPY_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes copied between two looks at the deadline when a file cannot be
/// cloned.
const CHUNK: usize = 1 << 20;

enum Stop {
    Timeout,
    Io(PathBuf, std::io::Error),
}

/// Copy each of `paths` (relative to `root`, or absolute inside it) to the
/// same relative place under `worktree`, replacing what is there. Every path
/// is checked before anything is copied.
pub(super) fn copy_to_worktree(
    root: &Path,
    worktree: &Path,
    paths: &[PathBuf],
    timeout: Duration,
) -> Result<()> {
    let items = paths
        .iter()
        .map(|p| resolve(root, p))
        .collect::<Result<Vec<_>>>()?;
    for (given, rel) in paths.iter().zip(&items) {
        let src = root.join(rel);
        if std::fs::symlink_metadata(&src).is_err() {
            return Err(Error::input(format!(
                "copyToWorktree: `{}` does not exist ({}); nothing was copied",
                given.display(),
                src.display()
            )));
        }
        refuse_symlinked_parent(worktree, rel)?;
    }
    // No deadline when the timeout is too large to add to now.
    let deadline = Instant::now().checked_add(timeout);
    for (i, rel) in items.iter().enumerate() {
        let dst = worktree.join(rel);
        let result = replace(&root.join(rel), &dst, deadline);
        let Err(stop) = result else { continue };
        let removed = match remove(&dst) {
            Ok(()) => "its partial copy was removed from the worktree".to_string(),
            Err(e) => format!(
                "its partial copy at {} could not be removed ({e}): remove it by hand",
                dst.display()
            ),
        };
        let done = if i == 0 {
            String::new()
        } else {
            let names: Vec<String> = items[..i]
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect();
            format!("; copied before it: {}", names.join(", "))
        };
        return Err(Error::Other(match stop {
            Stop::Timeout => anyhow::anyhow!(
                "copyToWorktree: copying `{}` did not finish within the {} ms timeout, so {removed}{done}; raise timeouts.copyToWorktreeMs or copy less",
                rel.display(),
                timeout.as_millis()
            ),
            Stop::Io(at, e) => anyhow::anyhow!(
                "copyToWorktree: copying `{}` failed at {}: {e}; {removed}{done}",
                rel.display(),
                at.display()
            ),
        }));
    }
    Ok(())
}

/// The path relative to the repository root. Absolute paths must lie inside
/// the repository (their place in the worktree is their place in the repo);
/// `..`, the root itself, `.git` and the worktrees are refused.
fn resolve(root: &Path, given: &Path) -> Result<PathBuf> {
    let outside = || {
        Error::input(format!(
            "copyToWorktree: `{}` is outside the repository {}: list files or directories inside it, relative to its root",
            given.display(),
            root.display()
        ))
    };
    let relative = if given.is_absolute() {
        let canonical_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        given
            .strip_prefix(root)
            .or_else(|_| given.strip_prefix(&canonical_root))
            .map_err(|_| outside())?
    } else {
        given
    };
    let mut rel = PathBuf::new();
    for c in relative.components() {
        match c {
            Component::Normal(part) => rel.push(part),
            Component::CurDir => {}
            _ => return Err(outside()),
        }
    }
    if rel.as_os_str().is_empty() {
        return Err(Error::input(format!(
            "copyToWorktree: `{}` is the repository itself: the worktree already has its tracked files; list the untracked files or directories it needs",
            given.display()
        )));
    }
    if rel.starts_with(".git") || rel.starts_with(".sanddune/worktrees") {
        return Err(Error::input(format!(
            "copyToWorktree: `{}` is sanddune's or git's own data and cannot be copied into a worktree",
            given.display()
        )));
    }
    Ok(rel)
}

/// A tracked symlink in the worktree must not redirect the copy outside it.
fn refuse_symlinked_parent(worktree: &Path, rel: &Path) -> Result<()> {
    let mut at = worktree.to_path_buf();
    let parents: Vec<_> = rel
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .collect();
    for c in parents {
        at.push(c);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::input(format!(
                "copyToWorktree: cannot copy `{}`: {} is a symlink in the worktree",
                rel.display(),
                at.display()
            )));
        }
    }
    Ok(())
}

fn replace(src: &Path, dst: &Path, deadline: Option<Instant>) -> Result<(), Stop> {
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Stop::Io(parent.to_path_buf(), e))?;
    }
    remove(dst).map_err(|e| Stop::Io(dst.to_path_buf(), e))?;
    copy_entry(src, dst, deadline)
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn copy_entry(src: &Path, dst: &Path, deadline: Option<Instant>) -> Result<(), Stop> {
    let io = |at: &Path| {
        let at = at.to_path_buf();
        move |e| Stop::Io(at, e)
    };
    let meta = std::fs::symlink_metadata(src).map_err(io(src))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(src).map_err(io(src))?;
        std::os::unix::fs::symlink(target, dst).map_err(io(dst))?;
    } else if kind.is_dir() {
        std::fs::create_dir(dst).map_err(io(dst))?;
        for entry in std::fs::read_dir(src).map_err(io(src))? {
            let entry = entry.map_err(io(src))?;
            copy_entry(&entry.path(), &dst.join(entry.file_name()), deadline)?;
        }
        // After the contents: a read-only directory must still be filled.
        std::fs::set_permissions(dst, meta.permissions()).map_err(io(dst))?;
    } else if kind.is_file() {
        copy_file(src, dst, deadline)?;
        std::fs::set_permissions(dst, meta.permissions()).map_err(io(dst))?;
    } else {
        tracing::warn!(path = %src.display(), "copyToWorktree skips what is neither a file, a directory nor a symlink");
    }
    check(deadline)
}

fn check(deadline: Option<Instant>) -> Result<(), Stop> {
    match deadline {
        Some(d) if Instant::now() >= d => Err(Stop::Timeout),
        _ => Ok(()),
    }
}

/// A copy-on-write clone when the filesystem offers one (btrfs, XFS, ...),
/// else the bytes in chunks, looking at the deadline between them.
fn copy_file(src: &Path, dst: &Path, deadline: Option<Instant>) -> Result<(), Stop> {
    let mut from = File::open(src).map_err(|e| Stop::Io(src.to_path_buf(), e))?;
    let mut to = File::create_new(dst).map_err(|e| Stop::Io(dst.to_path_buf(), e))?;
    if clone_file(&from, &to) {
        return Ok(());
    }
    let mut buf = vec![0; CHUNK];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Stop::Io(src.to_path_buf(), e)),
        };
        to.write_all(&buf[..n])
            .map_err(|e| Stop::Io(dst.to_path_buf(), e))?;
        check(deadline)?;
    }
}

#[cfg(target_os = "linux")]
fn clone_file(from: &File, to: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: FICLONE reads one descriptor and writes the other, both open
    // for the duration of the call; failure (EOPNOTSUPP, EXDEV) changes
    // nothing.
    unsafe { libc::ioctl(to.as_raw_fd(), libc::FICLONE, from.as_raw_fd()) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn clone_file(_: &File, _: &File) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_inside_the_repository_only() {
        let root = Path::new("/repo");
        let ok = |p: &str| resolve(root, Path::new(p)).unwrap();
        assert_eq!(ok(".env"), PathBuf::from(".env"));
        assert_eq!(
            ok("./config/local.json"),
            PathBuf::from("config/local.json")
        );
        assert_eq!(ok("/repo/node_modules"), PathBuf::from("node_modules"));
        let err = |p: &str| resolve(root, Path::new(p)).unwrap_err().to_string();
        assert!(err("/etc/passwd").contains("outside the repository /repo"));
        assert!(err("../other/.env").contains("outside the repository"));
        assert!(err("a/../../b").contains("outside the repository"));
        assert!(err(".").contains("is the repository itself"));
        assert!(err("/repo").contains("is the repository itself"));
        assert!(err(".git/config").contains("git's own data"));
        assert!(err(".sanddune/worktrees/x").contains("sanddune's or git's own data"));
    }
}
