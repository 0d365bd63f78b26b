//! The `process` capability: spawn granted host programs, stream their lines.
//!
//! The host owns every process it brokers. Each runs in its own process group
//! so a kill reaches grandchildren too (`kill_on_drop` alone orphans them).
//! `Brokered` lets the orchestrator kill them from outside the plugin call
//! (abort, idle timeout): the guest then sees end-of-output and a `killed`
//! status, returns normally, and its instance stays usable. Container execs
//! (the `containers` capability) register here too, with a killer of their own.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::PluginState;
use super::output::{MAX_LINE_BYTES, OutputLine, OutputStream};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// Host environment keys every spawned program inherits.
const BASE_ENV: &[&str] = &["PATH", "HOME", "USER", "LANG", "TMPDIR", "TERM"];

/// The processes brokered for one plugin instance.
#[derive(Clone, Default)]
pub struct Brokered {
    inner: Arc<BrokeredInner>,
}

#[derive(Default)]
struct BrokeredInner {
    next_id: AtomicU64,
    live: Mutex<HashMap<u64, Arc<dyn Killer>>>,
    /// Set by `kill_all`; refuses new spawns until the next call begins.
    cancelled: AtomicBool,
}

/// Something brokered for a plugin that the host can kill from outside the
/// plugin call: a host process group, or an exec's processes in a container.
pub(crate) trait Killer: Send + Sync {
    /// Kill it. Idempotent, never blocks.
    fn kill(&self);
}

/// Kills one process group once.
struct Kill {
    pgid: i32,
    killed: AtomicBool,
    timed_out: AtomicBool,
}

impl Killer for Kill {
    fn kill(&self) {
        if !self.killed.swap(true, Ordering::SeqCst) {
            // SAFETY: plain syscall; a negative pid addresses the process group.
            unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        }
    }
}

impl Brokered {
    /// Kill every live process of this plugin instance and refuse new ones
    /// until the next call into the plugin.
    pub fn kill_all(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        for kill in self.inner.live.lock().unwrap().values() {
            kill.kill();
        }
    }

    /// No process of this plugin instance is running.
    pub(crate) fn is_idle(&self) -> bool {
        self.inner.live.lock().unwrap().is_empty()
    }

    pub(crate) fn reset(&self) {
        self.inner.cancelled.store(false, Ordering::SeqCst);
    }

    /// Set by `kill_all` until the next call begins: start nothing new.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    pub(crate) fn register(&self, kill: Arc<dyn Killer>) -> u64 {
        let id = self.inner.next_id.fetch_add(1, Ordering::SeqCst);
        self.inner.live.lock().unwrap().insert(id, kill);
        id
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.inner.live.lock().unwrap().remove(&id);
    }
}

/// What to spawn (the WIT's `spawn-options`).
#[derive(Clone, Debug, Default)]
pub struct SpawnOptions {
    /// A granted bare name (resolved on PATH) or a granted absolute path.
    pub program: String,
    pub args: Vec<String>,
    /// The host's own cwd when absent.
    pub cwd: Option<String>,
    /// Added to the base environment (BASE_ENV taken from the host).
    pub env: Vec<(String, String)>,
    pub timeout_ms: Option<u64>,
    /// The host's terminal instead of pipes.
    pub terminal: bool,
}

/// How a process ended.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExitStatus {
    /// Absent when the process was ended by a signal.
    pub code: Option<i32>,
    pub timed_out: bool,
    /// The host killed it (abort, idle timeout, or `kill`).
    pub killed: bool,
}

/// A spawned process, as the guest's `child` resource.
pub struct Child {
    proc: tokio::process::Child,
    lines: mpsc::Receiver<OutputLine>,
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    kill: Arc<Kill>,
    id: u64,
    brokered: Brokered,
    exited: Option<oneshot::Sender<()>>,
    /// The terminal's foreground group before this program was given it.
    lent_terminal: Option<libc::pid_t>,
}

