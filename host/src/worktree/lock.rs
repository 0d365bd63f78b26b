//! The two locks of the worktree manager (ADR 0005):
//!
//! - [`WorktreeLock`]: one run per worktree. A file
//!   `.sanddune/worktrees/<name>.lock` holding who owns the worktree; a lock
//!   whose process is gone is reclaimed.
//! - [`GitLock`]: one git-metadata mutation at a time per repository, across
//!   threads and processes: `flock` on `<common git dir>/sanddune.lock`.
//!
//! And git's own lock files (`index.lock`, `<ref>.lock`) that a process
//! killed inside a git write leaves: [`clear_stale_git_locks`].

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::own_dir::{self, OwnDir};

/// What a worktree lock file says: who holds the worktree, since when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockHolder {
    pub pid: u32,
    pub branch: String,
    /// RFC 3339, UTC.
    pub created_at: String,
}

/// An owned lock on one managed worktree. Released by
/// [`WorktreeLock::release`], or when dropped (a panic or an early return
/// still frees the worktree).
#[derive(Debug)]
pub struct WorktreeLock {
    path: PathBuf,
    holder: LockHolder,
    // Atomic, not Cell: a `&Worktree` is held across awaits in Send futures.
    released: AtomicBool,
}

/// Attempts before giving up on a lock file that keeps changing under us
/// (released and retaken between our reads).
const ACQUIRE_ATTEMPTS: usize = 3;

impl WorktreeLock {
    /// Take the lock of worktree `name` in `worktrees_dir`, reclaiming it
    /// when its holder's process is gone. `git_dir` is the common git dir,
    /// whose [`GitLock`] makes reclaiming atomic.
    pub(super) fn acquire(
        worktrees_dir: &Path,
        name: &str,
        branch: &str,
        git_dir: &Path,
    ) -> Result<Self> {
        // `.sanddune/worktrees` swapped for a link (an agent writes the
        // repository root under head) would put the lock, and the worktree,
        // wherever it points.
        OwnDir::open(worktrees_dir, 2, false)?;
        // No worktree holds the host's branch; a lock that says one does
        // is forged, and gc would move that branch.
        if checked_out(git_dir).as_deref() == Some(branch) {
            return Err(Error::input(format!(
                "branch `{branch}` is checked out in the host repository; pick another branch for the agent"
            )));
        }
        let path = worktrees_dir.join(format!("{name}.lock"));
        let holder = LockHolder {
            pid: std::process::id(),
            branch: branch.to_string(),
            created_at: rfc3339_utc(SystemTime::now()),
        };
        let content = serde_json::to_vec(&holder).expect("a lock holder serializes");
        let mut last = None;
        for _ in 0..ACQUIRE_ATTEMPTS {
            if publish(worktrees_dir, &path, &content)? {
                return Ok(Self {
                    path,
                    holder,
                    released: AtomicBool::new(false),
                });
            }
            let Some(seen) = read(&path)? else {
                continue; // released between our attempt and our read
            };
            let current: LockHolder = serde_json::from_slice(&seen).map_err(|_| {
                Error::input(format!(
                    "the lock file {} of worktree `{name}` is not one sanddune wrote: if no sanddune run uses this worktree, remove the file and run again",
                    path.display()
                ))
            })?;
            if process_alive(current.pid) {
                return Err(contention(name, &path, &current));
            }
            reclaim(&path, &seen, git_dir)?;
            last = Some(current);
        }
        Err(match last {
            Some(h) => contention(name, &path, &h),
            None => Error::Other(anyhow::anyhow!(
                "cannot take the lock {}: it keeps changing; retry",
                path.display()
            )),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }

    /// Remove the lock file; later calls and the drop do nothing.
    pub fn release(&self) -> Result<()> {
        if self.released.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Other(
                anyhow::anyhow!("remove the worktree lock {}: {e}", self.path.display()),
            )),
            _ => Ok(()),
        }
    }
}

impl WorktreeLock {
    /// Leave the lock file, naming this process, in place: once the
    /// process exits, the worktree is an orphan again for the next gc.
    pub(super) fn leave(self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

impl Drop for WorktreeLock {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// Create the lock file with its full content in one step: write a temp file
/// next to it and hard-link it into place. `link(2)` fails when the name
/// exists, exactly like `O_CREAT | O_EXCL`, and a reader never sees a
/// half-written lock. False when the lock is taken.
fn publish(dir: &Path, path: &Path, content: &[u8]) -> Result<bool> {
    let io = |e: std::io::Error| {
        Error::Other(anyhow::anyhow!(
            "create the worktree lock {}: {e}",
            path.display()
        ))
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".lock-")
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(content).map_err(io)?;
    match std::fs::hard_link(tmp.path(), path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io(e)),
    }
}

/// A lock's bytes; a link or a FIFO in its place (which no run made) is
/// refused, naming it, and never followed or waited on.
fn read(path: &Path) -> Result<Option<Vec<u8>>> {
    own_dir::read_regular(path)
}

/// Who holds the lock at `path`, for `gc`; a lock file sanddune did not
/// write (a link, a FIFO, not its JSON) is passed over, with a warning for
/// anything but a regular file. So is a lock naming a branch its worktree
/// would not have (`run-<id>` holds `sanddune/run-<id>`, a branch worktree
/// its branch, and a warm container's `run-<id>` that a branch run claimed
/// the branch git's own record of that worktree says it has), or beside a
/// pending sync (`<name>.sync`) that is not a regular file: gc would move
/// that branch to the commit the sync names.
pub(super) fn read_holder(path: &Path, git_dir: &Path) -> Option<LockHolder> {
    let holder: LockHolder = match read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes?).ok()?,
        Err(e) => {
            tracing::warn!("{e}");
            return None;
        }
    };
    let name = path.file_stem()?.to_str()?;
    let claimed = || {
        name.starts_with("run-")
            && std::fs::read_to_string(git_dir.join("worktrees").join(name).join("HEAD"))
                .is_ok_and(|head| head.trim_end() == format!("ref: refs/heads/{}", holder.branch))
    };
    if super::worktree_name(&holder.branch) != name
        && holder.branch != format!("sanddune/{name}")
        && !claimed()
    {
        tracing::warn!(
            "{} names branch `{}`, which worktree `{name}` never holds: not a lock sanddune wrote; passed over",
            path.display(),
            holder.branch
        );
        return None;
    }
    let sync = path.with_extension("sync");
    if let Err(e) = own_dir::read_regular(&sync) {
        tracing::warn!("{e}");
        return None;
    }
    Some(holder)
}

