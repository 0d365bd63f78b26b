//! The hook runner: host hooks run on the host in the worktree, sandbox
//! hooks inside the sandbox (their declarations are in `crate::hooks`). `host.onWorktreeReady` runs one by one before the
//! sandbox exists; `host.onSandboxReady` and `sandbox.onSandboxReady` all run
//! at once after it is up, after a dev container's lifecycle commands
//! (`Hooks::devcontainer`), which run one by one first. The first hook to
//! fail stops the others and the setup; abort kills every hook in flight.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinSet;

use super::abort::AbortHandle;
use super::lanes::{self, Outcome};
use crate::error::{Error, Result};
use crate::hooks::{Hooks, HostHook, SandboxHook};
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox};

pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// Where hook output lines go: (hook label, line).
pub type HookLog = Arc<dyn Fn(&str, &str) + Send + Sync>;

fn timeout_of(ms: Option<u64>) -> Duration {
    ms.map(Duration::from_millis)
        .unwrap_or(DEFAULT_HOOK_TIMEOUT)
}

fn failure(label: &str, command: &str, why: String, tail: &str) -> Error {
    let tail = tail
        .lines()
        .filter(|l| !l.trim().is_empty())
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ");
    let tail = if tail.is_empty() {
        "no output".to_string()
    } else {
        tail
    };
    Error::Hook(format!("{label} hook `{command}` {why}: {tail}"))
}

/// host.onWorktreeReady: one by one, in `dir`.
pub async fn run_on_worktree_ready(
    hooks: &[HostHook],
    dir: &Path,
    abort: &AbortHandle,
    log: &HookLog,
) -> Result<()> {
    for hook in hooks {
        let run = run_host_hook(hook, dir, "host.onWorktreeReady", log.clone());
        tokio::select! {
            r = run => r?,
            () = abort.aborted() => return Err(Error::Aborted(abort.reason())),
        }
    }
    Ok(())
}

fn request(hook: &SandboxHook) -> ExecRequest {
    ExecRequest {
        command: Command::Shell(hook.command.clone()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: hook.sudo,
        timeout_ms: Some(timeout_of(hook.timeout_ms).as_millis() as u64),
    }
}

/// `hooks` in the sandbox side by side, each failure reported as `label`'s.
async fn run_in_sandbox(
    hooks: &[SandboxHook],
    label: &str,
    sandbox: &mut Sandbox,
    abort: &AbortHandle,
    log: &HookLog,
) -> Result<()> {
    if hooks.is_empty() {
        return Ok(());
    }
    let requests = hooks.iter().map(request).collect();
    let (log, owned) = (log.clone(), label.to_string());
    let sink: lanes::LineSink = Arc::new(move |_, line| log(&owned, &line.text));
    match lanes::exec_all(sandbox, requests, abort, sink).await? {
        Outcome::Done(_) => Ok(()),
        Outcome::Failed(i, out) => {
            let hook = &hooks[i];
            let why = if out.timed_out {
                format!(
                    "timed out after {} ms",
                    timeout_of(hook.timeout_ms).as_millis()
                )
            } else {
                format!("exited with code {}", out.exit_code)
            };
            let tail = if out.stderr.trim().is_empty() {
                &out.stdout
            } else {
                &out.stderr
            };
            Err(failure(label, &hook.command, why, tail))
        }
    }
}

/// The dev container's hooks one by one, then host.onSandboxReady and
/// sandbox.onSandboxReady, all at once.
pub async fn run_on_sandbox_ready(
    hooks: &Hooks,
    dir: &Path,
    sandbox: &mut Sandbox,
    abort: &AbortHandle,
    log: &HookLog,
) -> Result<()> {
    for named in &hooks.devcontainer {
        let label = format!("devcontainer {}", named.name);
        run_in_sandbox(
            std::slice::from_ref(&named.hook),
            &label,
            sandbox,
            abort,
            log,
        )
        .await?;
    }
    let mut host = JoinSet::new();
    for hook in hooks.host_on_sandbox_ready.clone() {
        let (dir, log) = (dir.to_path_buf(), log.clone());
        // Dropping the set aborts these tasks, and with them their
        // processes (kill_on_drop + the group kill below).
        host.spawn(async move { run_host_hook(&hook, &dir, "host.onSandboxReady", log).await });
    }
    let in_sandbox = run_in_sandbox(
        &hooks.sandbox_on_sandbox_ready,
        "sandbox.onSandboxReady",
        sandbox,
        abort,
        log,
    );
    let on_host = async {
        while let Some(joined) = host.join_next().await {
            joined.map_err(|e| Error::Other(anyhow::anyhow!("a host hook task failed: {e}")))??;
        }
        Ok::<(), Error>(())
    };
    // The first failure wins; the other side is dropped (host hooks killed)
    // or stopped by its own fail-fast.
    let both = async { tokio::try_join!(in_sandbox, on_host) };
    tokio::select! {
        r = both => r.map(|_| ()),
        () = abort.aborted() => Err(Error::Aborted(abort.reason())),
    }
}

/// One host hook: `sh -c` in `dir`, in its own process group so a timeout or
/// an abort (the future dropped) kills everything it started.
async fn run_host_hook(hook: &HostHook, dir: &Path, label: &str, log: HookLog) -> Result<()> {
    let timeout = timeout_of(hook.timeout_ms);
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&hook.command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            Error::Hook(format!(
                "{label} hook `{}` could not start: {e}",
                hook.command
            ))
        })?;
    let group = GroupKill(child.id().map(|id| id as i32));
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let tail = Arc::new(std::sync::Mutex::new(String::new()));
    let pump = |stream: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>| {
        let (log, tail, label) = (log.clone(), tail.clone(), label.to_string());
        async move {
            let Some(stream) = stream else { return };
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                log(&label, &line);
                let mut t = tail.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
                if t.len() > 16 << 10 {
                    let cut = t.len() - (8 << 10);
                    let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                    t.drain(..cut);
                }
            }
        }
    };
    let out = pump(stdout.map(|s| Box::new(s) as _));
    let err = pump(stderr.map(|s| Box::new(s) as _));
    let waited = async {
        let (_, _, status) = tokio::join!(out, err, child.wait());
        status
    };
    let status = match tokio::time::timeout(timeout, waited).await {
        Ok(status) => status.map_err(|e| Error::Other(e.into()))?,
        Err(_) => {
            drop(group);
            let tail = tail.lock().unwrap().clone();
            return Err(failure(
                label,
                &hook.command,
                format!(
                    "timed out after {} ms (raise it with timeoutMs)",
                    timeout.as_millis()
                ),
                &tail,
            ));
        }
    };
    std::mem::forget(group);
    if !status.success() {
        let why = match status.code() {
            Some(code) => format!("exited with code {code}"),
            None => "was killed by a signal".to_string(),
        };
        let tail = tail.lock().unwrap().clone();
        return Err(failure(label, &hook.command, why, &tail));
    }
    Ok(())
}

/// Kills a hook's process group when dropped (timeout, abort, a sibling's
/// failure): `kill_on_drop` alone would orphan what `sh` started.
struct GroupKill(Option<i32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: plain syscall; a negative pid addresses the process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
}
