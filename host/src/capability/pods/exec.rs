//! Commands in a pod over the API server's exec stream (WebSocket, kube-rs),
//! brokered like host processes, and files in and out through them.
//!
//! Kubernetes exec has no environment, working directory or kill of its
//! own: each command runs as `env SANDDUNE_EXEC=MARK argv` behind a shell
//! that reads its env from stdin and changes to its working directory, and
//! a kill is a second exec that ends every process carrying the mark.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, AttachedProcess, TerminalSize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};

use super::cluster::Cluster;
use super::{ExecOptions, ExecStatus};
use crate::capability::exec_mark::{EXEC_MARK, KILL_SCRIPT, exec_mark};
use crate::capability::output::{Lines, OutputLine, OutputStream};
use crate::capability::process::Killer;
use crate::capability::{Brokered, tty};

/// Output an exec without a sink returns, per stream.
const MAX_CAPTURE_BYTES: usize = 1 << 20;
/// After a kill, how long the stream may take to end before it is dropped.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(3);

/// Moves to the working directory `$1` and runs the rest.
const IN_DIR: &str = r#"cd "$1" || exit 1; shift; exec "$@""#;

/// Reads what the host sends ahead on stdin (a line with the number of env
/// lines that follow and the length of the command's own stdin, then
/// `export K='V'` lines), moves to the working directory `$1` (none when
/// empty) and runs the rest with exactly that many bytes of stdin. `read`
/// takes no byte past its line from a pipe, so the command's stdin follows
/// intact; and it ends by its length, never by the end of the stream: on
/// an API server that speaks only `v4.channel.k8s.io` a client can end
/// stdin only by closing the whole exec (see `feed`).
const PRELUDE_ON_STDIN: &str = r#"read -r n m || exit 1
s=
while [ "$n" -gt 0 ]; do IFS= read -r l || exit 1; s="$s$l
"; n=$((n-1)); done
eval "$s" || exit 1
if [ -n "$1" ]; then cd "$1" || exit 1; fi
shift
[ "$m" -gt 0 ] || exec "$@" </dev/null
head -c "$m" | "$@""#;

/// `argv` marked.
fn marked(argv: &[String], mark: &str) -> Vec<String> {
    let mut command = vec!["env".to_string(), format!("{EXEC_MARK}={mark}")];
    command.extend(argv.iter().cloned());
    command
}

/// The argv that runs `argv` marked in `workdir`, and the bytes to send on
/// its stdin: `env`, which never rides in argv, since argv is the exec
/// request's URL and the API server's audit log keeps that, then `stdin`,
/// both behind a prelude that gives their lengths.
fn wrapped(
    argv: &[String],
    env: &[(String, String)],
    workdir: Option<&str>,
    mark: &str,
    stdin: Option<Vec<u8>>,
) -> Result<(Vec<String>, Vec<u8>), String> {
    let mut script = String::new();
    for (key, value) in env {
        let shell_name = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !shell_name {
            return Err(format!(
                "env key `{key}` cannot be set in a pod: use letters, digits and `_`, not starting with a digit"
            ));
        }
        script.push_str(&format!(
            "export {key}='{}'\n",
            value.replace('\'', r"'\''")
        ));
    }
    let stdin = stdin.unwrap_or_default();
    let mut bytes =
        format!("{} {}\n{script}", script.matches('\n').count(), stdin.len()).into_bytes();
    bytes.extend(stdin);
    let command = [
        "sh",
        "-c",
        PRELUDE_ON_STDIN,
        "sanddune-exec",
        workdir.unwrap_or(""),
    ]
    .into_iter()
    .map(String::from)
    .chain(marked(argv, mark))
    .collect();
    Ok((command, bytes))
}

/// Kills every process of one exec inside its pod.
struct ExecKill {
    cluster: Cluster,
    pod: String,
    mark: String,
    killed: AtomicBool,
    done: Notify,
    runtime: tokio::runtime::Handle,
}

