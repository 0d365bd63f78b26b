//! Execs in a container, brokered like host processes: each carries a mark
//! in its environment so the host can kill everything it started inside the
//! container (killing the exec's client would leave it running there).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};

use super::{ExecOptions, ExecStatus, InteractiveExecOptions};
use crate::capability::exec_mark::{EXEC_MARK, KILL_SCRIPT, exec_mark};
use crate::capability::output::{Lines, OutputLine, OutputStream};
use crate::capability::process::Killer;
use crate::capability::{Brokered, tty};

/// Output an exec without a sink returns, per stream.
const MAX_CAPTURE_BYTES: usize = 1 << 20;

/// After killing an exec's processes, how long to wait for its output to end
/// before returning anyway (a daemonised grandchild may hold the pipe).
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(3);

/// A new exec's mark and its env (`KEY=VALUE`, the mark last); refused
/// once the run is cancelled.
fn marked_env(
    brokered: &Brokered,
    env: &[(String, String)],
) -> Result<(String, Vec<String>), String> {
    if brokered.is_cancelled() {
        return Err("the run was cancelled: no new execs".into());
    }
    let mark = exec_mark();
    let mut env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    env.push(format!("{EXEC_MARK}={mark}"));
    Ok((mark, env))
}

/// Kills every process of one exec inside its container.
struct ExecKill {
    docker: Docker,
    container: String,
    mark: String,
    killed: AtomicBool,
    done: Notify,
    runtime: tokio::runtime::Handle,
}

