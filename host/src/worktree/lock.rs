//! [`GitLock`]: one git-metadata mutation at a time per repository, across
//! threads and processes: `flock` on `<common git dir>/sanddune.lock`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a git-metadata mutation of another task may keep us waiting.
/// They are short (a branch, a worktree, a ref); this only bounds a hung one.
const GIT_LOCK_WAIT: Duration = Duration::from_secs(60);

/// Held while sanddune changes git metadata (branches, worktrees, the
/// target branch on merge), so parallel runs on one repository never race
/// on git's own lock files (`index.lock`, `packed-refs.lock`, ...). Each
/// acquisition opens its own file description, so `flock` excludes threads
/// of one process as well as other processes, and the kernel drops the lock
/// of a process that dies.
#[derive(Debug)]
pub(super) struct GitLock {
    _file: File,
}

impl GitLock {
    pub(super) fn acquire(git_dir: &Path) -> Result<Self> {
        let path = git_dir.join("sanddune.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::Other(anyhow::anyhow!("open {}: {e}", path.display())))?;
        let deadline = Instant::now() + GIT_LOCK_WAIT;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(Self { _file: file });
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Some(libc::EWOULDBLOCK) => {
                    return Err(Error::Other(anyhow::anyhow!(
                        "another sanddune process has held {} for over {} s while changing git metadata: if none is running, retry",
                        path.display(),
                        GIT_LOCK_WAIT.as_secs()
                    )));
                }
                _ => {
                    return Err(Error::Other(anyhow::anyhow!(
                        "lock {}: {e}",
                        path.display()
                    )));
                }
            }
        }
    }
}