impl Killer for ExecKill {
    fn kill(&self) {
        if self.killed.swap(true, Ordering::SeqCst) {
            return;
        }
        let (cluster, pod, mark) = (self.cluster.clone(), self.pod.clone(), self.mark.clone());
        self.runtime.spawn(async move {
            let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
            let argv = [
                "sh".to_string(),
                "-c".into(),
                KILL_SCRIPT.into(),
                "sanddune-kill".into(),
                format!("{EXEC_MARK}={mark}"),
            ];
            // Stdin held open while it runs: see `feed`.
            match pods
                .exec(&pod, argv, &AttachParams::default().stdin(true))
                .await
            {
                Ok(mut process) => {
                    let _stdin = process.stdin();
                    let _ = process.join().await;
                }
                Err(e) => tracing::warn!("cannot kill an exec in pod {pod}: {e}"),
            }
        });
        self.done.notify_one();
    }
}

/// The error of an exec that could not start.
fn exec_error(cluster: &Cluster, pod: &str, argv: &[String], e: kube::Error) -> String {
    use kube::client::UpgradeConnectionError::ProtocolSwitch;
    match e {
        kube::Error::UpgradeConnection(ProtocolSwitch(code)) if code.as_u16() == 403 => format!(
            "kubeconfig user `{}` may not create pods/exec in namespace `{}` (403 Forbidden; API servers before 1.31 check get pods/exec)",
            cluster.user, cluster.namespace
        ),
        kube::Error::UpgradeConnection(ProtocolSwitch(code)) if code.as_u16() == 404 => {
            format!("pod `{pod}` is gone")
        }
        kube::Error::UpgradeConnection(e) => {
            format!("cannot exec `{}` in pod `{pod}`: {e}", argv.join(" "))
        }
        e => cluster.error("create", "pods/exec", e),
    }
}

/// Run a command in `pod` (one the policy found the plugin owns), streaming
/// or capturing its lines.
pub(super) async fn exec(
    cluster: &Cluster,
    brokered: &Brokered,
    pod: &str,
    options: ExecOptions,
    sink: Option<mpsc::Sender<OutputLine>>,
) -> Result<ExecStatus, String> {
    match sink {
        Some(tx) => run(cluster, brokered, pod, options, tx).await,
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
                tokio::join!(run(cluster, brokered, pod, options, tx), capture);
            status.map(|s| ExecStatus {
                stdout,
                stderr,
                ..s
            })
        }
    }
}