impl Drop for Child {
    fn drop(&mut self) {
        // A guest that drops a child without waiting must not leak it.
        if self.exited.is_some() {
            self.kill.kill();
        }
        if let Some(group) = self.lent_terminal.take() {
            take_back_terminal(group);
        }
        self.brokered.unregister(self.id);
    }
}

/// A program runs only when granted by exactly the name it is spawned by
/// (`sh` is not `/bin/sh`).
fn check_granted(plugin: &str, programs: &[String], program: &str) -> Result<(), String> {
    if programs.iter().any(|p| p == program) {
        return Ok(());
    }
    let granted = if programs.is_empty() {
        "no programs".to_string()
    } else {
        programs.join(", ")
    };
    Err(format!(
        "plugin `{plugin}` may not run `{program}`: it was granted {granted}"
    ))
}

fn spawn(state: &PluginState, opts: SpawnOptions) -> Result<Child, String> {
    check_granted(&state.plugin, &state.grants.programs, &opts.program)?;
    let mut cmd = tokio::process::Command::new(&opts.program);
    cmd.args(&opts.args).env_clear();
    for key in BASE_ENV {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    for (key, value) in &opts.env {
        cmd.env(key, value);
    }
    if let Some(cwd) = &opts.cwd {
        cmd.current_dir(cwd);
    }
    start(state, cmd, &opts.program, opts.terminal, opts.timeout_ms)
}

/// Start `cmd` (its program, arguments, env and cwd set) as a brokered
/// child in a process group of its own: the `process` capability's
/// spawns and the `jail` capability's `bwrap`.
pub(crate) fn start(
    state: &PluginState,
    mut cmd: tokio::process::Command,
    program: &str,
    terminal: bool,
    timeout_ms: Option<u64>,
) -> Result<Child, String> {
    if state.brokered.is_cancelled() {
        return Err("the run was cancelled: no new processes".into());
    }
    cmd.process_group(0);
    let mut lent_terminal = None;
    if terminal {
        cmd.stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
        lent_terminal = lend_terminal(&mut cmd);
    } else {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    let mut proc = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let pgid = proc.id().map(|p| p as i32).unwrap_or(0);
    let kill = Arc::new(Kill {
        pgid,
        killed: AtomicBool::new(false),
        timed_out: AtomicBool::new(false),
    });
    let id = state.brokered.register(kill.clone());

    let (tx, lines) = mpsc::channel(1024);
    if let Some(out) = proc.stdout.take() {
        tokio::spawn(read_lines(out, OutputStream::Stdout, tx.clone()));
    }
    if let Some(err) = proc.stderr.take() {
        tokio::spawn(read_lines(err, OutputStream::Stderr, tx.clone()));
    }
    drop(tx);
    let stdin = proc.stdin.take().map(|mut pipe| {
        // A task writes stdin so a child that fills its stdout never
        // deadlocks against a guest still writing its prompt.
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(chunk) = rx.recv().await {
                if pipe.write_all(&chunk).await.is_err() {
                    return;
                }
            }
            let _ = pipe.shutdown().await;
        });
        tx
    });
    let (exited, exited_rx) = oneshot::channel();
    if let Some(ms) = timeout_ms {
        let kill = kill.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                    kill.timed_out.store(true, Ordering::SeqCst);
                    // SAFETY: see `Kill::kill`; not marked `killed`, it timed out.
                    unsafe { libc::kill(-kill.pgid, libc::SIGKILL) };
                }
                _ = exited_rx => {}
            }
        });
    }
    Ok(Child {
        proc,
        lines,
        stdin,
        kill,
        id,
        brokered: state.brokered.clone(),
        exited: Some(exited),
        lent_terminal,
    })
}

/// A program given the terminal (a shell, an agent's UI) reads it, which
/// only the terminal's foreground process group may: in a group of its own
/// in the background it would be stopped at its first read (SIGTTIN). So
/// the child makes its group the foreground one before it starts; returns
/// the group to give the terminal back to when it ends. None when stdin is
/// not a terminal.
fn lend_terminal(cmd: &mut tokio::process::Command) -> Option<libc::pid_t> {
    // SAFETY: tcgetpgrp only reads the terminal's state.
    let foreground = unsafe { libc::tcgetpgrp(libc::STDIN_FILENO) };
    if foreground <= 0 {
        return None;
    }
    // SAFETY: only async-signal-safe calls between fork and exec. SIGTTOU
    // is ignored while a background group takes the terminal, then reset
    // so the program starts with the default.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            libc::tcsetpgrp(libc::STDIN_FILENO, libc::getpid());
            libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            Ok(())
        });
    }
    Some(foreground)
}

