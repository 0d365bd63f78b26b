//! The engines' side of warm sandboxes (ADR 0037; the slots are
//! `capability::pool`'s): what makes two containers the same, and the
//! claim's wake. A container with a link directory is woken through a pipe
//! there ([`WAKE`]), which only the host can write; one without, by
//! `SIGUSR1`, which costs the engine a runtime call (about 20 ms on
//! dockerd, and an exec started beside it waits for it).

use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::KillContainerOptionsBuilder;
use sha2::{Digest, Sha256};

use super::snapshot::hex;
use crate::capability::pool::Claimed;

/// The pipe in a warm container's link directory its first process waits on.
pub const WAKE: &str = "wake";

/// What makes two containers the same for a run: everything of the create
/// but its env (given per exec) and the host's labels (whose it is), and
/// the link's forwarder a warm one runs from its start.
pub(super) fn fingerprint(
    body: &ContainerCreateBody,
    networks: &[String],
    plugin: &str,
    forwarder: Option<&[String]>,
) -> String {
    let mut body = body.clone();
    body.env = None;
    let value = serde_json::json!({
        "body": body,
        "networks": networks,
        "plugin": plugin,
        "forwarder": forwarder,
    });
    hex(&Sha256::digest(value.to_string().as_bytes()))
}

/// Take the warm container `claim` holds for a create whose would-be
/// container has `fingerprint`: wake it (its first process becomes the
/// provider's) and check it runs. Its execs get `env` first.
pub(super) async fn adopt(
    claim: &Claimed,
    docker: &Docker,
    fingerprint: &str,
    env: Vec<(String, String)>,
) -> Result<String, String> {
    claim.fits(fingerprint)?;
    let record = &claim.record;
    let id = &record.container;
    match &record.wake {
        Some(pipe) => wake(pipe)?,
        None => {
            let signal = KillContainerOptionsBuilder::default()
                .signal("USR1")
                .build();
            docker
                .kill_container(id, Some(signal))
                .await
                .map_err(|e| format!("it did not take the claim's signal: {e}"))?;
        }
    }
    // The forwarder was started with it; without it the run's link would
    // be cut off.
    let forwarder = async {
        match &record.forwarder {
            Some(exec) => docker
                .inspect_exec(exec)
                .await
                .is_ok_and(|e| e.running == Some(true)),
            None => true,
        }
    };
    let (info, forwarder) = tokio::join!(docker.inspect_container(id, None), forwarder);
    let info = info.map_err(|e| format!("cannot inspect it: {e}"))?;
    if info.state.and_then(|s| s.running) != Some(true) {
        return Err("it is no longer running".into());
    }
    if !forwarder {
        return Err("its link's forwarder is not running".into());
    }
    claim.took(id, env);
    Ok(id.clone())
}

/// Make the pipe a warm container waits on in its link directory `dir`:
/// readable by the container's user, whoever it maps to; only the host,
/// which owns the directory, can write or replace it.
pub(super) fn make_wake(dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let pipe = dir.join(WAKE);
    let _ = std::fs::remove_file(&pipe);
    let path = std::ffi::CString::new(pipe.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a pipe path with a NUL"))?;
    // SAFETY: a NUL-terminated path this function owns.
    if unsafe { libc::mkfifo(path.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    std::fs::set_permissions(&pipe, std::fs::Permissions::from_mode(0o644))?;
    Ok(pipe)
}

/// Wake a warm container through its pipe, which also proves its waiting
/// shell is there (no reader: `ENXIO`); the pipe then goes, so the link
/// directory is as a new container's.
fn wake(pipe: &Path) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(pipe)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => "it no longer waits for a run".to_string(),
            _ => format!("cannot wake it through {}: {e}", pipe.display()),
        })?;
    if !file.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
        return Err(format!("{} is not its pipe", pipe.display()));
    }
    file.write_all(b"go\n")
        .map_err(|e| format!("cannot wake it through {}: {e}", pipe.display()))?;
    drop(file);
    let _ = std::fs::remove_file(pipe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::capability::pool::waiting_entrypoint;

    /// Start the waiting shell of `pipe`'s kind on the host's `sh`, with
    /// `echo handed-over` as the provider's process.
    fn waiting(idle: u64, pipe: Option<&Path>) -> std::process::Child {
        let pipe = pipe.map(|p| p.to_str().unwrap());
        let argv = waiting_entrypoint(
            Duration::from_secs(idle),
            pipe,
            vec!["echo".into(), "handed-over".into()],
        );
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn said(child: std::process::Child) -> String {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    }

    /// Until a reader opens it, the pipe cannot be woken.
    fn wake_when_waiting(pipe: &Path) {
        for _ in 0..1000 {
            match wake(pipe) {
                Ok(()) => return,
                Err(e) if e.contains("no longer waits") => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("the shell never waited on its pipe");
    }

    #[test]
    fn a_shell_woken_through_its_pipe_hands_over_and_the_pipe_goes() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = make_wake(dir.path()).unwrap();
        let shell = waiting(60, Some(&pipe));
        wake_when_waiting(&pipe);
        assert_eq!(said(shell), "handed-over\n");
        // No pipe is left. (The idle `sleep` opens its end in the
        // background: woken first, its redirect can make a plain file in
        // this writable dir. A container's link dir is read-only to it.)
        use std::os::unix::fs::FileTypeExt;
        let left = std::fs::symlink_metadata(&pipe);
        assert!(
            left.is_err() || left.is_ok_and(|m| !m.file_type().is_fifo() && m.len() == 0),
            "the link directory is as a new container's"
        );
        assert!(wake(&pipe).is_err(), "nothing left to wake");
    }

    #[test]
    fn a_shell_not_woken_ends_after_its_idle_lifetime_and_then_cannot_be() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = make_wake(dir.path()).unwrap();
        assert_eq!(said(waiting(1, Some(&pipe))), "", "it ended itself");
        assert!(wake(&pipe).unwrap_err().contains("no longer waits"));
        // The signal's kind ends the same way.
        assert_eq!(said(waiting(1, None)), "");
    }

    #[test]
    fn a_shell_woken_by_the_signal_hands_over() {
        let shell = waiting(60, None);
        // A signal before the trap is set would end the shell: wait until
        // the kernel says it catches SIGUSR1 (bit 10 of `SigCgt`).
        let status = format!("/proc/{}/status", shell.id());
        let catches = || {
            std::fs::read_to_string(&status)
                .ok()
                .and_then(|s| {
                    let mask = s.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
                    u64::from_str_radix(mask.trim(), 16).ok()
                })
                .is_some_and(|mask| mask & (1 << (libc::SIGUSR1 - 1)) != 0)
        };
        for _ in 0..1000 {
            if catches() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(catches(), "the shell never set its trap");
        // SAFETY: signalling a child this test started.
        assert_eq!(unsafe { libc::kill(shell.id() as i32, libc::SIGUSR1) }, 0);
        assert_eq!(said(shell), "handed-over\n");
    }

    #[test]
    fn a_pipe_replaced_by_a_file_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join(WAKE);
        std::fs::write(&pipe, "").unwrap();
        assert!(wake(&pipe).unwrap_err().contains("is not its pipe"));
        assert_eq!(std::fs::read(&pipe).unwrap(), b"");
    }
}
