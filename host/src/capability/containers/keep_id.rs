//! One keep-id container creation at a time per Podman service.
//!
//! Podman reads the user's subordinate ID ranges through shadow's libsubid
//! when it sets up a `keep-id` user namespace, and libsubid is not safe to
//! call from two threads at once: two concurrent creates on one rootless
//! `podman system service` can kill the service with SIGSEGV in
//! `subid_get_uid_ranges` (containers/storage issue 2030, seen here with
//! Podman 4.3 when two runs started together). Every run after that finds
//! no engine. A run cannot fix the service, but it can avoid the race: the
//! create request is sent while holding an `flock` named after the socket,
//! which excludes other runs of this process and of every other sanddune
//! process of the same user. The kernel drops it with a dying process.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long to wait for another run's create. A create takes well under a
/// second; past this the holder is stuck and waiting more helps nobody, so
/// the create goes ahead unserialized.
const WAIT: Duration = Duration::from_secs(60);

/// Held while one keep-id create request is in flight.
pub(super) struct KeepIdLock {
    _file: File,
}

/// Whether a create with this user-namespace mode makes Podman read the
/// subordinate ID ranges.
pub(super) fn needs_lock(userns: Option<&str>) -> bool {
    userns.is_some_and(|m| m == "keep-id" || m.starts_with("keep-id:"))
}

impl KeepIdLock {
    /// Wait for the lock of the service at `socket`. `None` when it cannot
    /// be had (no lock file can be opened, or another holder kept it past
    /// the wait): the create then goes ahead as it would have without it.
    pub(super) async fn acquire(socket: &str) -> Option<Self> {
        let path = lock_path(socket);
        let file = match open(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!("keep-id create lock {}: {e}", path.display());
                return None;
            }
        };
        let deadline = Instant::now() + WAIT;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Some(Self { _file: file });
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    "{} has been held for over {} s: creating without it",
                    path.display(),
                    WAIT.as_secs()
                );
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The lock file of the service at `socket`: in the user's own runtime
/// directory when there is one (no other user can plant a file there),
/// else in the temporary directory.
fn lock_path(socket: &str) -> PathBuf {
    // The socket's path spelled as a file name: stable across versions of
    // sanddune, so an older and a newer binary exclude each other too.
    let spelled: String = socket
        .trim_start_matches("unix://")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = format!("sanddune-keep-id{spelled}.lock");
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    dir.join(name)
}

/// Open (creating, mode 0600) without following a symlink someone else
/// planted at the path.
fn open(path: &std::path::Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keep_id_modes_take_the_lock() {
        assert!(needs_lock(Some("keep-id")));
        assert!(needs_lock(Some("keep-id:uid=1000,gid=1000")));
        assert!(!needs_lock(None));
        assert!(!needs_lock(Some("")));
        assert!(!needs_lock(Some("host")));
    }

    #[test]
    fn each_service_has_its_own_lock_file() {
        let a = lock_path("unix:///run/user/1001/podman/podman.sock");
        let b = lock_path("unix:///run/podman/podman.sock");
        assert_ne!(a, b);
        assert_eq!(a, lock_path("unix:///run/user/1001/podman/podman.sock"));
    }

    #[tokio::test]
    async fn a_second_holder_waits_for_the_first() {
        let socket = format!("unix:///nonexistent/{}.sock", std::process::id());
        let first = KeepIdLock::acquire(&socket).await.expect("first lock");
        let second = tokio::spawn({
            let socket = socket.clone();
            async move { KeepIdLock::acquire(&socket).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!second.is_finished(), "the second took a held lock");
        drop(first);
        assert!(second.await.unwrap());
        let _ = std::fs::remove_file(lock_path(&socket));
    }
}