async fn run(
    cluster: &Cluster,
    brokered: &Brokered,
    pod: &str,
    options: ExecOptions,
    tx: mpsc::Sender<OutputLine>,
) -> Result<ExecStatus, String> {
    if brokered.is_cancelled() {
        return Err("the run was cancelled: no new execs".into());
    }
    let mark = exec_mark();
    let (argv, stdin) = wrapped(
        &options.argv,
        &options.env,
        options.workdir.as_deref(),
        &mark,
        options.stdin,
    )?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(true);
    let mut process = pods
        .exec(pod, argv, &params)
        .await
        .map_err(|e| exec_error(cluster, pod, &options.argv, e))?;
    let kill = Arc::new(ExecKill {
        cluster: cluster.clone(),
        pod: pod.to_string(),
        mark,
        killed: AtomicBool::new(false),
        done: Notify::new(),
        runtime: tokio::runtime::Handle::current(),
    });
    let registration = brokered.register(kill.clone());

    // Open until the exec has ended (see `feed`).
    let mut writer = process.stdin();
    let (stdout, stderr) = (process.stdout(), process.stderr());
    let io = async {
        tokio::join!(
            feed(&stdin, writer.as_mut()),
            forward(stdout, OutputStream::Stdout, tx.clone()),
            forward(stderr, OutputStream::Stderr, tx.clone()),
        );
    };
    let work = drive(io, process);
    tokio::pin!(work);
    let timeout = options.timeout_ms.map(Duration::from_millis);
    let mut timed_out = false;
    let ended = tokio::select! {
        s = &mut work => s,
        () = async { match timeout { Some(t) => tokio::time::sleep(t).await, None => std::future::pending().await } } => {
            timed_out = true;
            kill.kill();
            tokio::time::timeout(DRAIN_AFTER_KILL, &mut work).await.unwrap_or(Ok(None))
        }
        () = kill.done.notified() => {
            tokio::time::timeout(DRAIN_AFTER_KILL, &mut work).await.unwrap_or(Ok(None))
        }
    };
    brokered.unregister(registration);
    let killed = kill.killed.load(Ordering::SeqCst) && !timed_out;
    if timed_out || killed {
        return Ok(ExecStatus {
            code: None,
            timed_out,
            killed,
            ..Default::default()
        });
    }
    match ended {
        Ok(Some(status)) if status.status.as_deref() == Some("Success") => Ok(ExecStatus {
            code: Some(0),
            ..Default::default()
        }),
        Ok(Some(status)) => match exit_code(&status) {
            // A command fails when its pod does: say which. The runtime's
            // 126 (exec failed) and 137 (killed) come before the pod's
            // status says so, by up to a kubelet sync.
            Some(code) => match ended_by(cluster, pod, &options.argv, Some(code)).await {
                Some(why) => Err(why),
                None => Ok(ExecStatus {
                    code: Some(code),
                    ..Default::default()
                }),
            },
            // No exit code: the runtime could not run it, often because
            // the pod's container is gone.
            None => Err(match ended_by(cluster, pod, &options.argv, None).await {
                Some(why) => why,
                None => format!(
                    "`{}` in pod `{pod}`: {}",
                    options.argv.join(" "),
                    message(&status)
                ),
            }),
        },
        Ok(None) => Err(cut_short(cluster, pod, &options.argv, None).await),
        Err(broken) => Err(cut_short(cluster, pod, &options.argv, Some(&broken)).await),
    }
}

/// Write `bytes` to an exec's stdin, and leave it open: the command reads
/// them by their length (`wrapped`). On a `v4.channel.k8s.io` stream
/// kube-rs ends stdin (on shutdown or drop of its writer, or on `join`
/// while it holds the writer) by closing the whole exec, so every exec asks
/// for stdin, and its caller takes the writer and drops it only once the
/// exec has ended.
async fn feed(bytes: &[u8], writer: Option<&mut (impl AsyncWriteExt + Unpin)>) {
    if let Some(writer) = writer {
        let _ = writer.write_all(bytes).await;
        let _ = writer.flush().await;
    }
}

/// Run `io`, the feeding and reading of one exec's streams, until the exec
/// ends, and return the status the API server sent: `Ok(None)` when the
/// stream closed without one, `Err` with the cause when it broke.
///
/// kube-rs ends stdout and stderr only when the stream closes cleanly; when
/// the connection drops they stay open, and stdin stops being read once the
/// command is gone. So once the stream has ended, `io` gets a moment to
/// drain what came before, and no more.
async fn drive(
    io: impl Future<Output = ()>,
    mut process: AttachedProcess,
) -> Result<Option<Status>, String> {
    let status = process.take_status();
    let ended = process.join();
    tokio::pin!(io, ended);
    let ended = tokio::select! {
        () = &mut io => ended.await,
        ended = &mut ended => {
            let _ = tokio::time::timeout(DRAIN_AFTER_KILL, io).await;
            ended
        }
    };
    ended.map_err(|e| e.to_string())?;
    Ok(match status {
        Some(status) => status.await,
        None => None,
    })
}

/// The exit code in a `NonZeroExitCode` status.
fn exit_code(status: &Status) -> Option<i32> {
    status
        .details
        .as_ref()?
        .causes
        .iter()
        .flatten()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))?
        .message
        .as_deref()?
        .parse()
        .ok()
}