impl ExecKill {
    /// The kill of the exec marked `mark` in `container`, not killed yet.
    fn new(docker: &Docker, container: &str, mark: String) -> Arc<Self> {
        Arc::new(ExecKill {
            docker: docker.clone(),
            container: container.to_string(),
            mark,
            killed: AtomicBool::new(false),
            done: Notify::new(),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    fn start(&self) {
        let (docker, container, mark) = (
            self.docker.clone(),
            self.container.clone(),
            self.mark.clone(),
        );
        self.runtime.spawn(async move {
            if let Err(e) = kill_marked(&docker, &container, &mark).await {
                tracing::warn!("cannot kill an exec in container {container}: {e}");
            }
        });
        self.done.notify_one();
    }
}

impl Killer for ExecKill {
    fn kill(&self) {
        if !self.killed.swap(true, Ordering::SeqCst) {
            self.start();
        }
    }
}

/// Inside the container, as root: [`KILL_SCRIPT`] for the exec's mark.
async fn kill_marked(docker: &Docker, container: &str, mark: &str) -> Result<(), String> {
    let pattern = format!("{EXEC_MARK}={mark}");
    let exec = docker
        .create_exec(
            container,
            CreateExecOptions {
                cmd: Some(vec!["sh", "-c", KILL_SCRIPT, "sanddune-kill", &pattern]),
                user: Some("0"),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    if let StartExecResults::Attached { mut output, .. } = docker
        .start_exec(&exec.id, None)
        .await
        .map_err(|e| e.to_string())?
    {
        while output.next().await.is_some() {}
    }
    Ok(())
}

/// How long the link's forwarder may take to listen.
const FORWARDER_READY: Duration = Duration::from_secs(20);

/// Start the link's forwarder (`argv`) in container `id`, as root there so
/// that a program of the agent's user cannot kill it (one that can gains
/// nothing: each service decides behind its socket), and wait until it
/// listens. It carries
/// no kill mark: it lives as long as the container. Its output stream is
/// dropped after `ready`; it writes nothing more. Returns its exec's id.
pub(super) async fn start_forwarder(
    docker: &Docker,
    id: &str,
    argv: Vec<String>,
) -> Result<String, String> {
    let exec = docker
        .create_exec(
            id,
            CreateExecOptions {
                cmd: Some(argv),
                user: Some("0".to_string()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("cannot start the link's forwarder: {e}"))?;
    let started = docker
        .start_exec(&exec.id, None)
        .await
        .map_err(|e| format!("cannot start the link's forwarder: {e}"))?;
    let StartExecResults::Attached { mut output, .. } = started else {
        return Err("cannot start the link's forwarder: the exec was detached".into());
    };
    let mut said = String::new();
    let ready = tokio::time::timeout(FORWARDER_READY, async {
        while let Some(chunk) = output.next().await {
            let Ok(chunk) = chunk else { break };
            said.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
            if said.lines().any(|l| l == "ready") {
                return true;
            }
        }
        false
    })
    .await;
    match ready {
        Ok(true) => Ok(exec.id),
        Ok(false) => Err(format!(
            "the link's forwarder stopped before it listened: {}",
            said.trim()
        )),
        Err(_) => Err(format!(
            "the link's forwarder did not listen within {} s",
            FORWARDER_READY.as_secs()
        )),
    }
}

/// Start an exec with the kill mark in container `id` (one the policy
/// found the plugin owns), broker it, stream or capture its lines.
pub(super) async fn exec(
    docker: &Docker,
    brokered: &Brokered,
    id: &str,
    options: ExecOptions,
    sink: Option<mpsc::Sender<OutputLine>>,
) -> Result<ExecStatus, String> {
    let (mark, env) = marked_env(brokered, &options.env)?;
    let exec = docker
        .create_exec(
            id,
            CreateExecOptions {
                cmd: Some(options.argv.clone()),
                env: Some(env),
                user: options.user.clone(),
                working_dir: options.workdir.clone(),
                attach_stdin: Some(options.stdin.is_some()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("cannot exec `{}`: {e}", options.argv.join(" ")))?;
    let kill = ExecKill::new(docker, id, mark);
    let registration = brokered.register(kill.clone());
    let result = match sink {
        Some(tx) => run_exec(docker, &exec.id, options, tx, &kill).await,
        None => {
            let (tx, mut rx) = mpsc::channel::<OutputLine>(256);
            let capture = async {
                let (mut stdout, mut stderr) = (String::new(), String::new());
                while let Some(line) = rx.recv().await {
                    let buf = match line.stream {
                        OutputStream::Stdout => &mut stdout,
                        OutputStream::Stderr => &mut stderr,
                    };
                    if buf.len() + line.text.len() < MAX_CAPTURE_BYTES {
                        buf.push_str(&line.text);
                        buf.push('\n');
                    }
                }
                (stdout, stderr)
            };
            let (status, (stdout, stderr)) =
                tokio::join!(run_exec(docker, &exec.id, options, tx, &kill), capture);
            status.map(|s| ExecStatus {
                stdout,
                stderr,
                ..s
            })
        }
    };
    brokered.unregister(registration);
    result
}

/// An exec with the user's terminal: a TTY in the container, the host
/// terminal in raw mode (restored on every exit path by `RawMode`'s drop),
/// keys in, bytes out, window-size changes forwarded. Abort kills it like
/// any exec.
pub(super) async fn exec_interactive(
    docker: &Docker,
    brokered: &Brokered,
    id: &str,
    options: InteractiveExecOptions,
) -> Result<i32, String> {
    use tokio::signal::unix::{SignalKind, signal};

    if !tty::attached() {
        return Err(
            "an interactive exec needs a terminal: stdin and stdout are not both one".into(),
        );
    }
    let (mark, mut env) = marked_env(brokered, &options.env)?;
    if !options.env.iter().any(|(k, _)| k == "TERM") {
        env.push(format!(
            "TERM={}",
            std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into())
        ));
    }
    let exec = docker
        .create_exec(
            id,
            CreateExecOptions {
                cmd: Some(options.argv.clone()),
                env: Some(env),
                user: options.user.clone(),
                working_dir: options.workdir.clone(),
                attach_stdin: Some(true),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(true),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("cannot exec `{}`: {e}", options.argv.join(" ")))?;
    let kill = ExecKill::new(docker, id, mark);
    let registration = brokered.register(kill.clone());
    let started = docker
        .start_exec(
            &exec.id,
            Some(StartExecOptions {
                detach: false,
                tty: true,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|e| format!("cannot start exec: {e}"));
    let result = match started {
        Ok(StartExecResults::Attached {
            mut output,
            mut input,
        }) => {
            let resize = |(rows, cols): (u16, u16)| {
                docker.resize_exec(
                    &exec.id,
                    ResizeExecOptions {
                        height: rows,
                        width: cols,
                    },
                )
            };
            let raw = tty::RawMode::enter();
            let mut keys = tty::Keys::start();
            let mut winch = signal(SignalKind::window_change()).ok();
            if let Some(size) = tty::size() {
                let _ = resize(size).await;
            }
            let mut stdout = tokio::io::stdout();
            loop {
                tokio::select! {
                    chunk = output.next() => match chunk {
                        Some(Ok(out)) => {
                            let _ = stdout.write_all(&out.into_bytes()).await;
                            let _ = stdout.flush().await;
                        }
                        _ => break,
                    },
                    Some(bytes) = keys.rx.recv() => {
                        if input.write_all(&bytes).await.is_err() {
                            break;
                        }
                    }
                    Some(()) = async { match winch.as_mut() { Some(w) => w.recv().await, None => std::future::pending().await } } => {
                        if let Some(size) = tty::size() {
                            let _ = resize(size).await;
                        }
                    }
                    () = kill.done.notified() => break,
                }
            }
            drop(keys);
            drop(raw);
            exit_code(docker, &exec.id).await
        }
        Ok(StartExecResults::Detached) => Err("the engine detached the exec".into()),
        Err(e) => Err(e),
    };
    brokered.unregister(registration);
    if kill.killed.load(Ordering::SeqCst) {
        return Err("the interactive exec was killed (the run was aborted)".into());
    }
    result
}

/// An ended exec's exit code; the stream can end a moment before the engine
/// records it.
async fn exit_code(docker: &Docker, exec_id: &str) -> Result<i32, String> {
    for _ in 0..100 {
        match docker.inspect_exec(exec_id).await {
            Ok(info) if info.running == Some(true) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(info) => {
                return info
                    .exit_code
                    .map(|c| c as i32)
                    .ok_or_else(|| "the engine recorded no exit code".into());
            }
            Err(e) => return Err(format!("cannot inspect the exec: {e}")),
        }
    }
    Err("the exec did not end".into())
}

/// Start an exec, stream its lines, and wait for its real exit code.
async fn run_exec(
    docker: &Docker,
    exec_id: &str,
    options: ExecOptions,
    tx: mpsc::Sender<OutputLine>,
    kill: &Arc<ExecKill>,
) -> Result<ExecStatus, String> {
    let started = docker
        .start_exec(exec_id, None)
        .await
        .map_err(|e| format!("cannot start exec: {e}"))?;
    let StartExecResults::Attached {
        mut output,
        mut input,
    } = started
    else {
        return Err("the engine detached the exec".into());
    };
    match options.stdin {
        // A task writes stdin so a command that fills its stdout before
        // reading its input never deadlocks against us.
        Some(bytes) => {
            tokio::spawn(async move {
                let _ = input.write_all(&bytes).await;
                let _ = input.shutdown().await;
            });
        }
        None => drop(input),
    }
    let timed_out = AtomicBool::new(false);
    let timer = async {
        match options.timeout_ms {
            Some(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                timed_out.store(true, Ordering::SeqCst);
                kill.start();
                std::future::pending::<()>().await
            }
            None => std::future::pending().await,
        }
    };
    let drain = async {
        let (mut out, mut err) = (Lines::default(), Lines::default());
        let mut lines = Vec::new();
        while let Some(chunk) = output.next().await {
            match chunk {
                Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                    out.push(&message, OutputStream::Stdout, &mut lines)
                }
                Ok(LogOutput::StdErr { message }) => {
                    err.push(&message, OutputStream::Stderr, &mut lines)
                }
                Ok(LogOutput::StdIn { .. }) => {}
                Err(_) => break,
            }
            for line in lines.drain(..) {
                // A consumer that falls behind slows the exec (back-pressure).
                let _ = tx.send(line).await;
            }
        }
        out.finish(OutputStream::Stdout, &mut lines);
        err.finish(OutputStream::Stderr, &mut lines);
        for line in lines {
            let _ = tx.send(line).await;
        }
    };
    // Once killed, output that does not end soon is abandoned.
    let killed_then_grace = async {
        kill.done.notified().await;
        tokio::time::sleep(DRAIN_AFTER_KILL).await;
    };
    tokio::select! {
        () = drain => {}
        () = timer => {}
        () = killed_then_grace => {}
    }
    let timed_out = timed_out.load(Ordering::SeqCst);
    let killed = kill.killed.load(Ordering::SeqCst);
    // The stream can end a moment before the engine records the exit code.
    let mut code = None;
    for _ in 0..100 {
        match docker.inspect_exec(exec_id).await {
            Ok(info) if info.running == Some(true) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(info) => {
                code = info.exit_code.map(|c| c as i32);
                break;
            }
            Err(e) => return Err(format!("cannot inspect exec: {e}")),
        }
    }
    Ok(ExecStatus {
        code: if killed || timed_out { None } else { code },
        timed_out,
        killed,
        stdout: String::new(),
        stderr: String::new(),
    })
}