/// Remove a stale lock, but only if it is still the one we judged stale:
/// under the git lock, two reclaimers cannot both remove it, and one cannot
/// remove the fresh lock the other just took.
fn reclaim(path: &Path, stale: &[u8], git_dir: &Path) -> Result<()> {
    let _git = GitLock::acquire(git_dir)?;
    if read(path)?.as_deref() == Some(stale) {
        std::fs::remove_file(path).map_err(|e| {
            Error::Other(anyhow::anyhow!(
                "remove the stale worktree lock {}: {e}",
                path.display()
            ))
        })?;
        tracing::info!(lock = %path.display(), "reclaimed a worktree lock whose process is gone");
    }
    Ok(())
}

/// The branch checked out in the repository whose common git dir is
/// `git_dir`.
fn checked_out(git_dir: &Path) -> Option<String> {
    let repo = git2::Repository::open(git_dir).ok()?;
    let head = repo.head().ok()?;
    let name = head.shorthand().ok()?;
    head.is_branch().then(|| name.to_string())
}

fn contention(name: &str, path: &Path, h: &LockHolder) -> Error {
    let by = if h.pid == std::process::id() {
        format!(
            "another task of this process ({}) since {}: wait for it to close the worktree or use another branch",
            h.pid, h.created_at
        )
    } else {
        format!(
            "process {} since {}: wait for that run to finish or use another branch; if process {} is not a sanddune run, remove {}",
            h.pid,
            h.created_at,
            h.pid,
            path.display()
        )
    };
    Error::input(format!(
        "worktree `{name}` (branch `{}`) is in use by {by}",
        h.branch
    ))
}

/// `kill(pid, 0)`: only "no such process" means dead; a process of another
/// user (EPERM) is alive.
pub(super) fn process_alive(pid: u32) -> bool {
    // 0 and values beyond pid_t would address process groups or nothing.
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

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
    file: File,
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
                return Ok(Self { file });
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

impl GitLock {
    /// Let `cmd`'s process, and every process it starts, hold this lock
    /// too: the kernel drops it only when the last of them exits. A `git
    /// fetch` that outlives a killed sanddune (with its `index-pack` still
    /// writing objects) then keeps `sanddune gc` waiting until it is done,
    /// instead of gc judging a state that is still changing.
    pub(super) fn share_with(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let fd = self.file.as_raw_fd();
        // SAFETY: between fork and exec the closure only calls fcntl, which
        // is async-signal-safe, on the child's copy of a descriptor that is
        // open for as long as `self` (which outlives the spawn).
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// `2026-11-22T13:40:15Z`, without a date crate (days-to-civil, Howard
/// Hinnant's algorithm).
fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// How long a git lock file may stay before it counts as a killed
/// process's: a live git command holds one for moments.
const STALE_GIT_LOCK_WAIT: Duration = Duration::from_secs(3);

/// Remove the git lock files (`index.lock`, `<ref>.lock`) in `paths` that a
/// process killed inside a git write left: those made at or after `since`
/// (when the killed process began the work) that outlive
/// [`STALE_GIT_LOCK_WAIT`]. One older than that is another git command's (a
/// `git commit` waiting on its editor holds `index.lock`): never removed,
/// an error naming it, for `what` (what could not be done). Call under the
/// [`GitLock`], so no sanddune process is writing.
pub(super) fn clear_stale_git_locks(
    paths: &[PathBuf],
    since: SystemTime,
    what: &str,
) -> Result<()> {
    let deadline = Instant::now() + STALE_GIT_LOCK_WAIT;
    let mut left: Vec<&PathBuf> = paths.iter().collect();
    loop {
        left.retain(|path| std::fs::symlink_metadata(path).is_ok());
        if let Some(theirs) = left.iter().find(|path| {
            std::fs::symlink_metadata(path)
                .and_then(|m| m.modified())
                .is_ok_and(|made| made < since)
        }) {
            return Err(Error::Agent(format!(
                "cannot {what}: another git command holds {}; once it is done (or, if none runs, after removing the file) run `sanddune gc`",
                theirs.display()
            )));
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for path in left {
        tracing::warn!(path = %path.display(), "removing a git lock file a killed process left");
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Other(anyhow::anyhow!(
                    "remove the stale git lock {}: {e}",
                    path.display()
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_786_815);
        assert_eq!(rfc3339_utc(t), "2026-11-27T13:40:15Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_825_600);
        assert_eq!(rfc3339_utc(t), "2000-02-29T12:00:00Z");
    }

    #[test]
    fn only_a_missing_process_is_dead() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(0));
        assert!(!process_alive(u32::MAX));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