/// Give the terminal back to `group` once the program it was lent to ended.
fn take_back_terminal(group: libc::pid_t) {
    // SAFETY: a background group's tcsetpgrp raises SIGTTOU unless it is
    // blocked; blocked on this thread only, and the mask restored.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        libc::tcsetpgrp(libc::STDIN_FILENO, group);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Split a stream into lines, lossily decoded, none longer than MAX_LINE_BYTES.
async fn read_lines(
    pipe: impl AsyncRead + Unpin,
    stream: OutputStream,
    tx: mpsc::Sender<OutputLine>,
) {
    let mut reader = BufReader::with_capacity(64 << 10, pipe);
    let mut line = Vec::new();
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let room = MAX_LINE_BYTES - line.len();
        let (take, complete) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) if i <= room => (i + 1, true),
            _ if chunk.len() >= room => (room, true),
            _ => (chunk.len(), false),
        };
        line.extend_from_slice(&chunk[..take]);
        reader.consume(take);
        if complete && tx.send(to_line(&mut line, stream)).await.is_err() {
            return;
        }
    }
    if !line.is_empty() {
        let _ = tx.send(to_line(&mut line, stream)).await;
    }
}

fn to_line(buf: &mut Vec<u8>, stream: OutputStream) -> OutputLine {
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    let text = String::from_utf8_lossy(buf).into_owned();
    buf.clear();
    OutputLine { stream, text }
}

impl PluginState {
    /// Spawn a granted program; a refusal is also logged.
    pub fn spawn(&self, options: SpawnOptions) -> Result<Child, String> {
        spawn(self, options).inspect_err(|e| tracing::warn!(plugin = %self.plugin, "{e}"))
    }
}

impl Child {
    /// Queue bytes for stdin; fails once stdin is closed.
    pub fn write_stdin(&self, data: Vec<u8>) -> Result<(), String> {
        match &self.stdin {
            Some(tx) => tx.send(data).map_err(|_| "stdin is closed".to_string()),
            None => Err("stdin is closed".to_string()),
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next line from stdout or stderr, or none once both are closed.
    pub async fn read_line(&mut self) -> Option<OutputLine> {
        self.lines.recv().await
    }

    pub async fn wait(&mut self) -> ExitStatus {
        self.stdin = None;
        let status = self.proc.wait().await;
        if let Some(exited) = self.exited.take() {
            let _ = exited.send(());
        }
        if let Some(group) = self.lent_terminal.take() {
            take_back_terminal(group);
        }
        ExitStatus {
            code: status.ok().and_then(|s| s.code()),
            timed_out: self.kill.timed_out.load(Ordering::SeqCst),
            killed: self.kill.killed.load(Ordering::SeqCst),
        }
    }

    pub fn kill(&self) {
        self.kill.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_granted_name_runs() {
        let granted = ["sh".to_string(), "git".to_string()];
        let table: &[(&[String], &str, Result<(), &str>)] = &[
            (&granted, "sh", Ok(())),
            (&granted, "git", Ok(())),
            (
                &granted,
                "/bin/sh",
                Err("plugin `p` may not run `/bin/sh`: it was granted sh, git"),
            ),
            (
                &granted,
                "curl",
                Err("plugin `p` may not run `curl`: it was granted sh, git"),
            ),
            (
                &[],
                "sh",
                Err("plugin `p` may not run `sh`: it was granted no programs"),
            ),
        ];
        for (programs, program, want) in table {
            assert_eq!(
                check_granted("p", programs, program),
                want.map_err(str::to_string),
                "{program}"
            );
        }
    }
}