/// What a failed status says.
fn message(status: &Status) -> String {
    status.message.clone().unwrap_or_else(|| "failed".into())
}

/// Why an exec stream ended without a status: the pod went, or the stream
/// (`broken` says how, when the connection dropped).
async fn cut_short(cluster: &Cluster, pod: &str, argv: &[String], broken: Option<&str>) -> String {
    pod_ended(cluster, pod, argv).await.unwrap_or_else(|| {
        format!(
            "the API server closed the exec stream of `{}` in pod `{pod}` before the command ended{}",
            argv.join(" "),
            broken.map(|e| format!(" ({e})")).unwrap_or_default()
        )
    })
}

/// Why a command that exited `code` (None: could not run) failed, if its
/// pod ended under it.
async fn ended_by(
    cluster: &Cluster,
    pod: &str,
    argv: &[String],
    code: Option<i32>,
) -> Option<String> {
    let tries = if matches!(code, None | Some(126 | 137)) {
        15
    } else {
        1
    };
    for attempt in 0..tries {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if let Some(why) = pod_ended(cluster, pod, argv).await {
            return Some(why);
        }
    }
    None
}

/// Why `pod` cannot run commands any more, if it cannot: deleted or ended.
async fn pod_ended(cluster: &Cluster, pod: &str, argv: &[String]) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let command = argv.join(" ");
    match pods.get_opt(pod).await {
        Ok(None) => Some(format!("pod `{pod}` was deleted while `{command}` ran")),
        Ok(Some(p)) => {
            let status = p.status.unwrap_or_default();
            let reason = status
                .container_statuses
                .iter()
                .flatten()
                .find_map(|c| c.state.as_ref()?.terminated.as_ref()?.reason.clone())
                .or(status.reason);
            match status.phase.as_deref() {
                Some(phase @ ("Failed" | "Succeeded")) => Some(format!(
                    "pod `{pod}` ended ({phase}{}) while `{command}` ran",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                )),
                _ => None,
            }
        }
        Err(e) => Some(cluster.error("get", "pods", e)),
    }
}

/// Send `reader`'s lines to `tx` as they come.
async fn forward(
    reader: Option<impl AsyncRead + Unpin>,
    stream: OutputStream,
    tx: mpsc::Sender<OutputLine>,
) {
    let Some(mut reader) = reader else { return };
    let (mut lines, mut out) = (Lines::default(), Vec::new());
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => lines.push(&buf[..n], stream, &mut out),
        }
        for line in out.drain(..) {
            let _ = tx.send(line).await;
        }
    }
    lines.finish(stream, &mut out);
    for line in out {
        let _ = tx.send(line).await;
    }
}

/// Run `argv` with `stdin` and return its stdout, failing on a non-zero
/// exit with its stderr: the file transfers' one command.
pub(super) async fn exec_bytes(
    cluster: &Cluster,
    brokered: &Brokered,
    pod: &str,
    argv: Vec<String>,
    stdin: Option<Vec<u8>>,
) -> Result<Vec<u8>, String> {
    if brokered.is_cancelled() {
        return Err("the run was cancelled: no new execs".into());
    }
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mark = exec_mark();
    let (command, stdin) = wrapped(&argv, &[], None, &mark, stdin)?;
    let params = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(true);
    let mut process = pods
        .exec(pod, command, &params)
        .await
        .map_err(|e| exec_error(cluster, pod, &argv, e))?;
    // Open until the exec has ended (see `feed`).
    let mut writer = process.stdin();
    let (mut stdout, mut stderr) = (process.stdout(), process.stderr());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let io = async {
        let read_out = async {
            if let Some(r) = stdout.as_mut() {
                let _ = r.read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(r) = stderr.as_mut() {
                let _ = r.read_to_end(&mut err).await;
            }
        };
        tokio::join!(feed(&stdin, writer.as_mut()), read_out, read_err);
    };
    match drive(io, process).await {
        Ok(Some(s)) if s.status.as_deref() == Some("Success") => Ok(out),
        Ok(Some(s)) => Err(format!(
            "`{}` in pod `{pod}` failed ({}): {}",
            argv.join(" "),
            exit_code(&s).map_or(message(&s), |c| format!("exit code {c}")),
            String::from_utf8_lossy(&err).trim()
        )),
        Ok(None) => Err(cut_short(cluster, pod, &argv, None).await),
        Err(broken) => Err(cut_short(cluster, pod, &argv, Some(&broken)).await),
    }
}

/// A command with the user's terminal attached through a TTY.
pub(super) async fn exec_interactive(
    cluster: &Cluster,
    brokered: &Brokered,
    pod: &str,
    argv: Vec<String>,
    workdir: Option<String>,
) -> Result<i32, String> {
    use tokio::signal::unix::{SignalKind, signal};

    if !tty::attached() {
        return Err(
            "an interactive exec needs a terminal: stdin and stdout are not both one".into(),
        );
    }
    if brokered.is_cancelled() {
        return Err("the run was cancelled: no new execs".into());
    }
    let mark = exec_mark();
    let term = std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into());
    // On a terminal the env cannot go ahead on stdin (the terminal would
    // echo it): TERM, no secret, goes in argv; the component hands the
    // run's env over in a file (plugins/kubernetes).
    let with_term: Vec<String> = ["env".to_string(), format!("TERM={term}")]
        .into_iter()
        .chain(argv.iter().cloned())
        .collect();
    // The terminal is its stdin: no prelude.
    let command = match workdir.as_deref() {
        Some(dir) => ["sh", "-c", IN_DIR, "sanddune-exec", dir]
            .into_iter()
            .map(String::from)
            .chain(marked(&with_term, &mark))
            .collect(),
        None => marked(&with_term, &mark),
    };
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut process = pods
        .exec(pod, command, &AttachParams::interactive_tty())
        .await
        .map_err(|e| exec_error(cluster, pod, &argv, e))?;
    let kill = Arc::new(ExecKill {
        cluster: cluster.clone(),
        pod: pod.to_string(),
        mark,
        killed: AtomicBool::new(false),
        done: Notify::new(),
        runtime: tokio::runtime::Handle::current(),
    });
    let registration = brokered.register(kill.clone());
    let mut input = process.stdin();
    let mut output = process.stdout();
    let mut sizes = process.terminal_size();
    let status = process.take_status();
    // kube-rs leaves stdout open when the connection drops: its stream
    // task ending is what says so.
    let ended = process.join();
    tokio::pin!(ended);
    let (mut running, mut broken) = (true, None);
    let raw = tty::RawMode::enter();
    let mut keys = tty::Keys::start();
    let mut winch = signal(SignalKind::window_change()).ok();
    // The window's size now; kube-rs sends it on the resize channel.
    let size = || {
        tty::size().map(|(rows, cols)| TerminalSize {
            height: rows,
            width: cols,
        })
    };
    if let (Some(tx), Some(size)) = (sizes.as_mut(), size()) {
        let _ = tx.try_send(size);
    }
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        tokio::select! {
            n = async { match output.as_mut() { Some(o) => o.read(&mut buf).await, None => Ok(0) } } => match n {
                Ok(n) if n > 0 => {
                    let _ = stdout.write_all(&buf[..n]).await;
                    let _ = stdout.flush().await;
                }
                _ => break,
            },
            Some(bytes) = keys.rx.recv() => {
                let Some(w) = input.as_mut() else { break };
                if w.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            Some(()) = async { match winch.as_mut() { Some(w) => w.recv().await, None => std::future::pending().await } } => {
                if let (Some(tx), Some(size)) = (sizes.as_mut(), size()) {
                    let _ = tx.try_send(size);
                }
            }
            () = kill.done.notified() => break,
            result = &mut ended, if running => {
                running = false;
                if let Err(e) = result {
                    broken = Some(e.to_string());
                    break;
                }
                // A clean end: what stdout still holds comes first.
            }
        }
    }
    drop(keys);
    drop(raw);
    brokered.unregister(registration);
    if kill.killed.load(Ordering::SeqCst) {
        return Err("the interactive exec was killed (the run was aborted)".into());
    }
    let status = match status {
        Some(s) => tokio::time::timeout(DRAIN_AFTER_KILL, s)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    match status {
        Some(s) if s.status.as_deref() == Some("Success") => Ok(0),
        Some(s) => exit_code(&s).ok_or_else(|| message(&s)),
        None => Err(cut_short(cluster, pod, &argv, broken.as_deref()).await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_runs_marked_in_its_workdir_with_its_env_on_stdin() {
        let argv = vec!["git".to_string(), "status".into()];
        let (plain, stdin) = wrapped(&argv, &[], None, "m", None).unwrap();
        assert_eq!(&plain[..2], ["sh", "-c"]);
        assert_eq!(
            &plain[3..],
            [
                "sanddune-exec",
                "",
                "env",
                "SANDDUNE_EXEC=m",
                "git",
                "status"
            ]
        );
        assert_eq!(stdin, b"0 0\n");
        let (in_dir, _) = wrapped(&argv, &[], Some("/w d"), "m", Some(vec![])).unwrap();
        assert_eq!(&in_dir[3..5], ["sanddune-exec", "/w d"]);
        let env = [
            ("KEY".to_string(), "s3cret it's\nlong".to_string()),
            ("B".to_string(), String::new()),
        ];
        let (with_env, stdin) = wrapped(&argv, &env, None, "m", Some(b"in".to_vec())).unwrap();
        assert!(!with_env.concat().contains("s3cret"), "{with_env:?}");
        assert_eq!(
            String::from_utf8(stdin).unwrap(),
            "3 2\nexport KEY='s3cret it'\\''s\nlong'\nexport B=''\nin"
        );
        let bad = wrapped(&argv, &[("A-B".into(), "1".into())], None, "m", None).unwrap_err();
        assert!(bad.contains("`A-B`"), "{bad}");
    }

    /// What `sh` prints running the wrapped `script` with `env` and
    /// `stdin`, whose pipe stays open after them as a v4 exec's does: the
    /// command must end without an end of file.
    fn run_wrapped(env: &[(String, String)], stdin: Option<&[u8]>, workdir: &str) -> String {
        use std::io::{Read, Write};
        let argv = vec![
            "sh".to_string(),
            "-c".into(),
            r#"printf '%s|%s|' "$KEY" "$(pwd)"; cat"#.into(),
        ];
        let (argv, bytes) =
            wrapped(&argv, env, Some(workdir), "m", stdin.map(<[u8]>::to_vec)).unwrap();
        let mut child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(&bytes).unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(child.wait().unwrap().success());
        drop(input);
        out
    }

    /// The wrapper as `sh` runs it: the env set, the directory entered, the
    /// command's own stdin intact after the env and ended by its length.
    #[test]
    fn the_wrapper_sets_the_env_and_gives_the_command_exactly_its_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let workdir = dir.path().to_str().unwrap();
        let env = [("KEY".to_string(), "a 'b'\nc $HOME".to_string())];
        assert_eq!(
            run_wrapped(&env, Some(b"the command's input\n"), workdir),
            format!("a 'b'\nc $HOME|{workdir}|the command's input\n")
        );
        // No env: the stdin still goes by its length.
        assert_eq!(
            run_wrapped(&[], Some(b"x\0y"), workdir),
            format!("|{workdir}|x\0y")
        );
        // Neither: the command reads an empty stdin.
        assert_eq!(run_wrapped(&[], None, workdir), format!("|{workdir}|"));
        // Env and no stdin: the same.
        assert_eq!(
            run_wrapped(&env, None, workdir),
            format!("a 'b'\nc $HOME|{workdir}|")
        );
    }
}
